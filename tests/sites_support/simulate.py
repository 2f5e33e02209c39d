"""A simulated CUDA caching allocator that writes PyTorch memory snapshots, with the
answers vramscope must find, for tests/sites.rs and benches/sites.rs. Standard library only.

The snapshots have the shape torch.cuda.memory._snapshot() returns (torch/cuda/memory.py
documents it) and are pickled as torch._dump_snapshot does (pickle.dump, protocol 4+):
- frames are shared dicts {"name", "filename", "line"}, and a block's frame list is the very
  list its alloc trace entry holds, as torch's symbolize deduplicates them;
- trace entries: alloc / free_requested / free_completed with addr, size (the request),
  stream, time_us, frames (allocs only: context="alloc"); segment_alloc / segment_free;
  oom with device_free instead of addr;
- blocks: address, size (rounded to 512), requested_size, state, frames.

The simulator tracks what vramscope must reconstruct, forward: the requested and allocated
totals after every trace entry, the live set by site at the latest maximum, the peaks.

Usage: simulate.py OUTDIR [bench ENTRIES]
"""

import collections
import json
import os
import pickle
import sys

MB = 1 << 20
T0 = 1_790_000_000_000_000  # µs since the epoch

_frames = {}


def frame(filename, line, name):
    """One dict per distinct frame, shared by every stack that holds it (as torch does)."""
    key = (filename, line, name)
    if key not in _frames:
        _frames[key] = {"name": name, "filename": filename, "line": line}
    return _frames[key]


TORCH = frame("/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py", 125, "forward")
TORCH_EMPTY = frame("/venv/lib/python3.12/site-packages/torch/_tensor.py", 1500, "new_empty")
STDLIB = frame("/usr/lib/python3.12/contextlib.py", 81, "__enter__")
MAIN = frame("/home/u/train.py", 200, "main")


def is_user(f):
    return f is not TORCH and f is not TORCH_EMPTY and f is not STDLIB


