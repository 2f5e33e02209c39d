"""The allocator: per-device counters in torch's nested-stats shape."""

DEVICES = 2
GIB = 1 << 30

_context = set()
_observers = []
_stats = {}


def _blank():
    def stat():
        return {p: {"current": 0, "peak": 0, "allocated": 0, "freed": 0} for p in ("all", "large_pool", "small_pool")}

    return {
        "allocated_bytes": stat(),
        "reserved_bytes": stat(),
        "active_bytes": stat(),
        "inactive_split_bytes": stat(),
        "requested_bytes": stat(),
        "num_alloc_retries": 0,
        "num_ooms": 0,
        "num_device_alloc": 0,
        "num_device_free": 0,
        "oversize_allocations": {"current": 0, "peak": 0, "allocated": 0, "freed": 0},
    }


def _device(i):
    if i not in _stats:
        _stats[i] = _blank()
    return _stats[i]


def _set(stat, value):
    stat["all"]["current"] = value
    stat["all"]["peak"] = max(stat["all"]["peak"], value)


def _fake_malloc(i, nbytes):
    """An allocation on device i: creates its context, grows allocated and reserved."""
    from . import cuda

    cuda._lazy_init()
    _context.add(i)
    s = _device(i)
    alloc = s["allocated_bytes"]["all"]["current"] + nbytes
    _set(s["allocated_bytes"], alloc)
    _set(s["active_bytes"], alloc)
    _set(s["requested_bytes"], alloc)
    if s["reserved_bytes"]["all"]["current"] < alloc:
        _set(s["reserved_bytes"], alloc)
        s["num_device_alloc"] += 1


def _fake_free(i, nbytes):
    s = _device(i)
    alloc = s["allocated_bytes"]["all"]["current"] - nbytes
    _set(s["allocated_bytes"], alloc)
    _set(s["active_bytes"], alloc)
    _set(s["requested_bytes"], alloc)


def _fake_oom(i, nbytes, total=80 * GIB, free=GIB):
    """What the caching allocator does when cudaMalloc fails: retry, count, observers, raise."""
    from . import cuda

    s = _device(i)
    s["num_alloc_retries"] += 1
    s["num_ooms"] += 1
    for fn in list(_observers):
        fn(i, nbytes, total, free)
    raise cuda.OutOfMemoryError(
        "CUDA out of memory. Tried to allocate %.2f GiB. GPU %d has a total capacity of 80.00 GiB"
        % (nbytes / GIB, i)
    )


def _cuda_memoryStats(i):
    import copy

    return copy.deepcopy(_device(i))


def _cuda_resetPeakMemoryStats(i):
    def walk(node):
        if isinstance(node, dict):
            if "peak" in node and "current" in node:
                node["peak"] = node["current"]
            for v in node.values():
                walk(v)

    walk(_device(i))


def _cuda_hasPrimaryContext(i):
    return i in _context


def _cuda_attach_out_of_memory_observer(fn):
    from . import cuda

    if not cuda._initialized and not cuda._initializing:
        raise RuntimeError("attaching before CUDA init would initialise it")
    _observers.append(fn)
