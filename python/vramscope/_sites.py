"""Allocation sites (`VRAMSCOPE_SITES=1`): PyTorch's allocator history, and memory snapshots
dumped beside the channel file for the monitor to reduce (docs/channel-v1.md, section 8).

The history is `torch.cuda.memory._record_memory_history(enabled="all", context="alloc",
stacks="python", max_entries=N)`: Python stacks only (C++ stacks make a dump take minutes)
and stacks for allocations only. It is turned on once, at start, unless the program or a
framework already did (then theirs is used and never touched), and off at stop only if
vramscope turned it on.

The ring starts at `SITES_ENTRIES_DEFAULT` entries and grows to two and a half steps' worth,
measured from the allocator's own counters. Growing it keeps what it holds (PyTorch only
changes its bound) as long as it has not wrapped: once it has, PyTorch would return the
entries out of order, so the writer then clears it as it grows it.

A dump is `torch.cuda.memory._snapshot()` plus one key, "vramscope" (what the monitor needs
to say whether its reading is exact), pickled with protocol 4 (the highest memory_viz reads)
to `<channel>.snap-<seq>-<reason>.pickle`, a temporary name first. Dumps come from the OOM
observer (on the failing thread, before the exception unwinds), from a new high-water mark
(the sampler thread, rate-limited) and on request (`vramscope.snapshot()`, or a reader's
count at 0x220, polled by the sampler). Each is announced by a SNAPSHOT_WRITTEN event. The
newest `keep` files are kept. A dump that fails is one warning, once; the program goes on.

The sampler thread imports nothing (`_no_imports`): torch's first snapshot imports
torch._inductor, and an import there can break one the training thread is making. Work that
would import is handed to the training thread, which does it at its next step (the optimizer's
hook or `vramscope.step()`) or phase end, outside the writer's lock.
"""

import contextlib
import math
import os
import pickle
import sys
import threading
import time

from . import _layout as L
from . import _no_imports
from . import _runtime
from ._config import SITES_ENTRIES_DEFAULT
from ._guard import warn_once

# The ring's bound when the writer sizes it: several KB of host memory per entry.
SITES_ENTRIES_MAX = 1_000_000
# How many steps' worth the ring holds, at least: a peak reached in one step is still in it
# when the next step ends, where peak dumps happen.
RING_STEPS = 2.5
# A ring this full (by the allocator's counters since it was last cleared) may have wrapped.
WRAP_FRACTION = 0.8
# Per-step entry counts kept for sizing: the largest of these recent steps counts.
STEP_WINDOW = 8
# A program without steps: a high-water mark that has not moved for this long has settled.
SETTLE_S = 1.0
PICKLE_PROTOCOL = 4
# A high-water mark this far (a fraction) above the last one dumped is dumped once it settles,
# whatever the spacing (`sites_every_s`, `sites_every_steps`): with the default minute, a
# run's real peak a few seconds after a smaller one otherwise got no snapshot at all.
PEAK_MARGIN = 0.10
# Work handed to the training thread that has waited this long says so, once: a program
# without steps, phases or `vramscope.snapshot()` would otherwise never learn why its
# snapshots do not come.
HANDED_WARN_S = 30.0

REASONS = {"oom": L.SNAPSHOT_OOM, "peak": L.SNAPSHOT_PEAK, "request": L.SNAPSHOT_REQUEST}


def trace_entries(stats):
    """Trace entries the allocator has recorded in its life, by its own counters: an
    allocation is one entry, a free two (requested, completed), a segment's cudaMalloc or
    cudaFree one. None where the statistics do not say."""
    try:
        allocation = stats["allocation"]["all"]
        return (
            int(allocation["allocated"])
            + 2 * int(allocation["freed"])
            + int(stats["num_device_alloc"])
            + int(stats["num_device_free"])
        )
    except (KeyError, TypeError, ValueError):
        return None


def _one_line(error):
    text = str(error).strip().splitlines()
    return "%s: %s" % (type(error).__name__, text[0] if text else "")


