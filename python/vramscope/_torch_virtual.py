"""Exact peaks (VRAMSCOPE_PEAK=reset): the writer resets the allocator's peak counters after
every reading, and the program's own peak queries are answered as if it had not.

PyTorch keeps one peak per statistic and `reset_peak_memory_stats` resets all of them. The
virtualiser keeps, per device and statistic, the highest peak the writer's resets have
erased since the program's own last reset; the program then sees max(that, live peak).
Callers from C++ and references bound before the patch still see the writer's resets.
"""


def _peaked(tree, path=()):
    """(path, dict) for every statistic in the nested stats that has a current and a peak."""
    if isinstance(tree, dict):
        if "peak" in tree and "current" in tree:
            yield path, tree
            return
        for key, value in tree.items():
            if isinstance(value, dict):
                for found in _peaked(value, path + (key,)):
                    yield found


def _copy(tree):
    if isinstance(tree, dict):
        return {k: _copy(v) for k, v in tree.items()}
    return tree


class PeakVirtualiser:
    def __init__(self):
        self._saved = {}

    def fold(self, device, stats):
        """Before the writer resets: keep the peaks about to be erased."""
        saved = self._saved.setdefault(device, {})
        for path, stat in _peaked(stats):
            peak = stat["peak"]
            if path not in saved or peak > saved[path]:
                saved[path] = peak

    def user_reset(self, device, stats):
        """The program reset its peaks: from now on they start from the current values."""
        self._saved[device] = {path: stat["current"] for path, stat in _peaked(stats)}

    def view(self, device, stats):
        """`stats` as the program would see them had the writer never reset anything."""
        saved = self._saved.get(device)
        if not saved or not stats:
            return stats
        out = _copy(stats)
        for path, stat in _peaked(out):
            kept = saved.get(path)
            if kept is not None and kept > stat["peak"]:
                stat["peak"] = kept
        return out

    def view_flat(self, device, flat):
        """The same for the flat form ("allocated_bytes.all.peak": n) of `memory_stats()`."""
        saved = self._saved.get(device)
        if not saved or not flat:
            return flat
        out = None
        for path, kept in saved.items():
            key = ".".join(path + ("peak",))
            live = flat.get(key)
            if live is not None and kept > live:
                if out is None:
                    out = flat.copy()
                out[key] = kept
        return flat if out is None else out


def wrappers(memory_module, device_index, view, reset):
    """Replacements for `memory_stats_as_nested_dict` and `reset_peak_memory_stats` of
    `torch.cuda.memory`, as (name, replacement, original) for the caller to install there
    and in their `torch.cuda` aliases.

    `memory_stats`, `max_memory_allocated`, `max_memory_reserved`, `reset_max_memory_*` and
    `memory_summary` look these two up in `torch.cuda.memory` at call time, so they follow.
    `view(index, nested)` and `reset(index)` are guarded by the caller.
    """
    original_stats = memory_module.memory_stats_as_nested_dict
    original_reset = memory_module.reset_peak_memory_stats

    def memory_stats_as_nested_dict(device=None):
        result = original_stats(device=device)
        if not result:
            return result
        return view(device_index(device, optional=True), result)

    def reset_peak_memory_stats(device=None):
        reset(device_index(device, optional=True))

    return (
        ("memory_stats_as_nested_dict", memory_stats_as_nested_dict, original_stats),
        ("reset_peak_memory_stats", reset_peak_memory_stats, original_reset),
    )


def accelerator_wrappers(accelerator_memory, device_index, view_flat, reset):
    """The same for `torch.accelerator.memory`: its `max_memory_*` look up `memory_stats` in
    that module at call time, so replacing it there and in `torch.accelerator` covers them.
    """
    original_stats = accelerator_memory.memory_stats
    original_reset = accelerator_memory.reset_peak_memory_stats

    def memory_stats(device_index_=None):
        result = original_stats(device_index_)
        if not result:
            return result
        return view_flat(device_index(device_index_, optional=True), result)

    def reset_peak_memory_stats(device_index_=None):
        reset(device_index(device_index_, optional=True))

    return (
        ("memory_stats", memory_stats, original_stats),
        ("reset_peak_memory_stats", reset_peak_memory_stats, original_reset),
    )
