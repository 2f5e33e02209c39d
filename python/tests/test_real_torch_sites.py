"""Allocation sites (`start(sites=True)`, VRAMSCOPE_SITES=1) against the real torch package.

Simulated (`_simulated_cuda`), because they need a driver: the torch._C entry points
`_cuda_record_memory_history`, `_cuda_isHistoryEnabled` and `_cuda_memorySnapshot` (a
history ring kept as c10's RingBuffer keeps it, with each allocation's real Python stack),
besides the statistics ones the other adapter tests simulate. torch.cuda.memory's
`_record_memory_history`, `_snapshot` and `_memory_viz` are the real ones. Run by
tests/python_package.rs with the venv's python, where a missing torch fails.
"""

import os
import pickle
import pickletools
import struct
import sys
import time
import unittest
import warnings

import _support as S

try:
    import torch
except ImportError:
    raise unittest.SkipTest("the real torch is not installed for %s" % sys.executable)

import vramscope
from vramscope import _no_imports, _runtime, _sites
from vramscope._guard import VramscopeWarning
from _simulated_cuda import GIB, SimulatedCuda

EV_OOM, EV_SNAPSHOT_WRITTEN = 1, 10
FLAG_SITES = 1 << 2
SNAPSHOT_REQUESTS = 0x220  # control block, docs/channel-v1.md 2.3
REASON = {"oom": 0, "peak": 1, "request": 2}
OURS = {"enabled": "all", "context": "alloc", "stacks": "python", "clear_history": False}

# The opcodes PyTorch's memory_viz (torch/utils/viz/MemoryViz.js, its `unpickle`) knows; it
# refuses a protocol other than 2, 3 or 4.
MEMORY_VIZ_OPCODES = set(
    "PROTO FRAME EMPTY_DICT EMPTY_LIST EMPTY_TUPLE MEMOIZE MARK SHORT_BINUNICODE BINUNICODE BININT "
    "BININT1 BININT2 LONG1 APPEND APPENDS SETITEM SETITEMS NONE NEWTRUE NEWFALSE BINGET LONG_BINGET "
    "BINPUT LONG_BINPUT TUPLE TUPLE1 TUPLE2 TUPLE3 BINFLOAT LIST DICT STOP".split()
)


def temporary(cuda, n):
    """An oversized temporary, allocated and freed on this line's behalf."""
    address = cuda.alloc(n)  # the site the snapshots must name
    cuda.free(address=address)


TEMPORARY_LINE = temporary.__code__.co_firstlineno + 2


class SitesCase(unittest.TestCase):
    env = {}

    def setUp(self):
        self.private = S.PrivateRuntime(prefixes=("VRAMSCOPE_", "PYTORCH_"))
        self.dir = self.private.dir
        os.environ["VRAMSCOPE_HZ"] = "10"
        os.environ.update(self.env)
        self.cuda = SimulatedCuda(torch).install()
        self.saved_default = _sites.SITES_ENTRIES_DEFAULT

    def tearDown(self):
        self.private.close()
        self.cuda.uninstall()
        _sites.SITES_ENTRIES_DEFAULT = self.saved_default

    def start(self, **kwargs):
        self.assertTrue(vramscope.start(framework="torch", **kwargs))
        # The tests drive the sampler's passes themselves (`tick`), one at a time.
        _runtime.current().sampler.stop()

    @staticmethod
    def tick():
        _runtime._tick()

    def raw(self):
        return S.read_bytes(vramscope.channel_path())

    def snapshot_events(self):
        return [e for e in S.events(self.raw())[0] if e.kind == EV_SNAPSHOT_WRITTEN]

    def pickles(self):
        return sorted(n for n in os.listdir(self.dir) if n.endswith(".pickle"))

    def load(self, name):
        with open(os.path.join(self.dir, name), "rb") as f:
            return pickle.load(f)

    def request(self, times=1):
        """What a monitor does to ask for a snapshot: read the count, write it plus one."""
        fd = os.open(vramscope.channel_path(), os.O_RDWR)
        try:
            for _ in range(times):
                count = struct.unpack("<Q", os.pread(fd, 8, SNAPSHOT_REQUESTS))[0]
                os.pwrite(fd, struct.pack("<Q", count + 1), SNAPSHOT_REQUESTS)
        finally:
            os.close(fd)


