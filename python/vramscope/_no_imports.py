"""Work on the sampler thread that must not import anything.

CPython locks each module while it is imported. When two threads each hold one module's lock
and wait for the other's, importlib breaks the deadlock by handing one of them a module that
is half initialised, and the program's import fails ("cannot import name ... from partially
initialized module"). torch 2.11's `_C._cuda_memorySnapshot` imports torch._inductor, and
with it torch._dynamo, the first time it runs. On an H200, a peak dump on the sampler thread
did that while the training thread was importing torch._dynamo for its optimizer, and the
program died at `torch.optim.AdamW(...)`.

A thread that imports nothing holds no module lock while it waits for one, so it cannot be
half of such a cycle. Inside `refusing()`, any import the thread attempts is refused at once
(`find_spec`, which importlib calls before it loads anything); the caller hands that work to
the training thread, where importing is the program's own business. A module already
imported is not an import: it is found in sys.modules and never reaches the finder. One that
another thread is importing is waited for, which is safe: this thread holds no module lock.
A finder the program puts in front of this one later could still load a module here; the
refuser is not moved back to the front, since reordering sys.meta_path while another thread
walks it could make that thread skip a finder.
"""

import sys
import threading


class ImportRefused(ImportError):
    pass


class _State(threading.local):
    active = False
    refused = None


_state = _State()


class _Refuser:
    """First in sys.meta_path while sites are on; does nothing outside `refusing()`."""

    def find_spec(self, name, path=None, target=None):
        if not _state.active:
            return None
        if _state.refused is None:
            _state.refused = name
        raise ImportRefused("vramscope's sampler thread imports nothing (%s)" % name, name=name)


_refuser = _Refuser()


def install():
    if _refuser not in sys.meta_path:
        sys.meta_path.insert(0, _refuser)


def remove():
    try:
        sys.meta_path.remove(_refuser)
    except ValueError:
        pass


class refusing:
    """`with refusing():` refuses this thread's imports; `refused()` inside names the first.

    Whatever was refused is known by this flag, not by the exception: torch's C++ code may
    turn the ImportError it got into another."""

    def __enter__(self):
        self._outer = (_state.active, _state.refused)
        _state.active = True
        _state.refused = None
        return self

    def __exit__(self, *exc):
        _state.active, _state.refused = self._outer
        return False


def refused():
    """The first module refused on this thread inside the current `refusing()`, or None."""
    return _state.refused if _state.active else None


def imported(name):
    """Whether module `name` is imported and initialised: using it imports nothing."""
    module = sys.modules.get(name) if name else None
    if module is None:
        return False
    return not getattr(getattr(module, "__spec__", None), "_initializing", False)


def clear():
    """Forgets a refusal, once the work it stopped has been handed on."""
    _state.refused = None
