"""torch.cuda.memory: these functions look each other up at call time, as torch's do."""

import collections

import torch


def _get_device_index(device, optional=False):
    if device is None:
        return 0
    if isinstance(device, str):
        return int(device.split(":")[1]) if ":" in device else 0
    return int(device)


def memory_stats_as_nested_dict(device=None):
    if not torch.cuda.is_initialized():
        return {}
    return torch._C._cuda_memoryStats(_get_device_index(device, optional=True))


def memory_stats(device=None):
    result = []

    def add(prefix, obj):
        if isinstance(obj, dict):
            if prefix:
                prefix += "."
            for k, v in obj.items():
                add(prefix + k, v)
        else:
            result.append((prefix, obj))

    add("", memory_stats_as_nested_dict(device=device))
    result.sort()
    return collections.OrderedDict(result)


def max_memory_allocated(device=None):
    return memory_stats(device=device).get("allocated_bytes.all.peak", 0)


def max_memory_reserved(device=None):
    return memory_stats(device=device).get("reserved_bytes.all.peak", 0)


def memory_allocated(device=None):
    return memory_stats(device=device).get("allocated_bytes.all.current", 0)


def reset_peak_memory_stats(device=None):
    return torch._C._cuda_resetPeakMemoryStats(_get_device_index(device, optional=True))


def empty_cache():
    for s in torch._C._stats.values():
        reserved = s["reserved_bytes"]["all"]
        if reserved["current"] > s["allocated_bytes"]["all"]["current"]:
            reserved["current"] = s["allocated_bytes"]["all"]["current"]
            s["num_device_free"] += 1


def _dump_snapshot(filename="dump_snapshot.pickle"):
    with open(filename, "wb") as f:
        f.write(b"snapshot")


__all__ = [
    "memory_stats_as_nested_dict",
    "memory_stats",
    "max_memory_allocated",
    "max_memory_reserved",
    "memory_allocated",
    "reset_peak_memory_stats",
    "empty_cache",
]