class History(SitesCase):
    def test_sites_turn_the_history_on_once_with_python_stacks_and_off_at_stop(self):
        self.start(sites=True)
        self.assertEqual(self.cuda.history_calls, [dict(OURS, max_entries=100000)])
        self.assertEqual(S.Snapshot(self.raw()).header.flags & FLAG_SITES, FLAG_SITES)
        vramscope.stop()
        self.assertEqual(len(self.cuda.history_calls), 2)
        self.assertIsNone(self.cuda.history_calls[1]["enabled"])
        self.assertIsNone(self.cuda.history)

    def test_without_sites_nothing_is_recorded_or_dumped(self):
        self.start()
        self.assertEqual(self.cuda.history_calls, [])
        self.assertEqual(S.Snapshot(self.raw()).header.flags & FLAG_SITES, 0)
        self.assertIsNone(vramscope.snapshot())
        self.request()
        self.tick()
        self.assertEqual(self.pickles(), [])

    def test_history_the_program_turned_on_is_used_and_never_touched(self):
        torch.cuda.memory._record_memory_history(max_entries=5000)
        self.start(sites=True)
        self.assertEqual(len(self.cuda.history_calls), 1, "vramscope called it again")
        self.assertEqual(S.Snapshot(self.raw()).header.flags & FLAG_SITES, FLAG_SITES)
        path = vramscope.snapshot()
        info = self.load(os.path.basename(path))["vramscope"]
        self.assertEqual((info["history_owner"], info["max_entries"]), ("user", None))
        (event,) = self.snapshot_events()
        self.assertEqual(event.args[4], S.ABSENT, "a ring size nobody told is absent")
        vramscope.stop()
        self.assertEqual(len(self.cuda.history_calls), 1)
        self.assertEqual(self.cuda.history["max_entries"], 5000)

    def test_a_later_call_of_the_program_makes_the_history_its_own(self):
        self.start(sites=True)
        torch.cuda.memory._record_memory_history(enabled="all", max_entries=7777)
        info = self.load(os.path.basename(vramscope.snapshot()))["vramscope"]
        self.assertEqual((info["history_owner"], info["max_entries"]), ("user", 7777))
        vramscope.stop()
        self.assertEqual([c["max_entries"] for c in self.cuda.history_calls], [100000, 7777])
        self.assertIsNotNone(self.cuda.history, "vramscope turned the program's history off")

    def test_a_history_that_cannot_be_turned_on_leaves_sites_off_with_one_warning(self):
        def refuse(*args):
            raise RuntimeError("cudaMallocAsync does not yet support recordHistory")

        torch._C._cuda_record_memory_history = refuse
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.start(sites=True)
        self.assertEqual([str(w.message).count("allocation sites are off") for w in caught], [1])
        self.assertEqual(S.Snapshot(self.raw()).header.flags & FLAG_SITES, 0)
        self.assertIsNone(vramscope.snapshot())


    def test_sites_without_pytorch_are_one_warning(self):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.assertTrue(vramscope.start(framework="python", sites=True))
        self.assertEqual([str(w.message) for w in caught], ["allocation sites need PyTorch; python publishes without them"])
        self.assertEqual(S.Snapshot(self.raw()).header.flags & FLAG_SITES, 0)
        self.assertIsNone(vramscope.snapshot())


