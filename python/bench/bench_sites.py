"""Costs of allocation sites (`VRAMSCOPE_SITES=1`) in the Python writer, on a CPU.

    python3 python/bench/bench_sites.py [--entries 100000] [--dir /dev/shm]

What it measures, with the writer's own code:
  * the sampler's tick with sites off and on: reading the statistics, publishing, and with
    sites the planning pass (ring sizing, the request field, the peak rule) that runs after
    every tick; no dump happens in it;
  * one dump without PyTorch's part: a snapshot dict of `--entries` trace entries (Python
    stacks of 12 frames) and as many live blocks, given the "vramscope" key, pickled
    (protocol 4) to a temporary file, renamed, the old ones rotated: `Sites._write_file`.
What it cannot measure on a CPU: PyTorch's own cost of recording the history at every
allocation, and of `torch.cuda.memory._snapshot()` gathering the dict (C++ under the
allocator's lock). Those need a GPU; the published figures are in the README.
"""

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from vramscope import _layout as L  # noqa: E402
from vramscope._channel import Channel  # noqa: E402
from vramscope._config import Config  # noqa: E402
from vramscope._identity import Identity  # noqa: E402
from vramscope._session import Session  # noqa: E402
from vramscope._sites import Sites  # noqa: E402
from vramscope._torch import TorchAdapter  # noqa: E402

from bench_writer import StatsSource  # noqa: E402

GIB = 1 << 30


def fake_torch():
    """Just what `Sites` looks up; none of it is called by what is measured."""
    memory = types.SimpleNamespace(_record_memory_history=lambda *a, **k: None, _snapshot=lambda: {})
    return types.SimpleNamespace(
        cuda=types.SimpleNamespace(memory=memory), _C=types.SimpleNamespace(_cuda_isHistoryEnabled=lambda: False)
    )


def tick_us(directory, sites_on, n=20000):
    config = Config(hz=100, sites=sites_on)
    sites = Sites(fake_torch(), config) if sites_on else None
    adapter = TorchAdapter(StatsSource(), config, sites=sites)
    ch = Channel.create(Identity(L.KIND_PYTORCH), directory=directory)
    session = Session(ch)
    if sites is not None:
        sites.attach(ch)
    rt = types.SimpleNamespace(session=session)
    for _ in range(100):
        adapter.tick(session, False)
    start = time.perf_counter()
    for i in range(n):
        adapter.tick(session, False)
        if i % 50 == 0:
            session.end_step()
        if sites is not None:
            sites._plan(rt)
    elapsed = (time.perf_counter() - start) / n * 1e6
    if sites is not None:
        sites.stop()
    ch.finish()
    return elapsed


def snapshot_dict(entries):
    """A snapshot as `_snapshot()` returns it: `entries` trace entries (alloc, free requested,
    free completed, with a 12-frame Python stack on each allocation as context="alloc"
    records), and a live block per allocation still held (one in ten)."""
    rng = random.Random(1)
    files = ["/srv/train/model/layer%d.py" % i for i in range(40)] + [
        "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py",
        "/usr/lib/python3.11/site-packages/torch/nn/functional.py",
    ]
    pool = [{"filename": rng.choice(files), "line": rng.randrange(1, 900), "name": "fn%d" % i} for i in range(600)]

    def stack():
        # torch's py_symbolize (torch/csrc/profiler/python/combined_traceback.cpp) makes one
        # dict per distinct frame and a new list per traceback that refers to them.
        return rng.sample(pool, 12)

    trace = []
    live = []
    address = 0x7F0000000000
    t = 1_800_000_000_000_000
    while len(trace) < entries:
        size = rng.choice((512, 4096, 1 << 20, 8 << 20, 64 << 20))
        address += size
        t += 37
        frames = stack()
        trace.append({"action": "alloc", "addr": address, "size": size, "stream": 0, "time_us": t, "frames": frames})
        if rng.random() < 0.9:
            trace.append({"action": "free_requested", "addr": address, "size": size, "stream": 0, "time_us": t + 5, "frames": []})
            trace.append({"action": "free_completed", "addr": address, "size": size, "stream": 0, "time_us": t + 9, "frames": []})
        else:
            live.append((address, size, frames))
    segments = []
    for address, size, frames in live:
        block = {"address": address, "size": size, "requested_size": size, "state": "active_allocated", "frames": frames}
        segments.append(
            {
                "device": 0,
                "address": address,
                "total_size": size,
                "stream": 0,
                "segment_type": "large",
                "segment_pool_id": (0, 0),
                "allocated_size": size,
                "active_size": size,
                "requested_size": size,
                "blocks": [block],
            }
        )
    return {"segments": segments, "device_traces": [trace[:entries]], "allocator_settings": {}}


def dump(directory, entries, repeats=3):
    config = Config(sites=True, sites_keep=2)
    sites = Sites(fake_torch(), config)
    ch = Channel.create(Identity(L.KIND_PYTORCH), directory=directory)
    sites.attach(ch)
    snapshot = snapshot_dict(entries)
    sites._snapshot = lambda: snapshot
    info = {"version": 1, "reason": "request", "peak_allocated": 5 * GIB, "max_entries": entries}
    times = []
    size = 0
    for i in range(repeats):
        meta = {"name": "%s.snap-%d-request.pickle" % (ch.name, i + 1), "vramscope": info}
        start = time.perf_counter()
        size = sites._write_file(meta)
        times.append(time.perf_counter() - start)
    sites.stop()
    ch.finish()
    return min(times), size


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100000)
    parser.add_argument("--dir", default=None, help="where dumps go (default: a temporary directory under /dev/shm if there is one)")
    args = parser.parse_args()
    base = args.dir or ("/dev/shm" if os.path.isdir("/dev/shm") else None)
    directory = tempfile.mkdtemp(prefix="vramscope-bench-", dir=base)
    try:
        # Alternated and the best of five kept: the machine's other load only adds.
        runs = [(tick_us(directory, False), tick_us(directory, True)) for _ in range(5)]
        off = min(r[0] for r in runs)
        on = min(r[1] for r in runs)
        print("sampler tick (torch-sized stats dict rebuilt per read; best of 5 x 20,000):")
        print("  %-55s %7.2f us" % ("sites off", off))
        print("  %-55s %7.2f us" % ("sites on (tick, then the planning pass; no dump)", on))
        print("  %-55s %7.2f us" % ("added per tick", on - off))
        seconds, size = dump(directory, args.entries)
        print("one dump, pickled and written to %s (best of 3):" % directory)
        print("  %-55s %7.1f ms, %6.1f MB" % ("%d trace entries, 12-frame stacks" % args.entries, seconds * 1e3, size / 1e6))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
