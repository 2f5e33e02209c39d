//! What instrumented programs publish about their allocators through the channel
//! (docs/channel-v1.md), in the monitor's own vocabulary: the channel sampler translates the
//! reader's records into these, so nothing above the sampler knows the file format.

use super::absent::Reading;
use super::foresight::{Forecast, Room, StepPeaks};
use super::held_sites::SnapshotNote;
use super::host::HostProcess;
use super::snapshot_drops::Dropped;
use super::writer_fold::{Oom, PeakAt, WriterFold, room_of};
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
    Unknown {
        code: u16,
    },
}

impl EventKind {
    /// Whether the event is an out-of-memory error of either kind.
    pub fn is_oom(&self) -> bool {
        matches!(self, EventKind::Oom { .. } | EventKind::OomError { .. })
    }

    /// What a person reads for the kind: the screen, the replay's status line.
    pub fn title(&self) -> String {
        match self {
            EventKind::Oom { .. } => "OOM".into(),
            EventKind::OomError { .. } => "OOM (uncaught)".into(),
            EventKind::PhaseBegin => "phase begins".into(),
            EventKind::PhaseEnd { .. } => "phase ends".into(),
            EventKind::StepEnd { .. } => "step ends".into(),
            EventKind::Mark => "mark".into(),
            EventKind::NewHighWater { .. } => "new peak".into(),
            EventKind::AllocRetry { .. } => "alloc retry".into(),
            EventKind::Exit { error: true } => "exit (error)".into(),
            EventKind::Exit { error: false } => "exit".into(),
            EventKind::SnapshotWritten { .. } => "snapshot written".into(),
            EventKind::ForeignPeakReset { .. } => "peak reset by the program".into(),
            EventKind::EmptyCache { .. } => "cache emptied".into(),
            EventKind::Unknown { code } => format!("event {code}"),
        }
    }

    /// The kind's name in JSON and `inspect`: a stable identifier, not for people.
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::Oom { .. } => "oom",
            EventKind::OomError { .. } => "oom_error",
            EventKind::PhaseBegin => "phase_begin",
            EventKind::PhaseEnd { .. } => "phase_end",
            EventKind::StepEnd { .. } => "step_end",
            EventKind::Mark => "mark",
            EventKind::NewHighWater { .. } => "new_high_water",
            EventKind::AllocRetry { .. } => "alloc_retry",
            EventKind::Exit { .. } => "exit",
            EventKind::SnapshotWritten { .. } => "snapshot_written",
            EventKind::ForeignPeakReset { .. } => "foreign_peak_reset",
            EventKind::EmptyCache { .. } => "empty_cache",
            EventKind::Unknown { .. } => "unknown",
        }
    }

    /// The kind's figures, named.
    pub fn figures(&self) -> Vec<(&'static str, Reading<u64>)> {
        match self {
            EventKind::Oom {
                requested,
                device_free,
                device_total,
                allocated,
                reserved,
                retries,
            } => vec![
                ("requested", requested.clone()),
                ("device_free", device_free.clone()),
                ("device_total", device_total.clone()),
                ("allocated", allocated.clone()),
                ("reserved", reserved.clone()),
                ("retries", retries.clone()),
            ],
            EventKind::OomError { requested } => vec![("requested", requested.clone())],
            EventKind::PhaseEnd { peak } => vec![("peak", peak.clone())],
            EventKind::StepEnd {
                peak_allocated,
                peak_reserved,
                duration_ns,
            } => vec![
                ("peak_allocated", peak_allocated.clone()),
                ("peak_reserved", peak_reserved.clone()),
                ("duration_ns", duration_ns.clone()),
            ],
            EventKind::NewHighWater { peak, previous } => {
                vec![("peak", peak.clone()), ("previous", previous.clone())]
            }
            EventKind::AllocRetry { retries } => vec![("retries", retries.clone())],
            EventKind::Exit { error } => vec![("error", Ok(u64::from(*error)))],
            EventKind::ForeignPeakReset { before, after }
            | EventKind::EmptyCache { before, after } => {
                vec![("before", before.clone()), ("after", after.clone())]
            }
            EventKind::SnapshotWritten {
                size,
                peak,
                reason,
                allocated,
                max_entries,
                deleted,
                ..
            } => vec![
                ("size", size.clone()),
                ("peak", peak.clone()),
                ("reason", reason.clone()),
                ("allocated", allocated.clone()),
                ("max_entries", max_entries.clone()),
                ("deleted", deleted.clone()),
            ],
            EventKind::Unknown { code } => vec![("code", Ok(u64::from(*code)))],
            EventKind::PhaseBegin | EventKind::Mark => vec![],
        }
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

/// An instrumented process as the snapshot shows it: identity, latest figures, where its
/// peaks were, its OOMs and recent events; all read from its `WriterFold`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AllocatorSnapshot {
    pub identity: Arc<WriterIdentity>,
    pub host_pid: Option<u32>,
    pub liveness: WriterLiveness,
    pub step: Option<u64>,
    pub label: String,
    pub devices: Vec<AllocatorDevice>,
    /// NVML index of each device, as the fold resolved it.
    pub gpu_indices: Vec<Option<u32>>,
    /// Each device's true peak and where it happened.
    pub peaks: Vec<Option<PeakAt>>,
    /// Each device's forecast from its step peaks, in the room the writer's own figures
    /// give (memory outside the allocator not counted: `ProcessAllocator::forecast` does).
    pub forecasts: Vec<Forecast>,
    /// Each device's recent step peaks, oldest first.
    #[serde(skip)]
    pub step_peaks: Vec<StepPeaks>,
    /// The most recent events, oldest first.
    pub recent_events: Vec<AllocatorEvent>,
    /// Every OOM kept, one per failure, oldest first.
    pub ooms: Vec<Oom>,
    /// The memory snapshots announced, oldest first, with what reducing them said.
    pub snapshots: Vec<SnapshotNote>,
    /// The snapshots the writer deleted to keep its bound; `None` before it announced one.
    pub snapshots_dropped: Option<Dropped>,
    pub lost_samples: u64,
    pub lost_events: u64,
    /// The channel file's path: the key of its history (`state::History`).
    #[serde(skip)]
    pub path: String,
    /// When the channel was last polled.
    #[serde(skip)]
    pub last_poll_ms: u64,
    /// Each device's all-time peaks of the charted allocated and reserved, as of the
    /// snapshot (filled by whoever holds the history; empty otherwise).
    #[serde(skip)]
    pub chart_peaks: Vec<SlotPeaks>,
}

