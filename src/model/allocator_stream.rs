//! What instrumented programs publish about their allocators through the channel
//! (docs/channel-v1.md), in the monitor's own vocabulary: the channel sampler translates the
//! reader's records into these, so nothing above the sampler knows the file format. Below
//! the fold (`writer_fold`, `foresight`) and the snapshot's view of it (`allocator`).

use super::absent::Reading;
use crate::channel::EventKind as RawKind;
use serde::Serialize;
use std::sync::Arc;

/// Who is writing a channel; read once, when the channel is first opened.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WriterIdentity {
    /// The channel file's name, which is unique per process (pid and start time).
    pub file: String,
    /// Pid in the writer's own pid namespace (differs from the host pid in containers).
    pub pid: u32,
    /// `PyTorch`, `JAX`, `CuPy`, `C`, `Rust`...
    pub kind: String,
    /// Framework and version, e.g. `torch 2.5.1+cu124`.
    pub framework: String,
    pub rank: Option<i32>,
    pub local_rank: Option<i32>,
    pub world_size: Option<i32>,
    pub job_id: String,
    pub command: String,
    pub allocator_config: String,
    /// Interval peaks are exact (the writer resets the framework's peak counters).
    pub exact_peaks: bool,
    /// Started by `vramscope attach` in a process that was already running: the framework's
    /// peak counters cover the time before the attach, its history does not.
    pub attached: bool,
    pub sample_period_us: u32,
    /// The writer records the allocator's history and answers snapshot requests
    /// (`vramscope run --sites`).
    pub sites: bool,
}

impl WriterIdentity {
    /// The writer process's start time (clock ticks since boot, the same in every pid
    /// namespace), from its file's name `<pid>-<starttime>.vsc`; `None` for another form.
    pub fn starttime(&self) -> Option<u64> {
        let stem = self.file.strip_suffix(".vsc")?;
        let (_, start) = stem.split_once('-')?;
        start.parse().ok()
    }
}

/// Whether the writer is still there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum WriterLiveness {
    Live,
    /// Alive, but it has not published for a while (a hung process, or one stopped in a
    /// debugger).
    Stalled {
        silent_ms: u64,
    },
    /// Ended: cleanly, by an uncaught error, or killed without a word (`crashed`).
    Ended {
        crashed: bool,
        error: bool,
    },
    /// The file can no longer be read (refused mid-run, or its container is gone): the
    /// figures shown are the last ones read, and whether the writer lives is unknown.
    Unreadable,
}

impl WriterLiveness {
    pub fn is_ended(&self) -> bool {
        matches!(self, WriterLiveness::Ended { .. })
    }

    /// Known to be still there: live or stalled (not ended, not unreadable).
    pub fn is_running(&self) -> bool {
        matches!(self, WriterLiveness::Live | WriterLiveness::Stalled { .. })
    }

    /// Short words for tables and the detail pane.
    pub fn label(&self) -> &'static str {
        match self {
            WriterLiveness::Live => "live",
            WriterLiveness::Stalled { .. } => "stalled",
            WriterLiveness::Ended { crashed: true, .. } => "ended (killed)",
            WriterLiveness::Ended { error: true, .. } => "ended (error)",
            WriterLiveness::Ended { .. } => "ended",
            WriterLiveness::Unreadable => "no longer readable",
        }
    }
}

/// One GPU as an allocator sees it. Every figure may be absent: a framework that does not
/// offer it, or a device not yet read.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AllocatorDevice {
    /// The device's slot in the channel: what samples and events refer to.
    pub slot: u16,
    /// The framework's ordinal (`cuda:N`): renumbered by `CUDA_VISIBLE_DEVICES`, so never
    /// used to join; UUID and PCI bus id are.
    pub ordinal: u32,
    pub uuid: Option<String>,
    pub pci_bus_id: Option<String>,
    pub total: Reading<u64>,
    /// Bytes in live tensors.
    pub allocated: Reading<u64>,
    /// The framework's own all-time peak of `allocated` (users may reset it).
    pub allocated_peak: Reading<u64>,
    /// Bytes the caching allocator holds from the driver.
    pub reserved: Reading<u64>,
    pub reserved_peak: Reading<u64>,
    pub active: Reading<u64>,
    pub inactive_split: Reading<u64>,
    pub requested: Reading<u64>,
    pub alloc_retries: Reading<u64>,
    pub ooms: Reading<u64>,
    pub device_free: Reading<u64>,
    pub limit: Reading<u64>,
    /// The highest `allocated` since the writer's previous sample, as the status last said
    /// (the run's true peak is the fold's: `writer_fold::SlotFold::true_peak`).
    pub interval_peak: Reading<u64>,
    /// The peak of the last completed step.
    pub step_peak: Reading<u64>,
}

