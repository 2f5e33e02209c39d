"""The bytes the Python writer puts in a channel file, checked field by field against
docs/channel-v1.md with the tests' own parser."""

import os
import stat
import struct
import unittest
import zlib

import _support as S
from vramscope import _layout as L
from vramscope._channel import Channel, DeviceInfo
from vramscope._identity import Identity, proc_starttime

UUID = bytes(range(0xA0, 0xB0))


def make_identity():
    ident = Identity(L.KIND_PYTORCH, framework="torch 2.5.1+cu124", sample_period_us=50000)
    ident.rank, ident.local_rank, ident.world_size = 3, 1, 8
    ident.job_id = "job-42"
    ident.cmdline = "python train.py --lr 0.1"
    ident.allocator_config = "expandable_segments:True"
    ident.flags = L.FLAG_PEAK_RESET | L.FLAG_MODULE_ATTRIBUTION
    return ident


class ChannelBytes(unittest.TestCase):
    def setUp(self):
        self.tmp = S.TempDir()
        self.dir = self.tmp.__enter__()
        self.ident = make_identity()
        self.channel = Channel.create(
            self.ident,
            devices=[DeviceInfo(2, UUID, "00000000:18:00.0", 80 << 30)],
            directory=self.dir,
        )

    def tearDown(self):
        if not self.channel.closed:
            self.channel.finish()
        self.tmp.__exit__(None, None, None)

    def snapshot(self):
        return S.Snapshot(S.read_bytes(self.channel.path))

    def test_file_name_mode_and_size(self):
        name = "%d-%d.vsc" % (os.getpid(), proc_starttime())
        self.assertEqual(os.listdir(self.dir), [name])
        st = os.lstat(os.path.join(self.dir, name))
        self.assertTrue(stat.S_ISREG(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600)
        self.assertEqual(st.st_size, 401408)
        self.assertEqual(stat.S_IMODE(os.stat(self.dir).st_mode), 0o700)

    def test_header_fields(self):
        h = self.snapshot().header
        self.assertEqual(h.magic, b"VRAMSCOP")
        self.assertEqual(h.endian_bytes, b"\x04\x03\x02\x01")
        self.assertEqual((h.major, h.minor), (1, 0))
        self.assertEqual(h.header_size, 512)
        self.assertEqual(h.flags, 0b11)
        self.assertEqual(h.file_size, 401408)
        self.assertEqual(h.state, 1)
        self.assertEqual(h.heartbeat, self.ident.created_monotonic_ns)
        self.assertEqual(h.pid, os.getpid())
        self.assertEqual(h.starttime, proc_starttime())
        self.assertEqual(h.pidns, os.stat("/proc/self/ns/pid").st_ino)
        self.assertEqual(h.uid, os.geteuid())
        self.assertEqual(h.created_realtime, self.ident.created_realtime_ns)
        self.assertEqual(h.created_monotonic, self.ident.created_monotonic_ns)
        self.assertEqual((h.kind, h.period_us), (1, 50000))
        self.assertEqual((h.rank, h.local_rank, h.world_size), (3, 1, 8))
        self.assertEqual(h.pad, bytes(12))
        self.assertEqual(h.job_id, "job-42")
        self.assertEqual(h.framework, "torch 2.5.1+cu124")
        self.assertEqual(h.cmdline, "python train.py --lr 0.1")
        self.assertEqual(h.allocator_config, "expandable_segments:True")
        self.assertEqual(
            h.sections,
            [(0x400, 256, 16), (0x1400, 64, 32), (0x2000, 64, 4096), (0x42000, 256, 512)],
        )

    def test_fresh_control_status_and_absent_figures(self):
        snap = self.snapshot()
        self.assertEqual(
            (snap.devices_in_use, snap.samples_head, snap.events_head, snap.strings_in_use),
            (1, 0, 0, 0),
        )
        self.assertEqual((snap.status_seq, snap.status_step, snap.status_len), (0, S.ABSENT, 0))
        dev = snap.devices[0]
        self.assertEqual(dev.seq, 0)
        for name in S.Device.FIELDS:
            self.assertEqual(getattr(dev, name), S.ABSENT, name)

    def test_device_identity_and_figures(self):
        figures = list(range(1000, 1016))
        self.channel.publish_device(0, figures)
        dev = self.snapshot().devices[0]
        self.assertEqual(dev.seq, 2)
        self.assertEqual((dev.ordinal, dev.flags), (2, 0b11))
        self.assertEqual(dev.uuid, UUID)
        self.assertEqual(dev.pci, "00000000:18:00.0")
        self.assertEqual(dev.total, 80 << 30)
        self.assertEqual([getattr(dev, n) for n in S.Device.FIELDS], figures)
        self.assertEqual(dev.tail, bytes(0x48))

    def test_the_spare_keeps_each_block_as_it_was_before_its_last_update(self):
        # Section 3: a writer killed inside an update leaves its last complete values there.
        first = list(range(1000, 1016))
        self.channel.publish_device(0, first)
        self.channel.publish_device(0, list(range(2000, 2016)))
        b = S.read_bytes(self.channel.path)
        self.assertEqual((S.u64(b, 0x300), S.u64(b, 0x308)), (3, 0x400))
        # The slot from +0x08: ordinal and flags, UUID, PCI bus id, total, then the figures.
        identity = bytes(b[0x408:0x438])
        self.assertEqual(bytes(b[0x310:0x3C0]), identity + struct.pack("<16Q", *first))
        self.channel.set_status(7, "forward", 11)
        self.channel.set_status(8, "backward", 12)
        b = S.read_bytes(self.channel.path)
        self.assertEqual((S.u64(b, 0x300), S.u64(b, 0x308)), (3, 0x240))
        self.assertEqual(struct.unpack_from("<3Q", b, 0x310), (7, 11, 7))
        self.assertEqual(bytes(b[0x328:0x3C8]), b"forward".ljust(160, b"\0"))
        self.assertEqual(S.u64(b, 0x248), 8)

    def test_device_added_later_and_without_identity(self):
        slot = self.channel.add_device(DeviceInfo(0))
        self.assertEqual(slot, 1)
        snap = self.snapshot()
        self.assertEqual(snap.devices_in_use, 2)
        dev = snap.devices[1]
        self.assertEqual((dev.ordinal, dev.flags, dev.uuid, dev.total), (0, 0, bytes(16), S.ABSENT))

    def test_device_capacity(self):
        for _ in range(15):
            self.assertIsNotNone(self.channel.add_device(DeviceInfo(1)))
        self.assertIsNone(self.channel.add_device(DeviceInfo(1)))
        self.assertEqual(self.snapshot().devices_in_use, 16)

    def test_status(self):
        self.channel.set_status(7, "forward/model.layers.3", 123456)
        snap = self.snapshot()
        self.assertEqual(snap.status_seq, 2)
        self.assertEqual((snap.status_step, snap.status_t), (7, 123456))
        self.assertEqual(snap.status_label, "forward/model.layers.3")
        long_label = "é" * 100  # 200 bytes: cut to 160 on a character boundary
        self.channel.set_status(None, long_label, 5)
        snap = self.snapshot()
        self.assertEqual(snap.status_step, S.ABSENT)
        self.assertEqual(snap.status_len, 160)
        self.assertEqual(snap.status_label, "é" * 80)

    def test_strings(self):
        self.assertEqual(self.channel.intern("forward"), 1)
        self.assertEqual(self.channel.intern("backward"), 2)
        self.assertEqual(self.channel.intern("forward"), 1)
        self.assertEqual(self.channel.intern("x" * 100), 3)
        snap = self.snapshot()
        self.assertEqual(snap.strings, ["forward", "backward", "x" * 63])
        for i in range(29):
            self.channel.intern("p%d" % i)
        self.assertEqual(self.channel.intern("one too many"), 0)
        self.assertEqual(self.snapshot().strings_in_use, 32)

    def test_sample_record(self):
        self.channel.append_sample(111, 0, 10, 20, 30, 40, 5, L.SAMPLE_PEAK_EXACT | L.SAMPLE_HOOK, 2)
        raw = S.read_bytes(self.channel.path)
        off = 0x2000
        self.assertEqual(S.u64(raw, off), 2)
        rec = S.Sample(raw, off)
        self.assertEqual(
            (rec.t, rec.allocated, rec.reserved, rec.peak, rec.active, rec.step), (111, 10, 20, 30, 40, 5)
        )
        self.assertEqual((rec.slot, rec.flags, rec.phase), (0, 0b1001, 2))
        self.assertEqual(rec.crc, zlib.crc32(raw[off + 8 : off + 0x3C]))
        self.assertEqual(S.u64(raw, 0x208), 1)

    def test_event_record(self):
        self.channel.append_event(222, L.EV_OOM, 0, 3, 9, (1, 2, 3, 4, 5, None), "forward/layer")
        raw = S.read_bytes(self.channel.path)
        off = 0x42000
        rec = S.Event(raw, off)
        self.assertEqual(rec.seq, 2)
        self.assertEqual((rec.t, rec.kind, rec.slot, rec.phase, rec.step), (222, 1, 0, 3, 9))
        self.assertEqual(rec.args, (1, 2, 3, 4, 5, S.ABSENT))
        self.assertEqual((rec.text_len, rec.text), (13, "forward/layer"))
        self.assertEqual(raw[off + 0x50 + 13 : off + 0xFC], bytes(172 - 13))
        self.assertTrue(rec.crc_ok)
        self.assertEqual(S.u64(raw, 0x210), 1)

    def test_event_text_cut_to_172_bytes(self):
        self.channel.append_event(1, L.EV_MARK, L.NO_SLOT, 0, None, (), "€" * 60)
        rec = S.Event(S.read_bytes(self.channel.path), 0x42000)
        self.assertEqual(rec.text_len, 171)  # 57 whole 3-byte characters; the 58th would split
        self.assertEqual(rec.text, "€" * 57)
        self.assertEqual(rec.slot, 0xFFFF)
        self.assertEqual(rec.step, S.ABSENT)
        self.assertEqual(rec.args, (S.ABSENT,) * 6)

    def test_heartbeat(self):
        self.channel.heartbeat(987654321)
        self.assertEqual(self.snapshot().header.heartbeat, 987654321)

    def test_clean_finish_unlinks_after_exit_event(self):
        fd = os.open(self.channel.path, os.O_RDONLY)
        try:
            self.assertTrue(S.lock_is_held(self.channel.path))
            self.channel.finish(t=777)
            self.assertEqual(os.listdir(self.dir), [])
            snap = S.Snapshot(S.read_bytes(fd))
        finally:
            os.close(fd)
        self.assertEqual(snap.header.state, 2)
        evs, lost = S.events(snap.raw)
        self.assertEqual(lost, 0)
        self.assertEqual([(e.kind, e.args[0], e.t) for e in evs], [(9, 0, 777)])

    def test_error_finish_keeps_file_and_releases_lock(self):
        path = self.channel.path
        self.channel.finish("RuntimeError: boom", t=888)
        self.assertTrue(os.path.exists(path))
        self.assertFalse(S.lock_is_held(path))
        snap = S.Snapshot(S.read_bytes(path))
        self.assertEqual(snap.header.state, 3)
        evs, _ = S.events(snap.raw)
        self.assertEqual([(e.kind, e.args[0], e.text) for e in evs], [(9, 1, "RuntimeError: boom")])

    def test_text_field_that_fills_its_size_has_no_nul(self):
        ident = make_identity()
        ident.job_id = "j" * 80
        self.channel.finish()
        other = Channel.create(ident, directory=self.dir)
        try:
            raw = S.read_bytes(other.path)
            self.assertEqual(raw[0x80:0xC0], b"j" * 64)
        finally:
            other.finish()


class Directory(unittest.TestCase):
    def test_default_directory(self):
        from vramscope._directory import channel_dir

        self.assertEqual(channel_dir({}), "/dev/shm/vramscope-%d" % os.geteuid())
        self.assertEqual(channel_dir({"VRAMSCOPE_DIR": "/x/y"}), "/x/y")

    def test_created_0700(self):
        with S.TempDir() as d:
            target = os.path.join(d, "sub")
            ch = Channel.create(make_identity(), directory=target)
            try:
                self.assertEqual(stat.S_IMODE(os.stat(target).st_mode), 0o700)
            finally:
                ch.finish()


if __name__ == "__main__":
    unittest.main()
