//! What the reader hands out: plain owned values, every text sanitised, every figure the
//! writer could not read as `None`.

use super::kinds::{EventKind, WriterKind, WriterState};

/// The header's fixed fields: who writes the channel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The writer's pid in its own pid namespace.
    pub pid: u64,
    /// Field 22 of the writer's `/proc/self/stat`.
    pub starttime: u64,
    /// Inode of the writer's pid namespace.
    pub pid_ns: Option<u64>,
    pub uid: u64,
    pub created_realtime_ns: u64,
    pub created_monotonic_ns: u64,
    pub kind: WriterKind,
    pub sample_period_us: u32,
    pub rank: Option<i32>,
    pub local_rank: Option<i32>,
    pub world_size: Option<i32>,
    pub job_id: String,
    pub framework: String,
    pub cmdline: String,
    pub allocator_config: String,
    /// Header flags, `layout::flags::*`.
    pub flags: u32,
    /// The file's minor version (the major is always 1 here).
    pub minor: u16,
    pub file_size: u64,
}

/// Whether the writer is still there (§6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Liveness {
    Alive,
    /// Alive, but its heartbeat is older than `max(5 s, 10 sample periods)`.
    Stalled {
        heartbeat_age_ns: u64,
    },
    /// Gone. `crashed`: it never said it exited (SIGKILL, a crash, a reused pid).
    Ended {
        crashed: bool,
    },
}

/// One device slot (§2.5). Figures are `None` where the writer stored `ABSENT`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceSlot {
    pub index: usize,
    pub ordinal: u32,
    pub uuid: Option<[u8; 16]>,
    /// `uuid` names a MIG device (`device::FLAG_UUID_MIG`).
    pub uuid_is_mig: bool,
    pub pci_bus_id: Option<String>,
    pub total: Option<u64>,
    pub read_at_ns: Option<u64>,
    pub allocated: Option<u64>,
    pub allocated_peak: Option<u64>,
    pub reserved: Option<u64>,
    pub reserved_peak: Option<u64>,
    pub active: Option<u64>,
    pub inactive_split: Option<u64>,
    pub requested: Option<u64>,
    pub alloc_retries: Option<u64>,
    pub ooms: Option<u64>,
    pub device_allocs: Option<u64>,
    pub device_frees: Option<u64>,
    pub device_free: Option<u64>,
    pub limit: Option<u64>,
    pub interval_peak: Option<u64>,
    pub step_peak: Option<u64>,
}

/// The writer's status (§2.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    pub step: Option<u64>,
    pub set_at_ns: u64,
    pub label: String,
}

/// One sample record (§2.7).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SampleRecord {
    pub t_ns: u64,
    pub slot: u8,
    /// `layout::sample::FLAG_*`.
    pub flags: u8,
    /// 0 for none; phase `n` is `Update::phases[n - 1]`.
    pub phase: u16,
    pub allocated: Option<u64>,
    pub reserved: Option<u64>,
    pub peak: Option<u64>,
    pub active: Option<u64>,
    pub step: Option<u64>,
}

/// One event record (§2.8).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventRecord {
    pub t_ns: u64,
    pub kind: EventKind,
    pub slot: Option<u16>,
    pub phase: u16,
    pub step: Option<u64>,
    /// Raw arguments; `ABSENT` where unused.
    pub args: [u64; 6],
    pub text: String,
    /// Whether `text` is the writer's bytes unchanged: sanitising withheld nothing (a
    /// control character, NUL, invalid UTF-8). A name that must be taken as it is (a
    /// snapshot's file name) is refused when not.
    pub text_intact: bool,
}

/// One poll's worth: the current state plus the ring records that are new since the last one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Update {
    pub state: WriterState,
    pub liveness: Liveness,
    pub heartbeat_ns: Option<u64>,
    /// Slots `0..devices in use` that could be read consistently (this poll or earlier).
    pub devices: Vec<DeviceSlot>,
    /// `None` before the writer first sets a status.
    pub status: Option<Status>,
    /// The strings section: phase `n` is `phases[n - 1]`.
    pub phases: Vec<String>,
    pub samples: Vec<SampleRecord>,
    pub events: Vec<EventRecord>,
    /// Records appended but never seen (overwritten or torn), cumulative since open.
    pub lost_samples: u64,
    pub lost_events: u64,
}
