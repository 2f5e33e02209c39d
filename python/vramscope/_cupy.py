"""CuPy adapter: the default memory pool's used and held bytes on the device that was current
when the writer started.

CuPy keeps no peak, so every sample's peak is a lower bound (the higher of two readings).
Only that one device is read: making another device current from the sampler would create
a CUDA context on it.
"""

import os
import time

from . import _layout as L
from ._polled import PolledAdapter
from ._records import DeviceInfo, Figures, pci_bus_id, uuid_bytes


class CupySource:
    def __init__(self, cupy):
        self._cupy = cupy
        self.device_id = int(cupy.cuda.runtime.getDevice())

    def identity(self):
        props = self._cupy.cuda.runtime.getDeviceProperties(self.device_id)
        pci = None
        try:
            pci = pci_bus_id(props["pciDomainID"], props["pciBusID"], props["pciDeviceID"])
        except (KeyError, TypeError, ValueError):
            pass
        return DeviceInfo(
            ordinal=self.device_id,
            uuid=uuid_bytes(props.get("uuid")),
            pci_bus_id=pci,
            total=props.get("totalGlobalMem"),
        )

    def figures(self):
        cupy = self._cupy
        with cupy.cuda.Device(self.device_id):
            pool = cupy.get_default_memory_pool()
            limit = pool.get_limit()
            return Figures(
                allocated=int(pool.used_bytes()),
                reserved=int(pool.total_bytes()),
                limit=int(limit) if limit else None,
            )

    def device_free(self):
        with self._cupy.cuda.Device(self.device_id):
            return int(self._cupy.cuda.runtime.memGetInfo()[0])


class CupyAdapter(PolledAdapter):
    kind = L.KIND_CUPY

    def __init__(self, source, config, clock=time.monotonic):
        PolledAdapter.__init__(self, config, clock)
        self.source = source
        cupy = getattr(source, "_cupy", None)
        self.framework = ("cupy " + str(getattr(cupy, "__version__", ""))).strip()
        self.allocator_config = os.environ.get("CUPY_GPU_MEMORY_LIMIT", "")

    def tick(self, session, hook):
        source = self.source
        key = ("cupy", source.device_id)
        state = self.slot_state(session, key, source.identity)
        if state is None:
            return
        fig = source.figures()
        fig.device_free = self.device_free(key, source.device_free)
        session.publish(state, fig, hook, periodic=not hook)