class _Peak:
    """One device's high-water mark as far as peak dumps go."""

    __slots__ = ("dumped", "pending_since", "last_high", "rise_t", "rise_step")

    def __init__(self):
        self.dumped = 0
        self.pending_since = None
        self.last_high = None
        self.rise_t = None
        self.rise_step = None


class Sites:
    def __init__(self, torch, config, clock=time.monotonic):
        self.torch = torch
        self.config = config
        self.clock = clock
        memory = getattr(torch.cuda, "memory", torch.cuda)
        # Taken now, before the hooks wrap them: vramscope's own calls are not the program's.
        self._record = memory._record_memory_history
        self._snapshot = memory._snapshot
        self._history_query = getattr(torch._C, "_cuda_isHistoryEnabled", None)
        self.owner = None
        self.max_entries = None
        self.fixed = config.sites_entries is not None
        self.keep = max(1, int(config.sites_keep))
        # Entry counters per device: at the ring's last clear (0: the process's start, which
        # can only overstate how full the ring is), and at the last step seen.
        self._base = {}
        self._last = {}
        self._per_step = []
        self._sized_step = None
        # Statistics per device, as the adapter last read them.
        self.stats = {}
        self._peaks = {}
        self._last_peak_dump = None  # (monotonic s, step)
        self._served = 0
        # Files: the channel's directory, names written (oldest first), how many deleted.
        self._dir_fd = None
        self._prefix = None
        self._seq = 0
        self._kept = []
        self.dropped = 0
        self._dump_lock = threading.Lock()
        self._closed = False
        # Sampler work that needed an import, for the training thread (or for the sampler
        # once the module is imported): (reason, device) dumps, a ring size, the module
        # refused, since when it waits. Under `_handed_lock`: both threads take from it.
        self._handed_lock = threading.Lock()
        self._handed = []
        self._handed_resize = None
        self._handed_for = None
        self._handed_since = None
        self._pid = os.getpid()

    # -- the history ------------------------------------------------------------------------

    def history_on(self):
        query = self._history_query
        if query is None:
            return False
        return bool(query())

    def enable(self):
        """Turns the history on, or adopts the program's; False (one warning) if it cannot."""
        try:
            if self.history_on():
                self.owner = "user"
                self.max_entries = None
                return True
            entries = int(self.config.sites_entries or SITES_ENTRIES_DEFAULT)
            self._record(enabled="all", context="alloc", stacks="python", max_entries=entries)
            self.owner = "vramscope"
            self.max_entries = entries
            return True
        except Exception as e:
            warn_once("sites", "allocation sites are off: cannot record the allocator's history (%s)" % _one_line(e))
            self.owner = None
            return False

    def program_called(self, args, kwargs):
        """The program called `_record_memory_history` itself: the history is its own now."""
        enabled = args[0] if args else kwargs.get("enabled", "all")
        self.owner = "user"
        if enabled is None or enabled is False:
            self.max_entries = None
            return
        if isinstance(enabled, bool):
            entries = args[2] if len(args) > 2 else kwargs.get("trace_alloc_max_entries", 1)
        else:
            entries = args[3] if len(args) > 3 else kwargs.get("max_entries", sys.maxsize)
        try:
            self.max_entries = int(entries)
        except (TypeError, ValueError):
            self.max_entries = None

    def attach(self, channel):
        # Whoever owns the history, the sampler's dumps must not import (`background`).
        _no_imports.install()
        self._dir_fd = channel.directory_fd()
        self._prefix = channel.name + ".snap-"
        self._served = channel.snapshot_requests()

    def stop(self):
        """Turns vramscope's history off; the program's stays as it is."""
        if self.owner == "vramscope":
            self.owner = None
            try:
                self._record(None)
            except Exception:
                pass
        self._closed = True
        with self._handed_lock:
            self._handed, self._handed_resize = [], None
            self._handed_for = self._handed_since = None
        _no_imports.remove()
        # A dump in progress closes the directory itself when it is done.
        if self._dump_lock.acquire(False):
            try:
                self._close_dir()
            finally:
                self._dump_lock.release()

    def _close_dir(self):
        fd, self._dir_fd = self._dir_fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    # -- the sampler's work -----------------------------------------------------------------

    def background(self):
        """On the sampler thread, outside the writer's lock: grow the ring, then answer a
        request and dump a settled peak, as planned under the lock. Without importing: what
        would import is handed to the training thread (`on_training_thread`), or done here
        once the program has imported the module itself (torch.compile imports
        torch._inductor, say)."""
        if self._handed_since is not None and _no_imports.imported(self._handed_for):
            self._run_handed(refuse=True)
        plan = _runtime.run(self._plan)
        if plan:
            resize, dumps = plan
            # One refusal scope per piece of work: a refusal is blamed on the work it stopped.
            if resize is not None:
                with _no_imports.refusing():
                    self._resize(*resize)
            for reason, device in dumps:
                with _no_imports.refusing():
                    self.take(reason, device)
        since = self._handed_since
        if since is not None and self.clock() - since >= HANDED_WARN_S:
            warn_once(
                "sites-handed",
                "a memory snapshot waits for the training thread: PyTorch imports %s to take it, "
                "which vramscope's sampler thread never does (an import there can break one the "
                "program is making); it is taken at the next optimizer step, vramscope.step() or "
                "phase end, or call vramscope.snapshot()" % self._handed_for,
            )

    def on_training_thread(self):
        """From the training thread, outside the writer's lock (a step or a phase's end): the
        sampler's work that needed an import, done here, where importing is safe. Nothing to
        do costs one look at an attribute."""
        if self._handed_since is None or self._pid != os.getpid():
            return
        self._run_handed(refuse=False)

    def _run_handed(self, refuse):
        with self._handed_lock:
            resize, self._handed_resize = self._handed_resize, None
            dumps, self._handed = self._handed, []
            self._handed_for = self._handed_since = None
        scope = _no_imports.refusing if refuse else contextlib.nullcontext
        if resize is not None:
            with scope():
                self._resize(*resize)
        for reason, device in dumps:
            with scope():
                self.take(reason, device)

    def _hand_on(self, dump=None, resize=None):
        """Whether the work that just failed on this thread failed only because an import was
        refused (inside `background`); then it is handed on, to be done where importing is
        safe."""
        name = _no_imports.refused()
        if name is None:
            return False
        _no_imports.clear()
        with self._handed_lock:
            if resize is not None:
                self._handed_resize = resize
            if dump is not None and dump not in self._handed:
                self._handed.append(dump)
            self._handed_for = name
            if self._handed_since is None:
                self._handed_since = self.clock()
        return True

    def _plan(self, rt):
        session = rt.session
        now = self.clock()
        resize = self._sizing(session.step)
        dumps = []
        requests = session.channel.snapshot_requests()
        if requests > self._served:
            # Several requests since the last look are answered by one dump.
            self._served = requests
            dumps.append(("request", self.request_device()))
        device = self._peak_due(session, now)
        if device is not None and not dumps:
            # Marked now, under the lock: a second sampler pass plans no second dump.
            self._peaks[device].dumped = self._peaks[device].last_high
            self._peaks[device].pending_since = None
            self._last_peak_dump = (now, session.step)
            dumps.append(("peak", device))
        return resize, dumps

    def request_device(self):
        """The device a request names: the lowest one in use (a snapshot covers them all)."""
        return min(self.stats) if self.stats else 0

    def _sizing(self, step):
        """(entries, clear, counters) when the ring must grow to hold `RING_STEPS` steps,
        else None. Only a new step can change the answer: other passes return at once."""
        if step is None or step == self._sized_step:
            return None
        self._sized_step = step
        counts = {}
        for device, stats in self.stats.items():
            count = trace_entries(stats)
            if count is None:
                continue
            counts[device] = count
            last = self._last.get(device)
            if last is None or step > last[0]:
                if last is not None:
                    self._per_step.append((count - last[1]) / float(step - last[0]))
                    del self._per_step[:-STEP_WINDOW]
                self._last[device] = (step, count)
        if self.owner != "vramscope" or self.fixed or not self._per_step or self.max_entries is None:
            return None
        need = min(SITES_ENTRIES_MAX, int(math.ceil(RING_STEPS * max(self._per_step) / 10000.0)) * 10000)
        if need <= self.max_entries:
            return None
        full = max((c - self._base.get(d, 0) for d, c in counts.items()), default=0)
        return need, full >= WRAP_FRACTION * self.max_entries, counts

    def _resize(self, entries, clear, counts):
        try:
            self._record(
                enabled="all", context="alloc", stacks="python", max_entries=entries, clear_history=clear
            )
        except Exception as e:
            if self._hand_on(resize=(entries, clear, counts)):
                return
            warn_once("sites-resize", "cannot grow the allocator's history to %d entries (%s)" % (entries, _one_line(e)))
            self.fixed = True
            return
        self.max_entries = entries
        if clear:
            self._base.update(counts)

    def _peak_due(self, session, now):
        """The device whose new high-water mark is worth a dump now, if any.

        Dumped once it has settled (a step boundary, or `SETTLE_S` without steps, passed
        without a rise: the ring, two and a half steps long, still holds the step that
        reached it), or, for a mark that keeps rising, `every_s` after it first rose; after
        the first peak dump, at most one per `every_steps` steps and `every_s` seconds, except
        that the first dump after steps begin is free, and a settled mark `PEAK_MARGIN` above
        the last one dumped is not held back."""
        step = session.step
        for device in sorted(self.stats):
            state = session.slot(("torch", device))
            high = None if state is None else state.allocated.high_water
            if not high:
                continue
            peak = self._peaks.get(device)
            if peak is None:
                peak = self._peaks[device] = _Peak()
            if peak.last_high is None or high > peak.last_high:
                peak.last_high = high
                peak.rise_t = now
                peak.rise_step = step
            if high <= peak.dumped:
                peak.pending_since = None
                continue
            if peak.pending_since is None:
                peak.pending_since = now
            if step is None or peak.rise_step is None:
                settled = now - peak.rise_t >= SETTLE_S
            else:
                # The rise was seen in `rise_step`; a boundary since without another rise
                # means the step-end reading, which holds that step's peak, raised nothing.
                settled = step > peak.rise_step
            forced = now - peak.pending_since >= self.config.sites_every_s
            well_above = settled and high > peak.dumped * (1 + PEAK_MARGIN)
            if (settled or forced) and (well_above or self._peak_allowed(now, step)):
                return device
        return None

    def _peak_allowed(self, now, step):
        last = self._last_peak_dump
        if last is None:
            return True
        if step is not None and last[1] is None:
            # The last came before the first step (the weights reaching the GPU, seen as a
            # mark that settled): the training's first settled mark is not held back by it.
            return True
        if now - last[0] < self.config.sites_every_s:
            return False
        return step is None or last[1] is None or step - last[1] >= self.config.sites_every_steps

    # -- dumps ------------------------------------------------------------------------------

    def on_oom(self, device, requested, device_total, device_free):
        """From the allocator's OOM observer: a dump of the moment, for every OOM (never
        spaced: an OOM a few seconds after a caught one is often the fatal one)."""
        oom = {"requested": requested, "device_free": device_free, "device_total": device_total}
        return self.take("oom", device, oom)

    def take(self, reason, device, oom=None):
        """Dumps a snapshot now, on the calling thread; its path, or None. Never raises.

        What the writer knows (peak, step, phase) is read under its lock; the snapshot, the
        pickling and the writing happen outside it, so the training thread's hooks do not
        wait for them; the event is written under the lock again."""
        try:
            meta = _runtime.run(self._describe, reason, device, oom)
            if meta is None:
                return None
            size = self._write(meta)
            if size is None:
                return None
            _runtime.run(self._announce, meta, size)
            return meta["path"]
        except Exception as e:
            if not self._hand_on(dump=(reason, device)):
                self._failed(e)
            return None

    def _describe(self, rt, reason, device, oom):
        if self._closed or self._dir_fd is None:
            return None
        session = rt.session
        state = session.slot(("torch", device))
        row = state.row if state is not None else None
        high = state.allocated.high_water if state is not None else None
        high_t = state.high_water_t if state is not None else None
        peak_time_us = None
        if high_t is not None:
            peak_time_us = (time.time_ns() - (session.clock() - high_t)) // 1000
        self._seq += 1
        name = "%s%d-%s.pickle" % (self._prefix, self._seq, reason)
        peak = self._peaks.get(device)
        if peak is None:
            peak = self._peaks[device] = _Peak()
        # Whatever the reason, the ring now holds the mark as it stands.
        if high is not None and high > peak.dumped:
            peak.dumped = high
            peak.pending_since = None
        return {
            "name": name,
            "path": os.path.join(session.channel.directory, name),
            "slot": state.slot if state is not None else L.NO_SLOT,
            "vramscope": {
                "version": 1,
                "pid": os.getpid(),
                "device": int(device),
                "reason": reason,
                "peak_allocated": high,
                "peak_requested": state.requested.high_water if state is not None else None,
                "peak_time_us": peak_time_us,
                "allocated": _figure(row, 1),
                "reserved": _figure(row, 3),
                "step": session.step,
                # Said only where it is so: a reader without the key reads the job's steps.
                **({"steps_since_attach": True} if session.steps_since_attach else {}),
                "phase": session.phase_path or None,
                "max_entries": self.max_entries,
                "history_owner": self.owner,
                "oom": oom,
                "channel": session.channel.name,
                **_who(getattr(session.channel, "identity", None)),
            },
        }

    def _write(self, meta):
        """The snapshot, pickled to a temporary name then renamed; its size, or None."""
        with self._dump_lock:
            try:
                if self._dir_fd is None:
                    return None
                return self._write_file(meta)
            finally:
                if self._closed:
                    self._close_dir()

    def _write_file(self, meta):
        snapshot = self._snapshot()
        snapshot["vramscope"] = meta["vramscope"]
        name = meta["name"]
        tmp = "." + name + ".tmp"
        dir_fd = self._dir_fd
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
        except FileExistsError:
            os.unlink(tmp, dir_fd=dir_fd)
            fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "wb") as f:
                # With the memo, as torch's own `_dump_snapshot`: torch shares one dict per
                # distinct frame among all stacks (its py_symbolize), which the memo keeps.
                # Without it (`fast`), a 49,971-entry snapshot from an H200 run was 27.0 MB
                # and read in 0.57 s; with that sharing kept, 7.9 MB and 0.18 s.
                pickle.Pickler(f, protocol=PICKLE_PROTOCOL).dump(snapshot)
                size = f.tell()
            os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except OSError:
                pass
            raise
        self._kept.append(name)
        while len(self._kept) > self.keep:
            old = self._kept.pop(0)
            try:
                os.unlink(old, dir_fd=dir_fd)
            except FileNotFoundError:
                pass
            self.dropped += 1
        return size

    def _announce(self, rt, meta, size):
        info = meta["vramscope"]
        args = (size, info["peak_allocated"], REASONS[info["reason"]], info["allocated"], self.max_entries, self.dropped)
        rt.session.event(L.EV_SNAPSHOT_WRITTEN, meta["slot"], args, meta["name"])

    def _failed(self, error):
        where = "the channel's directory"
        rt = _runtime.current()
        if rt is not None:
            where = rt.session.channel.directory
        warn_once("sites-dump", "cannot write a memory snapshot in %s (%s); the program goes on" % (where, _one_line(error)))


def _who(identity):
    """The writer's rank and job, as its channel's header has them; None for none (-1, "")."""
    if identity is None:
        return {"rank": None, "local_rank": None, "world_size": None, "job_id": None}
    rank = lambda v: None if v is None or v < 0 else int(v)
    return {
        "rank": rank(identity.rank),
        "local_rank": rank(identity.local_rank),
        "world_size": rank(identity.world_size),
        "job_id": identity.job_id or None,
    }


def _figure(row, index):
    if row is None:
        return None
    value = row[index]
    return None if value == L.ABSENT else value
