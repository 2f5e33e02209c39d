//! Every number of the channel's binary layout (docs/channel-v1.md), in one place: offsets,
//! sizes, kinds, flags and limits. The writer and the reader both use these names, so the two
//! can only disagree with the spec, never with each other.

/// A figure the writer could not read. Never 0: the reader shows it as `n/a`.
pub const ABSENT: u64 = u64::MAX;

/// The first eight bytes, written last so a half-made file never looks valid.
pub const MAGIC: [u8; 8] = *b"VRAMSCOP";
/// Reads as `04 03 02 01` in a little-endian file.
pub const ENDIAN_TAG: u32 = 0x0102_0304;
pub const VERSION_MAJOR: u16 = 1;
pub const VERSION_MINOR: u16 = 0;

/// File name extension of a published channel.
pub const EXTENSION: &str = "vsc";
/// Extension of a channel still being created (the name also starts with a dot).
pub const TEMP_EXTENSION: &str = "tmp";
/// Mode of the channel directory.
pub const DIR_MODE: u32 = 0o700;
/// Mode of a channel file.
pub const FILE_MODE: u32 = 0o600;

/// Sections start at or after this offset, past header, control and status.
pub const SECTIONS_MIN_OFFSET: u64 = 0x400;
/// Alignment of section offsets and record sizes, so every `u64` is naturally aligned.
pub const FIELD_ALIGN: u64 = 8;
/// The writers here start each ring on a page and round the file up to one.
pub const PAGE: u64 = 4096;

/// `state` values.
pub mod state {
    pub const STARTING: u64 = 0;
    pub const RUNNING: u64 = 1;
    pub const EXITED_CLEAN: u64 = 2;
    pub const EXITED_ERROR: u64 = 3;
}

/// Header flags.
pub mod flags {
    /// The writer resets the framework's peak counters: exact interval peaks.
    pub const PEAK_RESET: u32 = 1 << 0;
    pub const MODULE_ATTRIBUTION: u32 = 1 << 1;
    /// The writer records the allocator's history and answers snapshot requests
    /// (`control::SNAPSHOT_REQUESTS`, event `SNAPSHOT_WRITTEN`).
    pub const SITES: u32 = 1 << 2;
    /// Started by `vramscope attach` in a running process: its framework peak counters
    /// cover the time before the attach.
    pub const ATTACHED: u32 = 1 << 3;
}

/// Writer kinds (header `0x060`).
pub mod kind {
    pub const PYTORCH: u32 = 1;
    pub const JAX: u32 = 2;
    pub const TENSORFLOW: u32 = 3;
    pub const CUPY: u32 = 4;
    pub const PYTHON: u32 = 5;
    pub const C: u32 = 16;
    pub const RUST: u32 = 17;
}

/// The 512-byte header at offset 0.
pub mod header {
    pub const SIZE: usize = 512;
    pub const MAGIC: usize = 0x000;
    pub const ENDIAN: usize = 0x008;
    pub const MAJOR: usize = 0x00C;
    pub const MINOR: usize = 0x00E;
    pub const HEADER_SIZE: usize = 0x010;
    pub const FLAGS: usize = 0x014;
    pub const FILE_SIZE: usize = 0x018;
    /// [M]
    pub const STATE: usize = 0x020;
    /// [M]
    pub const HEARTBEAT: usize = 0x028;
    pub const PID: usize = 0x030;
    pub const STARTTIME: usize = 0x038;
    pub const PID_NS: usize = 0x040;
    pub const UID: usize = 0x048;
    pub const CREATED_REALTIME: usize = 0x050;
    pub const CREATED_MONOTONIC: usize = 0x058;
    pub const WRITER_KIND: usize = 0x060;
    pub const SAMPLE_PERIOD: usize = 0x064;
    pub const RANK: usize = 0x068;
    pub const LOCAL_RANK: usize = 0x06C;
    pub const WORLD_SIZE: usize = 0x070;
    /// Ranks stored when the program is not distributed.
    pub const NOT_DISTRIBUTED: i32 = -1;
    pub const JOB_ID: usize = 0x080;
    pub const JOB_ID_LEN: usize = 64;
    pub const FRAMEWORK: usize = 0x0C0;
    pub const FRAMEWORK_LEN: usize = 64;
    pub const CMDLINE: usize = 0x100;
    pub const CMDLINE_LEN: usize = 128;
    pub const ALLOCATOR_CONFIG: usize = 0x180;
    pub const ALLOCATOR_CONFIG_LEN: usize = 64;
    pub const SECTION_TABLE: usize = 0x1C0;
}

