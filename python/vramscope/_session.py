"""What one writer publishes, independent of the framework it reads: device slots with
their peaks, samples, steps, phases, labels and events.

Adapters turn framework statistics into `Figures`; the session turns those into the
channel's records. Callers hold the runtime lock around every call.
"""

import time

from . import _layout as L
from ._peaks import PeakTracker
from ._records import Figures  # noqa: F401  (re-exported for adapters)

_A = L.ABSENT

# The Figures fields at row[1:14] of a published row (see `publish`).
_ROW_FIGURES = (
    "allocated allocated_peak reserved reserved_peak active inactive_split requested retries ooms "
    "device_allocs device_frees device_free limit"
).split()
_ROW = {name: i + 1 for i, name in enumerate(_ROW_FIGURES)}

# A steady climb sets a new high-water mark at every sample; an event for each would push
# the step and phase events out of the ring. The sample's flag marks every one; an event is
# written when the mark is this much above the last one reported, or this long after it.
_HIGH_WATER_EVENT_RISE = 1.05
_HIGH_WATER_EVENT_GAP_NS = 1_000_000_000
# A sampler's device slot is rewritten at most this often: every sample is in the ring
# anyway, and the monitor reads the slot at most every 100 ms. Readings that mark a new
# peak, a reset, a boundary or come from the program itself are written at once.
_SLOT_EVERY_NS = 100_000_000
# MEMORY_KINDS unchanged is written again after this many steps: with at least one STEP_END
# a step per slot, the 512 events of a default channel still hold one.
_KINDS_AGAIN_STEPS = 128
_URGENT = L.SAMPLE_NEW_HIGH_WATER | L.SAMPLE_FOREIGN_RESET_SEEN


def _u(v):
    return _A if v is None else v


class SlotState:
    """The writer's memory of one device slot between readings."""

    def __init__(self, slot, exact):
        self.slot = slot
        self.ordinal = None
        self.total = None
        self.allocated = PeakTracker(exact)
        self.reserved = PeakTracker(exact)
        # Requested bytes' high-water mark, for the memory snapshots' exactness check.
        self.requested = PeakTracker(exact)
        self.row = None
        self.row_published = True
        self.slot_written_t = None
        # When the allocated high-water mark was last raised (ns, the session's clock).
        self.high_water_t = None
        self.last_retries = None
        # The last high-water mark written as an event, and when.
        self.high_event_peak = None
        self.high_event_t = None
        self.step_allocated = None
        self.step_reserved = None
        self.last_step_peak = None
        # The framework's own OOM count as last read. OOMs it does not count (explicit ones,
        # uncaught ones no OOM event stood for) are events, and the monitor's fold counts
        # the events: adding them here too counted one OOM twice when the program's own
        # count (`report(ooms=N)`) already held it.
        self.own_ooms = None
        # The last OOM event not yet matched by an uncaught error: (step, phase, args).
        self.unmatched_oom = None
        # The memory by kind last written as an event: (parameters, buffers, gradients,
        # optimizer state), None where not known.
        self.kinds = None
        self.kinds_step = None


def _high_water_worth_an_event(state, t, peak):
    last = state.high_event_peak
    if last is None or peak is None:
        return True
    return peak >= last * _HIGH_WATER_EVENT_RISE or t - state.high_event_t >= _HIGH_WATER_EVENT_GAP_NS


class _Phase:
    __slots__ = ("label", "path", "peaks")

    def __init__(self, label):
        self.label = label
        self.path = label
        self.peaks = {}


