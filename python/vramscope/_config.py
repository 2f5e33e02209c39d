"""Settings from the environment; a malformed value falls back to its default, silently."""

import os

HZ_DEFAULT = 20.0
HZ_MIN = 10.0
HZ_MAX = 100.0

# Allocation sites (`VRAMSCOPE_SITES=1`), see `_sites`. The ring starts at this many trace
# entries and then grows to two steps' worth, unless VRAMSCOPE_SITES_ENTRIES fixes it.
SITES_ENTRIES_DEFAULT = 100_000
# Snapshot files kept per process.
SITES_KEEP_DEFAULT = 3
# Peak dumps after the first: at most one per this many steps and seconds. A dump with a
# 100,000-entry ring costs about 0.7 s (pytorch #172672, as published), so a peak that keeps
# rising (a leak) costs at most about 1 % of the run's time; the warm-up's peak, the one
# most runs have, is dumped at once.
SITES_EVERY_STEPS_DEFAULT = 10
SITES_EVERY_S_DEFAULT = 60.0

_TRUE = ("1", "true", "yes", "on")


def _flag(env, name):
    return env.get(name, "").strip().lower() in _TRUE


def _number(env, name, default, kind=int, minimum=0):
    """`name` as a number of `kind`, at least `minimum`; `default` when unset or malformed."""
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = kind(text.replace("_", ""))
    except ValueError:
        return default
    if value != value or value < minimum:  # NaN, or out of range
        return default
    return value


class Config:
    __slots__ = (
        "disabled",
        "hz",
        "exact_peaks",
        "modules",
        "autostart",
        "sites",
        "sites_entries",
        "sites_keep",
        "sites_every_steps",
        "sites_every_s",
    )

    def __init__(
        self,
        disabled=False,
        hz=HZ_DEFAULT,
        exact_peaks=False,
        modules=False,
        autostart=False,
        sites=False,
        sites_entries=None,
        sites_keep=SITES_KEEP_DEFAULT,
        sites_every_steps=SITES_EVERY_STEPS_DEFAULT,
        sites_every_s=SITES_EVERY_S_DEFAULT,
    ):
        self.disabled = disabled
        self.hz = clamp_hz(hz)
        self.exact_peaks = exact_peaks
        self.modules = modules
        self.autostart = autostart
        self.sites = sites
        # None: sized by the writer from the allocations per step.
        self.sites_entries = sites_entries
        self.sites_keep = sites_keep
        self.sites_every_steps = sites_every_steps
        self.sites_every_s = sites_every_s

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
            sites=_flag(env, "VRAMSCOPE_SITES"),
            sites_entries=_number(env, "VRAMSCOPE_SITES_ENTRIES", None, minimum=1),
            sites_keep=_number(env, "VRAMSCOPE_SITES_KEEP", SITES_KEEP_DEFAULT, minimum=1),
            sites_every_steps=_number(env, "VRAMSCOPE_SITES_EVERY_STEPS", SITES_EVERY_STEPS_DEFAULT),
            sites_every_s=_number(env, "VRAMSCOPE_SITES_EVERY_S", SITES_EVERY_S_DEFAULT, float),
        )


def clamp_hz(hz):
    if hz != hz:  # NaN
        return HZ_DEFAULT
    return min(HZ_MAX, max(HZ_MIN, float(hz)))