/// The section table at `0x1C0`: four `{ u64 offset, u32 record_size, u32 capacity }`.
pub mod section {
    pub const ENTRY_SIZE: usize = 16;
    pub const OFFSET: usize = 0;
    pub const RECORD_SIZE: usize = 8;
    pub const CAPACITY: usize = 12;
    /// Entry order in the table.
    pub const DEVICES: usize = 0;
    pub const STRINGS: usize = 1;
    pub const SAMPLES: usize = 2;
    pub const EVENTS: usize = 3;
    pub const COUNT: usize = 4;
    /// Capacity limits a reader enforces.
    pub const DEVICES_MAX: u32 = 64;
    pub const STRINGS_MAX: u32 = 1024;
    pub const RING_MAX: u32 = 1 << 20;
}

/// Control block at `0x200`, all [M].
pub mod control {
    pub const OFFSET: usize = 0x200;
    pub const SIZE: usize = 64;
    pub const DEVICES_IN_USE: usize = 0x200;
    pub const SAMPLES_HEAD: usize = 0x208;
    pub const EVENTS_HEAD: usize = 0x210;
    pub const STRINGS_IN_USE: usize = 0x218;
    /// [R] Snapshot requests: a count readers raise by one (the only bytes a reader ever
    /// writes); a writer with `flags::SITES` dumps a snapshot when it is above the count it
    /// has served.
    pub const SNAPSHOT_REQUESTS: usize = 0x220;
}

/// Status at `0x240`, a seqlock. Field offsets are relative to `OFFSET`.
pub mod status {
    pub const OFFSET: usize = 0x240;
    pub const SIZE: usize = 192;
    pub const SEQ: usize = 0x00;
    pub const STEP: usize = 0x08;
    pub const SET_AT: usize = 0x10;
    pub const LABEL_LEN: usize = 0x18;
    pub const LABEL: usize = 0x20;
    pub const LABEL_CAP: usize = 160;
}

/// The spare at `0x300` (§3): before each seqlocked update the writer copies the block there as
/// it stands, so that a writer killed between the two sequence stores still leaves its last
/// complete values in the file. Absolute offsets.
pub mod spare {
    pub const OFFSET: usize = 0x300;
    /// [M] The odd sequence the block has while this copy stands in for it; 0: none.
    pub const SEQ: usize = 0x300;
    /// [M] The file offset of that block: the status's or a device slot's.
    pub const BLOCK: usize = 0x308;
    /// The block's bytes from `+0x08` on (`STATUS_COPY` or `DEVICE_COPY` of them).
    pub const COPY: usize = 0x310;
    /// Status: every field after its seq.
    pub const STATUS_COPY: usize = super::status::SIZE - 8;
    /// Device slot: identity and figures, up to the end of the v1 fields.
    pub const DEVICE_COPY: usize = super::device::V1_END - 8;
    pub const SIZE: usize = COPY - OFFSET + STATUS_COPY;
}

