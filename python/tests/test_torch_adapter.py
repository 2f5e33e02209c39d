"""The PyTorch adapter's logic through an injected statistics source: no torch, no GPU."""

import copy
import unittest

import _support as S
from _simulated_cuda import empty_allocator_stats
from vramscope import _layout as L
from vramscope._channel import Channel, DeviceInfo
from vramscope._config import Config
from vramscope._identity import Identity
from vramscope._session import Session
from vramscope._torch import TorchAdapter, figures_from_stats
from vramscope._torch_virtual import PeakVirtualiser

GIB = 1 << 30
X, H, F, K = L.SAMPLE_PEAK_EXACT, L.SAMPLE_NEW_HIGH_WATER, L.SAMPLE_FOREIGN_RESET_SEEN, L.SAMPLE_HOOK


class FakeSource:
    """A caching allocator in miniature: allocate and free move current and peak."""

    def __init__(self, devices=2, active=(0,)):
        self.devices = devices
        self.active = set(active)
        self.s = {i: empty_allocator_stats() for i in range(devices)}
        self.resets = []
        self.free_queries = 0

    def alloc(self, i, n):
        for name in ("allocated_bytes", "active_bytes"):
            st = self.s[i][name]["all"]
            st["current"] += n
            st["peak"] = max(st["peak"], st["current"])
        res = self.s[i]["reserved_bytes"]["all"]
        if res["current"] < self.s[i]["allocated_bytes"]["all"]["current"]:
            res["current"] = self.s[i]["allocated_bytes"]["all"]["current"]
            res["peak"] = max(res["peak"], res["current"])

    def free(self, i, n):
        self.alloc(i, -n)

    def user_reset(self, i):
        for v in self.s[i].values():
            if isinstance(v, dict):
                v["all"]["peak"] = v["all"]["current"]

    # -- the source contract --
    def device_count(self):
        return self.devices

    def is_active(self, i):
        return i in self.active

    def identity(self, i):
        return DeviceInfo(i, bytes([i] * 16), "00000000:%02X:00.0" % (0x18 + i), 80 * GIB)

    def stats(self, i):
        return copy.deepcopy(self.s[i])

    def mem_get_info(self, i):
        self.free_queries += 1
        return (70 * GIB, 80 * GIB)

    def reset_peak(self, i):
        self.resets.append(i)
        self.user_reset(i)

    def limit(self, i):
        return None


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class AdapterCase(unittest.TestCase):
    exact = False

    def setUp(self):
        self.tmp = S.TempDir()
        self.ch = Channel.create(Identity(L.KIND_PYTORCH), directory=self.tmp.__enter__())
        self.session = Session(self.ch, exact=self.exact)
        self.source = FakeSource()
        self.clock = Clock()
        self.adapter = TorchAdapter(self.source, Config(hz=20, exact_peaks=self.exact), clock=self.clock)

    def tearDown(self):
        self.ch.finish()
        self.tmp.__exit__(None, None, None)

    def tick(self, hook=False):
        self.adapter.tick(self.session, hook)

    def snap(self):
        return S.Snapshot(S.read_bytes(self.ch.path))

    def samples(self):
        return S.samples(self.snap().raw)[0]

    def events(self, kind=None):
        return [e for e in S.events(self.snap().raw)[0] if kind is None or e.kind == kind]


