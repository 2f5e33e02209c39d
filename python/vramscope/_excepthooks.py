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
    """The size in PyTorch's "Tried to allocate 2.00 GiB" (to the message's precision)."""
    import re  # here: only an uncaught OOM gets this far

    m = re.search(_TRIED, message, re.IGNORECASE)
    if not m:
        return None
    try:
        return int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    except (KeyError, ValueError):
        return None


def describe(exc_type, exc):
    """`Type: first line of the message`."""
    name = getattr(exc_type, "__name__", "exception")
    text = str(exc).strip().splitlines()
    return "%s: %s" % (name, text[0]) if text else name
