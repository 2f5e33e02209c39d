"""Rings and seqlocks (spec sections 3 and 4): wrap-around with exact loss counts, the order
of the writer's stores, and a reader in this process racing a writer in another."""

import mmap
import os
import struct
import subprocess
import sys
import time
import unittest

import _support as S
from vramscope import _layout as L
from vramscope._channel import Channel, DeviceInfo
from vramscope._identity import Identity

SMALL = L.Layout(devices=2, strings=4, samples=8, events=4)


def small_channel(directory, layout=SMALL):
    return Channel.create(Identity(L.KIND_PYTHON), devices=[DeviceInfo(0)], layout=layout, directory=directory)


class RingWrap(unittest.TestCase):
    def setUp(self):
        self.tmp = S.TempDir()
        self.ch = small_channel(self.tmp.__enter__())

    def tearDown(self):
        self.ch.finish()
        self.tmp.__exit__(None, None, None)

    def append_samples(self, first, count):
        for i in range(first, first + count):
            self.ch.append_sample(1000 + i, 0, i, 2 * i, 3 * i, 4 * i, i, 0, 0)

    def read(self):
        return S.read_bytes(self.ch.path)

    def test_layout_of_small_rings(self):
        h = S.Snapshot(self.read()).header
        self.assertEqual(h.sections, [(0x400, 256, 2), (0x600, 64, 4), (0x1000, 64, 8), (0x2000, 256, 4)])
        self.assertEqual(h.file_size, 0x3000)

    def test_reader_behind_counts_exactly_what_it_missed(self):
        reader = S.RingReader(S.Sample, 64, 0)
        self.append_samples(0, 20)
        got = reader.poll(self.read())
        self.assertEqual([r.allocated for r in got], list(range(12, 20)))
        self.assertEqual(reader.lost, 12)
        self.append_samples(20, 3)
        got = reader.poll(self.read())
        self.assertEqual([r.allocated for r in got], [20, 21, 22])
        self.assertEqual(reader.lost, 12)
        self.append_samples(23, 100)
        got = reader.poll(self.read())
        self.assertEqual([r.allocated for r in got], list(range(115, 123)))
        self.assertEqual(reader.lost, 12 + 92)
        self.assertEqual(reader.lost + 8 + 3 + 8, 123)
        for r in got:
            self.assertEqual((r.t, r.reserved, r.peak, r.active, r.step), (1000 + r.allocated, 2 * r.allocated, 3 * r.allocated, 4 * r.allocated, r.allocated))

    def test_seq_of_each_slot_is_that_of_its_last_record(self):
        self.append_samples(0, 13)
        raw = self.read()
        self.assertEqual(S.u64(raw, 0x208), 13)
        for slot in range(8):
            idx = max(i for i in range(13) if i % 8 == slot)
            self.assertEqual(S.u64(raw, 0x1000 + 64 * slot), 2 * idx + 2)

    def test_event_ring_wraps_the_same_way(self):
        for i in range(10):
            self.ch.append_event(i, L.EV_MARK, L.NO_SLOT, 0, None, (i,), "e%d" % i)
        got, lost = S.events(self.read())
        self.assertEqual(([e.text for e in got], lost), (["e6", "e7", "e8", "e9"], 6))

    def test_a_reader_opening_a_running_channel_starts_at_head(self):
        self.append_samples(0, 5)
        reader = S.RingReader(S.Sample, 64, S.u64(self.read(), 0x208))
        self.assertEqual(reader.poll(self.read()), [])
        self.append_samples(5, 2)
        self.assertEqual([r.allocated for r in reader.poll(self.read())], [5, 6])
        self.assertEqual(reader.lost, 0)


class _StoreRecorder:
    """Stands in for the writer's view of the file as 8-byte words; at every single store
    it captures what a reader would see at that instant."""

    def __init__(self, real, mm, observe):
        self._real = real
        self._mm = mm
        self._observe = observe
        self.seen = []

    def __setitem__(self, index, value):
        self.seen.append((index * 8, value, self._observe(bytes(self._mm))))
        self._real[index] = value