class Devices(AdapterCase):
    def test_only_devices_with_a_context_get_a_slot(self):
        self.source.alloc(0, GIB)
        self.tick()
        snap = self.snap()
        self.assertEqual(snap.devices_in_use, 1)
        d = snap.devices[0]
        self.assertEqual((d.ordinal, d.flags, d.uuid, d.pci, d.total), (0, 3, bytes(16), "00000000:18:00.0", 80 * GIB))
        self.source.active.add(1)
        self.source.alloc(1, 2 * GIB)
        self.tick()
        snap = self.snap()
        self.assertEqual([(d.ordinal, d.uuid, d.allocated) for d in snap.devices], [(0, bytes(16), GIB), (1, bytes([1] * 16), 2 * GIB)])
        self.assertEqual([(s.slot, s.allocated) for s in self.samples()], [(0, GIB), (0, GIB), (1, 2 * GIB)])

    def test_all_figures_reach_the_slot(self):
        s = self.source.s[0]
        s["inactive_split_bytes"]["all"]["current"] = 11
        s["requested_bytes"]["all"]["current"] = 12
        s["num_alloc_retries"], s["num_ooms"], s["num_device_alloc"], s["num_device_free"] = 1, 2, 3, 4
        self.source.alloc(0, 1000)
        self.tick()
        d = self.snap().devices[0]
        self.assertEqual(
            (d.allocated, d.allocated_peak, d.reserved, d.reserved_peak, d.active, d.inactive_split, d.requested),
            (1000, 1000, 1000, 1000, 1000, 11, 12),
        )
        self.assertEqual((d.retries, d.ooms, d.device_allocs, d.device_frees), (1, 2, 3, 4))
        self.assertEqual((d.device_free, d.limit), (70 * GIB, S.ABSENT))

    def test_missing_statistics_are_absent_not_zero(self):
        fig = figures_from_stats({"allocated_bytes": {"all": {"current": 5, "peak": 6}}})
        self.assertEqual((fig.allocated, fig.allocated_peak, fig.reserved, fig.retries), (5, 6, None, None))
        self.source.s[0] = {"allocated_bytes": {"all": {"current": 5, "peak": 6}}}
        self.tick()
        d = self.snap().devices[0]
        self.assertEqual((d.allocated, d.reserved, d.active, d.device_allocs), (5, S.ABSENT, S.ABSENT, S.ABSENT))

    def test_uninitialised_statistics_publish_nothing(self):
        self.source.s[0] = {}
        self.tick()
        snap = self.snap()
        self.assertEqual((snap.devices_in_use, snap.samples_head), (1, 0))

    def test_free_memory_read_at_most_once_a_second(self):
        for _ in range(10):
            self.tick()
            self.clock.now += 0.05
        self.assertEqual(self.source.free_queries, 1)
        self.clock.now += 0.6
        self.tick()
        self.assertEqual(self.source.free_queries, 2)
        self.assertEqual(self.snap().devices[0].device_free, 70 * GIB)

    def test_rising_retries_are_events(self):
        self.tick()
        self.source.s[0]["num_alloc_retries"] = 2
        self.tick()
        self.tick()
        self.assertEqual([e.args[0] for e in self.events(L.EV_ALLOC_RETRY)], [2])


class ComparedPeaks(AdapterCase):
    def test_spike_between_samples_is_caught_exactly_without_reset(self):
        self.source.alloc(0, GIB)
        self.tick()
        self.source.alloc(0, 4 * GIB)  # a 5 GiB spike that is gone by the next sample
        self.source.free(0, 4 * GIB)
        self.tick()
        self.tick()
        self.source.user_reset(0)  # the program resets its peak (DeepSpeed does)
        self.source.alloc(0, GIB)
        self.source.free(0, GIB)
        self.tick()
        self.assertEqual(self.source.resets, [])
        self.assertEqual(
            [(s.allocated, s.peak, s.flags) for s in self.samples()],
            [(GIB, GIB, X | H), (GIB, 5 * GIB, X | H), (GIB, GIB, 0), (GIB, 2 * GIB, F)],
        )
        self.assertEqual([e.args[:2] for e in self.events(L.EV_NEW_HIGH_WATER)], [(GIB, S.ABSENT), (5 * GIB, GIB)])
        self.assertEqual([e.args[:2] for e in self.events(L.EV_FOREIGN_PEAK_RESET)], [(5 * GIB, 2 * GIB)])
        self.assertEqual(self.snap().devices[0].interval_peak, 2 * GIB)

    def test_step_peaks_and_step_end(self):
        self.source.alloc(0, GIB)
        self.tick()
        self.source.alloc(0, 3 * GIB)
        self.source.free(0, 3 * GIB)
        self.tick(hook=True)
        self.session.end_step()
        self.source.alloc(0, GIB)
        self.source.free(0, GIB)
        self.tick(hook=True)
        self.session.end_step()
        ends = self.events(L.EV_STEP_END)
        # Step 1's spike (2 GiB) is below the counter's 4 GiB, so only its lower bound shows.
        self.assertEqual([(e.step, e.slot, e.args[0], e.args[1]) for e in ends], [(0, 0, 4 * GIB, 4 * GIB), (1, 0, GIB, 4 * GIB)])
        self.assertEqual([s.flags & K for s in self.samples()], [0, K, K])
        snap = self.snap()
        self.assertEqual((snap.status_step, snap.devices[0].step_peak), (2, GIB))