class Ring(SitesCase):
    def steps(self, pairs, count):
        """`count` steps of `pairs` allocations freed again (3 trace entries each), each
        followed by a sampler pass."""
        for _ in range(count):
            for _ in range(pairs):
                self.cuda.free(address=self.cuda.alloc(1 << 20))
            vramscope.step()
            self.tick()

    def test_the_ring_grows_to_two_and_a_half_steps_and_keeps_its_entries(self):
        _sites.SITES_ENTRIES_DEFAULT = 100
        self.start(sites=True)
        self.steps(4, 1)
        self.assertEqual(len(self.cuda.history_calls), 1, "one step is no rate yet")
        self.steps(4, 1)
        # 12 entries a step, two and a half steps: rounded up to 10,000. The ring (100) has
        # not wrapped (24 entries), so it keeps them, in order.
        self.assertEqual(self.cuda.history_calls[-1], dict(OURS, max_entries=10000))
        actions = [e["action"] for e in self.cuda.trace()]
        self.assertEqual(actions, ["alloc", "free_requested", "free_completed"] * 8)
        info = self.load(os.path.basename(vramscope.snapshot()))["vramscope"]
        self.assertEqual(info["max_entries"], 10000)
        self.assertEqual(self.snapshot_events()[-1].args[4], 10000)

    def test_a_ring_that_wrapped_is_cleared_as_it_grows(self):
        _sites.SITES_ENTRIES_DEFAULT = 100
        self.start(sites=True)
        for _ in range(40):  # 120 entries: the ring of 100 wrapped
            self.cuda.free(address=self.cuda.alloc(1 << 20))
        self.steps(4, 2)
        # Grown without a clear, c10's ring would hand its entries back out of order.
        self.assertEqual(self.cuda.history_calls[-1], dict(OURS, max_entries=10000, clear_history=True))
        self.assertEqual(len(self.cuda.trace()), 0)
        self.steps(4, 1)
        self.assertEqual(len(self.cuda.trace()), 12)

    def test_a_ring_size_set_by_the_user_is_kept(self):
        os.environ["VRAMSCOPE_SITES_ENTRIES"] = "5_000"
        self.start(sites=True)
        self.steps(50, 4)
        self.assertEqual(self.cuda.history_calls, [dict(OURS, max_entries=5000)])


class Dumps(SitesCase):
    def test_an_oom_is_dumped_before_the_exception_unwinds(self):
        ranks = {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "SLURM_JOB_ID": "job-77"}
        saved = {k: os.environ.get(k) for k in list(ranks) + ["TORCHELASTIC_RUN_ID"]}
        os.environ.update(ranks)
        os.environ.pop("TORCHELASTIC_RUN_ID", None)
        self.addCleanup(lambda: [os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v) for k, v in saved.items()])
        self.start(sites=True)
        self.cuda.fraction = 0.5  # the observer is told the allowed 40 GiB, not the total
        weights = self.cuda.alloc(30 * GIB)
        vramscope.step()
        seen = []
        # An observer attached after vramscope's runs after its dump, still inside malloc.
        torch._C._cuda_attach_out_of_memory_observer(lambda *a: seen.append(self.pickles()))
        with vramscope.mark("backward"):
            self.cuda.fail(20 * GIB)
        self.assertEqual(len(seen[0]), 1)
        name = seen[0][0]
        self.assertTrue(name.endswith(".snap-1-oom.pickle"), name)
        self.assertTrue(name.startswith(os.path.basename(vramscope.channel_path())))
        self.assertEqual(os.stat(os.path.join(self.dir, name)).st_mode & 0o777, 0o600)
        data = self.load(name)
        info = data["vramscope"]
        self.assertEqual(info["reason"], "oom")
        self.assertEqual(info["oom"], {"requested": 20 * GIB, "device_free": 49 * GIB, "device_total": 80 * GIB})
        self.assertEqual((info["allocated"], info["peak_allocated"]), (30 * GIB, 30 * GIB))
        self.assertEqual((info["step"], info["phase"], info["device"]), (1, "backward", 0))
        self.assertEqual(info["pid"], os.getpid())
        # Who wrote it: the channel's identity (RANK etc. set below, before the start).
        self.assertEqual(info["channel"], os.path.basename(vramscope.channel_path()))
        self.assertEqual(
            (info["rank"], info["local_rank"], info["world_size"], info["job_id"]),
            (3, 1, 8, "job-77"),
        )
        # The allocator's own trace ends with the failed request.
        trace = data["device_traces"][0]
        self.assertEqual((trace[-1]["action"], trace[-1]["size"]), ("oom", 20 * GIB))
        self.assertEqual([s["address"] for s in data["segments"]], [weights])
        (oom,) = [e for e in S.events(self.raw())[0] if e.kind == EV_OOM]
        (event,) = self.snapshot_events()
        size = os.path.getsize(os.path.join(self.dir, name))
        self.assertEqual(event.args, (size, 30 * GIB, REASON["oom"], 30 * GIB, 100000, 0))
        self.assertEqual((event.text, event.slot, event.step, event.phase), (name, 0, 1, oom.phase))

    def test_a_settled_new_peak_is_dumped_with_the_site_that_made_it(self):
        self.start(sites=True)
        wall_before = time.time() * 1e6
        self.cuda.alloc(2 * GIB)
        vramscope.step()  # step 0: the weights
        self.tick()
        temporary(self.cuda, 3 * GIB)
        vramscope.step()  # step 1: the peak, 5 GiB, gone again by the step's end
        self.tick()
        self.assertEqual(self.pickles(), [], "the mark rose in the last step: not settled")
        vramscope.step()  # step 2: no higher
        self.tick()
        (name,) = self.pickles()
        self.assertTrue(name.endswith(".snap-1-peak.pickle"), name)
        data = self.load(name)
        info = data["vramscope"]
        self.assertEqual((info["reason"], info["peak_allocated"], info["allocated"]), ("peak", 5 * GIB, 2 * GIB))
        # The requested bytes' peak too: the history records requests, so exactness compares
        # with it (the simulated allocator asks for whole blocks: the two agree here).
        self.assertEqual(info["peak_requested"], 5 * GIB)
        self.assertEqual(info["step"], 3)
        self.assertTrue(wall_before <= info["peak_time_us"] <= time.time() * 1e6)
        # The temporary is in the trace, allocated on its line.
        (alloc,) = [e for e in data["device_traces"][0] if e["action"] == "alloc" and e["size"] == 3 * GIB]
        self.assertEqual((alloc["frames"][0]["name"], alloc["frames"][0]["line"]), ("temporary", TEMPORARY_LINE))
        (event,) = self.snapshot_events()
        self.assertEqual(event.args[1:4], (5 * GIB, REASON["peak"], 2 * GIB))
        # Nothing new: no second dump.
        for _ in range(3):
            vramscope.step()
            self.tick()
        self.assertEqual(len(self.pickles()), 1)


