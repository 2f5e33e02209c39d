# vramscope's attach agent: run once inside a running Python process by `vramscope attach`
# or `vramscope detach`, on its main thread at a safe point. Standard library only.
#
# It executes in a namespace of its own (never the program's __main__), so everything lives
# inside one function. Beside it: `request` ("attach" or "detach"), the writer package under
# lib/vramscope, and `waiter`, locked while the attaching vramscope waits. It writes its
# answer to `status` (one line) and, when nobody waits for it any more, removes the directory.


def _vramscope_attach_agent(here):
    import os
    import sys

    name = "_vramscope_run"

    def load():
        package = sys.modules.get(name)
        if package is not None:
            return package
        import importlib.util

        lib = os.path.join(here, "lib", "vramscope")
        spec = importlib.util.spec_from_file_location(
            name, os.path.join(lib, "__init__.py"), submodule_search_locations=[lib]
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
            # Every submodule now: the directory they come from is removed once this returns,
            # and the writer imports some of them only later (when CUDA comes up).
            for entry in sorted(os.listdir(lib)):
                if entry.endswith(".py") and entry != "__init__.py":
                    __import__(name + "." + entry[:-3])
        except BaseException:
            for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
                del sys.modules[key]
            raise
        return module

    def own_writer():
        # A program that imported vramscope and started it already publishes.
        own = sys.modules.get("vramscope")
        runtime = getattr(own, "_runtime_module", None)
        try:
            return own is not None and runtime is not None and runtime.current() is not None
        except Exception:
            return False

    try:
        with open(os.path.join(here, "request")) as f:
            request = f.read().strip()
        if request == "attach" and own_writer():
            answer = "live: the program's own vramscope writer already publishes"
        else:
            load()
            attach = sys.modules.get(name + "._attach")
            if attach is None:
                answer = "failed: this process runs an older vramscope writer (vramscope run) without attach support"
            elif request == "attach":
                answer = attach.attach()
            elif request == "detach":
                answer = attach.detach()
            else:
                answer = "failed: unknown request %r" % request[:40]
    except BaseException as e:
        answer = "failed: %s: %s" % (e.__class__.__name__, str(e)[:200])
    try:
        tmp = os.path.join(here, "status.tmp")
        with open(tmp, "w") as f:
            f.write(answer.replace("\n", " ") + "\n")
        os.rename(tmp, os.path.join(here, "status"))
        if not _waited_for(os.path.join(here, "waiter")):
            import shutil

            shutil.rmtree(here, ignore_errors=True)
    except BaseException:
        pass


def _waited_for(path):
    # vramscope holds a lock on `waiter` while it waits for the answer; it then removes the
    # directory. Free, the lock means nobody waits (vramscope gave up or was killed).
    import fcntl
    import os

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


_vramscope_attach_agent(__vramscope_dir__)  # noqa: F821 (given by the bootstrap)
