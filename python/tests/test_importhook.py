"""The post-import hook: the callback runs after the module's code, once, and the module
keeps its real loader."""

import importlib.machinery
import os
import sys
import unittest

import _support as S
from vramscope import _importhook


class PostImport(unittest.TestCase):
    def setUp(self):
        self.tmp = S.TempDir()
        self.dir = self.tmp.__enter__()
        sys.path.insert(0, self.dir)

    def tearDown(self):
        sys.path.remove(self.dir)
        for name in ("vs_probe_mod", "vs_probe_broken"):
            sys.modules.pop(name, None)
        self.tmp.__exit__(None, None, None)

    def write(self, name, body):
        with open(os.path.join(self.dir, name + ".py"), "w") as f:
            f.write(body)
        importlib.invalidate_caches()

    def test_runs_after_the_module_executes(self):
        self.write("vs_probe_mod", "VALUE = 42\n")
        seen = []
        _importhook.when_imported("vs_probe_mod", lambda m: seen.append(m.VALUE))
        self.assertEqual(seen, [])
        import vs_probe_mod

        self.assertEqual(seen, [42])
        self.assertIsInstance(vs_probe_mod.__loader__, importlib.machinery.SourceFileLoader)
        self.assertNotIn("exec_module", vars(vs_probe_mod.__loader__))
        self.assertFalse(any(isinstance(f, _importhook.PostImportFinder) for f in sys.meta_path))
        importlib.reload(vs_probe_mod)
        self.assertEqual(seen, [42])

    def test_already_imported_runs_at_once(self):
        seen = []
        _importhook.when_imported("os", lambda m: seen.append(m is os))
        self.assertEqual(seen, [True])

    def test_failed_import_runs_nothing_and_raises_as_usual(self):
        self.write("vs_probe_broken", "raise ImportError('nope')\n")
        seen = []
        _importhook.when_imported("vs_probe_broken", seen.append)
        with self.assertRaises(ImportError):
            import vs_probe_broken  # noqa: F401
        self.assertEqual(seen, [])
        _importhook._callbacks.pop("vs_probe_broken", None)
        if _importhook._finder is not None:
            sys.meta_path.remove(_importhook._finder)
            _importhook._finder = None

    def test_a_failing_callback_does_not_break_the_import(self):
        self.write("vs_probe_mod", "VALUE = 1\n")
        _importhook.when_imported("vs_probe_mod", lambda m: 1 / 0)
        import vs_probe_mod

        self.assertEqual(vs_probe_mod.VALUE, 1)


if __name__ == "__main__":
    unittest.main()