/// One allocator sample, taken by the writer at its own rate (10-100 Hz): the monitor polls
/// more slowly but receives every sample, and counts the ones it lost.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct AllocatorPoint {
    pub at_ms: u64,
    /// Index into the channel's `devices`.
    pub slot: u16,
    /// `None` where the writer could not read the figure (history has gaps, not zeros).
    pub allocated: Option<u64>,
    pub reserved: Option<u64>,
    /// The highest allocated since the writer's previous sample (a lower bound unless the
    /// writer's peaks are exact).
    pub peak: Option<u64>,
    pub step: Option<u64>,
    pub new_high_water: bool,
    /// `step` counts the steps since an attach, not the job's own (the channel's
    /// `STEP_SINCE_ATTACH`): every reader says so beside the step.
    pub steps_since_attach: bool,
}

/// Something that happened inside the program.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AllocatorEvent {
    pub at_ms: u64,
    pub kind: EventKind,
    pub slot: Option<u16>,
    pub step: Option<u64>,
    /// The phase or module label at the time, or the event's own text (a mark's label, an
    /// error message).
    pub label: String,
    /// The phase path in force when the event was written, whatever its text says (an OOM
    /// error's text is its message); empty outside any phase.
    pub phase: String,
}

/// Event kinds with their arguments, as the channel defines them.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum EventKind {
    /// Caught by the allocator's OOM observer.
    Oom {
        requested: Reading<u64>,
        device_free: Reading<u64>,
        device_total: Reading<u64>,
        allocated: Reading<u64>,
        reserved: Reading<u64>,
        retries: Reading<u64>,
    },
    /// An out-of-memory error that escaped to the top of the program.
    OomError {
        requested: Reading<u64>,
    },
    PhaseBegin,
    PhaseEnd {
        peak: Reading<u64>,
    },
    StepEnd {
        peak_allocated: Reading<u64>,
        peak_reserved: Reading<u64>,
        duration_ns: Reading<u64>,
    },
    Mark,
    NewHighWater {
        peak: Reading<u64>,
        previous: Reading<u64>,
    },
    AllocRetry {
        retries: Reading<u64>,
    },
    Exit {
        error: bool,
    },
    /// The writer dumped a memory snapshot (its file name is the event's label).
    SnapshotWritten {
        /// The file, beside the channel's; or why its announced name was refused.
        path: Reading<String>,
        /// The file's size in bytes.
        size: Reading<u64>,
        /// The allocator's lifetime peak allocated at the dump.
        peak: Reading<u64>,
        /// Why it was dumped: `layout::event::SNAPSHOT_*` (0 OOM, 1 peak, 2 request).
        reason: Reading<u64>,
        /// Allocated at the dump.
        allocated: Reading<u64>,
        /// The size of the allocator's history ring.
        max_entries: Reading<u64>,
        /// Older snapshots the writer deleted to keep its bound, in total so far.
        deleted: Reading<u64>,
    },
    ForeignPeakReset {
        before: Reading<u64>,
        after: Reading<u64>,
    },
    EmptyCache {
        before: Reading<u64>,
        after: Reading<u64>,
    },
    /// Memory by kind at the step's end (bytes), written where it changed.
    MemoryKinds {
        parameters: Reading<u64>,
        buffers: Reading<u64>,
        gradients: Reading<u64>,
        optimizer_state: Reading<u64>,
    },
    Unknown {
        code: u16,
    },
}