/// The all-time peaks of one device slot's charted allocated and reserved.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SlotPeaks {
    pub allocated: Option<crate::history::Peak>,
    pub reserved: Option<crate::history::Peak>,
}

impl AllocatorSnapshot {
    /// The snapshot of a fold that has seen its writer's identity.
    pub fn of(fold: &WriterFold) -> Option<AllocatorSnapshot> {
        let identity = fold.identity.clone()?;
        let slots: Vec<_> = fold.slots.iter().filter(|s| s.device.is_some()).collect();
        Some(AllocatorSnapshot {
            identity,
            host_pid: fold.host_pid,
            liveness: fold.liveness,
            step: fold.step,
            label: fold.label.clone(),
            devices: slots.iter().filter_map(|s| s.device.clone()).collect(),
            gpu_indices: slots.iter().map(|s| s.gpu).collect(),
            peaks: slots.iter().map(|s| s.true_peak().cloned()).collect(),
            forecasts: slots.iter().map(|s| s.forecast(None)).collect(),
            step_peaks: slots.iter().map(|s| s.step_peaks.clone()).collect(),
            recent_events: fold.recent.iter().cloned().collect(),
            ooms: fold.ooms.iter().cloned().collect(),
            snapshots: fold.snapshots.iter().cloned().collect(),
            snapshots_dropped: fold.snapshot_drops.dropped(),
            lost_samples: fold.lost_samples,
            lost_events: fold.lost_events,
            path: fold.path.clone(),
            last_poll_ms: fold.last_poll_ms,
            chart_peaks: Vec::new(),
        })
    }

    /// The memory snapshot worth showing, as the fold picks it (`relevant_snapshot`).
    pub fn relevant_snapshot(&self) -> Option<&SnapshotNote> {
        super::writer_fold::relevant_snapshot(self.snapshots.iter())
    }

    /// Where the device NVML knows as `gpu_index` sits among `devices`, with its writer's
    /// slot.
    pub fn slot_on_gpu(&self, gpu_index: u32) -> Option<(usize, u16)> {
        let i = self.position(gpu_index)?;
        Some((i, self.devices.get(i)?.slot))
    }

    fn position(&self, gpu_index: u32) -> Option<usize> {
        self.gpu_indices.iter().position(|g| *g == Some(gpu_index))
    }

    /// The figures for the device NVML knows as `gpu_index`.
    pub fn on_gpu(&self, gpu_index: u32) -> Option<&AllocatorDevice> {
        self.devices.get(self.position(gpu_index)?)
    }

    /// The forecast on `gpu_index` in the room the writer's figures and `outside` leave.
    pub fn forecast_on_gpu(&self, gpu_index: u32, outside: Option<u64>) -> Forecast {
        match (self.position(gpu_index), outside) {
            (Some(i), None) => self.forecasts[i].clone(),
            (Some(i), outside) => self.step_peaks[i].foresee(room_of(&self.devices[i], outside)),
            (None, _) => StepPeaks::default().foresee(Room::default()),
        }
    }

    /// The recent step peaks on `gpu_index`.
    pub fn step_peaks_on_gpu(&self, gpu_index: u32) -> StepPeaks {
        self.position(gpu_index)
            .and_then(|i| self.step_peaks.get(i).cloned())
            .unwrap_or_default()
    }

