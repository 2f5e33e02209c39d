"""Settings from the environment; a malformed value falls back to its default, silently."""

import os

HZ_DEFAULT = 20.0
HZ_MIN = 10.0
HZ_MAX = 100.0

_TRUE = ("1", "true", "yes", "on")


def _flag(env, name):
    return env.get(name, "").strip().lower() in _TRUE


class Config:
    __slots__ = ("disabled", "hz", "exact_peaks", "modules", "autostart")

    def __init__(self, disabled=False, hz=HZ_DEFAULT, exact_peaks=False, modules=False, autostart=False):
        self.disabled = disabled
        self.hz = clamp_hz(hz)
        self.exact_peaks = exact_peaks
        self.modules = modules
        self.autostart = autostart

    @classmethod
    def from_env(cls, env=None):
        env = os.environ if env is None else env
        try:
            hz = float(env.get("VRAMSCOPE_HZ", HZ_DEFAULT))
        except ValueError:
            hz = HZ_DEFAULT
        return cls(
            disabled=_flag(env, "VRAMSCOPE_DISABLE"),
            hz=hz,
            exact_peaks=env.get("VRAMSCOPE_PEAK", "").strip().lower() == "reset",
            modules=_flag(env, "VRAMSCOPE_MODULES"),
            autostart=_flag(env, "VRAMSCOPE_AUTOSTART"),
        )


def clamp_hz(hz):
    if hz != hz:  # NaN
        return HZ_DEFAULT
    return min(HZ_MAX, max(HZ_MIN, float(hz)))
