"""What the writer adds to each optimizer step of the real torch: µs per step with and
without it, back to back and paced as a GPU-bound loop is; and what one `vramscope.mark`
phase costs the training thread.

    $VRAMSCOPE_REAL_PYTHON python/bench/bench_step_hook.py

Needs the real torch (python/ci/requirements-real.txt; .ci/run installs it). There is no GPU
here: the CUDA allocator's statistics come from the tests' simulated driver entry points
(python/tests/_simulated_cuda.py), filled out to the size of the real nested dict (about 120
leaves, rebuilt per call as torch._C._cuda_memoryStats does), so the figures include reading
a dict of the real shape but not the allocator mutex or a real device's timing.
"""

import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

import torch  # noqa: E402

import vramscope  # noqa: E402
from _simulated_cuda import GIB, SimulatedCuda  # noqa: E402
from vramscope._runtime import MAX_DEFERRED  # noqa: E402

POOLS = ("all", "large_pool", "small_pool")
POOLED = ("active", "active_bytes", "allocated_bytes", "allocation", "inactive_split", "inactive_split_bytes",
          "requested_bytes", "reserved_bytes", "segment")
COUNTS = ("max_split_size", "num_alloc_retries", "num_device_alloc", "num_device_free", "num_ooms",
          "num_sync_all_streams")


class FullSizeCuda(SimulatedCuda):
    """The simulated allocator answering with every statistic the real one has."""

    def _nested(self, device=0):
        a = self.stats["allocated_bytes"]["all"]
        stats = {}
        for name in POOLED:
            stats[name] = {pool: {"current": a["current"], "peak": a["peak"], "allocated": 1, "freed": 1} for pool in POOLS}
        for name in COUNTS:
            stats[name] = 0
        for name in ("oversize_allocations", "oversize_segments"):
            stats[name] = {"current": 0, "peak": 0, "allocated": 0, "freed": 0}
        return stats


def per_step_us(opt, n, pause=0.0):
    """Mean time in `opt.step()`; with `pause`, the thread then sleeps as a training thread
    waits on its GPU (the GIL released), which lets the sampler thread run between steps."""
    step = opt.step
    clock = time.perf_counter
    spent = 0.0
    for _ in range(n):
        start = clock()
        step()
        spent += clock() - start
        if pause:
            time.sleep(pause)
    return spent / n * 1e6


def best(fn, repeats=5):
    return min(fn() for _ in range(repeats))


def best_in_turn(fns, repeats=9):
    """Each of `fns` timed once a round, in turn, for `repeats` rounds, and each one's best:
    a moment the machine was busy falls on all of them alike, so the difference of two bests
    (a mark less its readings) is not one batch's noise."""
    results = [[] for _ in fns]
    for _ in range(repeats):
        for out, fn in zip(results, fns):
            out.append(fn())
    return [min(out) for out in results]


