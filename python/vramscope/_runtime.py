"""The one writer of this process: start and stop, the lock every publication takes, the
sampler thread, fork and exit.

Every function here that user code or a hook reaches is guarded: an internal error is
counted, never raised, and enough of them switch the writer off.
"""

import atexit
import os
import sys
import threading

from . import _excepthooks
from . import _layout as L
from ._channel import Channel, ChannelError
from ._config import Config, clamp_hz
from ._guard import ErrorBudget, warn_once
from ._identity import Identity
from ._sampler import Sampler
from ._session import Session

# Idle heartbeat of a writer with nothing to sample (explicit API only): often enough that a
# reader never takes a quiet program for a stalled one.
HEARTBEAT_PERIOD = 1.0

# Deferred step readings kept before the hook publishes them itself: a bound on memory and on
# how far the file may lag a fast training loop between two sampler ticks.
MAX_DEFERRED = 32

# Capacities of new channels; tests shrink the rings.
layout = None

_lock = threading.RLock()
_runtime = None
_pending = False
_failed = False
_exit_error = None
_atexit_registered = False
# Set by `vramscope attach` (`_attach`): every channel this writer creates says so in its flags.
attached = False


class Runtime:
    def __init__(self, session, adapter, config):
        self.session = session
        self.adapter = adapter
        self.config = config
        self.pid = os.getpid()
        self.sampler = None
        self.explicit_steps = False
        # Work a hook left for later, as (fn, args): done in order, under the lock, before
        # anything else touches the session.
        self.pending = []

    def defer(self, fn, *args):
        self.pending.append((fn, args))
        if len(self.pending) >= MAX_DEFERRED:
            self.flush()

    def flush(self):
        pending, self.pending = self.pending, []
        for fn, args in pending:
            fn(self, *args)


def _disable(error):
    global _runtime, _failed
    warn_once(
        "errors",
        "writer switched off after %d internal errors (last: %r)" % (_budget.count, error),
    )
    with _lock:
        rt, _runtime, _failed = _runtime, None, True
    if rt is not None:
        # Possibly called with the lock held: signal the sampler, do not wait for it.
        _shut(rt, "vramscope writer switched off after internal errors: %r" % (error,), 0)


_budget = ErrorBudget(_disable)


def internal_error(error):
    try:
        _budget.record(error)
    except Exception:
        pass


def current():
    return _runtime


def run(fn, *args):
    """`fn(runtime, *args)` under the lock if a writer runs; errors are counted, not raised.

    Deferred work is done first, so that `fn` sees the session as if nothing had been."""
    try:
        with _lock:
            rt = _runtime
            if rt is None:
                return None
            if rt.pending:
                rt.flush()
            return fn(rt, *args)
    except Exception as e:
        internal_error(e)
        return None


def run_deferred(fn, *args):
    """`run` for a hook on the training thread that only adds deferred work: what is already
    pending stays so."""
    try:
        with _lock:
            rt = _runtime
            if rt is None:
                return None
            return fn(rt, *args)
    except Exception as e:
        internal_error(e)
        return None


# -- start and stop -------------------------------------------------------------------------


def config_from(hz=None, peak=None, modules=None, sites=None):
    config = Config.from_env()
    if hz is not None:
        config.hz = clamp_hz(hz)
    if peak is not None:
        config.exact_peaks = peak == "reset"
    if modules is not None:
        config.modules = bool(modules)
    if sites is not None:
        config.sites = bool(sites)
    return config


def start(framework=None, config=None):
    """Starts the writer; True when it publishes or waits for CUDA, False when switched off."""
    global _pending
    try:
        config = config or Config.from_env()
        if config.disabled:
            return False
        with _lock:
            if _runtime is not None:
                return True
            if _pending and framework in (None, "torch"):
                return True
            if _failed:
                return False
            framework = framework or _pick_framework()
            if framework == "torch":
                torch = sys.modules.get("torch")
                if torch is None:
                    return False
                if not _torch_initialised(torch):
                    from ._torch_boot import defer_until_cuda

                    _pending = True
                    if not defer_until_cuda(torch, lambda: _deferred_start(config)):
                        _pending = False
                    return _pending or _runtime is not None
            return start_adapter(framework, config)
    except Exception as e:
        internal_error(e)
        return False


def _torch_initialised(torch):
    try:
        return bool(torch.cuda.is_initialized())
    except Exception:
        return False


def _pick_framework():
    # torch wins whenever it is imported: before CUDA is up it cannot be told from a program
    # that will never use it, and choosing JAX or CuPy then would leave torch unarmed for
    # good. JAX wins only when it already holds an accelerator and torch has no CUDA yet.
    modules = sys.modules
    if "torch" in modules:
        if "jax" in modules and not _torch_initialised(modules["torch"]) and _jax_on_accelerator(modules["jax"]):
            return "jax"
        return "torch"
    if "jax" in modules:
        return "jax"
    if "cupy" in modules:
        return "cupy"
    return "python"


