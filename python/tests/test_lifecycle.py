"""A writer's life in real processes: fork, the three ways to end, and a full disk."""

import json
import os
import signal
import subprocess
import sys
import unittest

import _support as S
from vramscope import _layout as L

FORK = r"""
import json, os, sys
import vramscope
vramscope.report(device=0, allocated=100, peak=100)
path = vramscope.channel_path()
before = open(path, "rb").read()
pid = os.fork()
if pid == 0:
    # The child: its calls must not touch the parent's file, and it must not hold its lock.
    vramscope.step()
    vramscope.note("from the child")
    with vramscope.mark("child"):
        pass
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink("/proc/self/fd/" + fd) == path:
                held.append(fd)
        except OSError:
            pass
    enabled_after_fork = vramscope.enabled()
    vramscope.report(device=0, allocated=5)  # a channel of its own
    own = vramscope.channel_path()
    with open(sys.argv[1], "w") as f:
        json.dump({"held": held, "enabled": enabled_after_fork, "own": own}, f)
    sys.exit(0)  # runs atexit handlers in the child too
_, status = os.waitpid(pid, 0)
after = open(path, "rb").read()
print(json.dumps({"path": path, "same": before == after, "status": status}))
sys.stdout.flush()
sys.stdin.readline()
"""


class Fork(unittest.TestCase):
    def test_child_is_silent_and_lets_go_of_the_lock(self):
        with S.TempDir() as d:
            report = os.path.join(d, "child.json")
            env = S.python_env({"VRAMSCOPE_DIR": d})
            with subprocess.Popen(
                [sys.executable, "-c", FORK, report],
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                universal_newlines=True,
            ) as proc:
                parent = json.loads(proc.stdout.readline())
                with open(report) as f:
                    child = json.load(f)
                self.assertEqual(parent["status"], 0)
                self.assertTrue(parent["same"], "the child changed the parent's file")
                self.assertEqual(child["held"], [])
                self.assertFalse(child["enabled"])
                # The parent still holds its lock and runs; the child's own channel is gone
                # with the child's clean exit.
                self.assertTrue(S.lock_is_held(parent["path"]))
                snap = S.Snapshot(S.read_bytes(parent["path"]))
                self.assertEqual(snap.header.state, L.STATE_RUNNING)
                self.assertNotEqual(child["own"], parent["path"])
                self.assertEqual(S.channel_files(d), [os.path.basename(parent["path"])])
                proc.stdin.write("\n")
                proc.stdin.flush()
            self.assertEqual(proc.returncode, 0)
            self.assertEqual(S.channel_files(d), [])


ENDING = r"""
import sys, threading
import vramscope
vramscope.report(device=0, allocated=7, peak=7)
print(vramscope.channel_path(), flush=True)
how = sys.argv[1]
if how == "clean":
    pass
elif how == "error":
    raise ValueError("bad batch")
elif how == "oom":
    def worker():
        raise RuntimeError("CUDA error: out of memory (in a thread)")
    t = threading.Thread(target=worker)
    t.start()
    t.join()
    raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity)")
elif how == "kill":
    sys.stdin.readline()
"""


class Endings(unittest.TestCase):
    def end(self, how, directory):
        env = S.python_env({"VRAMSCOPE_DIR": directory})
        proc = subprocess.Popen(
            [sys.executable, "-c", ENDING, how],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            universal_newlines=True,
        )
        path = proc.stdout.readline().strip()
        return proc, path

    def test_clean_exit_removes_the_file(self):
        with S.TempDir() as d:
            proc, path = self.end("clean", d)
            _, err = proc.communicate()
            self.assertEqual((proc.returncode, err), (0, ""))
            self.assertFalse(os.path.exists(path))

    def test_uncaught_exception_keeps_the_file_with_exit_event(self):
        with S.TempDir() as d:
            proc, path = self.end("error", d)
            _, err = proc.communicate()
            self.assertEqual(proc.returncode, 1)
            self.assertIn("ValueError: bad batch", err)  # the original hook still prints
            snap = S.Snapshot(S.read_bytes(path))
            self.assertEqual(snap.header.state, L.STATE_EXITED_ERROR)
            self.assertFalse(S.lock_is_held(path))
            evs = S.events(snap.raw)[0]
            self.assertEqual(
                [(e.kind, e.args[0], e.text) for e in evs if e.kind == L.EV_EXIT],
                [(L.EV_EXIT, 1, "ValueError: bad batch")],
            )

    def test_uncaught_out_of_memory_errors(self):
        with S.TempDir() as d:
            proc, path = self.end("oom", d)
            _, err = proc.communicate()
            self.assertEqual(proc.returncode, 1)
            evs = S.events(S.read_bytes(path))[0]
            ooms = [(e.args[0], e.text) for e in evs if e.kind == L.EV_OOM_ERROR]
            self.assertEqual(
                ooms,
                [
                    (S.ABSENT, "CUDA error: out of memory (in a thread)"),
                    (2 << 30, "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity)"),
                ],
            )
            self.assertEqual(evs[-1].kind, L.EV_EXIT)
            self.assertTrue(evs[-1].text.startswith("RuntimeError: CUDA out of memory."))

    def test_sigkill_leaves_running_state_and_a_free_lock(self):
        with S.TempDir() as d:
            proc, path = self.end("kill", d)
            self.assertTrue(S.lock_is_held(path))
            proc.send_signal(signal.SIGKILL)
            proc.communicate()
            snap = S.Snapshot(S.read_bytes(path))
            self.assertEqual(snap.header.state, L.STATE_RUNNING)
            self.assertFalse(S.lock_is_held(path))


FULL = r"""
import resource, os, sys
# Any file beyond 64 KiB fails (EFBIG) as a full /dev/shm would (ENOSPC). SIGXFSZ keeps its
# default action (kill): the writer must fail without ever raising it.
resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
import vramscope
ok = vramscope.start(framework="python")
vramscope.report(allocated=1)
with vramscope.mark("m"):
    vramscope.step()
print(ok, vramscope.enabled(), sorted(os.listdir(os.environ["VRAMSCOPE_DIR"])))
"""


class NoSpace(unittest.TestCase):
    def test_full_disk_is_one_warning_and_no_leftovers(self):
        with S.TempDir() as d:
            r = S.run_python(FULL, S.python_env({"VRAMSCOPE_DIR": d}))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.strip(), "False False []")
            lines = [l for l in r.stderr.splitlines() if "vramscope" in l]
            self.assertEqual(len(lines), 1, r.stderr)
            self.assertIn("no space for the channel file", lines[0])


if __name__ == "__main__":
    unittest.main()
