"""The PyTorch and JAX adapters against the real packages from PyPI.

Only what needs a driver is simulated (`_simulated_cuda`, and JAX's per-device
`memory_stats`); torch.optim, torch.cuda.memory, torch.accelerator, torch.compile and JAX are
the real ones. `.ci/run` installs them in a cached venv and `tests/python_package.rs` runs
this module with that venv's python, where a missing package fails instead of skipping.
"""

import os
import sys
import time
import unittest

import _support as S

try:
    import torch
except ImportError:
    raise unittest.SkipTest("the real torch is not installed for %s" % sys.executable)

import vramscope
from _simulated_cuda import GIB, SimulatedCuda

EV_OOM, EV_STEP_END, EV_MARK, EV_SNAPSHOT_WRITTEN, EV_EMPTY_CACHE, EV_MEMORY_KINDS = 1, 5, 6, 10, 12, 13
KIND_PYTORCH, KIND_JAX = 1, 2


class RealTorchCase(unittest.TestCase):
    initialised = True

    def setUp(self):
        self.private = S.PrivateRuntime(prefixes=("VRAMSCOPE_", "PYTORCH_"))
        self.dir = self.private.dir
        # The sampler thread would race the figures a test sets up: 10 Hz, and tests that
        # need a reading take it through the API.
        os.environ["VRAMSCOPE_HZ"] = "10"
        self.cuda = SimulatedCuda(torch).install(initialised=self.initialised)

    def tearDown(self):
        # The writer stops before the simulated driver goes.
        self.private.close()
        self.cuda.uninstall()

    def snap(self):
        return S.Snapshot(S.read_bytes(vramscope.channel_path()))

    def events(self, kind):
        return [e for e in S.events(self.snap().raw)[0] if e.kind == kind]

    def model(self):
        layer = torch.nn.Linear(4, 2)
        return layer, torch.optim.SGD(layer.parameters(), lr=0.1)


def train_step(layer, opt):
    loss = layer(torch.ones(3, 4)).sum()
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