def _jax_on_accelerator(jax):
    try:
        from ._jax import JaxSource

        if not JaxSource(jax).ready():
            return False
        return any(getattr(d, "platform", "cpu") != "cpu" for d in jax.local_devices())
    except Exception:
        return False


def _deferred_start(config):
    # A stop() before CUDA came up cancels the start torch still has queued.
    if _pending:
        start_adapter("torch", config)


def start_adapter(framework, config):
    """Creates the channel for `framework` and starts publishing; never raises."""
    global _runtime, _pending, _failed
    try:
        with _lock:
            if _runtime is not None:
                return True
            if _failed:
                return False
            _pending = False
            from ._adapters import make_adapter

            adapter = make_adapter(framework, config)
            if config.sites and getattr(adapter, "sites", None) is None and framework != "torch":
                warn_once("sites", "allocation sites need PyTorch; %s publishes without them" % framework)
            identity = Identity(
                adapter.kind,
                framework=adapter.framework,
                sample_period_us=int(round(adapter.period * 1e6)) if adapter.period else 0,
                allocator_config=adapter.allocator_config,
                flags=adapter.flags | (L.FLAG_ATTACHED if attached else 0),
            )
            try:
                channel = Channel.create(identity, layout=layout)
            except ChannelError as e:
                _failed = True
                warn_once("create", "not publishing memory figures: %s" % e)
                # What the adapter set up for the channel (the allocator's history) goes.
                adapter.detach()
                return False
            session = Session(channel, exact=adapter.exact)
            rt = Runtime(session, adapter, config)
            _runtime = rt
            adapter.attach(rt)
            _excepthooks.set_handler(_on_uncaught)
            _excepthooks.install()
            _register_atexit()
            rt.sampler = Sampler(_tick, adapter.period or HEARTBEAT_PERIOD)
            rt.sampler.start()
            return True
    except Exception as e:
        internal_error(e)
        return False


def stop(error_text=None):
    """Stops publishing: a clean stop removes the file, an error stop keeps it."""
    global _runtime, _pending
    try:
        with _lock:
            rt, _runtime, _pending = _runtime, None, False
        if rt is not None and rt.pid == os.getpid():
            _shut(rt, error_text)
    except Exception as e:
        internal_error(e)


def _shut(rt, error_text, join_timeout=1.0):
    # The sampler may be waiting for the lock: join it without holding the lock.
    if rt.sampler is not None:
        rt.sampler.stop(join_timeout)
    with _lock:
        try:
            rt.flush()
        except Exception as e:
            internal_error(e)
        try:
            rt.adapter.detach()
        finally:
            rt.session.finish(error_text)


def _tick():
    rt = _runtime
    if rt is None:
        return
    try:
        with _lock:
            if rt is not _runtime:
                return
            if rt.pending:
                rt.flush()
            rt.adapter.tick(rt.session, False)
            rt.session.heartbeat()
        # Slow work (a snapshot dump) runs outside the lock, which the training thread's
        # hooks take.
        background = getattr(rt.adapter, "background", None)
        if background is not None:
            background()
    except Exception as e:
        internal_error(e)


# -- steps, phases, uncaught exceptions -----------------------------------------------------


def end_step(rt, explicit=True):
    if explicit:
        rt.explicit_steps = True
    rt.adapter.tick(rt.session, True)
    rt.session.end_step()


def leave_phase_with(exc_type, exc):
    """A phase is left by an exception: an OOM remembers where it was raised, for the
    exception hook that runs after every phase has unwound."""
    if _excepthooks.is_out_of_memory(exc_type, exc):
        run(lambda rt: _excepthooks.remember_failure(exc, rt.pid, rt.session.failure_point()))


def _on_uncaught(exc_type, exc, main_thread):
    global _exit_error
    oom = _excepthooks.is_out_of_memory(exc_type, exc)
    if oom:
        message = str(exc).strip()
        requested = _excepthooks.requested_bytes(message)
        ordinal = _excepthooks.device_ordinal(message)
        at = _excepthooks.failure_point(exc, os.getpid())
        run(lambda rt: rt.session.oom_error(message, requested, ordinal, at))
    if main_thread:
        _exit_error = _excepthooks.describe(exc_type, exc)


# -- exit and fork --------------------------------------------------------------------------


def _register_atexit():
    global _atexit_registered
    if not _atexit_registered:
        _atexit_registered = True
        atexit.register(_at_exit)


def _at_exit():
    rt = _runtime
    if rt is None or rt.pid != os.getpid():
        return
    stop(_exit_error)


def _after_fork_in_child():
    """The child shares the parent's lock on the file: drop it and publish nothing."""
    global _lock, _runtime, _failed, _exit_error
    _lock = threading.RLock()
    rt, _runtime = _runtime, None
    # A start still waiting for CUDA stays armed: a child that initialises CUDA itself (the
    # parent never did) gets a channel of its own.
    _failed = False
    _exit_error = None
    if rt is not None:
        try:
            rt.session.channel.forget()
        except Exception:
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

