"""What every sampling adapter shares: one slot per device, the rate of the sampler, and
the free-memory query kept to at most once a second per device."""

import time

FREE_MEMORY_PERIOD = 1.0


class PolledAdapter:
    exact = False
    flags = 0
    allocator_config = ""
    framework = ""

    def __init__(self, config, clock=time.monotonic):
        self.period = 1.0 / config.hz
        self._clock = clock
        self._free = {}

    def slot_state(self, session, key, identity):
        """The slot of device `key`, registered on first sight with `identity()`."""
        state = session.slot(key)
        if state is None:
            state = session.add_slot(key, identity())
        return state

    def device_free(self, key, read):
        """`read()` (bytes free on the device) at most once per second; the last value between.

        The query may be slow (a driver call) and, in PyTorch, creates a context on a device
        that has none, so it is rationed and only made for devices already in use.
        """
        now = self._clock()
        last = self._free.get(key)
        if last is not None and now - last[0] < FREE_MEMORY_PERIOD:
            return last[1]
        try:
            value = read()
        except Exception:
            value = None
        self._free[key] = (now, value)
        return value

    def attach(self, runtime):
        pass

    def detach(self):
        pass
