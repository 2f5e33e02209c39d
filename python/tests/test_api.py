"""The explicit API (`start`, `report`, `mark`, `step`, `note`, `stop`) as the file shows it."""

import asyncio
import os
import unittest
import warnings

import _support as S
import vramscope
from vramscope import _layout as L
from vramscope import _runtime

GIB = 1 << 30
UUID_TEXT = "GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf"


class ApiCase(unittest.TestCase):
    def setUp(self):
        self.private = S.PrivateRuntime()
        self.dir = self.private.dir

    def tearDown(self):
        self.private.close()

    def snap(self):
        return S.Snapshot(S.read_bytes(vramscope.channel_path()))

    def events(self):
        return S.events(self.snap().raw)[0]

    def samples(self):
        return S.samples(self.snap().raw)[0]


class StartStop(ApiCase):
    def test_start_is_idempotent_and_stop_removes_the_file(self):
        self.assertTrue(vramscope.start(framework="python"))
        path = vramscope.channel_path()
        self.assertTrue(vramscope.start())
        self.assertEqual(vramscope.channel_path(), path)
        self.assertEqual(S.channel_files(self.dir), [os.path.basename(path)])
        h = self.snap().header
        self.assertEqual((h.kind, h.period_us, h.state), (5, 0, 1))
        self.assertTrue(h.framework.startswith("python 3."))
        self.assertTrue(S.lock_is_held(path))
        vramscope.stop()
        self.assertFalse(vramscope.enabled())
        self.assertEqual(S.channel_files(self.dir), [])
        vramscope.stop()  # a second stop is harmless
        self.assertTrue(vramscope.start(framework="python"))
        self.assertEqual(vramscope.channel_path(), path)

    def test_heartbeat_moves_without_calls(self):
        vramscope.start(framework="python")
        first = self.snap().header.heartbeat
        import time

        time.sleep(1.3)
        self.assertGreater(self.snap().header.heartbeat, first)

    def test_disabled_by_environment(self):
        os.environ["VRAMSCOPE_DISABLE"] = "1"
        self.assertFalse(vramscope.start())
        vramscope.report(allocated=1)
        with vramscope.mark("x"):
            vramscope.step()
        self.assertEqual(os.listdir(self.dir), [])
        self.assertIsNone(vramscope.channel_path())

    def test_calls_before_start_do_nothing(self):
        with vramscope.mark("x"):
            vramscope.step()
            vramscope.note("n")
        self.assertEqual(os.listdir(self.dir), [])


