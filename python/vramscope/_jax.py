"""JAX adapter: `device.memory_stats()` of each local accelerator, once JAX's backends exist.

JAX preallocates most of the memory (XLA_PYTHON_CLIENT_PREALLOCATE) and never resets its
peak, so the peak comparisons of spec section 5 apply unchanged. Devices carry no UUID or
PCI id here: the monitor cannot join them to NVML by identity.
"""

import os
import time

from . import _layout as L
from ._polled import PolledAdapter
from ._records import DeviceInfo, Figures


class JaxSource:
    def __init__(self, jax):
        self._jax = jax

    def ready(self):
        """Whether backends are initialised; asking for devices before would initialise them."""
        xla_bridge = getattr(getattr(self._jax, "_src", None), "xla_bridge", None)
        if xla_bridge is None:
            try:
                from jax._src import xla_bridge
            except Exception:
                return False
        check = getattr(xla_bridge, "backends_are_initialized", None)
        if check is not None:
            return bool(check())
        return bool(getattr(xla_bridge, "_backends", None))

    def devices(self):
        """(key, device, stats) for each local device that reports memory statistics."""
        for device in self._jax.local_devices():
            stats = device.memory_stats()
            if stats:
                yield ("jax", device.platform, device.id), device, stats

    def identity(self, device):
        ordinal = getattr(device, "local_hardware_id", None)
        if ordinal is None:
            ordinal = device.id
        return DeviceInfo(ordinal=int(ordinal))

    @staticmethod
    def figures(stats):
        def get(*names):
            # XLA reports -1 for a figure it does not have: absent, not a value.
            for name in names:
                value = stats.get(name)
                if value is not None and int(value) >= 0:
                    return int(value)
            return None

        return Figures(
            allocated=get("bytes_in_use"),
            allocated_peak=get("peak_bytes_in_use"),
            reserved=get("pool_bytes", "bytes_reserved"),
            reserved_peak=get("peak_pool_bytes", "peak_bytes_reserved"),
            limit=get("bytes_limit"),
        )


class JaxAdapter(PolledAdapter):
    kind = L.KIND_JAX

    def __init__(self, source, config, clock=time.monotonic):
        PolledAdapter.__init__(self, config, clock)
        self.source = source
        jax = getattr(source, "_jax", None)
        self.framework = ("jax " + str(getattr(jax, "__version__", ""))).strip()
        self.allocator_config = " ".join(
            "%s=%s" % (k, os.environ[k])
            for k in ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_ALLOCATOR")
            if k in os.environ
        )

    def tick(self, session, hook):
        if not self.source.ready():
            return
        for key, device, stats in self.source.devices():
            state = self.slot_state(session, key, lambda d=device: self.source.identity(d))
            if state is not None:
                session.publish(state, self.source.figures(stats), hook, periodic=not hook)
