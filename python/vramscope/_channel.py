"""The channel file writer (docs/channel-v1.md): creation, seqlocked slots and rings.

One `Channel` has one writer at a time: callers serialise calls (the runtime holds a lock).
Methods raise on failure; the layers above turn failures into warnings, never into
exceptions in the user's program.
"""

import errno
import fcntl
import mmap
import os
import resource
import struct
import sys
import time
import zlib

from . import _layout as L
from ._directory import ChannelError, channel_dir, open_dir
from ._identity import fit_utf8
from ._records import DeviceInfo  # noqa: F401  (re-exported)

# A mutable field alone is stored through a memoryview cast to "Q": item assignment is one
# aligned 8-byte store. struct.pack_into is not: it zeroes its target before writing, so a
# reader could see a head or a seq of 0 in between. pack_into is only used where a seqlock
# or a record's seq and CRC cover the bytes, or before the file has its name.
_U32 = struct.Struct("<I")
_FIGURES = struct.Struct("<%dQ" % len(L.DEVICE_FIGURES))
_STATUS = struct.Struct("<QQQ%ds" % L.LABEL_MAX)
_SAMPLE = struct.Struct("<6QBBH")
_EVENT = struct.Struct("<Q4HQ6Q%ds" % L.EVENT_TEXT_MAX)
_HEADER_FIXED = struct.Struct("<IHHIIQQQQQQQQQII3i")
_SECTION = struct.Struct("<QII")
_DEVICE_ID = struct.Struct("<II16s16sQ")

_crc32 = zlib.crc32
_A = L.ABSENT
# The spare (section 3), as word indexes and byte ranges.
_SPARE_SEQ = L.SPARE_SEQ >> 3
_SPARE_BLOCK = L.SPARE_BLOCK >> 3
_SPARE_COPY = L.SPARE_COPY
_DEVICE_COPY = L.DEVICE_COPY
_SPARE_DEVICE_END = L.SPARE_COPY + L.DEVICE_COPY
_SPARE_STATUS_END = L.SPARE_COPY + L.STATUS_COPY
_STATUS_FIELDS = L.STATUS + 8
_STATUS_END = L.STATUS + L.STATUS_SIZE


def _u64(value):
    """None (a figure that could not be read) becomes ABSENT, never 0."""
    if value is None:
        return _A
    value = int(value)
    if value < 0 or value > L.U64_MAX_VALUE:
        return _A
    return value


