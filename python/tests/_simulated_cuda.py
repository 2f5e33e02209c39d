"""A GPU for the real torch package on a machine without one.

Only the driver-level entry points that torch's own Python code calls are replaced: the
`torch._C` functions that ask the CUDA caching allocator or the runtime, the device count
and properties, and torch.cuda's "initialised" flag. Everything above them (torch.cuda.memory,
torch.accelerator, torch.optim, torch.compile) is the real package. The allocator behind them
is a miniature with the statistics' real nested shape: tests allocate and free on it.

With sites, two more entry points: `_cuda_record_memory_history` and `_cuda_isHistoryEnabled`
(which on a machine without a driver raise), and a real `_cuda_memorySnapshot`: the
miniature then keeps a history ring as c10's RingBuffer does (a bound that grows without
reordering, a clear only when asked or when turned off) with each allocation's Python stack,
innermost frame first, as `stacks="python"` records it.
"""

import importlib
import sys
import time
import types

GIB = 1 << 30
# Where the simulated device's blocks start: a realistic address, above 2**32.
BASE_ADDRESS = 0x7F0000000000


def _stat():
    return {"all": {"current": 0, "peak": 0, "allocated": 0, "freed": 0}}


def _python_stack(skip):
    """The caller's Python frames, innermost first, as torch records them."""
    frames = []
    f = sys._getframe(skip + 1)
    while f is not None:
        frames.append({"filename": f.f_code.co_filename, "line": f.f_lineno, "name": f.f_code.co_name})
        f = f.f_back
    return frames


def empty_allocator_stats():
    """One device's `torch.cuda.memory_stats` before anything was allocated, nested as the
    caching allocator nests them."""
    return {
        "allocated_bytes": _stat(),
        "reserved_bytes": _stat(),
        "active_bytes": _stat(),
        "inactive_split_bytes": _stat(),
        "requested_bytes": _stat(),
        "allocation": _stat(),
        "num_alloc_retries": 0,
        "num_ooms": 0,
        "num_device_alloc": 0,
        "num_device_free": 0,
    }