class Report(ApiCase):
    def test_identity_and_figures(self):
        vramscope.report(
            device=1,
            allocated=3 * GIB,
            reserved=4 * GIB,
            peak=5 * GIB,
            reserved_peak=6 * GIB,
            active=7,
            inactive_split=8,
            requested=9,
            retries=0,
            ooms=0,
            free=10 * GIB,
            limit=11 * GIB,
            total=80 * GIB,
            uuid=UUID_TEXT,
            pci_bus_id="00000000:18:00.0",
        )
        snap = self.snap()
        self.assertEqual(snap.devices_in_use, 1)
        d = snap.devices[0]
        self.assertEqual((d.ordinal, d.flags, d.uuid, d.pci, d.total), (1, 3, bytes(range(0xA0, 0xB0)), "00000000:18:00.0", 80 * GIB))
        self.assertEqual(
            (d.allocated, d.allocated_peak, d.reserved, d.reserved_peak, d.active, d.inactive_split, d.requested),
            (3 * GIB, 5 * GIB, 4 * GIB, 6 * GIB, 7, 8, 9),
        )
        self.assertEqual((d.retries, d.ooms, d.device_allocs, d.device_frees), (0, 0, S.ABSENT, S.ABSENT))
        self.assertEqual((d.device_free, d.limit, d.interval_peak, d.step_peak), (10 * GIB, 11 * GIB, 5 * GIB, S.ABSENT))
        (s,) = self.samples()
        self.assertEqual((s.slot, s.allocated, s.reserved, s.peak, s.active, s.step, s.phase), (0, 3 * GIB, 4 * GIB, 5 * GIB, 7, S.ABSENT, 0))
        self.assertEqual(s.flags, L.SAMPLE_PEAK_EXACT | L.SAMPLE_NEW_HIGH_WATER)
        self.assertEqual(s.t, d.t)
        (e,) = self.events()
        self.assertEqual((e.kind, e.slot, e.args[:2]), (L.EV_NEW_HIGH_WATER, 0, (5 * GIB, S.ABSENT)))

    def test_peaks_compared_not_reset(self):
        for alloc, peak in ((100, 150), (120, 150), (50, 200), (40, 60), (70, 80), (90, 80)):
            vramscope.report(allocated=alloc, peak=peak)
        got = [(s.peak, s.flags) for s in self.samples()]
        X, H, F = L.SAMPLE_PEAK_EXACT, L.SAMPLE_NEW_HIGH_WATER, L.SAMPLE_FOREIGN_RESET_SEEN
        self.assertEqual(
            got,
            [
                (150, X | H),  # first reading: the counter's value, a new high
                (120, 0),  # same counter: at least the higher of the two readings
                (200, X | H),  # counter rose: exactly its new value
                (60, F),  # counter fell: someone reset it
                (80, X),  # rose again, but below the high-water mark
                (90, 0),
            ],
        )
        kinds = [(e.kind, e.args[:2]) for e in self.events()]
        self.assertEqual(
            kinds,
            [
                (L.EV_NEW_HIGH_WATER, (150, S.ABSENT)),
                (L.EV_NEW_HIGH_WATER, (200, 150)),
                (L.EV_FOREIGN_PEAK_RESET, (200, 60)),
            ],
        )

    def test_a_steady_climb_marks_every_sample_but_writes_few_events(self):
        # 1 % higher at each report, all within a second: every sample is a new high-water
        # mark, but only rises of 5 % or more since the last event become events, so steps
        # and phases are not pushed out of the event ring.
        peak = 1000
        for _ in range(50):
            peak = peak * 101 // 100
            vramscope.report(allocated=peak, peak=peak)
        flagged = [s for s in self.samples() if s.flags & L.SAMPLE_NEW_HIGH_WATER]
        self.assertEqual(len(flagged), 50)
        highs = [e.args[0] for e in self.events() if e.kind == L.EV_NEW_HIGH_WATER]
        self.assertLess(len(highs), 15)
        self.assertEqual(highs[0], 1010)
        for before, after in zip(highs, highs[1:]):
            self.assertGreaterEqual(after, before * 1.05)

    def test_without_a_peak_counter_readings_are_lower_bounds(self):
        for alloc in (10, 30, 20):
            vramscope.report(allocated=alloc)
        self.assertEqual(
            [(s.peak, s.flags) for s in self.samples()],
            [(10, L.SAMPLE_NEW_HIGH_WATER), (30, L.SAMPLE_NEW_HIGH_WATER), (30, 0)],
        )

    def test_retries_rising_are_events(self):
        for retries in (0, 0, 2, 2, 3):
            vramscope.report(allocated=1, retries=retries)
        self.assertEqual(
            [e.args[0] for e in self.events() if e.kind == L.EV_ALLOC_RETRY], [2, 3]
        )

    def test_bad_figures_never_raise(self):
        vramscope.report(allocated=-5, reserved=2**70, peak=None)
        vramscope.report(allocated="not a number")
        vramscope.report(device="x")
        (s,) = self.samples()
        self.assertEqual((s.allocated, s.reserved, s.peak), (S.ABSENT, S.ABSENT, S.ABSENT))

    def test_devices_get_their_own_slots(self):
        vramscope.report(device=0, allocated=1)
        vramscope.report(device=3, allocated=2)
        vramscope.report(device=0, allocated=3)
        snap = self.snap()
        self.assertEqual([d.ordinal for d in snap.devices], [0, 3])
        self.assertEqual([(s.slot, s.allocated) for s in self.samples()], [(0, 1), (1, 2), (0, 3)])