class ClockedCase(SitesCase):
    """The sampler's passes on a clock the test moves: one second per step."""

    def start(self, **kwargs):
        SitesCase.start(self, **kwargs)
        self.now = 1000.0
        _runtime.current().adapter.sites.clock = lambda: self.now

    def climb(self, size):
        if size:
            self.cuda.alloc(size)
        self.now += 1.0
        vramscope.step()
        self.tick()
        return len(self.pickles())


class PeakSteps(ClockedCase):
    env = {"VRAMSCOPE_SITES_EVERY_STEPS": "5", "VRAMSCOPE_SITES_EVERY_S": "2"}

    def test_peak_dumps_after_the_first_wait_for_every_steps(self):
        self.start(sites=True)
        # Rises seen at step 1, settled at step 2 (the first dump is free); a new mark 5 %
        # higher at step 3, settled at step 4, but the next dump waits for step 2 + 5.
        dumps = [self.climb(size) for size in (20 * GIB, 0, GIB, 0, 0, 0, 0, 0)]
        self.assertEqual(dumps, [0, 1, 1, 1, 1, 1, 2, 2])
        info = self.load(self.pickles()[-1])["vramscope"]
        self.assertEqual((info["peak_allocated"], info["step"]), (21 * GIB, 7))

    def test_a_peak_well_above_the_last_dump_is_dumped_once_it_settles(self):
        self.start(sites=True)
        # The run's real peak, twice the first one dumped, one step later: not held back
        # by the spacing (with the default minute it got no snapshot at all).
        dumps = [self.climb(size) for size in (GIB, 0, GIB, 0, 0)]
        self.assertEqual(dumps, [0, 1, 1, 2, 2])
        info = self.load(self.pickles()[-1])["vramscope"]
        self.assertEqual((info["peak_allocated"], info["step"]), (2 * GIB, 4))


