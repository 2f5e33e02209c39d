"""Keeping vramscope's own failures out of the user's program: one-time warnings and an
error budget after which the writer switches itself off."""

import sys
import warnings

MAX_INTERNAL_ERRORS = 10


class VramscopeWarning(RuntimeWarning):
    """Category of vramscope's warnings, so a program can filter them."""


_warned = set()


def warn_once(key, message):
    """Warns about `key` once per process, as one line."""
    if key in _warned:
        return
    _warned.add(key)
    try:
        # Attributed to "vramscope", line 0: no source line follows, so it stays one line.
        warnings.warn_explicit(message, VramscopeWarning, "vramscope", 0)
    except Exception:
        # `-W error` turns warnings into exceptions: say it on stderr instead of raising.
        try:
            sys.stderr.write("vramscope: %s\n" % message)
        except Exception:
            pass


class ErrorBudget:
    """Counts internal errors; the `exhausted` callback runs once, at the limit."""

    def __init__(self, exhausted, limit=MAX_INTERNAL_ERRORS):
        self.count = 0
        self.limit = limit
        self.last = None
        self._exhausted = exhausted

    def record(self, error):
        self.count += 1
        self.last = error
        if self.count == self.limit:
            self._exhausted(error)