class Phases(ApiCase):
    def test_nested_marks(self):
        vramscope.start(framework="python")
        with vramscope.mark("train"):
            self.assertEqual(self.snap().status_label, "train")
            vramscope.report(allocated=10, peak=10)
            with vramscope.mark("forward"):
                self.assertEqual(self.snap().status_label, "train/forward")
                vramscope.report(allocated=30, peak=30)
                vramscope.report(allocated=5, peak=30)
            vramscope.report(allocated=12, peak=30)
        self.assertEqual(self.snap().status_label, "")
        snap = self.snap()
        self.assertEqual(snap.strings, ["train", "train/forward"])
        self.assertEqual([snap.phase_name(s.phase) for s in self.samples()], ["train", "train/forward", "train/forward", "train"])
        phases = [(e.kind, e.slot, e.text, e.args[0], snap.phase_name(e.phase)) for e in self.events() if e.kind in (L.EV_PHASE_BEGIN, L.EV_PHASE_END)]
        self.assertEqual(
            phases,
            [
                (L.EV_PHASE_BEGIN, 0xFFFF, "train", S.ABSENT, "train"),
                (L.EV_PHASE_BEGIN, 0xFFFF, "train/forward", S.ABSENT, "train/forward"),
                (L.EV_PHASE_END, 0, "train/forward", 30, "train/forward"),
                (L.EV_PHASE_END, 0, "train", 30, "train"),
            ],
        )

    def test_phase_without_devices_ends_with_absent_peak(self):
        vramscope.start(framework="python")
        with vramscope.mark("load"):
            pass
        end = [e for e in self.events() if e.kind == L.EV_PHASE_END]
        self.assertEqual([(e.slot, e.args[0]) for e in end], [(0xFFFF, S.ABSENT)])

    def test_decorator_and_async_decorator(self):
        vramscope.start(framework="python")

        @vramscope.mark("eval")
        def evaluate(x):
            vramscope.report(allocated=x)
            return self.snap().status_label

        @vramscope.mark("serve")
        async def serve():
            return self.snap().status_label

        self.assertEqual(evaluate(7), "eval")
        self.assertEqual(evaluate.__name__, "evaluate")
        self.assertEqual(asyncio.run(serve()), "serve")
        texts = [(e.kind, e.text) for e in self.events() if e.kind in (L.EV_PHASE_BEGIN, L.EV_PHASE_END)]
        self.assertEqual(
            texts,
            [(3, "eval"), (4, "eval"), (3, "serve"), (4, "serve")],
        )

    def test_mark_survives_an_exception_and_passes_it_on(self):
        vramscope.start(framework="python")
        with self.assertRaises(KeyError):
            with vramscope.mark("boom"):
                raise KeyError("x")
        self.assertEqual(self.snap().status_label, "")

    def test_note(self):
        vramscope.start(framework="python")
        vramscope.note("checkpoint saved")
        (e,) = self.events()
        self.assertEqual((e.kind, e.slot, e.text), (L.EV_MARK, 0xFFFF, "checkpoint saved"))


class Steps(ApiCase):
    def test_steps(self):
        vramscope.start(framework="python")
        self.assertEqual(self.snap().status_step, S.ABSENT)
        vramscope.report(allocated=10, peak=40, reserved=50, reserved_peak=60)
        vramscope.step()
        self.assertEqual(self.snap().status_step, 1)
        vramscope.report(allocated=20, peak=40, reserved=50, reserved_peak=60)
        vramscope.report(allocated=15, peak=40, reserved=55, reserved_peak=60)
        vramscope.step()
        snap = self.snap()
        self.assertEqual(snap.status_step, 2)
        self.assertEqual(snap.devices[0].step_peak, 20)
        ends = [e for e in self.events() if e.kind == L.EV_STEP_END]
        self.assertEqual([(e.step, e.slot, e.args[0], e.args[1]) for e in ends], [(0, 0, 40, 60), (1, 0, 20, 55)])
        for e in ends:
            self.assertGreater(e.args[2], 0)
        self.assertEqual([s.step for s in self.samples()], [S.ABSENT, 1, 1])


