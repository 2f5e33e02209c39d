"""vramscope's writer: publishes this process's GPU memory figures for the vramscope monitor.

    import vramscope
    vramscope.start()               # PyTorch, JAX or CuPy, whichever this program uses
    with vramscope.mark("eval"):    # a phase: its peak, and the monitor's status line
        ...
    vramscope.step()                # end of a training step (automatic with torch optimizers)

`vramscope run -- python train.py` does the same with no code change. Nothing here ever
raises into the program: a channel that cannot be created is one warning, then silence.
`VRAMSCOPE_DISABLE=1` turns everything off.
"""

from _thread import _local

from ._guard import VramscopeWarning
from ._layout import ABSENT as _ABSENT
from ._records import DeviceInfo, Figures, uuid_bytes

# The writer's machinery loads on first use, not here: the zero-code bootstrap imports this
# package in every interpreter it arms, most of which never publish anything.
_runtime_module = None


def _rt():
    global _runtime_module
    if _runtime_module is None:
        from . import _runtime

        _runtime_module = _runtime
    return _runtime_module

__all__ = [
    "start",
    "stop",
    "step",
    "mark",
    "note",
    "report",
    "oom",
    "snapshot",
    "enabled",
    "channel_path",
    "VramscopeWarning",
]

__version__ = "0.1.0"


def start(framework=None, hz=None, peak=None, modules=None, sites=None):
    """Starts publishing; idempotent. Returns True when publishing (or waiting for CUDA).

    `framework`: "torch", "jax", "cupy" or "python" (the explicit API only); by default
    torch if imported (the channel then appears when CUDA is initialised), else JAX or CuPy
    if imported, else "python". `hz`: sampling rate, 10 to 100 (VRAMSCOPE_HZ, default 20).
    `peak="reset"`: exact interval peaks by resetting PyTorch's peak counters, hidden from
    the program's own calls (VRAMSCOPE_PEAK). `modules=True`: module attribution
    (VRAMSCOPE_MODULES). `sites=True`: allocation sites, PyTorch only (VRAMSCOPE_SITES):
    the allocator's history is recorded and memory snapshots are dumped beside the channel
    at an OOM, a new peak and on request (`snapshot()`, or the monitor's).
    """
    try:
        config = _rt().config_from(hz, peak, modules, sites)
    except Exception as e:
        _rt().internal_error(e)
        return False
    return _rt().start(framework, config)


def stop():
    """Stops publishing and removes the channel file."""
    _rt().stop()


def step():
    """Ends a training step: its peaks and duration become a STEP_END event.

    Once called, the automatic steps taken from PyTorch optimizers stop.
    """
    _rt().run(_rt().end_step)
    _hand_over()


def _hand_over():
    """On the training thread, between steps or phases: allocation-site work the sampler
    thread handed on because it needed an import (vramscope/_sites.py)."""
    try:
        rt = _rt().current()
        sites = getattr(getattr(rt, "adapter", None), "sites", None)
        if sites is not None:
            sites.on_training_thread()
    except Exception as e:
        _rt().internal_error(e)


def note(text):
    """A one-off MARK event carrying `text`."""
    _rt().run(lambda rt: rt.session.note(str(text)))


class mark:
    """A phase: `with vramscope.mark("eval"):` or `@vramscope.mark("eval")`.

    The phase's name becomes the status label (nested phases join with "/"); its start and
    end are PHASE_BEGIN and PHASE_END events, the latter with the highest allocation seen
    during the phase. One object may be entered by several threads and recursively.
    """

    def __init__(self, label):
        self.label = str(label)
        self._local = _local()

    def _phases(self):
        phases = getattr(self._local, "phases", None)
        if phases is None:
            phases = self._local.phases = []
        return phases

    def __enter__(self):
        phase = _rt().run_deferred(_begin_phase, self.label)
        try:
            self._phases().append(phase)
        except Exception:
            pass
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is not None:
            try:
                _rt().leave_phase_with(exc_type, exc)
            except Exception:
                pass
        try:
            phases = self._phases()
            phase = phases.pop() if phases else None
        except Exception:
            phase = None
        if phase is not None:
            _rt().run_deferred(_end_phase, phase)
            _hand_over()
        return False

    def __call__(self, fn):
        import functools
        import inspect

        label = self.label
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args, **kwargs):
                with mark(label):
                    return await fn(*args, **kwargs)

            return async_wrapper

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with mark(label):
                return fn(*args, **kwargs)

        return wrapper


# A phase's edges are read on the training thread, at once, and published later, as the
# step hook's are (`_runtime.Runtime.defer`): with an adapter that can read without
# publishing (torch's `capture`), entering and leaving a phase costs its two readings and no
# more; the sampler's next tick, or the writer's next call, publishes them with their own
# times, in order. python/bench/bench_step_hook.py measures a `mark` both ways.


def _begin_phase(rt, label):
    session = rt.session
    capture = getattr(rt.adapter, "capture", None)
    if capture is None:
        if rt.pending:
            rt.flush()
        rt.adapter.tick(session, True)
        return (session, session.begin_phase(label))
    phase = session.new_phase(label)
    rt.defer(_publish_begin, session.clock(), capture(), phase)
    return (session, phase)


