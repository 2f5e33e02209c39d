"""The allocation sites' settings from the environment (`_config.Config.from_env`): each
falls back to its default when unset or malformed, never raising."""

import unittest

import _support  # noqa: F401  (the package on sys.path)
from vramscope._config import (
    SITES_EVERY_S_DEFAULT,
    SITES_EVERY_STEPS_DEFAULT,
    SITES_KEEP_DEFAULT,
    Config,
)


def sites(**env):
    c = Config.from_env(env)
    return (c.sites, c.sites_entries, c.sites_keep, c.sites_every_steps, c.sites_every_s)


DEFAULTS = (False, None, SITES_KEEP_DEFAULT, SITES_EVERY_STEPS_DEFAULT, SITES_EVERY_S_DEFAULT)


class SitesSettings(unittest.TestCase):
    def test_defaults(self):
        self.assertEqual(sites(), DEFAULTS)
        self.assertEqual(DEFAULTS[2:], (3, 10, 60.0))

    def test_values_as_people_write_them(self):
        self.assertEqual(
            sites(
                VRAMSCOPE_SITES="yes",
                VRAMSCOPE_SITES_ENTRIES="200_000",
                VRAMSCOPE_SITES_KEEP=" 5 ",
                VRAMSCOPE_SITES_EVERY_STEPS="0",
                VRAMSCOPE_SITES_EVERY_S="2.5",
            ),
            (True, 200000, 5, 0, 2.5),
        )

    def test_malformed_or_out_of_range_values_keep_their_defaults(self):
        for bad in ("", "many", "-1", "1e3x", "nan"):
            got = sites(
                VRAMSCOPE_SITES_ENTRIES=bad,
                VRAMSCOPE_SITES_KEEP=bad,
                VRAMSCOPE_SITES_EVERY_STEPS=bad,
                VRAMSCOPE_SITES_EVERY_S=bad,
            )
            self.assertEqual(got, DEFAULTS, bad)
        # A ring of no entries, or keeping no file, is no setting.
        self.assertEqual(sites(VRAMSCOPE_SITES_ENTRIES="0", VRAMSCOPE_SITES_KEEP="0"), DEFAULTS)
        self.assertEqual(sites(VRAMSCOPE_SITES="0")[0], False)


if __name__ == "__main__":
    unittest.main()
