//! What a writer publishes: its configuration at creation and the figures it stores later.
//! Every figure is an `Option`; `None` is stored as `ABSENT`, never as 0.

use std::path::PathBuf;

use super::kinds::{EventKind, WriterKind};
use super::layout::{ABSENT, event};
use super::sections::Capacities;

/// Everything fixed at creation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriterConfig {
    pub kind: WriterKind,
    /// The sample period in µs; 0 when sampling only on demand.
    pub sample_period_us: u32,
    pub rank: Option<i32>,
    pub local_rank: Option<i32>,
    pub world_size: Option<i32>,
    /// Cut to 64 bytes.
    pub job_id: String,
    /// Framework and version, e.g. `torch 2.5.1+cu124`; cut to 64 bytes.
    pub framework: String,
    /// Arguments joined by spaces; cut to 128 bytes.
    pub cmdline: String,
    /// E.g. `PYTORCH_CUDA_ALLOC_CONF`; cut to 64 bytes.
    pub allocator_config: String,
    /// Header flags, `layout::flags::*`.
    pub flags: u32,
    /// The channel directory; `None` for the spec's choice ($VRAMSCOPE_DIR, /dev/shm, XDG).
    pub dir: Option<PathBuf>,
    pub capacities: Capacities,
}

impl Default for WriterConfig {
    fn default() -> WriterConfig {
        WriterConfig {
            kind: WriterKind::Rust,
            sample_period_us: 0,
            rank: None,
            local_rank: None,
            world_size: None,
            job_id: String::new(),
            framework: String::new(),
            cmdline: String::new(),
            allocator_config: String::new(),
            flags: 0,
            dir: None,
            capacities: Capacities::default(),
        }
    }
}

impl WriterConfig {
    /// A configuration filled from this process: the command line, the job id
    /// (`TORCHELASTIC_RUN_ID`, else `SLURM_JOB_ID`) and ranks (`RANK`, `LOCAL_RANK`,
    /// `WORLD_SIZE`) from the environment.
    pub fn from_process(kind: WriterKind) -> WriterConfig {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let number = |name: &str| var(name).and_then(|v| v.trim().parse::<i32>().ok());
        WriterConfig {
            kind,
            rank: number("RANK"),
            local_rank: number("LOCAL_RANK"),
            world_size: number("WORLD_SIZE"),
            job_id: var("TORCHELASTIC_RUN_ID")
                .or_else(|| var("SLURM_JOB_ID"))
                .unwrap_or_default(),
            cmdline: std::env::args().collect::<Vec<_>>().join(" "),
            ..WriterConfig::default()
        }
    }
}

/// A GPU the writer uses. The monitor joins it to NVML by UUID, else PCI bus id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceIdentity {
    /// The framework's ordinal (`cuda:N`), renumbered by `CUDA_VISIBLE_DEVICES`.
    pub ordinal: u32,
    /// Raw UUID bytes (see `parse_uuid` for NVML's text form).
    pub uuid: Option<[u8; 16]>,
    /// `0000:18:00.0` or `00000000:18:00.0`; cut to 16 bytes.
    pub pci_bus_id: Option<String>,
    /// Total device memory, bytes.
    pub total: Option<u64>,
}

/// One reading of a device's allocator figures (§2.5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceFigures {
    /// When the figures were read, `CLOCK_MONOTONIC` ns; `None` stamps the time of publishing.
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

impl DeviceFigures {
    /// The 15 figures in slot order, `ALLOCATED..=STEP_PEAK`, absent ones as `ABSENT`.
    pub(crate) fn words(&self) -> [u64; 15] {
        [
            self.allocated,
            self.allocated_peak,
            self.reserved,
            self.reserved_peak,
            self.active,
            self.inactive_split,
            self.requested,
            self.alloc_retries,
            self.ooms,
            self.device_allocs,
            self.device_frees,
            self.device_free,
            self.limit,
            self.interval_peak,
            self.step_peak,
        ]
        .map(|v| v.unwrap_or(ABSENT))
    }
}

/// One sample record (§2.7).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SampleFields {
    /// `CLOCK_MONOTONIC` ns; `None` stamps the time of appending (and beats the heartbeat).
    pub t_ns: Option<u64>,
    /// Device slot, as returned by `add_device`.
    pub slot: u8,
    /// `layout::sample::FLAG_*`.
    pub flags: u8,
    /// Phase from `intern`, 0 for none.
    pub phase: u16,
    pub allocated: Option<u64>,
    pub reserved: Option<u64>,
    /// Highest allocated since the previous sample of this slot (§5).
    pub peak: Option<u64>,
    pub active: Option<u64>,
    pub step: Option<u64>,
}

/// One event record (§2.8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventFields<'a> {
    pub kind: EventKind,
    /// `CLOCK_MONOTONIC` ns; `None` stamps the time of appending.
    pub t_ns: Option<u64>,
    pub slot: Option<u16>,
    pub phase: u16,
    pub step: Option<u64>,
    /// Kind-specific arguments; unused ones stay `ABSENT`.
    pub args: [u64; event::ARG_COUNT],
    /// Cut to 172 bytes.
    pub text: &'a str,
}

impl<'a> EventFields<'a> {
    /// An event of `kind` with no slot, phase, step, arguments or text, stamped when appended.
    pub fn new(kind: EventKind) -> EventFields<'a> {
        EventFields {
            kind,
            t_ns: None,
            slot: None,
            phase: 0,
            step: None,
            args: [ABSENT; event::ARG_COUNT],
            text: "",
        }
    }
}

/// How a writer ends (§1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exit {
    /// `EXITED_CLEAN`, and the file is removed.
    Clean,
    /// `EXITED_ERROR` and an `EXIT` event with this message; the file stays for the reader.
    Error(String),
}