class StoreOrder(unittest.TestCase):
    def setUp(self):
        self.tmp = S.TempDir()
        self.ch = small_channel(self.tmp.__enter__())
        self.real = self.ch._q

    def tearDown(self):
        self.ch._q = self.real
        self.ch.finish()
        self.tmp.__exit__(None, None, None)

    def record(self, observe):
        rec = _StoreRecorder(self.real, self.ch._mm, observe)
        self.ch._q = rec
        return rec

    def test_ring_append_order(self):
        self.ch.append_sample(1, 0, 10, 0, 0, 0, 0, 0, 0)
        rec = self.record(lambda raw: S.Sample(raw, 0x1000 + 64))
        self.ch.append_sample(2, 0, 20, 0, 0, 0, 0, 0, 0)
        (o1, v1, before), (o2, v2, during), (o3, v3, after) = rec.seen
        # seq odd first, while the payload is still the old (empty) one
        self.assertEqual((o1, v1), (0x1000 + 64, 3))
        self.assertEqual(before.allocated, 0)
        # seq even once payload and CRC are complete
        self.assertEqual((o2, v2), (0x1000 + 64, 4))
        self.assertEqual((during.allocated, during.crc_ok), (20, True))
        # head last
        self.assertEqual((o3, v3), (0x208, 2))
        self.assertEqual(after.seq, 4)

    def test_device_seqlock_order(self):
        self.ch.publish_device(0, [1] * 16)
        rec = self.record(lambda raw: S.Device(raw, 0x400))
        self.ch.publish_device(0, [2] * 16)
        spare, slot = rec.seen[:2], rec.seen[2:]
        (o1, v1, before), (o2, v2, during) = slot
        self.assertEqual((o1, v1, before.allocated), (0x400, 3, 1))
        self.assertEqual((o2, v2, during.allocated, during.step_peak), (0x400, 4, 2, 2))
        # First the spare (section 3), named for this slot and the odd seq to come, while the
        # slot is untouched.
        self.assertEqual([(o, v, d.allocated) for o, v, d in spare], [(0x308, 0x400, 1), (0x300, 3, 1)])

    def test_the_spare_is_complete_before_it_is_named(self):
        self.ch.publish_device(0, [1] * 16)
        # The spare's copy of `allocated` (slot +0x40), at every store of the next update.
        rec = self.record(lambda raw: S.u64(raw, 0x310 + 0x38))
        self.ch.publish_device(0, [2] * 16)
        self.assertEqual([(o, v) for o, v, _ in rec.seen], [(0x308, 0x400), (0x300, 3), (0x400, 3), (0x400, 4)])
        # Before: what the first update kept (the figures before any, absent).
        self.assertEqual([copy for _, _, copy in rec.seen], [S.ABSENT, 1, 1, 1])

    def test_status_seqlock_order(self):
        rec = self.record(lambda raw: S.Snapshot(raw).status_label)
        self.ch.set_status(1, "x", 5)
        spare, status = rec.seen[:2], rec.seen[2:]
        (o1, v1, before), (o2, v2, during) = status
        self.assertEqual((o1, v1, before), (0x240, 1, ""))
        self.assertEqual((o2, v2, during), (0x240, 2, "x"))
        self.assertEqual([(o, v, label) for o, v, label in spare], [(0x308, 0x240, ""), (0x300, 1, "")])


WRITER = r"""
import sys
sys.path.insert(0, sys.argv[1])
from vramscope import _layout as L
from vramscope._channel import Channel, DeviceInfo
from vramscope._identity import Identity
ch = Channel.create(Identity(L.KIND_PYTHON), devices=[DeviceInfo(0)],
                    layout=L.Layout(devices=1, strings=0, samples=256, events=1), directory=sys.argv[2])
print(ch.path, flush=True)
sys.stdin.readline()
k = 0
while k < int(sys.argv[3]):
    ch.publish_device(0, [k] * 16)
    ch.append_sample(k, 0, k, k, k, k, k, 0, 0)
    k += 1
ch.finish()
"""


class RacingReader(unittest.TestCase):
    """A writer flat out in another process: every accepted copy is whole, and accepted plus
    lost always equals what the reader has moved past."""

    def test_no_torn_copy_is_ever_accepted(self):
        with S.TempDir() as d:
            with subprocess.Popen(
                [sys.executable, "-c", WRITER, S.PYTHON_DIR, d, "150000"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                universal_newlines=True,
            ) as proc:
                path = proc.stdout.readline().strip()
                fd = os.open(path, os.O_RDONLY)
                mm = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
                proc.stdin.write("go\n")
                proc.stdin.flush()
                reader = S.RingReader(S.Sample, 64, 0)
                accepted = slot_ok = slot_retry = 0
                while proc.poll() is None:
                    for rec in reader.poll(mm):
                        self.assertEqual({rec.t, rec.allocated, rec.reserved, rec.peak, rec.active, rec.step}, {rec.t})
                        accepted += 1
                    self.assertEqual(accepted + reader.lost, reader.next)
                    s1 = S.u64(mm, 0x400)
                    figures = struct.unpack_from("<16Q", mm, 0x438)
                    s2 = S.u64(mm, 0x400)
                    if s1 == s2 and s1 % 2 == 0:
                        self.assertEqual(len(set(figures)), 1, figures)
                        slot_ok += 1
                    else:
                        slot_retry += 1
                self.assertEqual(proc.wait(), 0)
                mm.close()
                os.close(fd)
        print("accepted %d lost %d; slot copies %d whole, %d retried" % (accepted, reader.lost, slot_ok, slot_retry), file=sys.stderr)
        self.assertGreater(accepted, 0)
        self.assertGreater(slot_ok, 0)


if __name__ == "__main__":
    unittest.main()