class SimulatedCuda:
    def __init__(self, torch, total=80 * GIB):
        self.torch = torch
        self.total = total
        self.fraction = 1.0
        self.stats = empty_allocator_stats()
        self.observers = []
        self.empty_cache_calls = 0
        self._saved = []
        # Live blocks: address -> (size, frames); the next free address.
        self.blocks = {}
        self._next_address = BASE_ADDRESS
        # The history: None when off, else its settings; every call as torch passed it.
        self.history = None
        self.history_calls = []
        self.snapshots_taken = 0
        # A module `_cuda_memorySnapshot` imports as it runs, as torch 2.11's imports
        # torch._inductor (and torch._dynamo with it) the first time.
        self.snapshot_imports = None
        self.snapshot_import_error = ImportError
        self._ring = []
        self._ring_next = 0

    # -- the allocator in miniature ---------------------------------------------------------

    def alloc(self, n):
        """Allocates `n` bytes; returns the block's address (a negative `n` frees bytes, as
        `free` does, without a block)."""
        self._account(n)
        if n <= 0:
            return None
        address = self._next_address
        self._next_address += (n + 511) // 512 * 512
        frames = self._frames()
        self.blocks[address] = (n, frames)
        allocation = self.stats["allocation"]["all"]
        allocation["allocated"] += 1
        allocation["current"] += 1
        allocation["peak"] = max(allocation["peak"], allocation["current"])
        self._trace("alloc", address, n, frames)
        return address

    def free(self, n=None, address=None):
        """Frees the block at `address`, else the newest block of `n` bytes, else `n` bytes
        with no block (tests that only move the statistics)."""
        if address is None:
            address = next((a for a in reversed(list(self.blocks)) if self.blocks[a][0] == n), None)
        if address is None:
            self._account(-n)
            return
        size, _ = self.blocks.pop(address)
        self._account(-size)
        allocation = self.stats["allocation"]["all"]
        allocation["freed"] += 1
        allocation["current"] -= 1
        self._trace("free_requested", address, size, [])
        self._trace("free_completed", address, size, [])

    def _frames(self):
        h = self.history
        if h is None or h["context"] in (None, "state") or h["stacks"] not in ("python", "all"):
            return []
        return _python_stack(2)

    def _trace(self, action, address, size, frames, **extra):
        h = self.history
        if h is None or h["enabled"] != "all":
            return
        entry = {"action": action, "addr": address, "size": size, "stream": 0, "time_us": time.time_ns() // 1000, "frames": frames}
        entry.update(extra)
        # c10's RingBuffer::insertEntries.
        if len(self._ring) < h["max_entries"]:
            self._ring.append(entry)
        else:
            self._ring[self._ring_next] = entry
            self._ring_next += 1
            if self._ring_next == h["max_entries"]:
                self._ring_next = 0

    def trace(self):
        """The ring in the order torch returns it (RingBuffer::getEntries)."""
        return self._ring[self._ring_next :] + self._ring[: self._ring_next]

    def _record_memory_history(
        self,
        enabled,
        context,
        stacks,
        max_entries,
        clear_history,
        compile_context,
        global_record_annotations,
        skip_actions,
        record_pinned_host_memory,
        record_cuda,
    ):
        self.history_calls.append(
            {"enabled": enabled, "context": context, "stacks": stacks, "max_entries": max_entries, "clear_history": clear_history}
        )
        # DeviceCachingAllocator::recordHistory: the bound always, a clear only when turned
        # off or asked.
        on = enabled is not None
        self.history = {"enabled": enabled, "context": context, "stacks": stacks, "max_entries": max(1, max_entries)} if on else None
        if not on or clear_history:
            self._ring, self._ring_next = [], 0

    def _memory_snapshot(self, pool=None):
        if self.snapshot_imports is not None:
            try:
                importlib.import_module(self.snapshot_imports)
            except ImportError as e:
                # C++ code may hand an ImportError back as another exception.
                raise self.snapshot_import_error(str(e)) from None
        self.snapshots_taken += 1
        segments = []
        for address, (size, frames) in sorted(self.blocks.items()):
            total = (size + 511) // 512 * 512
            block = {"address": address, "size": total, "requested_size": size, "state": "active_allocated", "frames": frames}
            segments.append(
                {
                    "device": 0,
                    "address": address,
                    "total_size": total,
                    "stream": 0,
                    "segment_type": "large",
                    "segment_pool_id": (0, 0),
                    "allocated_size": total,
                    "active_size": total,
                    "requested_size": size,
                    "blocks": [block],
                }
            )
        # What the allocator reserved beyond its live blocks is its cache: freed blocks that
        # stay in their segments, here one inactive segment (torch lists each freed block in
        # the segment it was carved from; the sizes are what a reader sums).
        cached = self.stats["reserved_bytes"]["all"]["current"] - sum(s["total_size"] for s in segments)
        if cached > 0:
            block = {"address": self._next_address, "size": cached, "requested_size": 0, "state": "inactive", "frames": []}
            segments.append(
                {
                    "device": 0,
                    "address": self._next_address,
                    "total_size": cached,
                    "stream": 0,
                    "segment_type": "large",
                    "segment_pool_id": (0, 0),
                    "allocated_size": 0,
                    "active_size": 0,
                    "requested_size": 0,
                    "blocks": [block],
                }
            )
        return {"segments": segments, "device_traces": [self.trace()], "allocator_settings": {}}

    def _account(self, n):
        for name in ("allocated_bytes", "active_bytes", "requested_bytes"):
            st = self.stats[name]["all"]
            st["current"] += n
            st["peak"] = max(st["peak"], st["current"])
        res = self.stats["reserved_bytes"]["all"]
        if res["current"] < self.stats["allocated_bytes"]["all"]["current"]:
            res["current"] = self.stats["allocated_bytes"]["all"]["current"]
            res["peak"] = max(res["peak"], res["current"])

    def fail(self, requested):
        """An allocation the allocator cannot satisfy: its observers run, as in malloc."""
        self.stats["num_ooms"] += 1
        allowed = int(self.total * self.fraction) if self.fraction < 1.0 else self.total
        self._trace("oom", 0, requested, self._frames(), device_free=self._free())
        for fn in list(self.observers):
            fn(0, requested, allowed, self._free())

    def _free(self):
        return self.total - self.stats["reserved_bytes"]["all"]["current"] - GIB

    def _nested(self, device=0):
        self._check(device)
        return {k: ({p: dict(v) for p, v in val.items()} if isinstance(val, dict) else val) for k, val in self.stats.items()}

    def _reset_peaks(self, device=0):
        self._check(device)
        for v in self.stats.values():
            if isinstance(v, dict):
                v["all"]["peak"] = v["all"]["current"]

    def _empty_cache(self):
        self.empty_cache_calls += 1
        res = self.stats["reserved_bytes"]["all"]
        res["current"] = self.stats["allocated_bytes"]["all"]["current"]

    @staticmethod
    def _check(device):
        if device not in (0, None):
            raise RuntimeError("Invalid device argument %r" % (device,))

    # -- installing it in torch -------------------------------------------------------------

    def _set(self, owner, name, value):
        self._saved.append((owner, name, owner.__dict__.get(name, _MISSING)))
        setattr(owner, name, value)

    def install(self, initialised=True):
        torch, C, cuda = self.torch, self.torch._C, self.torch.cuda
        props = types.SimpleNamespace(
            name="Simulated H100",
            major=9,
            minor=0,
            total_memory=self.total,
            uuid=types.SimpleNamespace(bytes=bytes(range(16))),
            pci_domain_id=0,
            pci_bus_id=0x18,
            pci_device_id=0,
        )
        self._set(cuda, "_initialized", initialised)
        # torch._utils resolves "the current device" (device=None) only where CUDA is available.
        self._set(cuda, "is_available", lambda: True)
        self._set(cuda, "device_count", lambda: 1)
        self._set(cuda, "_get_device_properties", lambda i: props)
        self._set(cuda, "mem_get_info", lambda device=None: (self._free(), self.total))
        self._set(C, "_cuda_getDevice", lambda: 0)
        self._set(C, "_cuda_hasPrimaryContext", lambda i: i == 0)
        self._set(C, "_cuda_memoryStats", self._nested)
        self._set(C, "_cuda_resetPeakMemoryStats", self._reset_peaks)
        self._set(C, "_cuda_emptyCache", self._empty_cache)
        self._set(C, "_cuda_memorySnapshot", self._memory_snapshot)
        self._set(C, "_cuda_record_memory_history", self._record_memory_history)
        self._set(C, "_cuda_isHistoryEnabled", lambda: self.history is not None)
        self._set(C, "_cuda_getMemoryFraction", lambda device=None: self.fraction)
        self._set(C, "_cuda_attach_out_of_memory_observer", self.observers.append)
        self._set(C, "_accelerator_isAllocatorInitialized", lambda: cuda._initialized)
        self._set(C, "_accelerator_getDeviceIndex", lambda: 0)
        self._set(C, "_accelerator_getDeviceStats", self._nested)
        self._set(C, "_accelerator_resetPeakStats", self._reset_peaks)
        self._set(C, "_accelerator_emptyCache", self._empty_cache)
        return self

    def initialise(self):
        """What torch.cuda._lazy_init does once the driver is up: run the queued calls."""
        cuda = self.torch.cuda
        cuda._initialized = True
        queued, cuda._queued_calls[:] = list(cuda._queued_calls), []
        for fn, _ in queued:
            fn()

    def uninstall(self):
        for owner, name, old in reversed(self._saved):
            if old is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, old)
        self._saved = []


_MISSING = object()
