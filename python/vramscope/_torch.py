"""PyTorch adapter: turns the CUDA caching allocator's statistics into device slots, samples
and events.

It reads through a *source*, so its logic runs in tests without torch or a GPU. A source
has these methods (`_torch_source.TorchCudaSource` is the real one):

    device_count() -> int
    is_active(i) -> bool            # device i has a primary context: worth reading
    identity(i) -> DeviceInfo       # ordinal, UUID bytes, PCI bus id, total bytes
    stats(i) -> dict                # nested, as torch._C._cuda_memoryStats(i); {} if unknown
    mem_get_info(i) -> (free, total)
    reset_peak(i)                   # torch._C._cuda_resetPeakMemoryStats(i)
    limit(i) -> int or None         # bytes the process may use, when capped
"""

import time

from . import _layout as L
from ._polled import PolledAdapter
from ._records import Figures
from ._torch_virtual import PeakVirtualiser


def _stat(stats, name, field="current"):
    try:
        return int(stats[name]["all"][field])
    except (KeyError, TypeError, ValueError):
        return None


def _count(stats, name):
    try:
        return int(stats[name])
    except (KeyError, TypeError, ValueError):
        return None


def figures_from_stats(stats):
    return Figures(
        allocated=_stat(stats, "allocated_bytes"),
        allocated_peak=_stat(stats, "allocated_bytes", "peak"),
        reserved=_stat(stats, "reserved_bytes"),
        reserved_peak=_stat(stats, "reserved_bytes", "peak"),
        active=_stat(stats, "active_bytes"),
        inactive_split=_stat(stats, "inactive_split_bytes"),
        requested=_stat(stats, "requested_bytes"),
        requested_peak=_stat(stats, "requested_bytes", "peak"),
        retries=_count(stats, "num_alloc_retries"),
        ooms=_count(stats, "num_ooms"),
        device_allocs=_count(stats, "num_device_alloc"),
        device_frees=_count(stats, "num_device_free"),
    )


class TorchAdapter(PolledAdapter):
    kind = L.KIND_PYTORCH

    def __init__(
        self, source, config, framework="torch", allocator_config="", hooks=None, clock=time.monotonic, sites=None
    ):
        PolledAdapter.__init__(self, config, clock)
        self.source = source
        self.framework = framework
        self.allocator_config = allocator_config
        self.exact = config.exact_peaks
        self.virtualiser = PeakVirtualiser() if self.exact else None
        self.hooks = hooks
        self.flags = 0
        if self.exact:
            self.flags |= L.FLAG_PEAK_RESET
        if config.modules and hooks is not None:
            self.flags |= L.FLAG_MODULE_ATTRIBUTION
        # Allocation sites (`_sites.Sites`): on only if the history could be turned on, or
        # the program's was already, before the channel's header says so.
        self.sites = sites if sites is not None and sites.enable() else None
        if self.sites is not None:
            self.flags |= L.FLAG_SITES

    def attach(self, runtime):
        if self.sites is not None:
            self.sites.attach(runtime.session.channel)
        if self.hooks is not None:
            self.hooks.install(runtime, self)

    def detach(self):
        try:
            if self.hooks is not None:
                self.hooks.remove()
        finally:
            if self.sites is not None:
                self.sites.stop()

    def background(self):
        """The sampler's work outside the writer's lock: snapshot dumps."""
        if self.sites is not None:
            self.sites.background()

    def tick(self, session, hook):
        source = self.source
        for i in range(source.device_count()):
            if source.is_active(i):
                self.sample(session, i, hook)

    def _state(self, session, device):
        return self.slot_state(session, ("torch", device), lambda: self.source.identity(device))

    def slot_of_device(self, session, device):
        """The slot of CUDA device `device` (torch's ordinal), made at its first use."""
        return self._state(session, device)

    def _read(self, device):
        stats = self.source.stats(device)
        if not stats:
            return None, None
        fig = figures_from_stats(stats)
        fig.limit = self.source.limit(device)
        return stats, fig

    def sample(self, session, device, hook):
        state = self._state(session, device)
        if state is None:
            return
        stats, fig = self._read(device)
        if fig is None:
            return
        if self.sites is not None:
            self.sites.stats[device] = stats
        fig.device_free = self.device_free(device, lambda: self.source.mem_get_info(device)[0])
        session.publish(state, fig, hook, periodic=not hook)
        self._after_read(device, stats)

    def capture(self):
        """The step hook's reading, on the training thread: each active device's statistics
        at this moment and nothing more (the peak reset too, in exact mode, since it must
        follow the read at once). `replay` publishes them later, off that thread."""
        source = self.source
        readings = []
        for i in range(source.device_count()):
            if source.is_active(i):
                stats = source.stats(i)
                if stats and self.exact:
                    source.reset_peak(i)
                readings.append((i, stats))
        return readings

    def replay(self, session, t, readings):
        """Publishes what `capture` read at `t`, as `sample(..., hook=True)` would have."""
        for device, stats in readings:
            state = self._state(session, device)
            if state is None or not stats:
                continue
            fig = figures_from_stats(stats)
            fig.limit = self.source.limit(device)
            fig.device_free = self.device_free(device, lambda d=device: self.source.mem_get_info(d)[0])
            if self.sites is not None:
                self.sites.stats[device] = stats
            session.publish(state, fig, True, t=t)
            if self.exact:
                self.virtualiser.fold(device, stats)

    def _after_read(self, device, stats):
        if self.exact:
            # Fold before resetting so the program's own peak calls still see the old peak.
            self.virtualiser.fold(device, stats)
            self.source.reset_peak(device)

    def on_oom(self, session, device, requested, total_or_allowed, device_free):
        """The allocator's OOM observer: an OOM event with the figures of that moment.

        The observer's third argument is the device's total, or under
        `set_per_process_memory_fraction` the allowed maximum: the event says the total and
        the slot's limit the maximum, so neither passes for the other.
        """
        state = self._state(session, device)
        if state is None:
            return
        stats, fig = self._read(device)
        if fig is None:
            fig = Figures()
        fig.device_free = device_free
        total = self._total(device)
        if total_or_allowed is not None:
            if total is not None and 0 <= total_or_allowed < total:
                fig.limit = total_or_allowed
            elif total is None:
                total = total_or_allowed
        session.oom(state, requested, device_free, total, fig)
        if stats:
            self._after_read(device, stats)

    def explicit_oom(self, session, device, requested, device_free):
        """`vramscope.oom()`: the figures are read now; the total comes from the device."""
        self.on_oom(session, device, requested, None, device_free)

    def _total(self, device):
        try:
            total = self.source.identity(device).total
        except Exception:
            return None
        return None if total is None else int(total)

    def reserved_now(self, device):
        return _stat(self.source.stats(device), "reserved_bytes")

    def user_reset(self, device):
        """The program reset its peaks (exact mode): remember that without losing ours."""
        if self.virtualiser is not None:
            self.virtualiser.user_reset(device, self.source.stats(device))
        self.source.reset_peak(device)

    def user_view(self, device, nested):
        if self.virtualiser is None:
            return nested
        return self.virtualiser.view(device, nested)

    def user_view_flat(self, device, flat):
        if self.virtualiser is None:
            return flat
        return self.virtualiser.view_flat(device, flat)