impl EventKind {
    /// Whether the event is an out-of-memory error of either kind.
    pub fn is_oom(&self) -> bool {
        matches!(self, EventKind::Oom { .. } | EventKind::OomError { .. })
    }

    /// The kind's row in the one table of kinds (`channel::EventKind`): its code, tag, title
    /// and argument names are read there.
    pub fn raw(&self) -> RawKind {
        match self {
            EventKind::Oom { .. } => RawKind::Oom,
            EventKind::OomError { .. } => RawKind::OomError,
            EventKind::PhaseBegin => RawKind::PhaseBegin,
            EventKind::PhaseEnd { .. } => RawKind::PhaseEnd,
            EventKind::StepEnd { .. } => RawKind::StepEnd,
            EventKind::Mark => RawKind::Mark,
            EventKind::NewHighWater { .. } => RawKind::NewHighWater,
            EventKind::AllocRetry { .. } => RawKind::AllocRetry,
            EventKind::Exit { .. } => RawKind::Exit,
            EventKind::SnapshotWritten { .. } => RawKind::SnapshotWritten,
            EventKind::ForeignPeakReset { .. } => RawKind::ForeignPeakReset,
            EventKind::EmptyCache { .. } => RawKind::EmptyCache,
            EventKind::MemoryKinds { .. } => RawKind::MemoryKinds,
            EventKind::Unknown { code } => RawKind::Unknown(*code),
        }
    }

    /// The kind with its arguments, from a record's kind and its six `a0..a5` (the table
    /// names them; `u64::MAX` is a figure the writer could not read). `snapshot_path` is
    /// asked only of `SNAPSHOT_WRITTEN`: the file its text names, beside the channel.
    pub fn from_record(
        raw: RawKind,
        args: [u64; 6],
        snapshot_path: impl FnOnce() -> Reading<String>,
    ) -> EventKind {
        let a = |i: usize| {
            if args[i] == crate::channel::ABSENT {
                Err(super::absent::Absent::NotSupported)
            } else {
                Ok(args[i])
            }
        };
        match raw {
            RawKind::Oom => EventKind::Oom {
                requested: a(0),
                device_free: a(1),
                device_total: a(2),
                allocated: a(3),
                reserved: a(4),
                retries: a(5),
            },
            RawKind::OomError => EventKind::OomError { requested: a(0) },
            RawKind::PhaseBegin => EventKind::PhaseBegin,
            RawKind::PhaseEnd => EventKind::PhaseEnd { peak: a(0) },
            RawKind::StepEnd => EventKind::StepEnd {
                peak_allocated: a(0),
                peak_reserved: a(1),
                duration_ns: a(2),
            },
            RawKind::Mark => EventKind::Mark,
            RawKind::NewHighWater => EventKind::NewHighWater {
                peak: a(0),
                previous: a(1),
            },
            RawKind::AllocRetry => EventKind::AllocRetry { retries: a(0) },
            RawKind::Exit => EventKind::Exit {
                error: args[0] == 1,
            },
            RawKind::SnapshotWritten => EventKind::SnapshotWritten {
                path: snapshot_path(),
                size: a(0),
                peak: a(1),
                reason: a(2),
                allocated: a(3),
                max_entries: a(4),
                deleted: a(5),
            },
            RawKind::ForeignPeakReset => EventKind::ForeignPeakReset {
                before: a(0),
                after: a(1),
            },
            RawKind::EmptyCache => EventKind::EmptyCache {
                before: a(0),
                after: a(1),
            },
            RawKind::MemoryKinds => EventKind::MemoryKinds {
                parameters: a(0),
                buffers: a(1),
                gradients: a(2),
                optimizer_state: a(3),
            },
            RawKind::Unknown(code) => EventKind::Unknown { code },
        }
    }

