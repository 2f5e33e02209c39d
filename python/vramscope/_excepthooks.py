"""Uncaught exceptions: out-of-memory errors become OOM_ERROR events, and an uncaught
exception in the main thread makes the exit an error exit (the file is kept).

The wrappers chain whatever hook was installed before them and stay installed for the
life of the process: someone may have chained their own hook on top of ours since.
"""

import sys
import threading

_installed = False
_handler = None

_UNITS = {
    "B": 1,
    "KIB": 1 << 10,
    "MIB": 1 << 20,
    "GIB": 1 << 30,
    "TIB": 1 << 40,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
}
_TRIED = r"Tried to allocate ([0-9.]+) ?([KMGT]i?B|B)"
# XLA's "Out of memory while trying to allocate 17179869184 bytes.", CuPy's "Out of memory
# allocating 8,589,934,592 bytes".
_BYTES = r"allocat(?:e|ing) ([0-9][0-9,]*) bytes"
# PyTorch's "GPU 0 has a total capacity of ..." (older: "(GPU 0; 79.15 GiB total capacity)").
_GPU = r"\bGPU ([0-9]+)\b"
# Where an OOM was raised, set on the exception by the first phase it leaves: the phases
# unwind before the exception hook runs. Plain data (the exception may be pickled).
FAILURE_ATTR = "_vramscope_failure"


def set_handler(handler):
    """`handler(exc_type, exc, main_thread)` is called for every uncaught exception."""
    global _handler
    _handler = handler


def install():
    global _installed
    if _installed:
        return
    _installed = True
    previous_sys = sys.excepthook

    def vramscope_excepthook(exc_type, exc, tb):
        _notify(exc_type, exc, True)
        previous_sys(exc_type, exc, tb)

    sys.excepthook = vramscope_excepthook
    if hasattr(threading, "excepthook"):
        previous_thread = threading.excepthook

        def vramscope_thread_excepthook(args):
            _notify(args.exc_type, args.exc_value, False)
            previous_thread(args)

        threading.excepthook = vramscope_thread_excepthook


def _notify(exc_type, exc, main_thread):
    handler = _handler
    if handler is None:
        return
    try:
        handler(exc_type, exc, main_thread)
    except Exception:
        pass


def is_out_of_memory(exc_type, exc):
    """Recognises OOMs of every framework by name and message, without importing any."""
    names = {k.__name__ for k in getattr(exc_type, "__mro__", ())}
    if "OutOfMemoryError" in names:
        return True
    text = str(exc)
    if "out of memory" in text.lower():
        return True
    return "RESOURCE_EXHAUSTED" in text


def requested_bytes(message):
    """The size in PyTorch's "Tried to allocate 2.00 GiB" (to the message's precision),
    XLA's "trying to allocate 2147483648 bytes" or CuPy's "allocating 2,147,483,648 bytes"."""
    import re  # here: only an uncaught OOM gets this far

    m = re.search(_TRIED, message, re.IGNORECASE)
    if not m:
        m = re.search(_BYTES, message, re.IGNORECASE)
        return int(m.group(1).replace(",", "")) if m else None
    try:
        return int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    except (KeyError, ValueError):
        return None


def device_ordinal(message):
    """The device PyTorch's message names ("GPU 0 has a total capacity..."), else None."""
    import re

    m = re.search(_GPU, message)
    return int(m.group(1)) if m else None


def remember_failure(exc, pid, point):
    """Marks `exc` with where it was raised, unless an inner phase did already."""
    if getattr(exc, FAILURE_ATTR, None) is None:
        try:
            setattr(exc, FAILURE_ATTR, (pid,) + tuple(point))
        except (AttributeError, TypeError):
            pass  # an exception that takes no attributes: the hook reports where it is then


def failure_point(exc, pid):
    """The point `remember_failure` set on `exc` in this process, else None."""
    mark = getattr(exc, FAILURE_ATTR, None)
    if isinstance(mark, tuple) and len(mark) == 4 and mark[0] == pid:
        return mark[1:]
    return None


def describe(exc_type, exc):
    """`Type: first line of the message`."""
    name = getattr(exc_type, "__name__", "exception")
    text = str(exc).strip().splitlines()
    return "%s: %s" % (name, text[0]) if text else name
