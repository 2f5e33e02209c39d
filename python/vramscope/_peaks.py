"""Interval peaks from a framework's peak counter without resetting it (spec section 5)."""

from . import _layout as L

_EXACT = L.SAMPLE_PEAK_EXACT
_NEW_HIGH = L.SAMPLE_NEW_HIGH_WATER
_FOREIGN = L.SAMPLE_FOREIGN_RESET_SEEN


class PeakTracker:
    """Follows one counter (allocated, or reserved) of one device.

    `exact` is for a counter the writer itself resets after every reading: each reading's
    peak then covers exactly the interval since the previous one.
    """

    __slots__ = ("exact", "_prev_current", "_prev_peak", "high_water")

    def __init__(self, exact=False):
        self.exact = exact
        self._prev_current = None
        self._prev_peak = None
        self.high_water = None

    def update(self, current, peak):
        """Folds in one reading (None: not readable).

        Returns (interval peak or None, sample flags, previous high-water mark or None,
        (peak before, peak after) of a foreign reset or None). The flags carry
        NEW_HIGH_WATER when the interval peak is a new high-water mark.
        """
        prev_current = self._prev_current
        prev_peak = self._prev_peak
        self._prev_current = current
        self._prev_peak = peak
        # What the two readings themselves saw: a lower bound of the interval's peak.
        if current is None:
            seen = prev_current
        elif prev_current is None or current >= prev_current:
            seen = current
        else:
            seen = prev_current
        flags = 0
        reset = None
        if peak is None:
            # No counter (CuPy, or a figure the caller does not have).
            interval = seen
        elif self.exact or prev_peak is None or peak > prev_peak:
            # The counter covers everything since its last reset, which lies at or after the
            # previous reading: its value was reached inside the interval.
            interval = peak if current is None or peak >= current else current
            flags = _EXACT
        elif peak == prev_peak:
            # At most `peak`, at least what the two readings saw.
            interval = seen
        else:
            # Someone else reset the counter; what it says now covers only part of the
            # interval, so the figure is a lower bound and comparisons restart from here.
            interval = peak if seen is None or peak >= seen else seen
            flags = _FOREIGN
            reset = (prev_peak, peak)
        high = self.high_water
        # A first reading of 0 is no high-water mark: nothing has been allocated yet.
        if interval is not None and interval > (high or 0):
            flags |= _NEW_HIGH
            self.high_water = interval
        return interval, flags, high, reset