    /// The arguments in the record's order, as `from_record` took them.
    fn arg_values(&self) -> Vec<Reading<u64>> {
        match self {
            EventKind::Oom {
                requested,
                device_free,
                device_total,
                allocated,
                reserved,
                retries,
            } => vec![
                requested.clone(),
                device_free.clone(),
                device_total.clone(),
                allocated.clone(),
                reserved.clone(),
                retries.clone(),
            ],
            EventKind::OomError { requested } => vec![requested.clone()],
            EventKind::PhaseEnd { peak } => vec![peak.clone()],
            EventKind::StepEnd {
                peak_allocated,
                peak_reserved,
                duration_ns,
            } => vec![
                peak_allocated.clone(),
                peak_reserved.clone(),
                duration_ns.clone(),
            ],
            EventKind::NewHighWater { peak, previous } => vec![peak.clone(), previous.clone()],
            EventKind::AllocRetry { retries } => vec![retries.clone()],
            EventKind::Exit { error } => vec![Ok(u64::from(*error))],
            EventKind::ForeignPeakReset { before, after }
            | EventKind::EmptyCache { before, after } => vec![before.clone(), after.clone()],
            EventKind::SnapshotWritten {
                size,
                peak,
                reason,
                allocated,
                max_entries,
                deleted,
                ..
            } => vec![
                size.clone(),
                peak.clone(),
                reason.clone(),
                allocated.clone(),
                max_entries.clone(),
                deleted.clone(),
            ],
            EventKind::MemoryKinds {
                parameters,
                buffers,
                gradients,
                optimizer_state,
            } => vec![
                parameters.clone(),
                buffers.clone(),
                gradients.clone(),
                optimizer_state.clone(),
            ],
            EventKind::Unknown { code } => vec![Ok(u64::from(*code))],
            EventKind::PhaseBegin | EventKind::Mark => vec![],
        }
    }

    /// What a person reads for the kind: the screen, the replay's status line.
    pub fn title(&self) -> String {
        match self {
            EventKind::Exit { error: true } => "exit (error)".into(),
            other => other.raw().title(),
        }
    }

    /// The kind's name in JSON and `inspect`: a stable identifier, not for people.
    pub fn name(&self) -> &'static str {
        self.raw().tag()
    }

    /// The kind's figures, named as the table names its arguments (an unknown kind's one
    /// figure is its code).
    pub fn figures(&self) -> Vec<(&'static str, Reading<u64>)> {
        let names: &[&'static str] = match self {
            EventKind::Unknown { .. } => &["code"],
            known => known.raw().args(),
        };
        names.iter().copied().zip(self.arg_values()).collect()
    }
}

/// One poll of one channel, sent by the channel sampler to the state owner.
#[derive(Clone, Debug, PartialEq)]
pub struct ChannelPoll {
    /// The channel file's path: the key that ties successive polls together.
    pub path: String,
    /// Shared, so that sending it with every poll costs a reference count.
    pub identity: Arc<WriterIdentity>,
    /// The writer's pid as NVML lists it; `None` while it cannot be mapped (another pid
    /// namespace that we cannot see into).
    pub host_pid: Option<u32>,
    pub liveness: WriterLiveness,
    pub devices: Vec<AllocatorDevice>,
    /// Current step and phase or module label.
    pub step: Option<u64>,
    pub label: String,
    /// New since the previous poll, oldest first.
    pub points: Vec<AllocatorPoint>,
    pub events: Vec<AllocatorEvent>,
    /// Records the writer overwrote before the monitor read them, since the channel opened.
    pub lost_samples: u64,
    pub lost_events: u64,
}

/// Why a channel is no longer read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gone {
    /// Its file was removed: by its writer on a clean exit, or by the cleanup of old files.
    Removed,
    /// Refused mid-run (resized, rewritten); the reason is among the batch's `rejected`.
    Refused,
    /// Its directory cannot be reached any more (the container's process is gone).
    Unreachable,
    /// Ended long ago: closed to keep file descriptors bounded; its figures stay.
    Retired,
}

/// What the channel sampler found on one pass.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChannelBatch {
    pub at_ms: u64,
    pub polls: Vec<ChannelPoll>,
    /// Channels whose files went away (removed by their writer on a clean exit, or cleaned up).
    pub gone: Vec<(String, Gone)>,
    /// Files refused, each with a one-line reason (`1234-5678.vsc: wrong magic`).
    pub rejected: Vec<String>,
}
