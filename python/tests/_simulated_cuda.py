"""A GPU for the real torch package on a machine without one.

Only the driver-level entry points that torch's own Python code calls are replaced: the
`torch._C` functions that ask the CUDA caching allocator or the runtime, the device count
and properties, and torch.cuda's "initialised" flag. Everything above them (torch.cuda.memory,
torch.accelerator, torch.optim, torch.compile) is the real package. The allocator behind them
is a miniature with the statistics' real nested shape: tests allocate and free on it.
"""

import types

GIB = 1 << 30


def _stat():
    return {"all": {"current": 0, "peak": 0, "allocated": 0, "freed": 0}}


def empty_allocator_stats():
    """One device's `torch.cuda.memory_stats` before anything was allocated, nested as the
    caching allocator nests them."""
    return {
        "allocated_bytes": _stat(),
        "reserved_bytes": _stat(),
        "active_bytes": _stat(),
        "inactive_split_bytes": _stat(),
        "requested_bytes": _stat(),
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

    # -- the allocator in miniature ---------------------------------------------------------

    def alloc(self, n):
        for name in ("allocated_bytes", "active_bytes", "requested_bytes"):
            st = self.stats[name]["all"]
            st["current"] += n
            st["peak"] = max(st["peak"], st["current"])
        res = self.stats["reserved_bytes"]["all"]
        if res["current"] < self.stats["allocated_bytes"]["all"]["current"]:
            res["current"] = self.stats["allocated_bytes"]["all"]["current"]
            res["peak"] = max(res["peak"], res["current"])

    def free(self, n):
        self.alloc(-n)

    def fail(self, requested):
        """An allocation the allocator cannot satisfy: its observers run, as in malloc."""
        self.stats["num_ooms"] += 1
        allowed = int(self.total * self.fraction) if self.fraction < 1.0 else self.total
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
        self._set(C, "_cuda_memorySnapshot", lambda device=None: {"segments": [], "device_traces": []})
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