class ExplicitOom(ApiCase):
    def test_oom_carries_the_last_reported_figures(self):
        vramscope.report(device=0, allocated=5 * GIB, reserved=6 * GIB, retries=2, total=80 * GIB, uuid=UUID_TEXT)
        vramscope.step()
        with vramscope.mark("train"):
            vramscope.oom(0, 3 * GIB, free=GIB)
        (oom,) = [e for e in self.events() if e.kind == L.EV_OOM]
        self.assertEqual(oom.args, (3 * GIB, GIB, 80 * GIB, 5 * GIB, 6 * GIB, 2))
        self.assertEqual((oom.slot, oom.step, oom.text), (0, 1, "train"))
        self.assertEqual(self.snap().phase_name(oom.phase), "train")
        dev = self.snap().devices[0]
        self.assertEqual((dev.device_free, dev.allocated, dev.reserved), (GIB, 5 * GIB, 6 * GIB))
        self.assertEqual(dev.ooms, S.ABSENT, "the event is the OOM: the monitor counts it, not the writer")

    def test_the_ooms_figure_stays_the_programs_own_count(self):
        # An OOM the program counts and also reports would read as two if the writer added
        # its reports to the program's count; the monitor takes the larger of the two.
        vramscope.report(device=0, allocated=5 * GIB)
        vramscope.oom(0, GIB)
        vramscope.report(device=0, allocated=4 * GIB)  # the program counts no OOMs itself
        self.assertEqual(self.snap().devices[0].ooms, S.ABSENT)
        vramscope.oom(0, GIB)
        vramscope.report(device=0, allocated=4 * GIB, ooms=2)  # ...or both of them
        self.assertEqual(self.snap().devices[0].ooms, 2)
        self.assertEqual(len([e for e in self.events() if e.kind == L.EV_OOM]), 2)

    def test_an_oom_reported_then_raised_is_one_failure_with_its_phase(self):
        vramscope.report(device=0, allocated=5 * GIB, reserved=6 * GIB, total=80 * GIB)
        vramscope.step()
        try:
            with vramscope.mark("train"):
                with vramscope.mark("backward"):
                    vramscope.oom(0, 3 * GIB, free=GIB)
                    raise MemoryError("out of memory: Tried to allocate 3.00 GiB on GPU 0")
        except MemoryError as e:
            _runtime._on_uncaught(type(e), e, False)  # as a thread's exception hook would
        (oom,) = [e for e in self.events() if e.kind == L.EV_OOM]
        (error,) = [e for e in self.events() if e.kind == L.EV_OOM_ERROR]
        self.assertEqual(self.snap().phase_name(error.phase), "train/backward")
        self.assertEqual((error.slot, error.step, error.phase, error.args), (oom.slot, oom.step, oom.phase, oom.args))
        self.assertEqual(error.args, (3 * GIB, GIB, 80 * GIB, 5 * GIB, 6 * GIB, S.ABSENT))
        self.assertEqual(error.text, "train/backward: out of memory: Tried to allocate 3.00 GiB on GPU 0")
        self.assertEqual(self.snap().devices[0].ooms, S.ABSENT, "one failure: one OOM event, the error matched to it")

    def test_requested_bytes_in_every_frameworks_message(self):
        from vramscope._excepthooks import requested_bytes

        self.assertEqual(requested_bytes("CUDA out of memory. Tried to allocate 6.00 GiB. GPU 0 has"), 6 * GIB)
        self.assertEqual(requested_bytes("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4096 bytes."), 4096)
        self.assertEqual(requested_bytes("Out of memory allocating 8,589,934,592 bytes (allocated so far: 0 bytes)."), 8 * GIB)
        self.assertIsNone(requested_bytes("CUDA error: out of memory"))

    def test_an_uncaught_oom_outside_every_phase_names_the_device_of_its_message(self):
        vramscope.report(device=0, allocated=GIB)
        vramscope.report(device=1, allocated=5 * GIB, reserved=6 * GIB, free=2 * GIB, total=80 * GIB)
        message = "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17179869184 bytes. (GPU 1)"
        _runtime._on_uncaught(RuntimeError, RuntimeError(message), False)
        (error,) = [e for e in self.events() if e.kind == L.EV_OOM_ERROR]
        self.assertEqual((error.slot, error.phase, error.text), (1, 0, message))
        self.assertEqual(error.args, (16 * GIB, 2 * GIB, 80 * GIB, 5 * GIB, 6 * GIB, S.ABSENT))
        self.assertEqual([d.ooms for d in self.snap().devices], [S.ABSENT, S.ABSENT], "the error event is the OOM")

    def test_oom_on_an_unreported_device_and_bad_figures(self):
        vramscope.oom(device=3, requested=-5)
        vramscope.oom(device="not a device", requested=GIB)  # one internal error, no raise
        (oom,) = [e for e in self.events() if e.kind == L.EV_OOM]
        A = S.ABSENT
        self.assertEqual(oom.args, (A, A, A, A, A, A))
        self.assertEqual([d.ordinal for d in self.snap().devices], [3])
        self.assertEqual(self.snap().devices[oom.slot].ordinal, 3)


