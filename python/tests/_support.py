"""Test helpers: the package on sys.path, an independent reader of channel files written
from docs/channel-v1.md (its offsets are spelled out here, not imported from the writer),
and subprocess plumbing."""

import fcntl
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
FAKES = os.path.join(HERE, "fakes")
if PYTHON_DIR not in sys.path:
    sys.path.insert(0, PYTHON_DIR)

ABSENT = 0xFFFFFFFFFFFFFFFF


def u64(buf, off):
    return struct.unpack_from("<Q", buf, off)[0]


def text(buf, off, size):
    return bytes(buf[off : off + size]).rstrip(b"\0").decode("utf-8")


class Header:
    def __init__(self, b):
        self.magic = bytes(b[0:8])
        self.endian_bytes = bytes(b[8:12])
        self.major, self.minor = struct.unpack_from("<HH", b, 0x0C)
        self.header_size, self.flags = struct.unpack_from("<II", b, 0x10)
        self.file_size = u64(b, 0x18)
        self.state = u64(b, 0x20)
        self.heartbeat = u64(b, 0x28)
        self.pid = u64(b, 0x30)
        self.starttime = u64(b, 0x38)
        self.pidns = u64(b, 0x40)
        self.uid = u64(b, 0x48)
        self.created_realtime = u64(b, 0x50)
        self.created_monotonic = u64(b, 0x58)
        self.kind, self.period_us = struct.unpack_from("<II", b, 0x60)
        self.rank, self.local_rank, self.world_size = struct.unpack_from("<3i", b, 0x68)
        self.pad = bytes(b[0x74:0x80])
        self.job_id = text(b, 0x80, 64)
        self.framework = text(b, 0xC0, 64)
        self.cmdline = text(b, 0x100, 128)
        self.allocator_config = text(b, 0x180, 64)
        self.sections = [struct.unpack_from("<QII", b, 0x1C0 + 16 * i) for i in range(4)]


class Device:
    FIELDS = (
        "t allocated allocated_peak reserved reserved_peak active inactive_split requested "
        "retries ooms device_allocs device_frees device_free limit interval_peak step_peak"
    ).split()

    def __init__(self, b, off):
        self.seq = u64(b, off)
        self.ordinal, self.flags = struct.unpack_from("<II", b, off + 0x08)
        self.uuid = bytes(b[off + 0x10 : off + 0x20])
        self.pci = text(b, off + 0x20, 16)
        self.total = u64(b, off + 0x30)
        for i, name in enumerate(self.FIELDS):
            setattr(self, name, u64(b, off + 0x38 + 8 * i))
        self.tail = bytes(b[off + 0xB8 : off + 0x100])


class Sample:
    def __init__(self, b, off):
        self.seq = u64(b, off)
        (self.t, self.allocated, self.reserved, self.peak, self.active, self.step) = struct.unpack_from(
            "<6Q", b, off + 8
        )
        self.slot, self.flags, self.phase, self.crc = struct.unpack_from("<BBHI", b, off + 0x38)
        self.crc_ok = self.crc == zlib.crc32(bytes(b[off + 8 : off + 0x3C]))


class Event:
    def __init__(self, b, off):
        self.seq = u64(b, off)
        self.t = u64(b, off + 8)
        self.kind, self.slot, self.phase, self.text_len = struct.unpack_from("<4H", b, off + 0x10)
        self.step = u64(b, off + 0x18)
        self.args = struct.unpack_from("<6Q", b, off + 0x20)
        self.text = bytes(b[off + 0x50 : off + 0x50 + self.text_len]).decode("utf-8")
        self.crc = struct.unpack_from("<I", b, off + 0xFC)[0]
        self.crc_ok = self.crc == zlib.crc32(bytes(b[off + 8 : off + 0xFC]))


def read_bytes(path_or_fd):
    if isinstance(path_or_fd, int):
        size = os.fstat(path_or_fd).st_size
        return os.pread(path_or_fd, size, 0)
    with open(path_or_fd, "rb") as f:
        return f.read()