def round512(n):
    return max(512, (n + 511) // 512 * 512)


class Sim:
    def __init__(self, max_entries, segment_size=20 * MB, device=0):
        self.max_entries = max_entries
        self.segment_size = segment_size
        self.device = device
        self.segments = []  # dicts with "address", "total_size", "blocks": [block dicts]
        self.trace = collections.deque(maxlen=max_entries)
        self.entries = 0  # appended in all
        self.history = False
        self.t = T0
        self.next_addr = 0x7F0000000000
        self.live = {}  # addr -> block dict
        self.requested = 0
        self.allocated = 0
        self.reserved = 0
        self.peak_requested = 0
        self.peak_allocated = 0
        self.peak_time_us = None
        self.peak_entry = 0  # entries appended when the peak (latest maximum) was reached
        self.peak_sites = {}
        self.totals = [0]  # requested total after each appended entry (index = entries)

    # -- the trace ---------------------------------------------------------------------------
    def start_history(self):
        self.history = True
        self.totals = [self.requested]

    def record(self, entry):
        self.t += 10
        entry["time_us"] = self.t
        if self.history:
            self.trace.append(entry)
            self.entries += 1
            self.totals.append(self.requested)

    def note_peak(self):
        self.allocated_peak_check()
        if self.requested >= self.peak_requested:
            self.peak_requested = self.requested
            self.peak_time_us = self.t
            self.peak_entry = self.entries
            self.peak_sites = self.sites()

    def allocated_peak_check(self):
        self.peak_allocated = max(self.peak_allocated, self.allocated)

    def sites(self):
        by = collections.defaultdict(lambda: [0, 0])
        for b in self.live.values():
            key = site_of(b["frames"])
            by[key][0] += b["requested_size"]
            by[key][1] += 1
        return {f"{k[0]}:{k[1]}:{k[2]}": v for k, v in by.items()}

    # -- the allocator -------------------------------------------------------------------------
    def new_segment(self, size):
        total = max(self.segment_size, (size + 2 * MB - 1) // (2 * MB) * (2 * MB))
        addr = self.next_addr
        self.next_addr += total + 64 * MB
        seg = {"address": addr, "total_size": total, "blocks": [
            {"address": addr, "size": total, "requested_size": 0, "state": "inactive", "frames": []}
        ]}
        self.segments.append(seg)
        self.reserved += total
        self.record({"action": "segment_alloc", "addr": addr, "size": total, "stream": 0})
        return seg

    def find_free(self, size):
        for seg in self.segments:
            for i, b in enumerate(seg["blocks"]):
                if b["state"] == "inactive" and b["size"] >= size:
                    return seg, i
        return None

    def malloc(self, requested, *user, device_free=None, oom_stack=True):
        """Allocates `requested` bytes from the user frames given (innermost first). With
        `device_free`, a request no cached block fits fails: an `oom` entry with the request's
        Python stack, innermost first, as torch records it (none with `oom_stack=False`)."""
        size = round512(requested)
        found = self.find_free(size)
        frames = [TORCH, TORCH_EMPTY] + [frame(*u) for u in user] + [STDLIB, MAIN] if user else []
        if found is None:
            if device_free is not None:
                entry = {"action": "oom", "device_free": device_free, "size": requested, "stream": 0}
                if oom_stack:
                    entry["frames"] = frames
                self.record(entry)
                return None
            found = (self.new_segment(size), 0)
        seg, i = found
        b = seg["blocks"][i]
        rest = b["size"] - size
        block = {"address": b["address"], "size": size, "requested_size": requested,
                 "state": "active_allocated", "frames": frames if self.history else []}
        seg["blocks"][i:i + 1] = [block] + ([{
            "address": b["address"] + size, "size": rest, "requested_size": 0,
            "state": "inactive", "frames": []}] if rest >= 512 else [])
        if rest < 512:
            block["size"] += rest
        self.live[block["address"]] = block
        self.requested += requested
        self.allocated += block["size"]
        self.record({"action": "alloc", "addr": block["address"], "size": requested, "stream": 0,
                     "frames": block["frames"]})
        self.note_peak()
        return block["address"]

    def free(self, addr):
        block = self.live.pop(addr)
        self.requested -= block["requested_size"]
        self.allocated -= block["size"]
        self.record({"action": "free_requested", "addr": addr, "size": block["requested_size"], "stream": 0})
        self.record({"action": "free_completed", "addr": addr, "size": block["requested_size"], "stream": 0})
        block["state"] = "inactive"
        block["requested_size"] = 0
        block["frames"] = []
        for seg in self.segments:  # merge free neighbours
            blocks = seg["blocks"]
            i = 0
            while i + 1 < len(blocks):
                if blocks[i]["state"] == "inactive" and blocks[i + 1]["state"] == "inactive":
                    blocks[i]["size"] += blocks[i + 1]["size"]
                    del blocks[i + 1]
                else:
                    i += 1

    def empty_cache(self):
        for seg in list(self.segments):
            if all(b["state"] == "inactive" for b in seg["blocks"]):
                self.segments.remove(seg)
                self.reserved -= seg["total_size"]
                self.record({"action": "segment_free", "addr": seg["address"], "size": seg["total_size"], "stream": 0})

    # -- the dump --------------------------------------------------------------------------------
    def snapshot(self, key=None, reason="request", oom=None, requested_peak=True):
        segments = []
        for seg in self.segments:
            blocks = [dict(b) for b in seg["blocks"]]
            active = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
            segments.append({
                "device": self.device, "address": seg["address"], "total_size": seg["total_size"],
                "allocated_size": active, "active_size": active,
                "requested_size": sum(b["requested_size"] for b in blocks),
                "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
                "is_expandable": False, "frames": [], "blocks": blocks,
            })
        traces = [[] for _ in range(self.device)] + [list(self.trace)]
        snap = {
            "segments": segments,
            "device_traces": traces,
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                                   "expandable_segments": False},
        }
        if key:
            snap["vramscope"] = {
                "version": 1, "pid": 4242, "device": self.device, "reason": reason,
                "peak_allocated": self.peak_allocated,
                "peak_time_us": self.peak_time_us, "allocated": self.allocated,
                "reserved": self.reserved, "step": 7, "phase": "backward",
                "max_entries": self.max_entries, "history_owner": "vramscope", "oom": oom,
            }
            if requested_peak:
                snap["vramscope"]["peak_requested"] = self.peak_requested
        return snap

    def window_max(self):
        """The most requested bytes of any state the kept history can vouch for."""
        oldest = self.entries - len(self.trace)
        return max(self.totals[oldest:])


def site_of(frames):
    for f in frames:
        if is_user(f):
            return (f["filename"], f["line"], f["name"])
    if frames:
        f = frames[0]
        return (f["filename"], f["line"], f["name"])
    return ("", 0, "<allocated before the history>")


def dump(path, snap):
    with open(path, "wb") as f:
        pickle.dump(snap, f, protocol=4)


MODEL = "/home/u/model.py"


def training(sim, steps, dumps, peak_step=3):
    """A small training loop: parameters before the history, activations and gradients per
    step, one oversized temporary in the attention at `peak_step`."""
    params = [sim.malloc(8 * MB + 1000) for _ in range(4)]  # before history: no frames
    sim.start_history()
    kept = []
    for step in range(steps):
        acts = [sim.malloc(4 * MB + 4096 * i, (MODEL, 50, "forward")) for i in range(3)]
        if step == peak_step:
            tmp = sim.malloc(24 * MB + 123, (MODEL, 123, "attention"), (MODEL, 60, "block"))
            sim.free(tmp)
        grads = [sim.malloc(8 * MB, (MODEL, 80, "backward")) for _ in range(2)]
        for a in acts:
            sim.free(a)
        kept.append(sim.malloc(1 * MB, ("/home/u/leak.py", 7, "cache")))
        for g in grads:
            sim.free(g)
        if step in dumps:
            yield step
    del params


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    if len(sys.argv) > 2 and sys.argv[2] == "bench":
        return bench(out, int(sys.argv[3]))
    answers = {}

    # 1. A peak between two dumps, inside the ring.
    sim = Sim(max_entries=100_000)
    for step in training(sim, 8, {1, 7}):
        name = "before_peak" if step == 1 else "after_peak"
        dump(f"{out}/{name}.pickle", sim.snapshot(key=True, reason="request"))
        answers[name] = {"peak_requested": sim.peak_requested, "peak_allocated": sim.peak_allocated,
                         "peak_sites": sim.peak_sites, "end_requested": sim.requested,
                         "reserved": sim.reserved, "entries": len(sim.trace),
                         "window_max": sim.window_max()}
        if step == 7:
            dump(f"{out}/no_key.pickle", sim.snapshot(key=None))
            dump(f"{out}/allocated_only.pickle", sim.snapshot(key=True, requested_peak=False))

    # 2. The same run with a ring too small to reach the peak.
    sim = Sim(max_entries=60)
    for _ in training(sim, 9, {8}):
        dump(f"{out}/outside_ring.pickle", sim.snapshot(key=True, reason="peak"))
        answers["outside_ring"] = {"peak_requested": sim.peak_requested,
                                   "window_max": sim.window_max(),
                                   "entries_since_peak": sim.entries - sim.peak_entry,
                                   "entries": len(sim.trace)}

    # 3. An OOM with fragmentation: 10 MiB free in the cache in 1 MiB pieces, 4 MiB asked.
    sim = Sim(max_entries=100_000)
    sim.start_history()
    blocks = [sim.malloc(1 * MB, (MODEL, 30 + i % 2, "fill")) for i in range(20)]
    for b in blocks[::2]:
        sim.free(b)
    free_on_device = 3 * MB
    assert sim.malloc(4 * MB, (MODEL, 99, "big"), device_free=free_on_device) is None
    oom = {"requested": 4 * MB, "device_free": free_on_device, "device_total": 24 * MB}
    dump(f"{out}/oom_fragmented.pickle", sim.snapshot(key=True, reason="oom", oom=oom))
    answers["oom_fragmented"] = {"requested": 4 * MB, "device_free": free_on_device,
                                 "reserved": sim.reserved, "allocated": sim.allocated,
                                 "cached_free": sim.reserved - sim.allocated,
                                 "largest_free_block": 1 * MB, "live_requested": sim.requested,
                                 "request_site": "/home/u/model.py:99:big"}

    # 3b. The same OOM, recovered from: everything freed after it and the dump taken later
    # (on request). The dump's segments show one free 20 MiB segment; at the failure the
    # largest free block was 1 MiB.
    sim = Sim(max_entries=100_000)
    sim.start_history()
    blocks = [sim.malloc(1 * MB, (MODEL, 30, "fill")) for i in range(20)]
    for b in blocks[::2]:
        sim.free(b)
    assert sim.malloc(4 * MB, (MODEL, 99, "big"), device_free=3 * MB) is None
    live_at_oom = sim.requested
    for b in blocks[1::2]:
        sim.free(b)
    dump(f"{out}/oom_recovered.pickle", sim.snapshot(key=True, reason="request"))
    answers["oom_recovered"] = {"requested": 4 * MB, "largest_free_block": 1 * MB,
                                "largest_free_at_dump": 20 * MB, "live_requested": live_at_oom,
                                "request_site": "/home/u/model.py:99:big"}

    # 3c. Dumped at an OOM that recorded no figures and left no `oom` entry.
    sim = Sim(max_entries=100_000)
    sim.start_history()
    sim.malloc(1 * MB, (MODEL, 30, "fill"))
    dump(f"{out}/oom_no_figures.pickle", sim.snapshot(key=True, reason="oom", oom=None))

    # 3d. An OOM whose `oom` entry recorded no stack: where the request was made is unknown.
    sim = Sim(max_entries=100_000)
    sim.start_history()
    sim.malloc(18 * MB, (MODEL, 30, "fill"))
    assert sim.malloc(4 * MB, (MODEL, 99, "big"), device_free=MB, oom_stack=False) is None
    oom = {"requested": 4 * MB, "device_free": MB, "device_total": 24 * MB}
    dump(f"{out}/oom_no_stack.pickle", sim.snapshot(key=True, reason="oom", oom=oom))
    answers["oom_no_stack"] = {"requested": 4 * MB}

    # 4. A leak: the 1 MiB per step at leak.py:7 grows between two dumps of one run.
    sim = Sim(max_entries=100_000)
    for step in training(sim, 7, {2, 6}):
        dump(f"{out}/leak_{step}.pickle", sim.snapshot(key=True))
    answers["leak"] = {"site": "/home/u/leak.py:7:cache", "growth_bytes": 4 * MB, "growth_blocks": 4}

    with open(f"{out}/answers.json", "w") as f:
        json.dump(answers, f, indent=1)


def bench(out, entries):
    """A history of `entries` entries: a training loop's allocs and frees over 40 sites with
    stacks 12 frames deep, and the peak inside the ring."""
    sim = Sim(max_entries=entries)
    sim.start_history()
    sites = [[(f"/home/u/models/layer{i % 10}.py", 10 + i, f"fn{i}")] +
             [(f"/home/u/lib/util{j}.py", j, "helper") for j in range(6)] for i in range(40)]
    step = 0
    while sim.entries < entries + 2_000:
        live = []
        for i, site in enumerate(sites):
            live.append(sim.malloc((1 + (i + step) % 7) * MB // 4 + 512 * i, *site))
        for addr in live:
            sim.free(addr)
        step += 1
    dump(f"{out}/bench.pickle", sim.snapshot(key=True))
    print(json.dumps({"entries": len(sim.trace), "peak_requested": sim.peak_requested}))


if __name__ == "__main__":
    main()