class Failures(ApiCase):
    def test_unusable_directory_warns_once_and_never_raises(self):
        os.environ["VRAMSCOPE_DIR"] = "/proc/vramscope-cannot-exist"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # Named: in a run with the real torch imported, start() would wait for its CUDA.
            self.assertFalse(vramscope.start(framework="python"))
            self.assertFalse(vramscope.start())
            vramscope.report(allocated=1)
            with vramscope.mark("x"):
                vramscope.step()
        self.assertEqual(len(caught), 1, [str(w.message) for w in caught])
        self.assertIs(caught[0].category, vramscope.VramscopeWarning)
        self.assertIn("/proc/vramscope-cannot-exist", str(caught[0].message))

    def test_warnings_as_errors_still_do_not_raise(self):
        os.environ["VRAMSCOPE_DIR"] = "/proc/vramscope-cannot-exist"
        import io
        import sys

        saved, sys.stderr = sys.stderr, io.StringIO()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                self.assertFalse(vramscope.start(framework="python"))
            written = sys.stderr.getvalue()
        finally:
            sys.stderr = saved
        self.assertEqual(len(written.splitlines()), 1)
        self.assertTrue(written.startswith("vramscope: not publishing"))

    def check_refused(self, reason):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.assertFalse(vramscope.start(framework="python"))
        self.assertEqual(len(caught), 1)
        self.assertIn(reason, str(caught[0].message))

    def test_directory_open_to_others_is_refused(self):
        target = os.path.join(self.dir, "shared")
        os.mkdir(target)
        os.chmod(target, 0o755)
        os.environ["VRAMSCOPE_DIR"] = target
        self.check_refused("open to group or others")
        self.assertEqual(os.listdir(target), [])

    def test_symlinked_directory_is_refused(self):
        real = os.path.join(self.dir, "real")
        os.mkdir(real, 0o700)
        link = os.path.join(self.dir, "link")
        os.symlink(real, link)
        os.environ["VRAMSCOPE_DIR"] = link
        self.check_refused("is a symbolic link")
        self.assertEqual(os.listdir(real), [])

    @unittest.skipUnless(os.geteuid() == 0, "needs root to give the directory away")
    def test_directory_of_another_user_is_refused(self):
        target = os.path.join(self.dir, "theirs")
        os.mkdir(target, 0o700)
        os.chown(target, 65534, 65534)
        os.environ["VRAMSCOPE_DIR"] = target
        self.check_refused("belongs to uid 65534")

    def test_repeated_internal_errors_switch_the_writer_off(self):
        vramscope.start(framework="python")
        path = vramscope.channel_path()
        rt = _runtime.current()

        def broken(*args, **kwargs):
            raise RuntimeError("simulated")

        rt.session.publish = broken
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(12):
                vramscope.report(allocated=1)
        self.assertFalse(vramscope.enabled())
        self.assertEqual(len(caught), 1)
        self.assertIn("switched off after 10 internal errors", str(caught[0].message))
        snap = S.Snapshot(S.read_bytes(path))
        self.assertEqual(snap.header.state, L.STATE_EXITED_ERROR)
        (e,) = S.events(snap.raw)[0]
        self.assertEqual((e.kind, e.args[0]), (L.EV_EXIT, 1))
        self.assertIn("simulated", e.text)
        self.assertFalse(vramscope.start(framework="python"))


if __name__ == "__main__":
    unittest.main()