/// One device slot, its own seqlock. Offsets relative to the slot.
pub mod device {
    pub const RECORD_SIZE: usize = 256;
    pub const SEQ: usize = 0x00;
    pub const ORDINAL: usize = 0x08;
    pub const FLAGS: usize = 0x0C;
    pub const UUID: usize = 0x10;
    pub const UUID_LEN: usize = 16;
    pub const PCI_BUS_ID: usize = 0x20;
    pub const PCI_BUS_ID_LEN: usize = 16;
    pub const TOTAL: usize = 0x30;
    pub const READ_AT: usize = 0x38;
    pub const ALLOCATED: usize = 0x40;
    pub const ALLOCATED_PEAK: usize = 0x48;
    pub const RESERVED: usize = 0x50;
    pub const RESERVED_PEAK: usize = 0x58;
    pub const ACTIVE: usize = 0x60;
    pub const INACTIVE_SPLIT: usize = 0x68;
    pub const REQUESTED: usize = 0x70;
    pub const ALLOC_RETRIES: usize = 0x78;
    pub const OOMS: usize = 0x80;
    pub const DEVICE_ALLOCS: usize = 0x88;
    pub const DEVICE_FREES: usize = 0x90;
    pub const DEVICE_FREE: usize = 0x98;
    pub const LIMIT: usize = 0xA0;
    pub const INTERVAL_PEAK: usize = 0xA8;
    pub const STEP_PEAK: usize = 0xB0;
    /// First byte after the v1 fields; the rest of the slot is zero.
    pub const V1_END: usize = 0xB8;
    /// The [M] figures, `ALLOCATED..=STEP_PEAK`, in order.
    pub const FIGURES: usize = 15;
    pub const FLAG_UUID_VALID: u32 = 1 << 0;
    pub const FLAG_PCI_BUS_ID_VALID: u32 = 1 << 1;
    /// The UUID names a MIG device (a `MIG-` UUID, as CUDA_VISIBLE_DEVICES gives it), not a
    /// whole GPU. A reader that does not know the bit prints it as `GPU-`; the join by UUID
    /// compares the 16 bytes either way.
    pub const FLAG_UUID_MIG: u32 = 1 << 2;
}

/// A phase name: `u8` length then UTF-8.
pub mod string {
    pub const RECORD_SIZE: usize = 64;
    pub const LEN: usize = 0;
    pub const TEXT: usize = 1;
    pub const MAX_LEN: usize = 63;
}

/// A sample ring record. Offsets relative to the record.
pub mod sample {
    pub const RECORD_SIZE: usize = 64;
    pub const SEQ: usize = 0x00;
    pub const T: usize = 0x08;
    pub const ALLOCATED: usize = 0x10;
    pub const RESERVED: usize = 0x18;
    pub const PEAK: usize = 0x20;
    pub const ACTIVE: usize = 0x28;
    pub const STEP: usize = 0x30;
    pub const SLOT: usize = 0x38;
    pub const FLAGS: usize = 0x39;
    pub const PHASE: usize = 0x3A;
    pub const CRC: usize = 0x3C;
    /// The bytes the CRC covers: `T..CRC`.
    pub const CRC_START: usize = T;
    pub const FLAG_PEAK_EXACT: u8 = 1 << 0;
    pub const FLAG_NEW_HIGH_WATER: u8 = 1 << 1;
    pub const FLAG_FOREIGN_RESET_SEEN: u8 = 1 << 2;
    pub const FLAG_HOOK: u8 = 1 << 3;
    /// The sample's step counts the steps since an attach, not the job's own (the attached
    /// writer found no count in the job's optimizer).
    pub const FLAG_STEP_SINCE_ATTACH: u8 = 1 << 4;
}

/// An event ring record. Offsets relative to the record.
pub mod event {
    pub const RECORD_SIZE: usize = 256;
    pub const SEQ: usize = 0x00;
    pub const T: usize = 0x08;
    pub const KIND: usize = 0x10;
    pub const SLOT: usize = 0x12;
    pub const PHASE: usize = 0x14;
    pub const TEXT_LEN: usize = 0x16;
    pub const STEP: usize = 0x18;
    pub const ARGS: usize = 0x20;
    pub const ARG_COUNT: usize = 6;
    pub const TEXT: usize = 0x50;
    pub const TEXT_CAP: usize = 172;
    pub const CRC: usize = 0xFC;
    pub const CRC_START: usize = T;
    /// `slot` of an event that concerns no device.
    pub const NO_SLOT: u16 = 0xFFFF;

