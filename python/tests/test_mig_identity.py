"""A writer on a MIG device publishes the MIG device's UUID and says it is one (device flag
bit 2), whether the framework reports the MIG UUID or, as older CUDA runtimes did, the
GPU's own, as long as CUDA_VISIBLE_DEVICES names the MIG device."""

import unittest

import _support as S
from vramscope import _layout as L
from vramscope._channel import Channel, DeviceInfo
from vramscope._identity import Identity, mig_identity, visible_mig_uuids

MIG_A = "MIG-aaaaaaaa-1111-2222-3333-000000000001"
MIG_B = "MIG-bbbbbbbb-1111-2222-3333-000000000002"
RAW_A = bytes.fromhex("aaaaaaaa111122223333000000000001")
RAW_B = bytes.fromhex("bbbbbbbb111122223333000000000002")
GPU = bytes(range(16))


class MigIdentity(unittest.TestCase):
    def test_visible_mig_devices_in_their_order(self):
        env = {"CUDA_VISIBLE_DEVICES": "%s, 3,%s,MIG-GPU-x/1/0" % (MIG_A, MIG_B)}
        self.assertEqual(visible_mig_uuids(env), [RAW_A, None, RAW_B, None])
        self.assertEqual(visible_mig_uuids({"CUDA_VISIBLE_DEVICES": "0,1"}), [])
        self.assertEqual(visible_mig_uuids({}), [])

    def test_the_frameworks_mig_uuid_is_kept_and_marked(self):
        env = {"CUDA_VISIBLE_DEVICES": "%s,%s" % (MIG_A, MIG_B)}
        self.assertEqual(mig_identity(0, RAW_B, env), (RAW_B, True))

    def test_a_gpu_uuid_gives_way_to_the_mig_device_at_its_place(self):
        env = {"CUDA_VISIBLE_DEVICES": "%s,%s" % (MIG_A, MIG_B)}
        self.assertEqual(mig_identity(1, GPU, env), (RAW_B, True))
        self.assertEqual(mig_identity(1, None, env), (RAW_B, True))
        # Past the list, or a place that names no MIG device: as the framework said.
        self.assertEqual(mig_identity(2, GPU, env), (GPU, False))
        mixed = {"CUDA_VISIBLE_DEVICES": "GPU-00000000-0000-0000-0000-000000000000,%s" % MIG_A}
        self.assertEqual(mig_identity(0, GPU, mixed), (GPU, False))

    def test_without_mig_devices_nothing_changes(self):
        self.assertEqual(mig_identity(0, GPU, {"CUDA_VISIBLE_DEVICES": "0"}), (GPU, False))
        self.assertEqual(mig_identity(0, None, {}), (None, False))

    def test_the_channel_flags_a_mig_slot(self):
        with S.TempDir() as d:
            ident = Identity(L.KIND_PYTHON)
            channel = Channel.create(
                ident,
                devices=[
                    DeviceInfo(0, RAW_A, None, 10 << 30, mig=True),
                    DeviceInfo(1, GPU, mig=False),
                ],
                directory=d,
            )
            try:
                channel.publish_device(0, list(range(16)))
                devices = S.Snapshot(S.read_bytes(channel.path)).devices
                self.assertEqual(devices[0].flags, L.DEVICE_UUID_VALID | L.DEVICE_UUID_MIG)
                self.assertEqual(devices[0].uuid, RAW_A)
                self.assertEqual(devices[1].flags, L.DEVICE_UUID_VALID)
            finally:
                channel.finish()


if __name__ == "__main__":
    unittest.main()