class Steps(RealTorchCase):
    def test_optimizer_steps_end_steps(self):
        self.assertTrue(vramscope.start(framework="torch"))
        self.assertEqual(self.snap().header.kind, KIND_PYTORCH)
        layer, opt = self.model()
        for _ in range(3):
            self.cuda.alloc(GIB)
            train_step(layer, opt)
            self.cuda.free(GIB // 2)  # after the step: not in its peak
        # The hook only reads; the writer's next call publishes first what it read.
        vramscope.note("after")
        events = [e for e in S.events(self.snap().raw)[0] if e.kind in (EV_STEP_END, EV_MARK)]
        self.assertEqual([(e.kind, e.step) for e in events], [(EV_STEP_END, 0), (EV_STEP_END, 1), (EV_STEP_END, 2), (EV_MARK, 3)])
        self.assertEqual([e.args[0] for e in events[:3]], [GIB, GIB * 3 // 2, 2 * GIB])
        self.assertTrue(events[0].t < events[1].t < events[2].t < events[3].t)
        self.assertEqual(self.snap().status_step, 3)

    def attached_step(self, layer, opt):
        """One training step of a writer started as `vramscope attach` starts it; the STEP_END
        steps and MARK notes it wrote."""
        from vramscope import _runtime

        _runtime.attached = True
        self.addCleanup(setattr, _runtime, "attached", False)
        self.assertTrue(vramscope.start(framework="torch"))
        train_step(layer, opt)
        vramscope.note("after")
        return [e.step for e in self.events(EV_STEP_END)], [e.text for e in self.events(EV_MARK)]

    def test_an_attached_writer_takes_the_jobs_own_step_from_adam(self):
        layer = torch.nn.Linear(4, 2)
        opt = torch.optim.Adam(layer.parameters(), lr=0.1)
        # Adam asks the CUDA stream whether it is capturing when CUDA is available: the
        # simulation has no stream, and these parameters are on the CPU. Set through the
        # simulation, whose uninstall restores torch's own (a cleanup run after tearDown
        # put the simulation's back, and the modules after this one saw CUDA available).
        self.cuda._set(torch.cuda, "is_available", lambda: False)
        for _ in range(300):  # the job's steps before the attach
            train_step(layer, opt)
        steps, notes = self.attached_step(layer, opt)
        self.assertEqual(steps, [300])
        self.assertEqual(self.snap().status_step, 301)
        self.assertIn("steps are the job's own: 300 taken before this one (the optimizer's state)", notes)

    def test_an_attached_writer_without_an_optimizer_count_says_steps_are_since_the_attach(self):
        layer, opt = self.model()  # SGD without momentum keeps no step
        for _ in range(5):
            train_step(layer, opt)
        steps, notes = self.attached_step(layer, opt)
        self.assertEqual(steps, [0])
        self.assertIn("steps count from the attach: the optimizer keeps no step count", notes)
        # Every sample from the step on says what its steps count from, so that no reader
        # shows one bare (a timer's sample before the first step has no step to speak of).
        from vramscope import _layout as L

        (end,) = self.events(EV_STEP_END)
        samples = [s for s in S.samples(self.snap().raw)[0] if s.t >= end.t]
        self.assertTrue(samples)
        self.assertTrue(all(s.flags & L.SAMPLE_STEP_SINCE_ATTACH for s in samples))

    def test_an_attached_writer_with_the_jobs_own_count_says_nothing_of_the_attach(self):
        layer = torch.nn.Linear(4, 2)
        opt = torch.optim.Adam(layer.parameters(), lr=0.1)
        self.cuda._set(torch.cuda, "is_available", lambda: False)  # as in the test above
        for _ in range(3):
            train_step(layer, opt)
        self.attached_step(layer, opt)
        from vramscope import _layout as L

        samples = S.samples(self.snap().raw)[0]
        self.assertTrue(samples)
        self.assertFalse(any(s.flags & L.SAMPLE_STEP_SINCE_ATTACH for s in samples))

    def test_a_phase_is_read_at_its_edges_and_published_later(self):
        # `mark` reads at entry and exit and publishes on the writer's next call: the phase's
        # peak is the spike inside it, not the higher one just before it, and its events
        # keep the times they were read at.
        # Exact peaks (the peak counter reset at each reading): without them a phase's peak
        # is seen only where it passes the run's.
        from vramscope import _layout as L

        os.environ["VRAMSCOPE_PEAK"] = "reset"
        self.assertTrue(vramscope.start(framework="torch"))
        self.cuda.alloc(4 * GIB)
        self.cuda.free(4 * GIB)  # a spike before the phase, read at its entry
        before = self.snap()
        # The writer's lock keeps the sampler thread from publishing while the phase runs.
        from vramscope import _runtime

        with _runtime._lock:
            with vramscope.mark("backward"):
                entered = time.time() * 1e6
                self.cuda.alloc(2 * GIB)
                self.cuda.free(2 * GIB)
                # Nothing published yet: the channel has not been told of the phase.
                self.assertEqual(S.events(self.snap().raw)[0], S.events(before.raw)[0])
            left = time.time() * 1e6
        time.sleep(0.01)
        vramscope.note("after")
        events = S.events(self.snap().raw)[0]
        (begin,) = [e for e in events if e.kind == L.EV_PHASE_BEGIN]
        (end,) = [e for e in events if e.kind == L.EV_PHASE_END]
        (after,) = [e for e in events if e.kind == EV_MARK]
        self.assertEqual(self.snap().phase_name(end.phase), "backward")
        self.assertEqual(end.args[0], 2 * GIB)
        self.assertLessEqual(begin.t, entered)
        self.assertLess(begin.t, end.t)
        self.assertLessEqual(end.t, left)
        self.assertLess(end.t, after.t)

    def test_the_sampler_publishes_deferred_steps(self):
        self.assertTrue(vramscope.start(framework="torch"))
        layer, opt = self.model()
        train_step(layer, opt)
        deadline = time.monotonic() + 30
        while not self.events(EV_STEP_END) and time.monotonic() < deadline:
            time.sleep(0.05)
        (end,) = self.events(EV_STEP_END)
        self.assertEqual(end.step, 0)

    def test_compiled_optimizer_step_is_not_broken(self):
        import torch._dynamo
        from torch._dynamo.utils import counters

        self.assertTrue(vramscope.start(framework="torch"))
        # Where CUDA is available Dynamo saves its RNG state, which has no simulation.
        self.cuda._set(torch.cuda, "is_available", lambda: False)
        layer, opt = self.model()
        torch._dynamo.reset()
        counters.clear()
        compiled = torch.compile(lambda: opt.step(), backend="eager")
        for _ in range(2):
            layer(torch.ones(3, 4)).sum().backward()
            before = [p.detach().clone() for p in layer.parameters()]
            compiled()
            self.assertTrue(any(not torch.equal(a, b) for a, b in zip(layer.parameters(), before)), "the step ran")
        # The optimizer's own graph breaks are torch's; the writer's hook adds none and
        # makes Dynamo give up on no frame (it could not enter the writer's lock).
        self.assertEqual(dict(counters["unimplemented"]), {})
        self.assertEqual(counters["frames"]["ok"], counters["frames"]["total"])
        torch._dynamo.reset()


    def test_a_fast_loop_publishes_its_steps_itself(self):
        from vramscope._runtime import MAX_DEFERRED

        self.assertTrue(vramscope.start(framework="torch"))
        layer, opt = self.model()
        for _ in range(MAX_DEFERRED + 3):
            train_step(layer, opt)
        # Whether or not the sampler ticked meanwhile, no more than the bound waits.
        self.assertGreaterEqual(len(self.events(EV_STEP_END)), MAX_DEFERRED)


class Wrappers(RealTorchCase):
    def test_dump_snapshot_and_empty_cache_take_torchs_own_arguments(self):
        self.assertTrue(vramscope.start(framework="torch"))
        path = os.path.join(self.dir, "snap.pickle")
        torch.cuda.memory._dump_snapshot(path, augment_with_fx_traces=False)
        torch.cuda.memory._dump_snapshot(filename=path)
        self.assertTrue(os.path.exists(path))
        self.assertEqual([e.text for e in self.events(EV_SNAPSHOT_WRITTEN)], [path, path])
        self.cuda.alloc(3 * GIB)
        self.cuda.free(2 * GIB)
        torch.cuda.empty_cache()
        torch.accelerator.empty_cache()
        self.assertEqual(self.cuda.empty_cache_calls, 2)
        self.assertEqual([e.args[:2] for e in self.events(EV_EMPTY_CACHE)], [(3 * GIB, GIB), (GIB, GIB)])


class ExactPeaks(RealTorchCase):
    def test_program_sees_its_peaks_through_every_public_api(self):
        self.assertTrue(vramscope.start(framework="torch", peak="reset"))
        self.cuda.alloc(4 * GIB)
        vramscope.step()
        self.cuda.free(3 * GIB)
        vramscope.step()  # the writer has reset the allocator's peak since the spike
        self.assertEqual(self.cuda.stats["allocated_bytes"]["all"]["peak"], GIB)
        self.assertEqual(torch.cuda.max_memory_allocated(0), 4 * GIB)
        self.assertEqual(torch.accelerator.max_memory_allocated(0), 4 * GIB)
        self.assertEqual(torch.accelerator.max_memory_allocated(), 4 * GIB)
        self.assertEqual(torch.accelerator.memory_stats()["allocated_bytes.all.peak"], 4 * GIB)
        self.assertEqual(torch.accelerator.max_memory_reserved(), 4 * GIB)
        self.assertEqual(torch.accelerator.memory_allocated(), GIB)
        torch.accelerator.reset_peak_memory_stats()  # the program's own reset
        self.assertEqual(torch.accelerator.max_memory_allocated(), GIB)
        self.assertEqual(torch.cuda.max_memory_allocated(), GIB)


    def test_automatic_steps_keep_the_programs_peaks(self):
        self.assertTrue(vramscope.start(framework="torch", peak="reset"))
        layer, opt = self.model()
        self.cuda.alloc(4 * GIB)
        train_step(layer, opt)  # reads, then resets the allocator's peak at once
        self.assertEqual(self.cuda.stats["allocated_bytes"]["all"]["peak"], 4 * GIB)
        self.cuda.free(3 * GIB)
        train_step(layer, opt)
        self.assertEqual(self.cuda.stats["allocated_bytes"]["all"]["peak"], GIB)
        self.assertEqual(torch.cuda.max_memory_allocated(), 4 * GIB)
        self.assertEqual(torch.accelerator.max_memory_allocated(), 4 * GIB)
        ends = self.events(EV_STEP_END)
        # Step 1 began at 4 GiB: its peak, although the allocator's counter was reset.
        self.assertEqual([e.args[0] for e in ends], [4 * GIB, 4 * GIB])


class Oom(RealTorchCase):
    def test_observer_under_a_memory_fraction(self):
        self.assertTrue(vramscope.start(framework="torch"))
        self.cuda.fraction = 0.5
        self.cuda.alloc(30 * GIB)
        self.assertEqual(len(self.cuda.observers), 1)
        self.cuda.fail(20 * GIB)
        (oom,) = self.events(EV_OOM)
        self.assertEqual(oom.args[:4], (20 * GIB, 49 * GIB, 80 * GIB, 30 * GIB))
        dev = self.snap().devices[0]
        self.assertEqual((dev.total, dev.limit), (80 * GIB, 40 * GIB))

    def test_observer_without_a_fraction(self):
        self.assertTrue(vramscope.start(framework="torch"))
        self.cuda.fail(GIB)
        (oom,) = self.events(EV_OOM)
        self.assertEqual(oom.args[:3], (GIB, 79 * GIB, 80 * GIB))
        self.assertEqual(self.snap().devices[0].limit, S.ABSENT)


    def test_explicit_oom_reads_the_allocator_now(self):
        self.assertTrue(vramscope.start(framework="torch"))
        self.cuda.alloc(7 * GIB)
        self.cuda.stats["num_alloc_retries"] = 4
        vramscope.oom(0, 2 * GIB)
        (oom,) = self.events(EV_OOM)
        self.assertEqual(oom.args, (2 * GIB, S.ABSENT, 80 * GIB, 7 * GIB, 7 * GIB, 4))
        # Torch's allocator never saw it: the figure stays torch's own count; the event is
        # the OOM, which the monitor counts (the larger of the two, never their sum).
        self.assertEqual(self.snap().devices[0].ooms, 0)
        self.cuda.fail(GIB)  # one torch does count, through its observer
        vramscope.step()
        self.assertEqual(self.snap().devices[0].ooms, 1)
        self.assertEqual(len(self.events(EV_OOM)), 2)


class MemoryKinds(RealTorchCase):
    """MEMORY_KINDS events: memory by kind at a step's end, written where it changed. The
    simulated driver has no CUDA tensors (a tensor on a GPU needs one), so the hook's own
    measure finds the CPU parameters and writes nothing for the GPU; what it writes for a
    CUDA device is driven here through the same session call with figures as the measure
    gives them."""

    def test_cpu_parameters_are_no_gpus_memory(self):
        self.assertTrue(vramscope.start(framework="torch"))
        layer, opt = self.model()
        for _ in range(3):
            train_step(layer, opt)
        vramscope.note("after")
        self.assertEqual(len(self.events(EV_STEP_END)), 3)
        self.assertEqual(self.events(EV_MEMORY_KINDS), [])

    def test_an_event_where_the_kinds_changed_and_only_there(self):
        from vramscope import _runtime, _torch_categories as C
        from vramscope._torch_hooks import _kinds_by_cuda_device

        self.assertTrue(vramscope.start(framework="torch"))
        vramscope.step()
        rt = _runtime.current()
        measured = {("cuda", 0): {C.PARAMETERS: 4096, C.BUFFERS: 0, C.GRADIENTS: 4096, C.OPTIMIZER: 0},
                    ("cpu", None): {C.PARAMETERS: 64, C.BUFFERS: 0, C.GRADIENTS: 0, C.OPTIMIZER: 0}}
        kinds = _kinds_by_cuda_device(measured)
        self.assertEqual(kinds, [(0, (4096, None, 4096, 0))], "the GPU's only, buffers unknown")
        state = rt.adapter.slot_of_device(rt.session, 0)
        with _runtime._lock:
            self.assertTrue(rt.session.memory_kinds(state, kinds[0][1]))
            self.assertFalse(rt.session.memory_kinds(state, kinds[0][1]), "unchanged: no event")
            # AdamW's state made at the first step: a change.
            self.assertTrue(rt.session.memory_kinds(state, (4096, None, 4096, 8192)))
        (first, second) = self.events(EV_MEMORY_KINDS)
        absent = 2**64 - 1
        self.assertEqual(first.args[:4], (4096, absent, 4096, 0))
        self.assertEqual(second.args[:4], (4096, absent, 4096, 8192))
        self.assertEqual((first.slot, first.step), (state.slot, 1))

    def test_unchanged_kinds_are_written_again_now_and_then_and_the_first_is_step_0(self):
        from vramscope import _runtime

        self.assertTrue(vramscope.start(framework="torch"))
        rt = _runtime.current()
        state = rt.adapter.slot_of_device(rt.session, 0)
        kinds = (4096, None, 0, 0)
        with _runtime._lock:
            written = []
            for _ in range(300):
                written.append(rt.session.memory_kinds(state, kinds))
                rt.session.end_step()
        # The channel's event ring is bounded: a monitor started late still finds one.
        self.assertEqual([i for i, w in enumerate(written) if w], [0, 128, 256])
        steps = [e.step for e in self.events(EV_MEMORY_KINDS)]
        self.assertEqual(steps[-3:], [0, 128, 256])


# A training step that dies of an OOM inside its phases, run as its own program so the
# exception really is uncaught: the phases unwind, then the interpreter's hook runs.
UNCAUGHT = r"""
import sys, torch, vramscope
sys.path.insert(0, sys.argv[1])
from _simulated_cuda import GIB, SimulatedCuda
cuda = SimulatedCuda(torch).install()
vramscope.start(framework="torch")
print(vramscope.channel_path(), flush=True)
cuda.alloc(9 * GIB)
vramscope.step()
if sys.argv[2] == "observed":
    with vramscope.mark("train"):
        with vramscope.mark("backward"):  # entering it takes the last reading
            cuda.fail(6 * GIB)  # torch's allocator runs its OOM observers, then raises
            raise torch.OutOfMemoryError(
                "CUDA out of memory. Tried to allocate 6.00 GiB. GPU 0 has a total capacity of "
                "80.00 GiB of which 70.00 GiB is free. Of the allocated memory 9.00 GiB is "
                "allocated by PyTorch"
            )
else:
    with vramscope.mark("backward"):
        # A failure outside the caching allocator (a library's workspace): no observer.
        raise RuntimeError("CUDA error: out of memory")
"""
EV_OOM_ERROR = 2


class UncaughtOom(unittest.TestCase):
    def die(self, how):
        with S.TempDir() as d:
            env = S.python_env({"VRAMSCOPE_DIR": d, "VRAMSCOPE_HZ": "10"})
            r = S.run_python(UNCAUGHT, env, timeout=120, args=(S.HERE, how))
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("out of memory", r.stderr)
            snap = S.Snapshot(S.read_bytes(r.stdout.strip()))
        events = S.events(snap.raw)[0]
        samples = S.samples(snap.raw)[0]
        (error,) = [e for e in events if e.kind == EV_OOM_ERROR]
        last = [s for s in samples if s.t <= error.t][-1]
        return snap, events, error, last

    def test_an_oom_caught_by_the_observer_is_told_again_with_its_phase_and_figures(self):
        snap, events, error, last = self.die("observed")
        (oom,) = [e for e in events if e.kind == EV_OOM]
        # The same failure, to be matched: slot, step, phase and figures of the observer's.
        self.assertEqual(snap.phase_name(error.phase), "train/backward")
        self.assertEqual((error.slot, error.step, error.phase), (oom.slot, oom.step, oom.phase))
        self.assertEqual((error.slot, error.step), (0, 1))
        self.assertEqual(error.args, oom.args)
        self.assertEqual(error.args, (6 * GIB, 70 * GIB, 80 * GIB, 9 * GIB, 9 * GIB, 0))
        self.assertEqual((last.allocated, last.reserved), error.args[3:5])
        self.assertTrue(error.text.startswith("train/backward: CUDA out of memory. Tried to allocate 6.00 GiB"))
        self.assertEqual(oom.text, "train/backward")
        # Torch counted it; the error does not count it twice.
        self.assertEqual(snap.devices[0].ooms, 1)

    def test_an_oom_no_observer_saw_keeps_its_phase_and_the_last_figures(self):
        snap, events, error, last = self.die("unobserved")
        self.assertEqual([e for e in events if e.kind == EV_OOM], [])
        self.assertEqual(snap.phase_name(error.phase), "backward")
        self.assertEqual((error.slot, error.step), (0, 1))
        self.assertEqual(error.text, "backward: CUDA error: out of memory")
        # Nothing asked is named; the rest is what the last reading held.
        self.assertEqual(error.args, (S.ABSENT, 70 * GIB, 80 * GIB, 9 * GIB, 9 * GIB, 0))
        self.assertEqual((last.allocated, last.reserved), (9 * GIB, 9 * GIB))
        # Torch's allocator never counted it: its error event is the OOM the monitor counts.
        self.assertEqual(snap.devices[0].ooms, 0)


class StartBeforeCuda(RealTorchCase):
    initialised = False

    def test_torch_is_armed_although_jax_is_imported(self):
        import jax  # noqa: F401

        self.assertTrue(vramscope.start())
        self.assertIsNone(vramscope.channel_path(), "nothing before CUDA is up")
        self.cuda.initialise()
        self.assertEqual(self.snap().header.kind, KIND_PYTORCH)
        self.assertTrue(self.snap().header.framework.startswith("torch 2."))


class RealJax(unittest.TestCase):
    def setUp(self):
        import jax
        import jaxlib

        self.jax = jax
        self.private = S.PrivateRuntime()
        # A CPU device has no memory statistics; an accelerator's come from the driver.
        self.device_type = type(jax.local_devices()[0])
        self.assertTrue(self.device_type.__module__.startswith(jaxlib.__name__))
        self.original = self.device_type.memory_stats
        self.stats = {}
        self.device_type.memory_stats = lambda device: dict(self.stats)

    def tearDown(self):
        self.private.close()
        self.device_type.memory_stats = self.original

    def test_unavailable_figure_is_absent_and_the_writer_stays_on(self):
        self.stats.update(bytes_in_use=GIB, peak_bytes_in_use=2 * GIB, bytes_limit=-1, pool_bytes=-1)
        self.assertTrue(vramscope.start(framework="jax"))
        for _ in range(12):  # more readings than the error budget allows errors
            vramscope.step()
        self.assertTrue(vramscope.enabled())
        snap = S.Snapshot(S.read_bytes(vramscope.channel_path()))
        self.assertEqual(snap.header.kind, KIND_JAX)
        dev = snap.devices[0]
        self.assertEqual((dev.allocated, dev.allocated_peak, dev.limit, dev.reserved), (GIB, 2 * GIB, S.ABSENT, S.ABSENT))

    def test_an_uncaught_resource_exhausted_keeps_its_phase_and_the_last_figures(self):
        from vramscope import _runtime

        self.stats.update(bytes_in_use=3 * GIB, peak_bytes_in_use=4 * GIB, bytes_limit=16 * GIB)
        self.assertTrue(vramscope.start(framework="jax"))
        vramscope.step()
        message = "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 8589934592 bytes."
        try:
            with vramscope.mark("eval"):
                raise self.jax.errors.JaxRuntimeError(message)
        except self.jax.errors.JaxRuntimeError as e:
            _runtime._on_uncaught(type(e), e, False)  # as a thread's exception hook would
        snap = S.Snapshot(S.read_bytes(vramscope.channel_path()))
        (error,) = [e for e in S.events(snap.raw)[0] if e.kind == 2]
        self.assertEqual(snap.phase_name(error.phase), "eval")
        self.assertEqual((error.slot, error.step, error.text), (0, 1, "eval: " + message))
        self.assertEqual(error.args[0], 8 * GIB)
        self.assertEqual(error.args[3], 3 * GIB)
        # JAX counts no OOMs: the error event is the OOM the monitor counts.
        self.assertEqual(snap.devices[0].ooms, S.ABSENT)


if __name__ == "__main__":
    unittest.main()
