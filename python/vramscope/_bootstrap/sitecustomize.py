"""vramscope's zero-code start, put first on PYTHONPATH by `vramscope run`.

It arms vramscope's import hook (the package comes from a second PYTHONPATH entry) and
then runs the `sitecustomize` this one shadows, if any, so a distribution's or a
virtualenv's own customisation still happens. Kept importable by old Pythons: a Python 2
child of `vramscope run` must still get its own sitecustomize.
"""

import os
import sys


def _same_dir(a, b):
    try:
        return bool(a) and os.path.realpath(a) == os.path.realpath(b)
    except Exception:
        return False


def _flag(name):
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _arm():
    # Checked before importing anything: an unarmed interpreter pays for nothing.
    if sys.version_info < (3, 8) or _flag("VRAMSCOPE_DISABLE") or not _flag("VRAMSCOPE_AUTOSTART"):
        return
    try:
        package = _load_private()
        __import__(_PRIVATE + "._autostart")
        package._autostart.install()
    except Exception as err:
        try:
            sys.stderr.write("vramscope: not armed: %s: %s\n" % (err.__class__.__name__, err))
        except Exception:
            pass


# The package is armed under this name, never as `vramscope`: the program's own
# `import vramscope` then finds what its sys.path says, so a vramscope.py beside the script
# wins as Python promises; where sys.path leads to this package, `_Alias` hands over the armed
# module itself rather than a second copy with a state of its own.
_PRIVATE = "_vramscope_run"


def _load_private():
    import importlib.util
    from importlib.machinery import PathFinder

    # Looked up now, before Python puts the script's directory first on sys.path.
    spec = PathFinder.find_spec("vramscope", sys.path)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the vramscope package is not on PYTHONPATH")
    private = importlib.util.spec_from_file_location(
        _PRIVATE, spec.origin, submodule_search_locations=list(spec.submodule_search_locations)
    )
    module = importlib.util.module_from_spec(private)
    sys.modules[_PRIVATE] = module
    try:
        private.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(_PRIVATE, None)
        raise
    sys.meta_path.insert(0, _Alias(spec.origin))
    return module


class _Alias(object):
    """Finds `vramscope` (and its submodules) as the armed module where sys.path leads to the
    package armed here; anything else is left to the usual finders."""

    def __init__(self, origin):
        self.origin = origin

    def find_spec(self, name, path=None, target=None):
        if name == "vramscope":
            from importlib.machinery import PathFinder

            found = PathFinder.find_spec(name, sys.path)
            if found is None or not _same_dir(found.origin, self.origin):
                return None
        elif not name.startswith("vramscope.") or getattr(sys.modules.get("vramscope"), "__name__", None) != _PRIVATE:
            return None
        import importlib.util

        return importlib.util.spec_from_loader(name, _AliasLoader(_PRIVATE + name[len("vramscope") :]))


class _AliasLoader(object):
    def __init__(self, target):
        self.target = target

    def create_module(self, spec):
        import importlib

        module = importlib.import_module(self.target)
        self.own_spec = module.__spec__
        return module

    def exec_module(self, module):
        # The import system set the alias's spec on the module; its own is what its relative
        # imports go by.
        module.__spec__ = self.own_spec


def _chain():
    """Imports the next `sitecustomize` on sys.path the way site.py imports the first."""
    here = os.path.dirname(os.path.abspath(__file__))
    ours = sys.modules.get("sitecustomize")
    positions = [i for i, entry in enumerate(sys.path) if _same_dir(entry, here)]
    for i in reversed(positions):
        del sys.path[i]
    sys.modules.pop("sitecustomize", None)
    try:
        try:
            import sitecustomize  # noqa: F401  (the one this file shadows)
        except ImportError as exc:
            if getattr(exc, "name", "sitecustomize") != "sitecustomize":
                raise
    except Exception as err:
        if sys.flags.verbose:
            sys.excepthook(*sys.exc_info())
        else:
            sys.stderr.write(
                "Error in sitecustomize; set PYTHONVERBOSE for traceback:\n%s: %s\n"
                % (err.__class__.__name__, err)
            )
    finally:
        for i in positions:
            sys.path.insert(min(i, len(sys.path)), here)
        if ours is not None:
            sys.modules["sitecustomize"] = ours


_arm()
_chain()