def _max(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return a if a >= b else b


class Session:
    def __init__(self, channel, exact=False, clock=time.monotonic_ns):
        self.channel = channel
        self.exact = exact
        self.clock = clock
        self.step = None
        # True once an attached writer found no step count in the job: every sample says so.
        self.steps_since_attach = False
        self._step_started = clock()
        self._slots = {}
        self._phases = []
        self._phase_id = 0
        self._module_label = ""
        self._status_label = ""

    # -- devices and samples ----------------------------------------------------------------

    def slot(self, key):
        return self._slots.get(key)

    def add_slot(self, key, info):
        """Registers a device under `key`; None when the channel has no free slot."""
        index = self.channel.add_device(info)
        if index is None:
            return None
        state = SlotState(index, self.exact)
        state.ordinal = info.ordinal
        state.total = info.total
        self._slots[key] = state
        return state

    def slot_of_ordinal(self, ordinal):
        """The first slot registered for device `ordinal`, whatever its key."""
        for state in self._slots.values():
            if state.ordinal == ordinal:
                return state
        return None

    def last_figures(self, state, device_free=None):
        """The slot's last published figures (absent where none), `device_free` replaced."""
        row = state.row
        fig = Figures()
        if row is not None:
            for name, value in zip(_ROW_FIGURES, row[1:14]):
                setattr(fig, name, None if value == _A else value)
        fig.ooms = state.own_ooms
        fig.device_free = device_free
        return fig

    def publish(self, state, fig, hook=False, periodic=False, t=None):
        """Publishes a reading: device slot, one sample, and the events it implies.

        `periodic`: another reading follows within the sampling period (the background
        sampler), so the device slot may wait for it. `t`: when the figures were read, for
        a reading published later (a step hook's); now by default.
        """
        if t is None:
            t = self.clock()
        peak, flags, previous_high, reset = state.allocated.update(fig.allocated, fig.allocated_peak)
        reserved_peak = state.reserved.update(fig.reserved, fig.reserved_peak)[0]
        if fig.requested_peak is not None:
            state.requested.update(fig.requested, fig.requested_peak)
        if peak is not None and (state.step_allocated is None or peak > state.step_allocated):
            state.step_allocated = peak
        if reserved_peak is not None and (state.step_reserved is None or reserved_peak > state.step_reserved):
            state.step_reserved = reserved_peak
        for phase in self._phases:
            phase.peaks[state.slot] = _max(phase.peaks.get(state.slot), peak)
        # Written out rather than looped: this runs at every sample.
        allocated = _A if fig.allocated is None else fig.allocated
        reserved = _A if fig.reserved is None else fig.reserved
        active = _A if fig.active is None else fig.active
        peak_word = _A if peak is None else peak
        state.own_ooms = ooms = fig.ooms
        state.row = row = [
            t,
            allocated,
            _A if fig.allocated_peak is None else fig.allocated_peak,
            reserved,
            _A if fig.reserved_peak is None else fig.reserved_peak,
            active,
            _A if fig.inactive_split is None else fig.inactive_split,
            _A if fig.requested is None else fig.requested,
            _A if fig.retries is None else fig.retries,
            _A if ooms is None else ooms,
            _A if fig.device_allocs is None else fig.device_allocs,
            _A if fig.device_frees is None else fig.device_frees,
            _A if fig.device_free is None else fig.device_free,
            _A if fig.limit is None else fig.limit,
            peak_word,
            _A if state.last_step_peak is None else state.last_step_peak,
        ]
        ch = self.channel
        last = state.slot_written_t
        if (
            not periodic
            or hook
            or flags & _URGENT
            or last is None
            or t - last >= _SLOT_EVERY_NS
        ):
            ch.publish_device(state.slot, row)
            state.slot_written_t = t
            state.row_published = True
        else:
            state.row_published = False
        if hook:
            flags |= L.SAMPLE_HOOK
        if self.steps_since_attach:
            flags |= L.SAMPLE_STEP_SINCE_ATTACH
        step = _A if self.step is None else self.step
        ch.append_sample(t, state.slot, allocated, reserved, peak_word, active, step, flags, self._phase_id)
        if flags & L.SAMPLE_NEW_HIGH_WATER:
            state.high_water_t = t
            if _high_water_worth_an_event(state, t, peak):
                self._event(t, L.EV_NEW_HIGH_WATER, state.slot, (peak, previous_high))
                state.high_event_peak = peak
                state.high_event_t = t
        if reset is not None:
            self._event(t, L.EV_FOREIGN_PEAK_RESET, state.slot, reset)
        retries = fig.retries
        if retries is not None:
            if retries > (state.last_retries or 0):
                self._event(t, L.EV_ALLOC_RETRY, state.slot, (retries,))
            state.last_retries = retries

    # -- steps ------------------------------------------------------------------------------

    def end_step(self, t=None):
        """Closes the current step (0 until the first boundary): STEP_END per device, at `t`
        (now by default)."""
        if t is None:
            t = self.clock()
        ended = 0 if self.step is None else self.step
        duration = max(0, t - self._step_started)
        if not self._slots:
            self._event(t, L.EV_STEP_END, L.NO_SLOT, (None, None, duration), step=ended)
        for state in self._slots.values():
            state.last_step_peak = state.step_allocated
            if state.row is not None:
                state.row[15] = _u(state.last_step_peak)
                self.channel.publish_device(state.slot, state.row)
                state.row_published = True
            self._event(
                t,
                L.EV_STEP_END,
                state.slot,
                (state.step_allocated, state.step_reserved, duration),
                step=ended,
            )
            state.step_allocated = state.step_reserved = None
        self.step = ended + 1
        self._step_started = t
        self._write_status(t)

    def memory_kinds(self, state, kinds, t=None):
        """Memory by kind on the slot of `state` at the end of the current step: (parameters,
        buffers, gradients, optimizer state) in bytes, None where not known. Written as a
        MEMORY_KINDS event only when it differs from the last one written for the slot: most
        steps change none of them."""
        kinds = tuple(kinds)
        step = 0 if self.step is None else self.step
        # Written again now and then although unchanged: the channel's event ring is bounded,
        # and a monitor started later must still find the figures in it.
        due = state.kinds_step is None or step - state.kinds_step >= _KINDS_AGAIN_STEPS
        if kinds == state.kinds and not due:
            return False
        if t is None:
            t = self.clock()
        self._event(t, L.EV_MEMORY_KINDS, state.slot, kinds, step=step)
        state.kinds = kinds
        state.kinds_step = step
        return True

    # -- phases and labels ------------------------------------------------------------------

    @staticmethod
    def new_phase(label):
        """A phase not yet begun: the token `begin_phase` and `end_phase` take."""
        return _Phase(label)

    def begin_phase(self, label, t=None, phase=None):
        """Begins a phase (`phase`, made by `new_phase`, or a new one) at `t`, now by
        default: a phase begun later than it was entered (`vramscope.mark`) keeps its time."""
        if phase is None:
            phase = _Phase(label)
        if self._phases:
            phase.path = self._phases[-1].path + "/" + phase.label
        self._phases.append(phase)
        self._relabel()
        self._event(self.clock() if t is None else t, L.EV_PHASE_BEGIN, L.NO_SLOT, (), phase.path)
        return phase

    def end_phase(self, phase, t=None):
        """Ends `phase` (not necessarily the innermost: phases may end out of order) at `t`,
        now by default."""
        if phase not in self._phases:
            return
        if t is None:
            t = self.clock()
        if not phase.peaks:
            self._event(t, L.EV_PHASE_END, L.NO_SLOT, (None,), phase.path)
        for slot, peak in sorted(phase.peaks.items()):
            self._event(t, L.EV_PHASE_END, slot, (peak,), phase.path)
        self._phases.remove(phase)
        self._relabel()

    def set_module_label(self, label):
        if label != self._module_label:
            self._module_label = label
            self._relabel()

    @property
    def label(self):
        return self._status_label

    def _relabel(self):
        marks = self._phases[-1].path if self._phases else ""
        self._phase_id = self.channel.intern(marks) if marks else 0
        parts = [p for p in (marks, self._module_label) if p]
        label = "/".join(parts)
        if label != self._status_label:
            self._status_label = label
            self._write_status(self.clock())

    def _write_status(self, t):
        self.channel.set_status(self.step, self._status_label, t)

    # -- events -----------------------------------------------------------------------------

    def oom(self, state, requested, device_free, device_total, fig):
        """An allocation failed: seen by the framework's allocator, or told by the program.
        The event is the OOM; the monitor counts it, never this writer (see `own_ooms`)."""
        args = (requested, device_free, device_total, fig.allocated, fig.reserved, fig.retries)
        self._event(self.clock(), L.EV_OOM, state.slot, args, self._status_label)
        state.unmatched_oom = (self.step, self._phase_id, args)
        self.publish(state, fig, hook=True)

    @property
    def phase_path(self):
        """The innermost phase's path, e.g. `train/backward`; empty outside every phase."""
        return self._phases[-1].path if self._phases else ""

    def failure_point(self):
        """Where the program is now, as an uncaught OOM must remember it while its phases
        unwind: (step, phase path, status label)."""
        return (self.step, self.phase_path, self._status_label)

    def oom_error(self, message, requested=None, ordinal=None, at=None):
        """An out-of-memory error that reached the top of the program or of a thread.

        `at`: the `failure_point` where it was raised (now by default). `ordinal`: the device
        the message names, if any. The event carries that step and phase, the text
        `label: message`, and the figures of the OOM event that stood for the same failure
        (same slot, step and phase) or else the slot's last published figures; the monitor
        counts a failure no OOM event stood for as an OOM of its own.
        """
        step, path, label = at if at is not None else self.failure_point()
        phase = self.channel.intern(path) if path else 0
        state = self._failed_slot(ordinal)
        slot = L.NO_SLOT
        args = (requested,)
        if state is not None:
            slot = state.slot
            matched, state.unmatched_oom = state.unmatched_oom, None
            if matched is not None and matched[:2] == (step, phase):
                args = matched[2]
                if args[0] is None:
                    args = (requested,) + args[1:]
            else:
                free, allocated, reserved, retries = self._last_row(state)
                args = (requested, free, state.total, allocated, reserved, retries)
        text = "%s: %s" % (label, message) if label else message
        self._event(self.clock(), L.EV_OOM_ERROR, slot, args, text, step=step, phase=phase)

    def _failed_slot(self, ordinal):
        """The slot an uncaught OOM happened on: the device its message names, else the one
        with an OOM event still unmatched, else the only one."""
        if ordinal is not None:
            state = self.slot_of_ordinal(ordinal)
            if state is not None:
                return state
        states = list(self._slots.values())
        pending = [s for s in states if s.unmatched_oom is not None]
        if len(pending) == 1:
            return pending[0]
        return states[0] if len(states) == 1 else None

    @staticmethod
    def _last_row(state):
        """(device free, allocated, reserved, retries) as last published; None where unknown."""
        row = state.row
        if row is None:
            return (None, None, None, None)
        words = (row[_ROW[name]] for name in ("device_free", "allocated", "reserved", "retries"))
        return tuple(None if w == _A else w for w in words)

    def note(self, text):
        self._event(self.clock(), L.EV_MARK, L.NO_SLOT, (), text)

    def event(self, kind, slot=L.NO_SLOT, args=(), text=""):
        self._event(self.clock(), kind, slot, args, text)

    def _event(self, t, kind, slot, args, text="", step=-1, phase=None):
        if step == -1:
            step = self.step
        if phase is None:
            phase = self._phase_id
        self.channel.append_event(t, kind, slot, phase, step, args, text)

    def heartbeat(self):
        self.channel.heartbeat(self.clock())

    def finish(self, error_text=None):
        # A kept file (an error exit) shows the last reading, not one up to 100 ms older.
        for state in self._slots.values():
            if not state.row_published and state.row is not None:
                self.channel.publish_device(state.slot, state.row)
        self.channel.finish(error_text, self.clock())
