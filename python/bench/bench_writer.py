"""Costs of the Python writer: one sample, one event, and the sampling thread's CPU at 100 Hz.

    python3 python/bench/bench_writer.py

Targets: publishing one sample <= 2 us; the sampler a small fraction of one core. The torch
statistics come from a stand-in that builds a fresh nested dict per call, as
torch._C._cuda_memoryStats does, so the sampler's figure includes that dict's cost.
"""

import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from vramscope import _layout as L  # noqa: E402
from vramscope._channel import Channel, DeviceInfo  # noqa: E402
from vramscope._config import Config  # noqa: E402
from vramscope._identity import Identity  # noqa: E402
from vramscope._sampler import Sampler  # noqa: E402
from vramscope._session import Figures, Session  # noqa: E402
from vramscope._torch import TorchAdapter  # noqa: E402

GIB = 1 << 30


def per_call_us(fn, n):
    start = time.perf_counter()
    fn(n)
    return (time.perf_counter() - start) / n * 1e6


class StatsSource:
    """torch's nested statistics for one device, rebuilt on every call."""

    def __init__(self):
        self.allocated = GIB

    def _stat(self, current):
        pools = {}
        for pool in ("all", "large_pool", "small_pool"):
            pools[pool] = {"current": current, "peak": current + GIB, "allocated": 10 * current, "freed": 9 * current}
        return pools

    def device_count(self):
        return 1

    def is_active(self, i):
        return True

    def identity(self, i):
        return DeviceInfo(i, bytes(16), "00000000:18:00.0", 80 * GIB)

    def stats(self, i):
        self.allocated += 512
        a = self.allocated
        stats = {}
        for name in ("active", "allocated_bytes", "active_bytes", "inactive_split", "inactive_split_bytes", "reserved_bytes", "requested_bytes", "segment", "allocation"):
            stats[name] = self._stat(a)
        for name in ("num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free", "num_sync_all_streams", "max_split_size"):
            stats[name] = 0
        stats["oversize_allocations"] = {"current": 0, "peak": 0, "allocated": 0, "freed": 0}
        stats["oversize_segments"] = {"current": 0, "peak": 0, "allocated": 0, "freed": 0}
        return stats

    def mem_get_info(self, i):
        return (10 * GIB, 80 * GIB)

    def reset_peak(self, i):
        pass

    def limit(self, i):
        return None


class CachedStats(StatsSource):
    """The same statistics without rebuilding them: what the writer itself costs per tick."""

    def __init__(self):
        StatsSource.__init__(self)
        self._cached = StatsSource.stats(self, 0)

    def stats(self, i):
        return self._cached


def sampler_cpu(name, source, directory, hz=100, seconds=5.0):
    """Runs the sampler at `hz` for `seconds` and prints its thread's share of one core."""
    adapter = TorchAdapter(source, Config(hz=hz))
    ch = Channel.create(Identity(L.KIND_PYTORCH), directory=directory)
    session = Session(ch)
    marks = []

    def tick():
        adapter.tick(session, False)
        session.heartbeat()
        marks.append(time.thread_time())

    one = time.perf_counter()
    for _ in range(100):
        adapter.tick(session, False)
    tick_us = (time.perf_counter() - one) / 100 * 1e6
    sampler = Sampler(tick, adapter.period)
    wall0 = time.monotonic()
    sampler.start()
    time.sleep(seconds)
    sampler.stop()
    wall = time.monotonic() - wall0
    thread_cpu = marks[-1] - marks[0]
    print("sampler, %s:" % name)
    print("  %-53s %6.1f us" % ("one tick (read stats, publish slot and sample)", tick_us))
    print("  %-53s %6.1f Hz" % ("rate achieved (asked %d Hz)" % hz, (len(marks) - 1) / wall))
    print("  %-53s %6.3f %%" % ("thread CPU, share of one core", 100 * thread_cpu / wall))
    ch.finish()


