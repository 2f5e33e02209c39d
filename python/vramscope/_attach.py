"""What `vramscope attach PID` and `vramscope detach PID` run inside the target process.

The injected entry script (assets/attach_agent.py) loads this package under its private name
and calls `attach()` or `detach()` on the main thread, at a safe point (a pending call, as a
signal handler runs). Both return one line for the attaching vramscope to print; neither
raises, prints, nor touches the program's globals.

Attach starts the writer for what the process already uses, as `vramscope run` would have:
torch with CUDA up at once (its allocator's peak counters still hold the lifetime peak,
which the channel's ATTACHED flag marks as reached before the attach), torch without CUDA
yet armed until CUDA comes up, JAX or CuPy at once, and nothing imported yet armed until
torch is imported.
"""

import sys

from . import _runtime
from ._config import Config

# A detach before torch is imported cancels the import hook's start (the hook itself cannot
# be taken out of another module's list without reaching into it).
_armed = False


def attach(env=None):
    global _armed
    config = Config.from_env(env)
    if config.disabled:
        return "disabled: VRAMSCOPE_DISABLE is set in the process's environment"
    _runtime.attached = True
    if _runtime.current() is not None:
        return "live: already publishing"
    modules = sys.modules
    if "torch" in modules or "jax" in modules or "cupy" in modules:
        if not _runtime.start(None, config):
            return "failed: the writer did not start (see the process's stderr)"
        if _runtime.current() is not None:
            return "live: publishing"
        return "armed: the writer starts when torch initialises CUDA"
    if not _armed:
        from ._importhook import when_imported

        _armed = True
        when_imported("torch", _on_torch)
    return "armed: the writer starts when the program imports torch and initialises CUDA"


def _on_torch(torch):
    if _armed:
        _runtime.start("torch", Config.from_env())


def detach():
    global _armed
    was = _runtime.current() is not None or _runtime._pending or _armed
    _armed = False
    _runtime.stop()
    _runtime.attached = False
    return "detached: the writer stopped and removed its channel" if was else "detached: no writer was running"
