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
        from vramscope import _autostart

        _autostart.install()
    except Exception as err:
        try:
            sys.stderr.write("vramscope: not armed: %s: %s\n" % (err.__class__.__name__, err))
        except Exception:
            pass


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
