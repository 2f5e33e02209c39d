"""The statistics source of the PyTorch adapter on real torch (see `_torch` for the contract).

It reads through torch's private, cheap entry points where they exist (one nested dict per
call instead of the public API's flattened, sorted copy) and falls back to the public API.
References are taken at construction, before exact mode patches the public functions.
"""

from ._records import DeviceInfo, pci_bus_id, uuid_bytes


def _unflatten(flat):
    nested = {}
    for key, value in flat.items():
        node = nested
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return nested


class TorchCudaSource:
    def __init__(self, torch):
        self._torch = torch
        cuda = torch.cuda
        c = torch._C
        self._memory_stats = getattr(c, "_cuda_memoryStats", None)
        self._has_context = getattr(c, "_cuda_hasPrimaryContext", None)
        self._reset = getattr(c, "_cuda_resetPeakMemoryStats", None)
        memory = getattr(cuda, "memory", cuda)
        self._public_nested = getattr(memory, "memory_stats_as_nested_dict", None)
        self._public_flat = getattr(cuda, "memory_stats", None)
        self._public_reset = getattr(memory, "reset_peak_memory_stats", None)
        self._fraction = getattr(memory, "get_per_process_memory_fraction", None)
        self._totals = {}

    def device_count(self):
        return self._torch.cuda.device_count()

    def is_active(self, i):
        # Not before initialisation has finished: asking for device properties during it
        # would wait on torch's initialisation lock while holding the writer's.
        if not self._torch.cuda.is_initialized():
            return False
        if self._has_context is not None:
            return bool(self._has_context(i))
        return True

    def identity(self, i):
        props = self._torch.cuda.get_device_properties(i)
        pci = None
        try:
            pci = pci_bus_id(props.pci_domain_id, props.pci_bus_id, props.pci_device_id)
        except (AttributeError, TypeError, ValueError):
            pass
        total = getattr(props, "total_memory", None)
        self._totals[i] = total
        return DeviceInfo(
            ordinal=i, uuid=uuid_bytes(getattr(props, "uuid", None)), pci_bus_id=pci, total=total
        )

    def stats(self, i):
        if self._memory_stats is not None:
            return self._memory_stats(i)
        if self._public_nested is not None:
            return self._public_nested(i)
        return _unflatten(self._public_flat(i))

    def mem_get_info(self, i):
        return self._torch.cuda.mem_get_info(i)

    def reset_peak(self, i):
        if self._reset is not None:
            self._reset(i)
        else:
            self._public_reset(i)

    def limit(self, i):
        if self._fraction is None:
            return None
        try:
            fraction = float(self._fraction(i))
        except Exception:
            return None
        total = self._totals.get(i)
        if fraction >= 1.0 or total is None:
            return None
        return int(fraction * total)