def main():
    directory = tempfile.mkdtemp(prefix="vramscope-bench-")
    os.environ["VRAMSCOPE_DIR"] = directory
    # The default rate: the sampler publishes deferred steps every 50 ms.
    os.environ["VRAMSCOPE_HZ"] = "20"
    cuda = FullSizeCuda(torch).install()
    cuda.alloc(GIB)
    try:
        layer = torch.nn.Linear(16, 16)
        opt = torch.optim.SGD(layer.parameters(), lr=1e-3)
        layer(torch.ones(2, 16)).sum().backward()
        n = 3000
        paced = 300
        pause = 0.005
        per_step_us(opt, 300)  # warm up
        bare = best(lambda: per_step_us(opt, n))
        bare_paced = best(lambda: per_step_us(opt, paced, pause), 3)
        vramscope.start(framework="torch")
        with_writer = best(lambda: per_step_us(opt, n))
        with_writer_paced = best(lambda: per_step_us(opt, paced, pause), 3)
        hook_now, hook_sync = best(lambda: _hook_alone(opt, n))
        (mark_now, mark_sync), reading = best_in_turn([lambda: _mark_alone(n), lambda: _reading_alone(n)])
        explicit = best(lambda: _explicit_steps(n))  # turns automatic steps off: last
        vramscope.stop()
        print("torch %s, SGD on a 16x16 Linear (CPU), time in optimizer.step():" % torch.__version__)
        print("  back to back, %d steps, best of 5 (the hook publishes every %d steps itself):" % (n, MAX_DEFERRED))
        print("    %-52s %7.1f us" % ("without the writer", bare))
        print("    %-52s %7.1f us" % ("with the writer (automatic steps)", with_writer))
        print("    %-52s %7.1f us" % ("added per step", with_writer - bare))
        print("  %.0f ms pause after each step, as on a GPU, %d steps, best of 3:" % (pause * 1e3, paced))
        print("    %-52s %7.1f us" % ("without the writer", bare_paced))
        print("    %-52s %7.1f us" % ("with the writer (the sampler publishes)", with_writer_paced))
        print("    %-52s %7.1f us" % ("added per step on the training thread", with_writer_paced - bare_paced))
        print("  the step hook alone, %d calls, best of 5:" % n)
        print("    %-52s %7.1f us" % ("reading only, publishing deferred (now)", hook_now))
        print("    %-52s %7.1f us" % ("reading and publishing at once (before)", hook_sync))
        print("  one `with vramscope.mark(...)` (entered and left), %d uses, best of 9:" % n)
        print("    %-52s %7.1f us" % ("reading only, publishing deferred (now)", mark_now))
        print("    %-52s %7.1f us" % ("reading and publishing at once (before)", mark_sync))
        print("    %-52s %7.1f us" % ("of which its two readings of the statistics", 2 * reading))
        own = mark_now - 2 * reading
        if own >= 0:
            print("    %-52s %7.1f us" % ("and vramscope's own work", own))
        else:  # the readings' best came from a quieter moment than the mark's
            print("    %-52s %10s" % ("and vramscope's own work", "n/a (noise: rerun on an idle machine)"))
        print("  %-54s %7.1f us" % ("one vramscope.step() call (reads and publishes)", explicit))
    finally:
        vramscope.stop()
        cuda.uninstall()
        shutil.rmtree(directory, ignore_errors=True)


def _hook_alone(opt, n):
    """The registered step hook called directly, in batches below the deferral bound, the
    deferred work done outside the timing; against the synchronous reading it replaced."""
    from torch.optim.optimizer import _global_optimizer_post_hooks

    from vramscope import _runtime

    hook = list(_global_optimizer_post_hooks.values())[-1]
    clock = time.perf_counter
    spent = 0.0
    batch = MAX_DEFERRED - 1
    for _ in range(n // batch):
        start = clock()
        for _ in range(batch):
            hook(opt, (), {})
        spent += clock() - start
        _runtime.run(lambda rt: None)  # publishes what the batch deferred
    now = spent / (n // batch * batch) * 1e6
    start = clock()
    for _ in range(n):
        _runtime.run(_runtime.end_step, False)
    return now, (clock() - start) / n * 1e6


def _mark_alone(n):
    """A phase entered and left with nothing in it, in batches below the deferral bound (two
    deferred readings a use), the deferred publishing done outside the timing; against the
    same with the publishing done at each use, as `mark` did before it deferred."""
    from vramscope import _runtime

    phase = vramscope.mark("bench")
    clock = time.perf_counter
    spent = 0.0
    batch = (MAX_DEFERRED - 1) // 2
    for _ in range(n // batch):
        start = clock()
        for _ in range(batch):
            with phase:
                pass
        spent += clock() - start
        _runtime.run(lambda rt: None)  # publishes what the batch deferred
    now = spent / (n // batch * batch) * 1e6
    start = clock()
    for _ in range(n):
        with phase:
            pass
        _runtime.run(lambda rt: None)
    return now, (clock() - start) / n * 1e6


def _reading_alone(n):
    """One reading of the allocator's statistics as the writer makes it (the nested dict,
    here the simulated one of the real size): what a phase's edge cannot do without."""
    stats = torch._C._cuda_memoryStats
    clock = time.perf_counter
    start = clock()
    for _ in range(n):
        stats(0)
    return (clock() - start) / n * 1e6


def _explicit_steps(n):
    step = vramscope.step
    start = time.perf_counter()
    for _ in range(n):
        step()
    return (time.perf_counter() - start) / n * 1e6


if __name__ == "__main__":
    main()
