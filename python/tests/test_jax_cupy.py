"""The JAX and CuPy adapters on fakes with those libraries' interfaces."""

import os
import types
import unittest

import _support as S
from vramscope import _layout as L
from vramscope._channel import Channel
from vramscope._config import Config
from vramscope._cupy import CupyAdapter, CupySource
from vramscope._identity import Identity
from vramscope._jax import JaxAdapter, JaxSource
from vramscope._records import DeviceInfo, Figures
from vramscope._session import Session

GIB = 1 << 30


class FakeJaxDevice:
    def __init__(self, id, platform, stats):
        self.id = id
        self.local_hardware_id = id + 4
        self.platform = platform
        self.stats = stats

    def memory_stats(self):
        return self.stats


def fake_jax(devices, ready):
    state = {"ready": ready, "asked": 0}

    def local_devices():
        state["asked"] += 1
        if not state["ready"]:
            raise AssertionError("asked for devices before backends were initialised")
        return devices

    bridge = types.SimpleNamespace(backends_are_initialized=lambda: state["ready"])
    jax = types.SimpleNamespace(__version__="0.4.30", local_devices=local_devices, _src=types.SimpleNamespace(xla_bridge=bridge))
    return jax, state


class Case(unittest.TestCase):
    def setUp(self):
        self.tmp = S.TempDir()
        self.ch = Channel.create(Identity(L.KIND_JAX), directory=self.tmp.__enter__())
        self.clock = 1_000_000_000
        self.session = Session(self.ch, clock=lambda: self.clock)

    def tearDown(self):
        self.ch.finish()
        self.tmp.__exit__(None, None, None)

    def snap(self):
        return S.Snapshot(S.read_bytes(self.ch.path))


class Jax(Case):
    def test_waits_for_backends_then_reads_accelerators_only(self):
        stats = {"bytes_in_use": GIB, "peak_bytes_in_use": 3 * GIB, "bytes_limit": 60 * GIB, "pool_bytes": 2 * GIB, "peak_pool_bytes": 4 * GIB}
        devices = [FakeJaxDevice(0, "cpu", None), FakeJaxDevice(0, "gpu", stats)]
        jax, state = fake_jax(devices, ready=False)
        os.environ.pop("XLA_PYTHON_CLIENT_MEM_FRACTION", None)
        adapter = JaxAdapter(JaxSource(jax), Config(hz=50))
        self.assertEqual((adapter.kind, adapter.framework, adapter.period), (2, "jax 0.4.30", 0.02))
        adapter.tick(self.session, False)
        self.assertEqual((state["asked"], self.snap().devices_in_use), (0, 0))
        state["ready"] = True
        adapter.tick(self.session, False)
        stats["bytes_in_use"] = 2 * GIB
        adapter.tick(self.session, False)
        # A sampler's reading within 100 ms of the last slot write waits for a later one:
        # the slot still shows 1 GiB, while the ring already holds the 2 GiB sample.
        self.assertEqual(self.snap().devices[0].allocated, GIB)
        self.clock += 100_000_000
        adapter.tick(self.session, False)
        snap = self.snap()
        (dev,) = snap.devices
        self.assertEqual((dev.ordinal, dev.flags, dev.total), (4, 0, S.ABSENT))
        self.assertEqual(
            (dev.allocated, dev.allocated_peak, dev.reserved, dev.reserved_peak, dev.limit),
            (2 * GIB, 3 * GIB, 2 * GIB, 4 * GIB, 60 * GIB),
        )
        got = [(s.allocated, s.peak, s.flags) for s in S.samples(snap.raw)[0]]
        self.assertEqual(
            got,
            [
                (GIB, 3 * GIB, L.SAMPLE_PEAK_EXACT | L.SAMPLE_NEW_HIGH_WATER),
                (2 * GIB, 2 * GIB, 0),
                (2 * GIB, 2 * GIB, 0),
            ],
        )


class SlotWrites(Case):
    def test_a_kept_file_shows_the_last_reading_even_one_the_slot_was_waiting_on(self):
        state = self.session.add_slot("dev", DeviceInfo(0))
        self.session.publish(state, Figures(allocated=2 * GIB), periodic=True)
        self.clock += 10_000_000
        # Lower, so no new peak: nothing urgent, the slot waits.
        self.session.publish(state, Figures(allocated=GIB), periodic=True)
        self.assertEqual(self.snap().devices[0].allocated, 2 * GIB)
        self.session.finish("RuntimeError: boom")
        self.assertEqual(self.snap().devices[0].allocated, GIB)


class FakeCupy:
    """cupy's pieces the adapter uses; the current device is per thread in CuPy."""

    def __init__(self):
        self.used, self.held, self.limit = GIB, 2 * GIB, 0
        self.current = 1
        self.switches = []
        fake = self

        class Device:
            def __init__(self, i):
                self.i = i

            def __enter__(self):
                fake.switches.append(self.i)
                self.saved, fake.current = fake.current, self.i

            def __exit__(self, *exc):
                fake.current = self.saved

        class Pool:
            def used_bytes(self):
                assert fake.current == 1
                return fake.used

            def total_bytes(self):
                return fake.held

            def get_limit(self):
                return fake.limit

        runtime = types.SimpleNamespace(
            getDevice=lambda: fake.current,
            getDeviceProperties=lambda i: {"uuid": bytes([i] * 16), "pciBusID": 0x3B, "pciDomainID": 0, "pciDeviceID": 0, "totalGlobalMem": 40 * GIB},
            memGetInfo=lambda: (30 * GIB, 40 * GIB),
        )
        self.__version__ = "13.3.0"
        self.cuda = types.SimpleNamespace(Device=Device, runtime=runtime)
        pool = Pool()
        self.get_default_memory_pool = lambda: pool


class Cupy(Case):
    def test_pool_figures_of_the_starting_device(self):
        cupy = FakeCupy()
        adapter = CupyAdapter(CupySource(cupy), Config())
        cupy.current = 0  # the sampler thread's own current device differs
        adapter.tick(self.session, False)
        cupy.used, cupy.limit = 3 * GIB, 8 * GIB
        adapter.tick(self.session, False)
        cupy.used = 2 * GIB
        adapter.tick(self.session, True)
        self.assertEqual(cupy.current, 0)
        self.assertTrue(set(cupy.switches) == {1})
        snap = self.snap()
        (dev,) = snap.devices
        self.assertEqual((dev.ordinal, dev.flags, dev.uuid, dev.pci, dev.total), (1, 3, bytes([1] * 16), "00000000:3B:00.0", 40 * GIB))
        self.assertEqual((dev.allocated, dev.reserved, dev.allocated_peak, dev.limit, dev.device_free), (2 * GIB, 2 * GIB, S.ABSENT, 8 * GIB, 30 * GIB))
        got = [(s.allocated, s.peak, s.flags) for s in S.samples(snap.raw)[0]]
        H, K = L.SAMPLE_NEW_HIGH_WATER, L.SAMPLE_HOOK
        # No peak counter: each peak is the higher of two readings, never marked exact.
        self.assertEqual(got, [(GIB, GIB, H), (3 * GIB, 3 * GIB, H), (2 * GIB, 3 * GIB, K)])
        self.assertEqual(adapter.framework, "cupy 13.3.0")


if __name__ == "__main__":
    unittest.main()
