//! What the snapshot shows of instrumented programs' allocators: each writer's figures as its
//! fold (`writer_fold`) left them, and how a process row joins its channel. The stream the
//! writers publish is `allocator_stream`, re-exported here.

pub use super::allocator_stream::{
    AllocatorDevice, AllocatorEvent, AllocatorPoint, ChannelBatch, ChannelPoll, EventKind, Gone,
    WriterIdentity, WriterLiveness,
};
use super::foresight::{Forecast, Room, StepPeaks};
use super::held_sites::SnapshotNote;
use super::host::HostProcess;
use super::snapshot_drops::Dropped;
use super::step_origin::StepOrigin;
use super::writer_fold::{NvmlBeside, Oom, PeakAt, WriterFold, room_of};
use serde::Serialize;
use std::sync::Arc;

/// An instrumented process as the snapshot shows it: identity, latest figures, where its
/// peaks were, its OOMs and recent events; all read from its `WriterFold`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AllocatorSnapshot {
    pub identity: Arc<WriterIdentity>,
    pub host_pid: Option<u32>,
    pub liveness: WriterLiveness,
    pub step: Option<u64>,
    /// What `step` and the steps of `peaks`, `ooms` and `recent_events` count from.
    pub steps_from: StepOrigin,
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
    /// Where the fold placed each of `ooms` (`WriterFold::gpu_of_oom`).
    #[serde(skip)]
    pub oom_gpus: Vec<Option<u32>>,
    /// The name of the snapshot each of `ooms` left (`WriterFold::snapshot_of`), `None`
    /// where it left none.
    #[serde(skip)]
    pub oom_snapshots: Vec<Option<String>>,
    /// OOMs the fold saw but no longer keeps in `ooms` (each device's `ooms` counts them).
    pub ooms_dropped: u64,
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
            steps_from: fold.steps_from,
            label: fold.label.clone(),
            devices: slots.iter().filter_map(|s| s.device.clone()).collect(),
            gpu_indices: slots.iter().map(|s| s.gpu).collect(),
            peaks: slots.iter().map(|s| s.true_peak().cloned()).collect(),
            forecasts: slots
                .iter()
                .map(|s| fold.forecast(s, NvmlBeside::NONE))
                .collect(),
            step_peaks: slots.iter().map(|s| s.step_peaks.clone()).collect(),
            recent_events: fold.recent.iter().cloned().collect(),
            ooms: fold.ooms.iter().cloned().collect(),
            oom_gpus: fold.ooms.iter().map(|o| fold.gpu_of_oom(o)).collect(),
            oom_snapshots: fold
                .ooms
                .iter()
                .map(|o| fold.snapshot_of(o).map(|n| n.name.clone()))
                .collect(),
            ooms_dropped: fold.ooms_dropped(),
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

    /// The forecast on `gpu_index` in the room the writer's figures and `nvml` leave
    /// (`room_of`); no OOM to come once the writer is no longer running (`ended_or`).
    pub fn forecast_on_gpu(&self, gpu_index: u32, nvml: NvmlBeside) -> Forecast {
        ended_or(self.liveness, || match self.position(gpu_index) {
            Some(i) if nvml == NvmlBeside::NONE => self.forecasts[i].clone(),
            Some(i) => self.step_peaks[i].foresee(room_of(&self.devices[i], nvml)),
            None => StepPeaks::default().foresee(Room::default()),
        })
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

    /// The OOMs the fold placed on `gpu_index` or on no one GPU (`WriterFold::ooms_on`),
    /// oldest first.
    pub fn ooms_on_gpu(&self, gpu_index: u32) -> Vec<Oom> {
        self.ooms
            .iter()
            .zip(&self.oom_gpus)
            .filter(|(_, gpu)| gpu.is_none_or(|g| g == gpu_index))
            .map(|(oom, _)| oom.clone())
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

/// `forecast()` while the writer runs; once it does not, `Forecast::once_ended`.
fn ended_or(liveness: WriterLiveness, forecast: impl FnOnce() -> Forecast) -> Forecast {
    let forecast = forecast();
    if liveness.is_running() {
        forecast
    } else {
        forecast.once_ended()
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