class Snapshot:
    """Everything in a channel file at one moment, parsed per the spec."""

    def __init__(self, b):
        self.raw = b
        self.header = Header(b)
        (dev_off, _, dev_cap), (str_off, _, str_cap), (s_off, _, s_cap), (e_off, _, e_cap) = self.header.sections
        self.devices_in_use = u64(b, 0x200)
        self.samples_head = u64(b, 0x208)
        self.events_head = u64(b, 0x210)
        self.strings_in_use = u64(b, 0x218)
        self.status_seq = u64(b, 0x240)
        self.status_step = u64(b, 0x248)
        self.status_t = u64(b, 0x250)
        self.status_len = u64(b, 0x258)
        self.status_label = bytes(b[0x260 : 0x260 + self.status_len]).decode("utf-8")
        self.devices = [Device(b, dev_off + 256 * i) for i in range(self.devices_in_use)]
        self.strings = []
        for i in range(self.strings_in_use):
            off = str_off + 64 * i
            self.strings.append(bytes(b[off + 1 : off + 1 + b[off]]).decode("utf-8"))
        self.sample_ring = (s_off, s_cap)
        self.event_ring = (e_off, e_cap)

    def phase_name(self, phase):
        return None if phase == 0 else self.strings[phase - 1]


class RingReader:
    """Section 4's reader algorithm, verbatim: `next`, lost counting, torn-record rejection."""

    def __init__(self, kind, size, next_index=0):
        self.kind = kind
        self.size = size
        self.next = next_index
        self.lost = 0

    def poll(self, b):
        head = u64(b, 0x208 if self.kind is Sample else 0x210)
        off, cap = Snapshot(b).sample_ring if self.kind is Sample else Snapshot(b).event_ring
        if head < self.next:
            raise AssertionError("head went backwards: %d < %d" % (head, self.next))
        if head - self.next > cap:
            self.lost += head - cap - self.next
            self.next = head - cap
        out = []
        idx = self.next
        while idx < head:
            rec_off = off + (idx & (cap - 1)) * self.size
            s1 = u64(b, rec_off)
            if s1 <= 2 * idx + 1:
                break
            if s1 > 2 * idx + 2:
                self.lost += 1
            else:
                copy = bytes(b[rec_off : rec_off + self.size])
                s2 = u64(b, rec_off)
                rec = self.kind(copy, 0)
                if s2 != s1 or rec.seq != s1 or not rec.crc_ok:
                    self.lost += 1
                else:
                    out.append(rec)
            idx += 1
        self.next = idx
        return out


def samples(b, start=0):
    reader = RingReader(Sample, 64, start)
    return reader.poll(b), reader.lost


def events(b, start=0):
    reader = RingReader(Event, 256, start)
    return reader.poll(b), reader.lost


def lock_is_held(path):
    """Section 6's liveness probe: a shared lock fails while the writer holds its own."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def channel_files(directory):
    return sorted(n for n in os.listdir(directory) if n.endswith(".vsc"))


class TempDir:
    """A private (0700) directory, removed afterwards."""

    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix="vramscope-test-")
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)


def python_env(extra=None, fakes=False):
    env = dict(os.environ)
    for name in list(env):
        if name.startswith("VRAMSCOPE_") or name in ("PYTHONPATH", "RANK", "LOCAL_RANK", "WORLD_SIZE"):
            del env[name]
    paths = [PYTHON_DIR]
    if fakes:
        paths.insert(0, FAKES)
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.update(extra or {})
    return env


def run_python(code, env, timeout=60, args=(), **kwargs):
    return subprocess.run(
        [sys.executable, "-c", code] + list(args),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        universal_newlines=True,
        timeout=timeout,
        **kwargs
    )


def reset_runtime():
    """Stops any writer this test process started and forgets earlier failures and warnings."""
    import vramscope
    from vramscope import _guard, _runtime

    vramscope.stop()
    _runtime._failed = False
    _runtime._exit_error = None
    _runtime.layout = None
    _runtime._budget.count = 0
    _guard._warned.clear()


class PrivateRuntime:
    """A test's own writer state: the runtime reset, every variable starting with one of
    `prefixes` cleared, and VRAMSCOPE_DIR naming a fresh private directory (`dir`). `close`
    resets the runtime again, puts the environment back and removes the directory."""

    def __init__(self, prefixes=("VRAMSCOPE_",)):
        reset_runtime()
        self._tmp = TempDir()
        self.dir = self._tmp.__enter__()
        self._saved_env = dict(os.environ)
        for name in list(os.environ):
            if name.startswith(prefixes):
                del os.environ[name]
        os.environ["VRAMSCOPE_DIR"] = self.dir

    def close(self):
        reset_runtime()
        os.environ.clear()
        os.environ.update(self._saved_env)
        self._tmp.__exit__(None, None, None)