class PeakAfterLoading(ClockedCase):
    def test_a_mark_before_the_first_step_does_not_hold_back_the_trainings_peak(self):
        # The weights reach the GPU before any step: a mark that settles after a quiet second
        # and is dumped. The training's own peak, a step later, is dumped once it settles,
        # not a minute and ten steps later (on an H200 the run's real peak was never dumped).
        self.start(sites=True)
        self.cuda.alloc(GIB)
        self.tick()
        self.now += _sites.SETTLE_S
        self.tick()
        self.assertEqual(len(self.pickles()), 1)
        self.assertIsNone(self.load(self.pickles()[0])["vramscope"]["step"])
        dumps = [self.climb(size) for size in (2 * GIB, 0, 0, 0)]
        self.assertEqual(dumps, [1, 2, 2, 2])
        info = self.load(self.pickles()[-1])["vramscope"]
        self.assertEqual((info["peak_allocated"], info["step"]), (3 * GIB, 2))


class PeakSeconds(ClockedCase):
    env = {"VRAMSCOPE_SITES_EVERY_STEPS": "0", "VRAMSCOPE_SITES_EVERY_S": "4"}

    def test_peak_dumps_after_the_first_wait_for_every_s(self):
        self.start(sites=True)
        # The first at step 2 (t + 2 s); a new mark 5 % higher at step 3, settled at step 4,
        # dumped at step 6, four seconds after the first.
        dumps = [self.climb(size) for size in (20 * GIB, 0, GIB, 0, 0, 0, 0)]
        self.assertEqual(dumps, [0, 1, 1, 1, 1, 2, 2])

    def test_a_mark_that_never_settles_is_dumped_every_s_after_it_rose(self):
        self.start(sites=True)
        # A leak: a new mark every step, first seen at step 1 and dumped 4 s later; the next
        # one pending from step 6, dumped at step 10.
        dumps = [self.climb(GIB) for _ in range(10)]
        self.assertEqual(dumps, [0, 0, 0, 0, 1, 1, 1, 1, 1, 2])
        info = self.load(self.pickles()[0])["vramscope"]
        self.assertEqual((info["peak_allocated"], info["step"]), (5 * GIB, 5))

    def test_without_steps_a_mark_settles_after_a_quiet_second(self):
        self.start(sites=True)
        self.cuda.alloc(GIB)
        vramscope.note("a reading, no step")
        self.tick()
        self.now += _sites.SETTLE_S / 2
        self.tick()
        self.assertEqual(self.pickles(), [])
        self.now += _sites.SETTLE_S / 2
        self.tick()
        (name,) = self.pickles()
        self.assertIsNone(self.load(name)["vramscope"]["step"])


class Requests(SitesCase):
    env = {"VRAMSCOPE_SITES_KEEP": "2"}

    def test_the_channel_field_asks_and_two_requests_make_one_dump(self):
        self.start(sites=True)
        self.cuda.alloc(GIB)
        self.request(times=2)
        self.tick()
        self.tick()
        (name,) = self.pickles()
        self.assertTrue(name.endswith(".snap-1-request.pickle"))
        self.assertEqual(self.load(name)["vramscope"]["reason"], "request")
        self.request()
        self.tick()
        self.assertEqual(len(self.pickles()), 2)

    def test_only_the_newest_are_kept_and_the_dropped_are_counted(self):
        self.start(sites=True)
        paths = [vramscope.snapshot() for _ in range(4)]
        self.assertEqual([os.path.basename(p) for p in paths[2:]], self.pickles())
        self.assertFalse(os.path.exists(paths[0]) or os.path.exists(paths[1]))
        events = self.snapshot_events()
        self.assertEqual([e.args[5] for e in events], [0, 0, 1, 2])
        self.assertEqual([e.text for e in events], [os.path.basename(p) for p in paths])
        self.assertEqual([e.args[2] for e in events], [REASON["request"]] * 4)

    def test_the_file_is_torchs_snapshot_for_memory_viz_and_pickle(self):
        self.start(sites=True)
        self.cuda.alloc(GIB)
        temporary(self.cuda, GIB)
        path = vramscope.snapshot()
        with open(path, "rb") as f:
            raw = f.read()
        data = pickle.loads(raw)
        self.assertEqual(set(data) - {"vramscope"}, set(torch.cuda.memory._snapshot()))
        # The weights' segment, and the temporary's, freed into the cache.
        self.assertEqual([[b["state"] for b in s["blocks"]] for s in data["segments"]], [["active_allocated"], ["inactive"]])
        self.assertEqual(len(data["device_traces"][0]), 4)
        ops = list(pickletools.genops(raw))
        self.assertEqual((ops[0][0].name, ops[0][1]), ("PROTO", 4))
        self.assertLessEqual({op.name for op, _, _ in ops}, MEMORY_VIZ_OPCODES)
        # PyTorch's own summaries read it as they read theirs.
        from torch.cuda import _memory_viz

        self.assertIn("total_allocated: 1.0GiB", _memory_viz.segsum(data))
        self.assertIn("snapshot.pickle", _memory_viz.trace_plot(data))


