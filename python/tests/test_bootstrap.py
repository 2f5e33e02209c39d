"""Zero-code start end to end: real interpreters with the bootstrap directory first on
PYTHONPATH, the package second and a fake torch third, as `vramscope run` arranges."""

import json
import os
import unittest

import _support as S
from vramscope import _layout as L

BOOTSTRAP = os.path.join(S.PYTHON_DIR, "vramscope", "_bootstrap")
GIB = 1 << 30


def env_for(directory, extra=None, autostart=True):
    env = S.python_env({"VRAMSCOPE_DIR": directory, "PYTHONDONTWRITEBYTECODE": "1"}, fakes=True)
    env["PYTHONPATH"] = os.pathsep.join([BOOTSTRAP, S.PYTHON_DIR, S.FAKES])
    for name in ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        env.pop(name, None)
    if autostart:
        env["VRAMSCOPE_AUTOSTART"] = "1"
    env.update(extra or {})
    return env


TRAIN = r"""
import os, sys, time
import torch
d = os.environ["VRAMSCOPE_DIR"]
assert "_vramscope_run._runtime" in sys.modules, "the bootstrap armed nothing"
print("before init:", sorted(os.listdir(d)), flush=True)
torch._C._fake_malloc(0, 1 << 30)  # first allocation: CUDA initialises, the channel appears
print("after init:", len([n for n in os.listdir(d) if n.endswith(".vsc")]), flush=True)
opt, discriminator_opt = torch.optim.Optimizer(), torch.optim.Optimizer()
for i in range(3):
    torch._C._fake_malloc(0, (i + 1) << 30)
    torch._C._fake_free(0, (i + 1) << 30)
    opt.step()
    discriminator_opt.step()  # a second optimizer marks no steps of its own
torch.cuda.empty_cache()
torch.cuda.memory._dump_snapshot(os.path.join(d, "snap.pickle"))
time.sleep(0.2)
torch._C._fake_oom(0, 20 << 30)
"""


class Train(unittest.TestCase):
    def test_training_process_publishes_and_keeps_its_file_after_an_oom(self):
        with S.TempDir() as d:
            env = env_for(
                d,
                {
                    "RANK": "3",
                    "LOCAL_RANK": "1",
                    "WORLD_SIZE": "8",
                    "TORCHELASTIC_RUN_ID": "run-7",
                    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
                },
            )
            r = S.run_python(TRAIN, env)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("OutOfMemoryError: CUDA out of memory", r.stderr)
            self.assertEqual(r.stdout.splitlines(), ["before init: []", "after init: 1"])
            (name,) = S.channel_files(d)
            snap = S.Snapshot(S.read_bytes(os.path.join(d, name)))
        h = snap.header
        self.assertEqual((h.kind, h.period_us, h.flags, h.state), (L.KIND_PYTORCH, 50000, 0, L.STATE_EXITED_ERROR))
        self.assertEqual((h.rank, h.local_rank, h.world_size, h.job_id), (3, 1, 8, "run-7"))
        self.assertEqual((h.framework, h.allocator_config), ("torch 2.5.1+fake", "expandable_segments:True"))
        (dev,) = snap.devices
        self.assertEqual((dev.ordinal, dev.flags, dev.uuid, dev.pci, dev.total), (0, 3, bytes(range(16)), "00000000:18:00.0", 80 * GIB))
        self.assertEqual((dev.allocated, dev.ooms, dev.retries), (GIB, 1, 1))
        self.assertEqual(snap.status_step, 3)
        evs, lost = S.events(snap.raw)
        self.assertEqual(lost, 0)
        by_kind = {}
        for e in evs:
            by_kind.setdefault(e.kind, []).append(e)
        steps = by_kind[L.EV_STEP_END]
        self.assertEqual([(e.step, e.args[0]) for e in steps], [(0, 2 * GIB), (1, 3 * GIB), (2, 4 * GIB)])
        (empty,) = by_kind[L.EV_EMPTY_CACHE]
        self.assertEqual(empty.args[:2], (4 * GIB, GIB))
        (snapshot,) = by_kind[L.EV_SNAPSHOT_WRITTEN]
        self.assertTrue(snapshot.text.endswith("snap.pickle"))
        (oom,) = by_kind[L.EV_OOM]
        self.assertEqual(oom.args, (20 * GIB, GIB, 80 * GIB, GIB, GIB, 1))
        self.assertEqual(oom.step, 3)
        (oom_error,) = by_kind[L.EV_OOM_ERROR]
        self.assertEqual(oom_error.args[0], 20 * GIB)
        (exit_event,) = by_kind[L.EV_EXIT]
        self.assertEqual(exit_event.args[0], 1)
        self.assertTrue(exit_event.text.startswith("OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB"))
        samples, _ = S.samples(snap.raw)
        hooked = [s for s in samples if s.flags & L.SAMPLE_HOOK]
        # Steps are known from the first boundary on: before it, samples carry no step.
        self.assertEqual([s.step for s in hooked[:3]], [S.ABSENT, 1, 2])
        self.assertGreater(len(samples) - len(hooked), 0, "the sampler thread never ran")


