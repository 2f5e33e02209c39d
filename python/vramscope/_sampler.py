"""The background thread that reads the framework's figures at a fixed rate."""

import threading
import time


class Sampler:
    """Calls `tick()` every `period` seconds on a daemon thread, on a drift-free schedule.

    A tick that overruns is not made up with a burst: the schedule restarts from now.
    `tick` must not raise (the runtime guards it).
    """

    def __init__(self, tick, period, name="vramscope-sampler"):
        self._tick = tick
        self._period = period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self):
        self._thread.start()

    def stop(self, timeout=1.0):
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def alive(self):
        return self._thread.is_alive()

    @property
    def ident(self):
        return self._thread.ident

    def _run(self):
        period = self._period
        due = time.monotonic()
        while True:
            due += period
            delay = due - time.monotonic()
            if delay < 0:
                due = time.monotonic()
                delay = 0
            if self._stop.wait(delay):
                return
            self._tick()