    pub const OOM: u16 = 1;
    pub const OOM_ERROR: u16 = 2;
    pub const PHASE_BEGIN: u16 = 3;
    pub const PHASE_END: u16 = 4;
    pub const STEP_END: u16 = 5;
    pub const MARK: u16 = 6;
    pub const NEW_HIGH_WATER: u16 = 7;
    pub const ALLOC_RETRY: u16 = 8;
    pub const EXIT: u16 = 9;
    pub const SNAPSHOT_WRITTEN: u16 = 10;
    pub const FOREIGN_PEAK_RESET: u16 = 11;
    pub const EMPTY_CACHE: u16 = 12;
    /// Memory by kind at a step's end, written where it changed (§2.8).
    pub const MEMORY_KINDS: u16 = 13;

    /// `SNAPSHOT_WRITTEN`'s reason (`a2`): why the writer dumped the snapshot.
    pub const SNAPSHOT_OOM: u64 = 0;
    pub const SNAPSHOT_PEAK: u64 = 1;
    pub const SNAPSHOT_REQUEST: u64 = 2;
}

/// Liveness thresholds (§6).
pub mod liveness {
    /// A heartbeat older than this (or than `STALL_PERIODS` sample periods) means stalled.
    pub const STALL_MIN_NS: u64 = 5_000_000_000;
    pub const STALL_PERIODS: u64 = 10;
    /// Ended writers' files older than this are removed by their owner's reader.
    pub const STALE_TTL_NS: u64 = 3_600_000_000_000;
}

/// The capacities the writers in this repository use by default.
pub mod defaults {
    pub const DEVICES: u32 = 16;
    pub const STRINGS: u32 = 32;
    pub const SAMPLES: u32 = 4096;
    pub const EVENTS: u32 = 512;
    pub const DEVICES_OFFSET: u64 = 0x400;
    pub const STRINGS_OFFSET: u64 = 0x1400;
    pub const SAMPLES_OFFSET: u64 = 0x2000;
    pub const EVENTS_OFFSET: u64 = 0x4_2000;
    pub const FILE_SIZE: u64 = 401_408;
}

// The fixed parts must not run into each other or into the sections, and every [M] word must
// be 8-aligned; a typo here would otherwise only show up as garbage in another language.
const _: () = {
    assert!(header::SECTION_TABLE + section::COUNT * section::ENTRY_SIZE == header::SIZE);
    assert!(control::OFFSET == header::SIZE);
    assert!(status::OFFSET == control::OFFSET + control::SIZE);
    assert!((status::OFFSET + status::SIZE) as u64 <= SECTIONS_MIN_OFFSET);
    assert!(spare::OFFSET == status::OFFSET + status::SIZE);
    assert!((spare::OFFSET + spare::SIZE) as u64 <= SECTIONS_MIN_OFFSET);
    assert!(spare::DEVICE_COPY <= spare::STATUS_COPY);
    assert!(status::LABEL + status::LABEL_CAP == status::SIZE);
    assert!(control::STRINGS_IN_USE + 8 <= control::OFFSET + control::SIZE);
    assert!(control::SNAPSHOT_REQUESTS + 8 <= control::OFFSET + control::SIZE);
    assert!(device::STEP_PEAK + 8 == device::V1_END);
    assert!((device::STEP_PEAK - device::ALLOCATED) / 8 + 1 == device::FIGURES);
    assert!(sample::CRC + 4 == sample::RECORD_SIZE);
    assert!(event::ARGS + 8 * event::ARG_COUNT == event::TEXT);
    assert!(event::TEXT + event::TEXT_CAP == event::CRC);
    assert!(event::CRC + 4 == event::RECORD_SIZE);
    assert!(string::TEXT + string::MAX_LEN == string::RECORD_SIZE);
    assert!(
        defaults::STRINGS_OFFSET
            == defaults::DEVICES_OFFSET + defaults::DEVICES as u64 * device::RECORD_SIZE as u64
    );
    assert!(
        defaults::EVENTS_OFFSET
            == defaults::SAMPLES_OFFSET + defaults::SAMPLES as u64 * sample::RECORD_SIZE as u64
    );
    assert!(
        defaults::FILE_SIZE
            == defaults::EVENTS_OFFSET + defaults::EVENTS as u64 * event::RECORD_SIZE as u64
    );
};