class ExactPeaks(AdapterCase):
    exact = True

    def test_every_interval_peak_is_exact(self):
        self.assertEqual(self.adapter.flags & L.FLAG_PEAK_RESET, L.FLAG_PEAK_RESET)
        self.source.alloc(0, 4 * GIB)
        self.tick()
        self.source.free(0, 2 * GIB)
        self.tick()
        self.source.alloc(0, GIB)
        self.source.free(0, GIB)
        self.tick()
        self.assertEqual(self.source.resets, [0, 0, 0])
        self.assertEqual(
            [(s.allocated, s.peak, s.flags) for s in self.samples()],
            [(4 * GIB, 4 * GIB, X | H), (2 * GIB, 4 * GIB, X), (2 * GIB, 3 * GIB, X)],
        )
        self.assertEqual(self.events(L.EV_FOREIGN_PEAK_RESET), [])

    def test_the_program_still_sees_its_own_peaks(self):
        self.source.alloc(0, 4 * GIB)
        self.tick()
        self.source.free(0, 3 * GIB)
        self.tick()
        live = self.source.stats(0)
        self.assertEqual(live["allocated_bytes"]["all"]["peak"], GIB)  # reset by the writer
        view = self.adapter.user_view(0, live)
        self.assertEqual(view["allocated_bytes"]["all"]["peak"], 4 * GIB)
        self.assertEqual(view["reserved_bytes"]["all"]["peak"], 4 * GIB)
        self.adapter.user_reset(0)  # the program's own reset
        self.source.alloc(0, GIB)
        self.source.free(0, GIB)
        view = self.adapter.user_view(0, self.source.stats(0))
        self.assertEqual(view["allocated_bytes"]["all"]["peak"], 2 * GIB)
        self.tick()
        view = self.adapter.user_view(0, self.source.stats(0))
        self.assertEqual(view["allocated_bytes"]["all"]["peak"], 2 * GIB)


class Oom(AdapterCase):
    def test_observer_payload_then_a_sample(self):
        self.source.alloc(0, 30 * GIB)
        self.tick()
        self.session.end_step()
        begin = self.session.begin_phase("train")
        self.session.set_module_label("forward/Net.blocks.3")
        self.source.s[0]["num_alloc_retries"] = 3
        self.adapter.on_oom(self.session, 0, 20 * GIB, 80 * GIB, GIB)
        (oom,) = self.events(L.EV_OOM)
        self.assertEqual(oom.slot, 0)
        self.assertEqual(oom.args, (20 * GIB, GIB, 80 * GIB, 30 * GIB, 30 * GIB, 3))
        self.assertEqual((oom.step, oom.text), (1, "train/forward/Net.blocks.3"))
        self.assertEqual(self.snap().phase_name(oom.phase), "train")
        last = self.samples()[-1]
        self.assertEqual((last.flags & K, last.step), (K, 1))
        self.assertEqual(self.snap().devices[0].device_free, GIB)
        self.session.end_phase(begin)

    def test_observer_for_an_unseen_device_registers_it(self):
        self.adapter.on_oom(self.session, 1, GIB, 80 * GIB, 0)
        snap = self.snap()
        self.assertEqual([d.ordinal for d in snap.devices], [1])
        (oom,) = self.events(L.EV_OOM)
        self.assertEqual((oom.slot, oom.args[0], oom.args[1]), (0, GIB, 0))


class Virtualiser(unittest.TestCase):
    def test_fold_view_reset(self):
        v = PeakVirtualiser()
        stats = {"allocated_bytes": {"all": {"current": 1, "peak": 9}, "small_pool": {"current": 0, "peak": 4}}, "num_ooms": 0, "oversize_allocations": {"current": 0, "peak": 2}}
        v.fold(0, stats)
        after_reset = {"allocated_bytes": {"all": {"current": 1, "peak": 1}, "small_pool": {"current": 0, "peak": 0}}, "num_ooms": 0, "oversize_allocations": {"current": 0, "peak": 0}}
        view = v.view(0, after_reset)
        self.assertEqual(view["allocated_bytes"]["all"]["peak"], 9)
        self.assertEqual(view["allocated_bytes"]["small_pool"]["peak"], 4)
        self.assertEqual(view["oversize_allocations"]["peak"], 2)
        self.assertEqual(after_reset["allocated_bytes"]["all"]["peak"], 1, "the input is not modified")
        self.assertEqual(v.view(1, after_reset), after_reset)
        v.user_reset(0, after_reset)
        self.assertEqual(v.view(0, after_reset)["allocated_bytes"]["all"]["peak"], 1)


if __name__ == "__main__":
    unittest.main()