    /// The true peak on `gpu_index`, and where it happened.
    pub fn peak_on_gpu(&self, gpu_index: u32) -> Option<&PeakAt> {
        self.peaks.get(self.position(gpu_index)?)?.as_ref()
    }

    /// The OOMs on `gpu_index` (and those that name no device), oldest first.
    pub fn ooms_on_gpu(&self, gpu_index: u32) -> Vec<Oom> {
        self.ooms
            .iter()
            .filter(|o| {
                let slot_gpu = o.slot.and_then(|slot| {
                    let i = self.devices.iter().position(|d| d.slot == slot)?;
                    self.gpu_indices.get(i).copied().flatten()
                });
                slot_gpu.is_none_or(|g| g == gpu_index)
            })
            .cloned()
            .collect()
    }
}

impl AllocatorSnapshot {
    /// How a writer whose named GPUs all match none of NVML's names the first: its UUID, or
    /// "with an unknown PCI bus id" (the id is the writer's text, not worth echoing); `None`
    /// when one of its GPUs is on this host.
    pub fn gpu_elsewhere(&self) -> Option<String> {
        if self.gpu_indices.iter().any(Option::is_some) {
            return None;
        }
        let named = self
            .devices
            .iter()
            .find(|d| d.uuid.is_some() || d.pci_bus_id.is_some())?;
        Some(match &named.uuid {
            Some(uuid) => uuid.clone(),
            None => "with an unknown PCI bus id".into(),
        })
    }
}

/// The process a row stands for, as the join with its channels needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowProcess {
    /// NVML lists it; `starttime` is the one the host read for it, when it did.
    Listed { starttime: Option<u64> },
    /// NVML lists it no more (exited, or it left the GPU), or still lists it although the
    /// host found no such process (NVML is a moment behind its exit).
    Unlisted,
}

impl RowProcess {
    /// The process of a row NVML lists, with what the host read of it (`None`: not yet).
    pub fn listed(host: Option<&HostProcess>) -> RowProcess {
        match host {
            // The host looked and found no such process: it is gone.
            Some(h) if h.local_pid.is_none() && h.starttime.is_none() => RowProcess::Unlisted,
            _ => RowProcess::Listed {
                starttime: host.and_then(|h| h.starttime),
            },
        }
    }
}

/// Of the channels written by one pid, the one its process row joins. A listed process
/// joins a channel not ended, else an ended one written by that very process (same start
/// time): a writer marks itself ended on its uncaught error, while its process is still
/// tearing down and NVML still lists it. An unlisted one prefers an ended channel, else the
/// first. A pid reused after an instrumented process died never shows the dead one's figures:
/// its start time differs.
pub fn joined_channel<'a, T: 'a>(
    channels: impl IntoIterator<Item = &'a T>,
    liveness: impl Fn(&T) -> WriterLiveness,
    starttime: impl Fn(&T) -> Option<u64>,
    process: RowProcess,
) -> Option<&'a T> {
    let channels = channels.into_iter();
    if let RowProcess::Listed { starttime: listed } = process {
        let mut same_process = None;
        for channel in channels {
            if !liveness(channel).is_ended() {
                return Some(channel);
            }
            if listed.is_some() && starttime(channel) == listed {
                same_process = same_process.or(Some(channel));
            }
        }
        return same_process;
    }
    let mut first = None;
    for channel in channels {
        if liveness(channel).is_ended() {
            return Some(channel);
        }
        first = first.or(Some(channel));
    }
    first
}

/// The three parts of what NVML counts for this process on this GPU.
pub struct Breakdown {
    pub allocated: u64,
    /// Reserved but not allocated: the caching allocator's free blocks.
    pub cache: u64,
    /// Used minus reserved: CUDA context, libraries' workspaces, other allocators.
    pub outside: u64,
    /// Reserved exceeds NVML's figure (they are read at different moments).
    pub skewed: bool,
}

/// Splits NVML's `used` by the allocator's figures.
pub fn split(allocated: u64, reserved: u64, used: u64) -> Breakdown {
    let allocated = allocated.min(reserved);
    Breakdown {
        allocated: allocated.min(used),
        cache: reserved.min(used).saturating_sub(allocated),
        outside: used.saturating_sub(reserved),
        skewed: reserved > used,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_parts_sum_to_nvml_used() {
        let p = split(10 << 30, 14 << 30, 15 << 30);
        assert_eq!(
            (p.allocated, p.cache, p.outside),
            (10 << 30, 4 << 30, 1 << 30)
        );
        assert_eq!(p.allocated + p.cache + p.outside, 15 << 30);
        assert!(!p.skewed);
        // Reserved read after NVML's figure grew past it: the parts still sum to used.
        let p = split(10, 30, 20);
        assert_eq!(p.allocated + p.cache + p.outside, 20);
        assert!(p.skewed);
    }
}