# Two modules that import each other, each waiting (a little) for the other's import to have
# begun on another thread: what torch._inductor and torch._dynamo can do to two threads that
# import them at once, made certain. The program's thread, importing b, gets a half-initialised
# a from importlib's deadlock breaker and fails, as its `torch.optim.AdamW(...)` failed on an
# H200 when the sampler's first snapshot imported torch._inductor.
RACE_EVENTS = """
import threading
started = {"a": threading.Event(), "b": threading.Event()}
"""
RACE_A = """
import {prefix}_events as events
events.started["a"].set()
events.started["b"].wait(2.0)
import {prefix}_b
VALUE = "a"
"""
RACE_B = """
import time
import {prefix}_events as events
events.started["b"].set()
events.started["a"].wait(1.5)
time.sleep(0.2)  # the other thread, if it imports a, now waits for this module
import {prefix}_a as a
OTHER = a.VALUE
VALUE = "b"
"""


def until(done, seconds=10.0):
    """Waits for the real sampler thread's passes, polling, at most `seconds`."""
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        time.sleep(0.01)


class SamplerImports(SitesCase):
    """The sampler thread imports nothing; a dump that needs an import waits for the training
    thread (vramscope/_no_imports.py)."""

    def setUp(self):
        SitesCase.setUp(self)
        self.prefix = "vsrace%d_%d" % (os.getpid(), id(self))
        self.modules = os.path.join(self.dir, "modules")
        os.mkdir(self.modules)
        for name, text in (("events", RACE_EVENTS), ("a", RACE_A), ("b", RACE_B), ("lazy", "VALUE = 1\n")):
            with open(os.path.join(self.modules, "%s_%s.py" % (self.prefix, name)), "w") as f:
                f.write(text.replace("{prefix}", self.prefix))
        sys.path.insert(0, self.modules)

    def tearDown(self):
        sys.path.remove(self.modules)
        for name in [n for n in sys.modules if n.startswith(self.prefix)]:
            del sys.modules[name]
        SitesCase.tearDown(self)

    def test_a_dump_that_needs_an_import_is_taken_at_the_next_optimizer_step(self):
        self.cuda.snapshot_imports = self.prefix + "_lazy"
        self.start(sites=True)
        self.cuda.alloc(GIB)
        self.request()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.tick()  # the sampler's pass: refused, handed on, no warning
            self.assertEqual(self.pickles(), [])
            self.assertNotIn(self.prefix + "_lazy", sys.modules)
            # A real optimizer's step, on this (the training) thread: its hook takes the dump.
            weight = torch.nn.Parameter(torch.zeros(4))
            optimizer = torch.optim.SGD([weight], lr=0.1)
            weight.grad = torch.ones(4)
            optimizer.step()
        self.assertEqual([str(w.message) for w in caught if issubclass(w.category, VramscopeWarning)], [])
        self.assertIn(self.prefix + "_lazy", sys.modules)
        (name,) = self.pickles()
        self.assertEqual(self.load(name)["vramscope"]["reason"], "request")
        (event,) = self.snapshot_events()
        self.assertEqual(event.args[2], REASON["request"])
        optimizer.step()
        self.assertEqual(len(self.pickles()), 1, "handed on once, taken once")

    def test_a_refusal_torch_turns_into_another_error_is_still_handed_on(self):
        self.cuda.snapshot_imports = self.prefix + "_lazy"
        self.cuda.snapshot_import_error = RuntimeError
        self.start(sites=True)
        self.cuda.alloc(GIB)
        self.request()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.tick()
            vramscope.step()
        self.assertEqual([str(w.message) for w in caught if issubclass(w.category, VramscopeWarning)], [])
        (name,) = self.pickles()
        self.assertEqual(self.load(name)["vramscope"]["reason"], "request")

    def test_with_the_programs_own_history_too(self):
        torch.cuda.memory._record_memory_history(enabled="all", stacks="python", max_entries=1000)
        self.cuda.snapshot_imports = self.prefix + "_lazy"
        self.start(sites=True)
        self.assertEqual(_runtime.current().adapter.sites.owner, "user")
        self.cuda.alloc(GIB)
        self.request()
        self.tick()
        self.assertEqual(self.pickles(), [])
        self.assertNotIn(self.prefix + "_lazy", sys.modules)
        vramscope.step()
        (name,) = self.pickles()
        self.assertEqual(self.load(name)["vramscope"]["history_owner"], "user")

    def test_the_programs_import_is_whole_while_the_sampler_runs(self):
        # The sampler thread running for real: asked for a snapshot while the program imports
        # `b`, which needs `a`, which the snapshot imports.
        self.cuda.snapshot_imports = self.prefix + "_a"
        self.assertTrue(vramscope.start(framework="torch", sites=True))
        self.cuda.alloc(GIB)
        self.request()
        sites = _runtime.current().adapter.sites
        until(lambda: sites._handed)  # the sampler's pass (10 Hz) tries the dump, refused
        self.assertEqual(sites._handed, [("request", 0)])
        self.assertEqual(sites._handed_for, self.prefix + "_a")
        b = __import__(self.prefix + "_b")  # "partially initialized module" if both import
        self.assertEqual((b.VALUE, b.OTHER), ("b", "a"))
        # The program imported `a` itself: the sampler's next pass takes the dump.
        until(self.pickles)
        (name,) = self.pickles()
        self.assertEqual(self.load(name)["vramscope"]["reason"], "request")
        self.assertEqual(sites._handed, [])

    def test_without_steps_the_wait_is_said_once_and_stop_forgets_it(self):
        self.cuda.snapshot_imports = self.prefix + "_lazy"
        self.start(sites=True)
        sites = _runtime.current().adapter.sites
        now = [1000.0]
        sites.clock = lambda: now[0]
        self.cuda.alloc(GIB)
        self.request()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                self.tick()
                now[0] += _sites.HANDED_WARN_S / 2
            self.tick()
        messages = [str(w.message) for w in caught if issubclass(w.category, VramscopeWarning)]
        self.assertEqual(len(messages), 1, messages)
        self.assertIn("waits for the training thread: PyTorch imports %s_lazy" % self.prefix, messages[0])
        self.assertIn("vramscope.snapshot()", messages[0])
        self.assertEqual(self.pickles(), [])
        vramscope.stop()
        self.assertEqual(sites._handed, [])
        self.assertNotIn(_no_imports._refuser, sys.meta_path)