EXPLICIT = r"""
import json, os, torch, vramscope
d = os.environ["VRAMSCOPE_DIR"]
out = {"started": vramscope.start(), "before_init": os.listdir(d)}
torch._C._fake_malloc(0, 1 << 30)
out["after_init"] = len(os.listdir(d))
opt = torch.optim.Optimizer()
opt.step()                    # an automatic step boundary
vramscope.step()              # explicit steps take over...
opt.step()                    # ...so this one marks nothing
raw = open(vramscope.channel_path(), "rb").read()
out["step"] = int.from_bytes(raw[0x248:0x250], "little")
vramscope.stop()
out["after_stop"] = os.listdir(d)
print(json.dumps(out))
"""


class ExplicitStart(unittest.TestCase):
    def test_start_before_cuda_waits_for_it_and_explicit_steps_win(self):
        with S.TempDir() as d:
            r = S.run_python(EXPLICIT, env_for(d, autostart=False))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(
                json.loads(r.stdout),
                {"started": True, "before_init": [], "after_init": 1, "step": 2, "after_stop": []},
            )


class Silence(unittest.TestCase):
    def run_silent(self, code, extra=None, autostart=True):
        with S.TempDir() as d:
            log = os.path.join(d, "torch.log")
            r = S.run_python(code, env_for(d, dict(extra or {}, FAKE_TORCH_LOG=log), autostart))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stderr, "")
            with open(log) as f:
                seen = f.read()
            return os.listdir(d), seen, r.stdout

    def test_importing_torch_without_cuda_creates_nothing(self):
        files, log, _ = self.run_silent("import torch; torch.cuda.device_count(); torch.optim.Optimizer().step()")
        self.assertEqual(files, ["torch.log"])
        self.assertIn("imported", log)
        self.assertNotIn("cuda init", log)

    def test_disabled(self):
        files, log, _ = self.run_silent("import torch; torch._C._fake_malloc(0, 1)", {"VRAMSCOPE_DISABLE": "1"})
        self.assertEqual(files, ["torch.log"])
        self.assertIn("cuda init", log)

    def test_without_autostart_the_bootstrap_only_chains(self):
        files, _, out = self.run_silent("import sys, torch; torch._C._fake_malloc(0, 1); print('vramscope' in sys.modules)", autostart=False)
        self.assertEqual((files, out.strip()), (["torch.log"], "False"))


LAUNCHER = r"""
import os, subprocess, sys
import torch  # the agent imports torch but never initialises CUDA
# Each rank allocates, says its pid, and dies by SIGKILL so that its file stays to be read.
rank_code = (
    "import os, signal, sys, torch; torch._C._fake_malloc(0, 1 << 20); "
    "print(os.getpid(), flush=True); os.kill(os.getpid(), signal.SIGKILL)"
)
pids = []
for rank in range(2):
    env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2")
    out = subprocess.run([sys.executable, "-c", rank_code], env=env, stdout=subprocess.PIPE)
    pids.append(out.stdout.decode().strip())
print(" ".join(pids))
"""


class Launcher(unittest.TestCase):
    def test_each_rank_gets_its_file_and_the_agent_none(self):
        with S.TempDir() as d:
            r = S.run_python(LAUNCHER, env_for(d, {"TORCHELASTIC_RUN_ID": "job-9"}))
            self.assertEqual(r.returncode, 0, r.stderr)
            pids = r.stdout.split()
            files = S.channel_files(d)
            # The ranks were SIGKILLed, so their files stay; the agent (this process) has none.
            self.assertEqual(sorted(n.split("-")[0] for n in files), sorted(pids))
            ranks = []
            for name in files:
                h = S.Snapshot(S.read_bytes(os.path.join(d, name))).header
                ranks.append((h.rank, h.local_rank, h.world_size, h.job_id, h.state))
            self.assertEqual(sorted(ranks), [(0, 0, 2, "job-9", 1), (1, 1, 2, "job-9", 1)])


