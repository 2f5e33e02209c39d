"""Running code right after a module is imported, without importing it ourselves.

A finder placed first on `sys.meta_path` answers for the watched names only: it asks the
finders after it for the real spec and wraps that spec's `loader.exec_module`, so the
callback runs once the module's code has run successfully. The module keeps its real
loader (the wrapper lives on the loader instance only while the module executes).
"""

import _thread
import sys

# _thread rather than threading: this module loads at every armed interpreter's start.
_lock = _thread.allocate_lock()
_callbacks = {}
_local = _thread._local()
_finder = None


def when_imported(name, callback):
    """Calls `callback(module)` once `name` is imported; at once if it already is."""
    module = sys.modules.get(name)
    if module is not None:
        _call(callback, module)
        return
    global _finder
    with _lock:
        _callbacks.setdefault(name, []).append(callback)
        if _finder is None:
            _finder = PostImportFinder()
            sys.meta_path.insert(0, _finder)


def _call(callback, module):
    try:
        callback(module)
    except Exception:
        pass


def _fire(name, module):
    global _finder
    with _lock:
        callbacks = _callbacks.pop(name, [])
        if not _callbacks and _finder is not None:
            try:
                sys.meta_path.remove(_finder)
            except ValueError:
                pass
            _finder = None
    for callback in callbacks:
        _call(callback, module)


class PostImportFinder:
    def find_spec(self, fullname, path=None, target=None):
        if fullname not in _callbacks:
            return None
        busy = getattr(_local, "busy", None)
        if busy is None:
            busy = _local.busy = set()
        if fullname in busy:
            return None
        busy.add(fullname)
        try:
            spec = _find_elsewhere(self, fullname, path, target)
        finally:
            busy.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        _wrap(spec.loader, fullname)
        return spec

    def invalidate_caches(self):
        pass


def _find_elsewhere(me, fullname, path, target):
    for finder in list(sys.meta_path):
        if finder is me:
            continue
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is None:
            continue
        spec = find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


def _wrap(loader, fullname):
    original = loader.exec_module

    def exec_module(module):
        try:
            original(module)
        finally:
            try:
                del loader.exec_module
            except AttributeError:
                pass
        _fire(fullname, module)

    try:
        loader.exec_module = exec_module
    except (AttributeError, TypeError):
        # A loader that takes no instance attributes: no callback rather than a broken import.
        pass