class FailingDumps(SitesCase):
    def test_a_snapshot_that_raises_in_the_oom_observer_stays_out_of_the_allocator(self):
        self.start(sites=True)

        def broken(*args):
            raise RuntimeError("snapshot failed")

        torch._C._cuda_memorySnapshot = broken
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.cuda.fail(GIB)  # would raise into malloc if the observer did
            self.cuda.fail(GIB)
        messages = [str(w.message) for w in caught if issubclass(w.category, VramscopeWarning)]
        self.assertEqual(len(messages), 1, messages)
        self.assertIn("cannot write a memory snapshot", messages[0])
        self.assertEqual(len([e for e in S.events(self.raw())[0] if e.kind == EV_OOM]), 2)
        self.assertTrue(vramscope.enabled())
        self.assertEqual(os.listdir(self.dir), [os.path.basename(vramscope.channel_path())])


# A full disk, for real: the file size limit makes the kernel refuse the snapshot's write
# (EFBIG; SIGXFSZ ignored so it is an error, not a kill) once the channel file exists.
FULL_DISK = r"""
import os, resource, signal, sys, torch, vramscope
from vramscope import _runtime
sys.path.insert(0, sys.argv[1])
from _simulated_cuda import GIB, SimulatedCuda
cuda = SimulatedCuda(torch).install()
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
vramscope.start(framework="torch", sites=True)
# No peak dump of its own before the limit is set (the mark settles a second after it rose).
_runtime.current().sampler.stop()
for _ in range(10000):  # a trace of about 1.5 MB
    cuda.free(address=cuda.alloc(1 << 20))
# Above the channel file's 401,408 bytes, which it already has.
resource.setrlimit(resource.RLIMIT_FSIZE, (410000, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
print(vramscope.snapshot(), vramscope.snapshot(), flush=True)
cuda.fail(GIB)  # the OOM observer's dump fails too, inside malloc
vramscope.note("still publishing")
print(sorted(os.listdir(os.path.dirname(vramscope.channel_path()))), flush=True)
print("alive", flush=True)
"""