class Channel:
    """A created channel file, mapped and locked for the writer's whole life."""

    def __init__(self, dir_fd, directory, name, fd, mm, layout):
        self.directory = directory
        self.name = name
        self.path = os.path.join(directory, name)
        self.layout = layout
        self._dir_fd = dir_fd
        self._fd = fd
        self._mm = mm
        self._q = memoryview(mm).cast("Q")
        self._devices = 0
        self._device_seq = [0] * layout.devices
        # Who writes it (rank, job), for what else the writer writes: the snapshots' key.
        self.identity = None
        self._status_seq = 0
        self._strings = {}
        self._samples_next = 0
        self._events_next = 0
        self._s_off = layout.samples_offset
        self._s_mask = layout.samples - 1
        self._e_off = layout.events_offset
        self._e_mask = layout.events - 1
        self._closed = False

    # -- creation ---------------------------------------------------------------------------

    @classmethod
    def create(cls, identity, devices=(), layout=None, directory=None):
        """Creates `<pid>-<starttime>.vsc` in the channel directory; raises ChannelError."""
        if sys.byteorder != "little":
            raise ChannelError("the channel format is little-endian; this machine is not")
        layout = layout or L.Layout()
        directory = directory or channel_dir()
        dir_fd = open_dir(directory)
        name = "%d-%d.vsc" % (identity.pid, identity.starttime)
        tmp = ".%d-%d.tmp" % (identity.pid, identity.starttime)
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = mm = channel = None
        try:
            try:
                fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
            except FileExistsError:
                # Left by an earlier writer with our pid and start time: that is this very
                # process (a channel stopped and started again), so it is ours to replace.
                os.unlink(tmp, dir_fd=dir_fd)
                fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
            # Reserve every page now: a full /dev/shm fails here, not as SIGBUS later. A file
            # size limit would fail it too, but with SIGXFSZ, which kills: check it first.
            limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
            if limit != resource.RLIM_INFINITY and limit < layout.file_size:
                raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))
            os.posix_fallocate(fd, 0, layout.file_size)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            mm = mmap.mmap(fd, layout.file_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            channel = cls(dir_fd, directory, name, fd, mm, layout)
            channel.identity = identity
            channel._write_header(identity)
            for info in devices:
                channel.add_device(info)
            # Magic last: a reader that sees it sees everything above.
            mm[L.H_MAGIC : L.H_MAGIC + 8] = L.MAGIC
            os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            channel._q[L.H_STATE >> 3] = L.STATE_RUNNING
            return channel
        except OSError as e:
            _discard(dir_fd, tmp, fd, mm, channel)
            raise ChannelError(_describe(e, directory))
        except BaseException:
            _discard(dir_fd, tmp, fd, mm, channel)
            raise

    def _write_header(self, ident):
        mm = self._mm
        lay = self.layout
        _HEADER_FIXED.pack_into(
            mm,
            L.H_ENDIAN,
            L.ENDIAN_TAG,
            L.MAJOR,
            L.MINOR,
            L.HEADER_SIZE,
            ident.flags,
            lay.file_size,
            L.STATE_STARTING,
            ident.created_monotonic_ns,
            ident.pid,
            ident.starttime,
            _u64(ident.pidns_inode),
            ident.uid,
            ident.created_realtime_ns,
            ident.created_monotonic_ns,
            ident.kind,
            ident.sample_period_us,
            ident.rank,
            ident.local_rank,
            ident.world_size,
        )
        for off, size, text in (
            (L.H_JOB_ID, L.JOB_ID_SIZE, ident.job_id),
            (L.H_FRAMEWORK, L.FRAMEWORK_SIZE, ident.framework),
            (L.H_CMDLINE, L.CMDLINE_SIZE, ident.cmdline),
            (L.H_ALLOC_CONF, L.ALLOC_CONF_SIZE, ident.allocator_config),
        ):
            raw = fit_utf8(text or "", size)
            mm[off : off + len(raw)] = raw
        for i, section in enumerate(lay.sections()):
            _SECTION.pack_into(mm, L.H_SECTIONS + 16 * i, *section)
        # Seqlocked and [M] figures start out absent, not zero.
        self._q[(L.STATUS + 8) >> 3] = _A
        self._fill_absent_figures()

    def _fill_absent_figures(self):
        blank = _FIGURES.pack(*([_A] * len(L.DEVICE_FIGURES)))
        for slot in range(self.layout.devices):
            off = self.layout.devices_offset + slot * L.DEVICE_SIZE + L.D_FIGURES
            self._mm[off : off + len(blank)] = blank

    # -- devices, strings, status -----------------------------------------------------------

    @property
    def device_count(self):
        return self._devices

    def add_device(self, info):
        """Writes a slot's identity, then counts it in; returns the slot or None when full."""
        slot = self._devices
        if slot >= self.layout.devices:
            return None
        flags = 0
        uuid = b""
        if info.uuid is not None and len(info.uuid) == L.UUID_SIZE:
            uuid = bytes(info.uuid)
            flags |= L.DEVICE_UUID_VALID
            if getattr(info, "mig", False):
                flags |= L.DEVICE_UUID_MIG
        pci = b""
        if info.pci_bus_id:
            pci = fit_utf8(info.pci_bus_id, L.PCI_SIZE)
            flags |= L.DEVICE_PCI_VALID
        base = self.layout.devices_offset + slot * L.DEVICE_SIZE
        _DEVICE_ID.pack_into(
            self._mm, base + L.D_ORDINAL, info.ordinal & 0xFFFFFFFF, flags, uuid, pci, _u64(info.total)
        )
        self._devices = slot + 1
        self._q[L.C_DEVICES >> 3] = slot + 1
        return slot

    def publish_device(self, slot, figures):
        """Seqlocked update of a slot's [M] figures, given in `DEVICE_FIGURES` order."""
        base = self.layout.devices_offset + slot * L.DEVICE_SIZE
        seq = self._device_seq[slot]
        q = self._q
        # The spare keeps the slot as it stands (section 3), so that a writer killed inside
        # this update leaves its last complete figures readable. Written out, not a method:
        # this runs at every report.
        mm = self._mm
        q[_SPARE_BLOCK] = base
        mm[_SPARE_COPY:_SPARE_DEVICE_END] = mm[base + 8 : base + 8 + _DEVICE_COPY]
        q[_SPARE_SEQ] = seq + 1
        q[base >> 3] = seq + 1
        _FIGURES.pack_into(mm, base + L.D_FIGURES, *figures)
        q[base >> 3] = seq + 2
        self._device_seq[slot] = seq + 2

    def intern(self, name):
        """The phase number of `name` (string n-1 is phase n); 0 when the table is full."""
        phase = self._strings.get(name)
        if phase is not None:
            return phase
        index = len(self._strings)
        if index >= self.layout.strings:
            return 0
        raw = fit_utf8(name, L.STRING_MAX)
        off = self.layout.strings_offset + index * L.STRING_SIZE
        self._mm[off : off + 1 + len(raw)] = bytes((len(raw),)) + raw
        self._q[L.C_STRINGS >> 3] = index + 1
        self._strings[name] = index + 1
        return index + 1

    def set_status(self, step, label, t):
        raw = fit_utf8(label or "", L.LABEL_MAX)
        seq = self._status_seq
        q = self._q
        mm = self._mm
        q[_SPARE_BLOCK] = L.STATUS
        mm[_SPARE_COPY:_SPARE_STATUS_END] = mm[_STATUS_FIELDS:_STATUS_END]
        q[_SPARE_SEQ] = seq + 1
        q[L.STATUS >> 3] = seq + 1
        _STATUS.pack_into(mm, L.STATUS + 8, _u64(step), t, len(raw), raw)
        q[L.STATUS >> 3] = seq + 2
        self._status_seq = seq + 2

    def heartbeat(self, t):
        self._q[L.H_HEARTBEAT >> 3] = t

    def snapshot_requests(self):
        """The readers' snapshot request count (control 0x220): the one field they write."""
        return self._q[L.C_SNAPSHOT_REQUESTS >> 3]

    def directory_fd(self):
        """A descriptor of its own on the channel's directory (the caller closes it): files
        written beside the channel go where it is, whatever the path names by then."""
        return os.dup(self._dir_fd)

    # -- rings ------------------------------------------------------------------------------

    def append_sample(self, t, slot, allocated, reserved, peak, active, step, flags, phase):
        idx = self._samples_next
        base = self._s_off + (idx & self._s_mask) * L.SAMPLE_SIZE
        q = self._q
        q[base >> 3] = 2 * idx + 1
        payload = _SAMPLE.pack(t, allocated, reserved, peak, active, step, slot, flags, phase)
        self._mm[base + 8 : base + L.SAMPLE_SIZE] = payload + _U32.pack(_crc32(payload))
        q[base >> 3] = 2 * idx + 2
        self._samples_next = idx + 1
        q[L.C_SAMPLES_HEAD >> 3] = idx + 1

    def append_event(self, t, kind, slot, phase, step, args, text):
        """`args` holds up to six u64 arguments (None: ABSENT); `text` is cut to 172 bytes."""
        raw = fit_utf8(text or "", L.EVENT_TEXT_MAX)
        a = [_u64(v) for v in args] + [_A] * (6 - len(args))
        idx = self._events_next
        base = self._e_off + (idx & self._e_mask) * L.EVENT_SIZE
        q = self._q
        q[base >> 3] = 2 * idx + 1
        payload = _EVENT.pack(t, kind, slot, phase, len(raw), _u64(step), *a[:6], raw)
        self._mm[base + 8 : base + L.EVENT_SIZE] = payload + _U32.pack(_crc32(payload))
        q[base >> 3] = 2 * idx + 2
        self._events_next = idx + 1
        q[L.C_EVENTS_HEAD >> 3] = idx + 1

    # -- the end ----------------------------------------------------------------------------

    def finish(self, error_text=None, t=None):
        """Clean: EXIT event, EXITED_CLEAN, unlink. Error: EXIT event, EXITED_ERROR, kept."""
        if self._closed:
            return
        t = time.monotonic_ns() if t is None else t
        clean = error_text is None
        try:
            self.append_event(t, L.EV_EXIT, L.NO_SLOT, 0, None, (0 if clean else 1,), error_text)
            self.heartbeat(t)
            self._q[L.H_STATE >> 3] = L.STATE_EXITED_CLEAN if clean else L.STATE_EXITED_ERROR
            if clean:
                self._unlink_own_name()
        finally:
            self._release()

    def _unlink_own_name(self):
        """Removes our name, unless it now names another file (a newer channel of ours)."""
        try:
            named = os.stat(self.name, dir_fd=self._dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        mine = os.fstat(self._fd)
        if (named.st_dev, named.st_ino) == (mine.st_dev, mine.st_ino):
            os.unlink(self.name, dir_fd=self._dir_fd)

    def forget(self):
        """After fork, in the child: drop the inherited mapping and descriptors, touch nothing.

        The child's descriptor shares the parent's lock; keeping it open would make the
        parent look alive after it died.
        """
        self._release()

    def _release(self):
        if self._closed:
            return
        self._closed = True
        for close in (
            self._q.release,
            self._mm.close,
            lambda: os.close(self._fd),
            lambda: os.close(self._dir_fd),
        ):
            try:
                close()
            except (OSError, BufferError, ValueError):
                pass

    @property
    def closed(self):
        return self._closed


def _discard(dir_fd, tmp, fd, mm, channel):
    for undo in (
        (lambda: channel._q.release()) if channel is not None else None,
        (lambda: mm.close()) if mm is not None else None,
        (lambda: os.close(fd)) if fd is not None else None,
        (lambda: os.unlink(tmp, dir_fd=dir_fd)) if fd is not None else None,
        lambda: os.close(dir_fd),
    ):
        if undo is None:
            continue
        try:
            undo()
        except OSError:
            pass


def _describe(e, directory):
    if e.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
        return "no space for the channel file in %s: %s" % (directory, e.strerror)
    return "cannot create the channel file in %s: %s" % (directory, e.strerror or e)