EXACT = r"""
import json, time, torch, vramscope
torch._C._fake_malloc(0, 4 << 30)
torch._C._fake_free(0, 3 << 30)
time.sleep(0.3)  # several samples, each resetting the real counter
real = torch._C._cuda_memoryStats(0)["allocated_bytes"]["all"]["peak"]
seen = [torch.cuda.max_memory_allocated(), torch.cuda.memory.max_memory_allocated(0), torch.cuda.memory_stats()["allocated_bytes.all.peak"], torch.cuda.max_memory_reserved()]
torch.cuda.reset_peak_memory_stats()
after_reset = torch.cuda.max_memory_allocated()
torch._C._fake_malloc(0, 1 << 30)
torch._C._fake_free(0, 1 << 30)
time.sleep(0.15)
later = torch.cuda.max_memory_allocated("cuda:0")
flags = open(vramscope.channel_path(), "rb").read()[0x14]
print(json.dumps([real, seen, after_reset, later, flags]))
"""


class ExactMode(unittest.TestCase):
    def test_program_sees_its_peaks_despite_the_writers_resets(self):
        with S.TempDir() as d:
            r = S.run_python(EXACT, env_for(d, {"VRAMSCOPE_PEAK": "reset"}))
            self.assertEqual(r.returncode, 0, r.stderr)
            real, seen, after_reset, later, flags = json.loads(r.stdout)
            self.assertEqual(real, GIB)  # the writer did reset the allocator's counter
            self.assertEqual(seen, [4 * GIB] * 4)
            self.assertEqual(after_reset, GIB)
            self.assertEqual(later, 2 * GIB)
            self.assertEqual(flags, L.FLAG_PEAK_RESET)
            self.assertEqual(os.listdir(d), [])  # clean exit


MODULES = r"""
import json, torch, vramscope
torch._C._fake_malloc(0, 1)
seen = []
def label():
    raw = open(vramscope.channel_path(), "rb").read()
    n = int.from_bytes(raw[0x258:0x260], "little")
    return raw[0x260:0x260 + n].decode()
class Block(torch.nn.Module):
    def forward(self, x):
        seen.append(label())
        return x
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Module()
        self.encoder.block = Block()
    def forward(self, x):
        seen.append(label())
        return self.encoder.block(x)
with vramscope.mark("train"):
    Net()(1)
    seen.append(label())
print(json.dumps([seen, open(vramscope.channel_path(), "rb").read()[0x14]]))
"""


class Modules(unittest.TestCase):
    def test_status_follows_the_running_module(self):
        with S.TempDir() as d:
            r = S.run_python(MODULES, env_for(d, {"VRAMSCOPE_MODULES": "1"}))
            self.assertEqual(r.returncode, 0, r.stderr)
            seen, flags = json.loads(r.stdout)
            self.assertEqual(seen, ["train/forward/Net", "train/forward/Net.encoder.block", "train"])
            self.assertEqual(flags, L.FLAG_MODULE_ATTRIBUTION)


CHAINED = r"""
import os
with open(os.environ["CHAIN_MARKER"], "w") as f:
    f.write("ran")
"""


class Chaining(unittest.TestCase):
    def test_the_shadowed_sitecustomize_still_runs(self):
        with S.TempDir() as d:
            other = os.path.join(d, "other")
            os.mkdir(other)
            with open(os.path.join(other, "sitecustomize.py"), "w") as f:
                f.write(CHAINED)
            marker = os.path.join(d, "marker")
            env = env_for(d, {"CHAIN_MARKER": marker})
            env["PYTHONPATH"] += os.pathsep + other
            code = "import sys, sitecustomize, json; print(json.dumps([sitecustomize.__file__, sys.path.count(%r)]))" % BOOTSTRAP
            r = S.run_python(code, env)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(marker) as f:
                self.assertEqual(f.read(), "ran")
            ours, count = json.loads(r.stdout)
            self.assertEqual(os.path.dirname(ours), BOOTSTRAP)
            self.assertEqual(count, 1)

    def test_a_failing_shadowed_sitecustomize_is_reported_like_site_does(self):
        with S.TempDir() as d:
            other = os.path.join(d, "other")
            os.mkdir(other)
            with open(os.path.join(other, "sitecustomize.py"), "w") as f:
                f.write("raise ValueError('broken distro hook')\n")
            env = env_for(d)
            env["PYTHONPATH"] += os.pathsep + other
            r = S.run_python("print('main ran')", env)
            self.assertEqual((r.returncode, r.stdout.strip()), (0, "main ran"))
            self.assertIn("Error in sitecustomize; set PYTHONVERBOSE for traceback:\nValueError: broken distro hook", r.stderr)

    def test_bootstrap_dir_holds_only_sitecustomize(self):
        names = [n for n in os.listdir(BOOTSTRAP) if n != "__pycache__"]
        self.assertEqual(names, ["sitecustomize.py"])


if __name__ == "__main__":
    unittest.main()