# VRAMSCOPE_SITES=1 and a job that dies of its OOM: the snapshot of the moment outlives it.
DIES = r"""
import sys, torch, vramscope
sys.path.insert(0, sys.argv[1])
from _simulated_cuda import GIB, SimulatedCuda
cuda = SimulatedCuda(torch).install()
vramscope.start(framework="torch")
print(vramscope.channel_path(), flush=True)
cuda.alloc(9 * GIB)
vramscope.step()
with vramscope.mark("forward"):
    cuda.fail(6 * GIB)
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB.")
"""


class Processes(unittest.TestCase):
    def test_a_full_disk_is_one_warning_and_the_program_goes_on(self):
        with S.TempDir() as d:
            env = S.python_env({"VRAMSCOPE_DIR": d, "VRAMSCOPE_HZ": "10"})
            r = S.run_python(FULL_DISK, env, timeout=120, args=(S.HERE,))
            self.assertEqual(r.returncode, 0, r.stderr)
            lines = r.stdout.splitlines()
            self.assertEqual(lines[0], "None None")
            self.assertEqual(lines[-1], "alive")
            self.assertEqual(len(eval(lines[1])), 1, "a temporary file was left: %s" % lines[1])
            warned = [l for l in r.stderr.splitlines() if "cannot write a memory snapshot" in l]
            self.assertEqual(len(warned), 1, r.stderr)
            self.assertIn("File too large", warned[0])

    def test_the_environment_turns_sites_on_and_the_oom_snapshot_outlives_the_job(self):
        with S.TempDir() as d:
            env = S.python_env({"VRAMSCOPE_DIR": d, "VRAMSCOPE_HZ": "10", "VRAMSCOPE_SITES": "1"})
            r = S.run_python(DIES, env, timeout=120, args=(S.HERE,))
            self.assertEqual(r.returncode, 1, r.stderr)
            channel = r.stdout.strip()
            snap = S.Snapshot(S.read_bytes(channel))
            self.assertEqual(snap.header.flags & FLAG_SITES, FLAG_SITES)
            (event,) = [e for e in S.events(snap.raw)[0] if e.kind == EV_SNAPSHOT_WRITTEN]
            self.assertEqual(event.args[1:4], (9 * GIB, REASON["oom"], 9 * GIB))
            self.assertEqual(snap.phase_name(event.phase), "forward")
            with open(os.path.join(d, event.text), "rb") as f:
                info = pickle.load(f)["vramscope"]
            self.assertEqual(info["oom"]["requested"], 6 * GIB)
            self.assertEqual((info["step"], info["phase"], info["history_owner"]), (1, "forward", "vramscope"))


if __name__ == "__main__":
    unittest.main()