def _publish_begin(rt, t, readings, phase):
    rt.adapter.replay(rt.session, t, readings)
    rt.session.begin_phase(phase.label, t, phase)


def _end_phase(rt, phase):
    session, token = phase
    if session is not rt.session:
        return
    capture = getattr(rt.adapter, "capture", None)
    if capture is None:
        if rt.pending:
            rt.flush()
        rt.adapter.tick(session, True)
        session.end_phase(token)
        return
    rt.defer(_publish_end, session.clock(), capture(), token)


def _publish_end(rt, t, readings, token):
    rt.adapter.replay(rt.session, t, readings)
    rt.session.end_phase(token, t)


def report(
    device=0,
    allocated=None,
    reserved=None,
    peak=None,
    reserved_peak=None,
    active=None,
    inactive_split=None,
    requested=None,
    retries=None,
    ooms=None,
    free=None,
    limit=None,
    total=None,
    uuid=None,
    pci_bus_id=None,
):
    """Publishes figures for one device from the program's own accounting (bytes, or counts).

    `peak` and `reserved_peak` are running peak counters, like PyTorch's
    `max_memory_allocated`: the writer compares successive values (a rise is a new
    high-water mark, a fall a reset). `uuid` (16 bytes, "GPU-..." or "MIG-..." text), `pci_bus_id` and
    `total` identify the GPU and are taken from the first report of each `device`. Starts
    the writer if it is not running.
    """
    try:
        if _rt().current() is None and not _rt().start("python", _rt().config_from()):
            return
        figures = Figures(
            allocated=_figure(allocated),
            allocated_peak=_figure(peak),
            reserved=_figure(reserved),
            reserved_peak=_figure(reserved_peak),
            active=_figure(active),
            inactive_split=_figure(inactive_split),
            requested=_figure(requested),
            retries=_figure(retries),
            ooms=_figure(ooms),
            device_free=_figure(free),
            limit=_figure(limit),
        )
        # A "MIG-..." text names a MIG device whatever CUDA_VISIBLE_DEVICES says.
        mig = True if isinstance(uuid, str) and uuid.strip().startswith("MIG-") else None
        info = DeviceInfo(int(device), uuid_bytes(uuid), pci_bus_id, _figure(total), mig)
    except Exception as e:
        _rt().internal_error(e)
        return
    _rt().run(_report, ("report", int(device)), info, figures)


def _figure(value):
    """A byte count or count as the file stores it; None for anything else (shown n/a)."""
    if value is None:
        return None
    value = int(value)
    return value if 0 <= value < _ABSENT else None


def _report(rt, key, info, figures):
    session = rt.session
    state = session.slot(key)
    if state is None:
        state = session.add_slot(key, info)
        if state is None:
            return
    session.publish(state, figures, False)


def oom(device=0, requested=None, free=None):
    """Reports an out-of-memory on `device`: an allocation of `requested` bytes failed, with
    `free` bytes free on the device if known (bytes; None: not known, shown n/a).

    For OOMs no allocator observer sees: a trainer that catches one and skips the batch, a
    custom allocator. The OOM event also carries the device's total, allocated and
    reserved figures and retries as the writer last knew them (with PyTorch, read now). The
    monitor counts OOM events and takes the larger of that and the program's own count
    (`report(ooms=...)`, PyTorch's `num_ooms`), so an OOM both counted by the program and
    reported here is one OOM.
    Starts the writer if it is not running.
    """
    try:
        if _rt().current() is None and not _rt().start("python", _rt().config_from()):
            return
        args = (int(device), _figure(requested), _figure(free))
    except Exception as e:
        _rt().internal_error(e)
        return
    _rt().run(_oom, *args)


def _oom(rt, device, requested, free):
    explicit_oom = getattr(rt.adapter, "explicit_oom", None)
    if explicit_oom is not None:
        explicit_oom(rt.session, device, requested, free)
        return
    session = rt.session
    state = session.slot_of_ordinal(device)
    if state is None:
        state = session.add_slot(("report", device), DeviceInfo(device))
        if state is None:
            return
    session.oom(state, requested, free, state.total, session.last_figures(state, device_free=free))


def snapshot():
    """Dumps a memory snapshot now (allocation sites must be on: `start(sites=True)`).

    Returns the file's path, beside the channel file, or None when sites are off or the dump
    failed (one warning). The file is `torch.cuda.memory._snapshot()` pickled, which
    PyTorch's memory_viz opens, plus a "vramscope" key; `vramscope sites FILE` reads it.
    """
    found = _rt().run(_fresh_reading)
    if found is None:
        return None
    sites, device = found
    return sites.take("request", device)


def _fresh_reading(rt):
    sites = getattr(rt.adapter, "sites", None)
    if sites is None:
        return None
    rt.adapter.tick(rt.session, True)
    return sites, sites.request_device()


def enabled():
    """Whether this process is publishing now."""
    return _rt().current() is not None


def channel_path():
    """The channel file's path while publishing, else None."""
    rt = _rt().current()
    return rt.session.channel.path if rt is not None else None