def module_attribution(directory):
    """What `VRAMSCOPE_MODULES=1` adds to each module call: the global forward pre/post
    hooks, their path lookup and the status label written through the session. Run against
    the tests' fake torch, whose module call is a bare Python call: on real torch the hooks
    also turn off `_call_impl`'s no-hook fast path, which this cannot show.
    """
    fakes = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fakes")
    sys.path.insert(0, fakes)
    import torch  # the fake
    from vramscope._torch_modules import ModuleTracker

    class Leaf(torch.nn.modules.module.Module):
        def forward(self, x):
            return x

    class Block(torch.nn.modules.module.Module):
        def __init__(self):
            super().__init__()
            self.attn = Leaf()
            self.mlp = Leaf()

        def forward(self, x):
            return self.mlp(self.attn(x))

    class Model(torch.nn.modules.module.Module):
        def __init__(self, depth):
            super().__init__()
            self.blocks = [Block() for _ in range(depth)]
            for i, block in enumerate(self.blocks):
                setattr(self, "block%d" % i, block)

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return x

    model = Model(12)
    calls = 1 + 12 * 3  # the model, each block, and its two leaves

    def forward_us(n):
        start = time.perf_counter()
        for _ in range(n):
            model(1)
        return (time.perf_counter() - start) / n * 1e6

    bare = forward_us(2000)
    ch = Channel.create(Identity(L.KIND_PYTORCH), directory=directory)
    session = Session(ch)
    remove = ModuleTracker(torch, session.set_module_label).install()
    hooked = forward_us(2000)
    remove()
    ch.finish()
    sys.path.remove(fakes)
    print("module attribution (VRAMSCOPE_MODULES=1), fake torch, %d module calls per pass:" % calls)
    print("  %-53s %6.1f us" % ("forward pass without hooks", bare))
    print("  %-53s %6.1f us" % ("forward pass with attribution", hooked))
    print("  %-53s %6.2f us" % ("added per module call", (hooked - bare) / calls))


def main():
    directory = tempfile.mkdtemp(prefix="vramscope-bench-")
    try:
        ch = Channel.create(Identity(L.KIND_PYTHON), devices=[DeviceInfo(0)], directory=directory)
        session = Session(ch)
        state = session.add_slot("bench", DeviceInfo(1))
        A = L.ABSENT

        def ring_append(n):
            append = ch.append_sample
            for i in range(n):
                append(i, 0, i, i, i, i, A, 0, 0)

        def device_publish(n):
            row = list(range(16))
            publish = ch.publish_device
            for _ in range(n):
                publish(0, row)

        def full_sample(n):
            publish = session.publish
            fig = Figures(allocated=0, allocated_peak=n, reserved=0, reserved_peak=n, active=0)
            for i in range(n):
                fig.allocated = i
                publish(state, fig, False)

        def full_sample_periodic(n):
            publish = session.publish
            fig = Figures(allocated=0, allocated_peak=n, reserved=0, reserved_peak=n, active=0)
            for i in range(n):
                fig.allocated = i
                publish(state, fig, False, periodic=True)

        def full_sample_with_figures(n):
            publish = session.publish
            for i in range(n):
                publish(state, Figures(allocated=i, allocated_peak=n, reserved=2 * i, reserved_peak=n), False)

        def event(n):
            append = ch.append_event
            for i in range(n):
                append(i, L.EV_MARK, L.NO_SLOT, 0, None, (i,), "forward/model.encoder.layers.3")

        def full_event(n):
            for _ in range(n):
                session.note("forward/model.encoder.layers.3")

        rows = [
            ("sample: ring append (seq, payload + CRC, seq, head)", per_call_us(ring_append, 200000)),
            ("sample: device slot publish (seqlock, 16 figures)", per_call_us(device_publish, 200000)),
            ("sample: full publish (peaks, slot, ring)", per_call_us(full_sample, 100000)),
            ("sample: the sampler's publish (slot at most every 100 ms)", per_call_us(full_sample_periodic, 100000)),
            ("sample: full publish, building its Figures too", per_call_us(full_sample_with_figures, 100000)),
            ("event: ring append, 30-byte text", per_call_us(event, 100000)),
            ("event: full (session.note)", per_call_us(full_event, 100000)),
        ]
        for name, us in rows:
            print("%-55s %6.2f us" % (name, us))
        ch.finish()

        sampler_cpu("torch-sized stats dict rebuilt per read", StatsSource(), directory, hz=100)
        sampler_cpu("stats dict reused (the writer's own cost)", CachedStats(), directory, hz=100)
        sampler_cpu("torch-sized stats dict, default rate", StatsSource(), directory, hz=20)
        module_attribution(directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
