//! One pass over a recording's events, keeping only what a summary needs: per GPU and per
//! process the peaks with their time (and, for instrumented processes, the fold's true peak
//! with its step and phase), every OOM once as the fold merged it, the largest spikes, and
//! the allocator's cache and fragmentation at its peak. Memory stays bounded by the number of GPUs, processes and writers, never by
//! the recording's length.

use super::spikes::{Rise, RiseTracker};
use crate::model::SourceEvent;
use crate::model::allocator::{RowProcess, joined_channel};
use crate::model::foresight::{Forecast, StepPeak};
use crate::model::held_sites::SitesJob;
use crate::model::held_sites::SnapshotNote;
use crate::model::mig::RowInstance;
use crate::model::oom_explain::{self, Allocator, OomFigures, UsedBy, Verdict};
use crate::model::peak_owner::{self, PeakHolders, PeakOwner};
use crate::model::phase_peaks::PhasePeaks;
use crate::model::snapshot_drops::Dropped;
use crate::model::writer_fold::NvmlBeside;
use crate::model::writer_fold::{Oom, WriterFold};
use crate::model::{
    Absent, ChannelPoll, DeviceSample, HostSample, Periods, PodInfo, Reading, StepOrigin,
};
use crate::recording::folds::RecordedFolds;
use crate::recording::{Ending, Header, Recording};
use crate::sources::sites::reduce;
use std::collections::BTreeMap;

/// A value and where it happened.
#[derive(Clone, Debug, PartialEq)]
pub struct At {
    pub value: u64,
    pub at_ms: u64,
    pub step: Option<u64>,
    /// Phase or module label, as the writer last published it.
    pub phase: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct GpuSummary {
    pub index: u32,
    pub name: String,
    pub uuid: Option<String>,
    pub total: Option<u64>,
    pub peak_used: Option<At>,
    /// Who made `peak_used`, or why none is named.
    pub peak_owner: Option<PeakOwner>,
}

impl GpuSummary {
    /// What was left at the peak.
    pub fn headroom(&self) -> Option<u64> {
        Some(self.total?.saturating_sub(self.peak_used.as_ref()?.value))
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct AllocatorSummary {
    pub kind: String,
    pub framework: String,
    pub rank: Option<i32>,
    pub world_size: Option<i32>,
    /// What every step of this writer counts from.
    pub steps_from: StepOrigin,
    pub peak_allocated: Option<At>,
    pub peak_reserved: Option<At>,
    /// Reserved in the sample of the allocated peak minus the peak: the cache then.
    pub cache_at_peak: Option<u64>,
    /// Largest inactive split (free but not releasable) seen, and reserved at that moment.
    pub fragmentation: Option<(u64, u64)>,
    pub alloc_retries: Option<u64>,
    pub ooms: Option<u64>,
    pub allocator_config: String,
    /// The command line as the writer gave it (its own argv).
    pub writer_command: String,
    /// What its step peaks say: a leak, an OOM to come, or nothing confident.
    pub forecast: Forecast,
    /// Whether the writer had ended by the recording's end (not merely unreadable).
    pub ended: bool,
    /// The newest snapshot of its peak the writer announced, reduced (`--sites`).
    pub held: Option<SnapshotNote>,
    /// The snapshots the writer deleted to keep its bound, by name where seen.
    pub snapshots_dropped: Option<Dropped>,
    /// The highest allocation in each phase (the fold's).
    pub phase_peaks: PhasePeaks,
    /// Each step's peak as its `STEP_END` said, by step number: the first `KEPT_STEPS`.
    pub step_peaks: StepSeries,
}

/// Steps whose peaks a summary keeps per writer slot: a long run's first 100,000 (1.6 MB).
pub const KEPT_STEPS: usize = 100_000;

/// Each step's peak by step number, bounded by `KEPT_STEPS`; a step told twice (a ring read
/// again) keeps its highest.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepSeries {
    peaks: BTreeMap<u64, u64>,
    /// Steps beyond the bound, not kept.
    pub untracked: u64,
}

impl StepSeries {
    fn push(&mut self, peak: StepPeak) {
        if let Some(seen) = self.peaks.get_mut(&peak.step) {
            *seen = (*seen).max(peak.peak);
        } else if self.peaks.len() < KEPT_STEPS {
            self.peaks.insert(peak.step, peak.peak);
        } else {
            self.untracked += 1;
        }
    }

    /// `(step, peak)`, by step.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.peaks.iter().map(|(s, p)| (*s, *p))
    }

    pub fn get(&self, step: u64) -> Option<u64> {
        self.peaks.get(&step).copied()
    }

    pub fn len(&self) -> usize {
        self.peaks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.peaks.is_empty()
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ProcessSummary {
    pub pid: u32,
    pub gpu_index: u32,
    pub command: Option<String>,
    pub user: Option<String>,
    /// The Kubernetes pod it ran in, as last recorded.
    pub pod: Option<PodInfo>,
    /// The MIG instance it ran in, as last recorded (a GPU in MIG mode).
    pub mig: Option<RowInstance>,
    pub peak_nvml: Option<At>,
    pub allocator: Option<AllocatorSummary>,
}

/// What the host said of a pid, the latest readable of each.
#[derive(Clone, Debug, Default)]
struct HostFacts {
    command: Option<String>,
    user: Option<String>,
    pod: Option<PodInfo>,
    /// The start time the host last read for the pid: which process NVML's row is, when a
    /// pid was used twice (`joined_channel`).
    starttime: Option<u64>,
}

/// One OOM as the fold merged it, with the writer's pid and the GPU it happened on.
#[derive(Clone, Debug, PartialEq)]
pub struct OomSummary {
    pub pid: Option<u32>,
    pub gpu_index: Option<u32>,
    pub oom: Oom,
    /// What `oom.step` counts from.
    pub steps_from: StepOrigin,
    /// Why it happened (`oom_explain`): asked against free, the cache, outside the
    /// allocator, what `expandable_segments` would have changed.
    pub explanation: Vec<String>,
    /// What kept the request from being served, as the explanation says; the hints below
    /// it never contradict it.
    pub verdict: Reading<Verdict>,
    /// The snapshot the writer dumped at it, reduced (`--sites`).
    pub held: Option<SnapshotNote>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SpikeSummary {
    /// `GPU 0` or `pid 4242 on GPU 0 (allocated)`.
    pub what: String,
    pub rise: Rise,
    /// What `rise.step` counts from (a GPU's rise has no step).
    pub steps_from: StepOrigin,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub header: Header,
    pub first_ms: Option<u64>,
    pub last_ms: Option<u64>,
    pub gpus: Vec<GpuSummary>,
    pub processes: Vec<ProcessSummary>,
    pub ooms: Vec<OomSummary>,
    pub spikes: Vec<SpikeSummary>,
    /// The recording stopped being readable here; everything before it is summarised.
    pub damaged: Option<String>,
    /// What was skipped, being of kinds this vramscope does not know.
    pub skipped: Option<String>,
    /// The refresh period: the header's, then each change recorded (the monitor's `+`/`-`).
    pub periods: Periods,
}

/// How many spikes the report lists.
const TOP_SPIKES: usize = 5;

/// What the report adds to the fold for one writer's device slot: the figures the fold does
/// not keep (reserved at the peak, the reserved peak, fragmentation, retries) and the spikes.
#[derive(Default)]
struct SlotExtras {
    /// When the slot's previous sample was taken: a true peak belongs to a sample only when
    /// it fell after the one before (two equal spikes are two moments).
    last_point_ms: Option<u64>,
    /// The fold's true peak when `reserved_at_peak` was taken: `(value, at_ms)`.
    peak_seen: Option<(u64, u64)>,
    /// Reserved in the first sample at or after the allocated peak.
    reserved_at_peak: Option<u64>,
    /// Reserved in the status read with the peak, for a peak no later sample followed.
    status_reserved: Option<u64>,
    peak_reserved: Option<At>,
    fragmentation: Option<(u64, u64)>,
    retries: Option<u64>,
    ooms: Option<u64>,
    rises: RiseTracker,
    steps: StepSeries,
}

#[derive(Default)]
struct Analysis {
    /// Every writer's stream, folded as the monitor folds it.
    folds: RecordedFolds,
    /// (channel path, slot) -> what the report keeps beside the fold.
    extras: BTreeMap<(String, usize), SlotExtras>,
    /// The peaks per GPU and per (pid, GPU): an entry is `Some` as soon as `raise` makes it.
    gpu_peaks: BTreeMap<u32, Option<At>>,
    /// Who made each GPU's peak (`peak_owner::owner_of`).
    gpu_peak_owners: BTreeMap<u32, PeakOwner>,
    /// Each GPU's previous sample: a peak's owner is the process that rose most since it.
    last_device: BTreeMap<u32, DeviceSample>,
    gpu_rises: BTreeMap<u32, RiseTracker>,
    process_peaks: BTreeMap<(u32, u32), Option<At>>,
    /// NVML's latest used figure per (pid, GPU).
    process_used: BTreeMap<(u32, u32), u64>,
    /// What NVML read beside each (pid, GPU) in the last sample that listed it: the room its
    /// forecast is given (`room_of`), as the monitor gives it while the process runs.
    process_beside: BTreeMap<(u32, u32), NvmlBeside>,
    /// The MIG instance each (pid, GPU) was last listed in.
    process_mig: BTreeMap<(u32, u32), RowInstance>,
    /// (channel path, OOM time, slot) -> NVML's used figure for its process when the OOM
    /// reached the recorder.
    used_at_oom: BTreeMap<(String, u64, Option<u16>), u64>,
    hosts: BTreeMap<u32, HostFacts>,
    first_ms: Option<u64>,
    last_ms: Option<u64>,
}

/// Reads the whole recording and summarises it. A damaged record stops the reading; what
/// came before is still summarised, and the damage is named.
pub fn analyse(recording: Recording) -> Report {
    let header = recording.header().clone();
    let mut analysis = Analysis::default();
    let mut periods = Periods::constant(header.interval_ms);
    let ending = recording.each_event(|at_ms, event| {
        if let SourceEvent::Interval { ms } = &event {
            periods.change(at_ms, *ms);
        }
        analysis.event(at_ms, event);
    });
    analysis.finish(header, periods, ending)
}

impl Analysis {
    fn event(&mut self, at_ms: u64, event: SourceEvent) {
        self.first_ms.get_or_insert(at_ms);
        self.last_ms = Some(self.last_ms.map_or(at_ms, |l| l.max(at_ms)));
        match event {
            SourceEvent::Started { devices, .. } => self.folds.started(&devices),
            SourceEvent::Device(sample) => self.device(&sample),
            SourceEvent::Host(sample) => self.host(&sample),
            SourceEvent::Channels(batch) => {
                let at_ms = batch.at_ms;
                for poll in batch.polls {
                    self.poll(poll, at_ms);
                }
                self.folds.gone(&batch.gone);
                self.folds.resolve();
                self.note_ooms();
            }
            // A recording gives a batch's members one by one; the period is `analyse`'s.
            SourceEvent::NvmlUnavailable(_)
            | SourceEvent::Batch(_)
            | SourceEvent::Interval { .. } => {}
        }
    }

    fn device(&mut self, sample: &DeviceSample) {
        self.folds.device(sample);
        // The monitor's rule for who made the sample's peak (`peak_owner::owner_of`).
        let owner = peak_owner::owner_of(sample, self.last_device.get(&sample.index));
        let mut raised = false;
        // A spike the fast memory sampling caught between two samples.
        if let Some(peak) = &sample.memory_peak {
            raised |= raise(
                self.gpu_peaks.entry(sample.index).or_default(),
                peak.used,
                peak.at_ms,
                None,
                "",
            );
            // Read between two refreshes, it is in the GPU's series as the monitor's history
            // has it: a 250 ms spike no refresh saw is among the report's spikes.
            if peak.at_ms < sample.at_ms {
                self.gpu_rises
                    .entry(sample.index)
                    .or_default()
                    .push(peak.at_ms, peak.used);
            }
            // Each process's figure at the spike, as the monitor keeps it in its history.
            if let PeakHolders::Read(holders) = &peak.holders {
                for held in holders {
                    raise(
                        self.process_peaks
                            .entry((held.pid, sample.index))
                            .or_default(),
                        held.used,
                        peak.at_ms,
                        None,
                        "",
                    );
                }
            }
        }
        if let Ok(memory) = &sample.memory {
            raised |= raise(
                self.gpu_peaks.entry(sample.index).or_default(),
                memory.used,
                sample.at_ms,
                None,
                "",
            );
            self.gpu_rises
                .entry(sample.index)
                .or_default()
                .push(sample.at_ms, memory.used);
        }
        let instances = sample.mig_enabled().and_then(|m| m.instances.as_ref().ok());
        for instance in instances.into_iter().flatten() {
            for p in instance.processes.as_ref().into_iter().flatten() {
                self.process_mig
                    .insert((p.pid, sample.index), RowInstance::from(instance));
            }
        }
        if let Ok(processes) = &sample.processes {
            for p in processes {
                // As the monitor's row does: the device's free memory whatever the process's
                // own figure (`snapshot::join_processes`).
                self.process_beside.insert(
                    (p.pid, sample.index),
                    NvmlBeside {
                        process_used: p.used_memory.as_ref().ok().copied(),
                        device_free: sample.memory.as_ref().ok().map(|m| m.free),
                    },
                );
                if let Ok(used) = p.used_memory {
                    self.process_used.insert((p.pid, sample.index), used);
                    raise(
                        self.process_peaks.entry((p.pid, sample.index)).or_default(),
                        used,
                        sample.at_ms,
                        None,
                        "",
                    );
                }
            }
        }
        if raised && let Some(owner) = owner {
            self.gpu_peak_owners.insert(sample.index, owner);
        }
        self.last_device.insert(sample.index, sample.clone());
    }

    fn host(&mut self, sample: &HostSample) {
        for p in &sample.processes {
            let entry = self.hosts.entry(p.pid).or_default();
            if let Ok(command) = &p.command {
                entry.command = Some(command.clone());
            }
            if let Ok(user) = &p.user {
                entry.user = Some(user.clone());
            }
            if p.pod.is_some() {
                entry.pod.clone_from(&p.pod);
            }
            if p.starttime.is_some() {
                entry.starttime = p.starttime;
            }
        }
    }

    /// Folds the poll, then reads its samples against what the fold now knows: the peak's
    /// own sample gives the cache at the peak, and a spike at the peak takes its phase.
    fn poll(&mut self, poll: ChannelPoll, at_ms: u64) {
        let path = poll.path.clone();
        let points = poll.points.clone();
        let devices = poll.devices.clone();
        for event in &poll.events {
            if let (Some(slot), Some(peak)) = (event.slot, StepPeak::from_event(event)) {
                let key = (path.clone(), usize::from(slot));
                self.extras.entry(key).or_default().steps.push(peak);
            }
        }
        let fold = self.folds.poll(poll, at_ms);
        for device in &devices {
            let extras = self
                .extras
                .entry((path.clone(), usize::from(device.slot)))
                .or_default();
            if let (Ok(split), Ok(reserved)) = (&device.inactive_split, &device.reserved)
                && extras.fragmentation.is_none_or(|(worst, _)| *split > worst)
            {
                extras.fragmentation = Some((*split, *reserved));
            }
            if let Ok(r) = device.alloc_retries {
                extras.retries = Some(extras.retries.map_or(r, |s| s.max(r)));
            }
            // The fold's count, not the writer's figure: it counts each OOM once.
            let counted = fold
                .slots
                .get(usize::from(device.slot))
                .and_then(|s| s.device.as_ref())
                .and_then(|d| d.ooms.as_ref().ok().copied());
            if let Some(o) = counted {
                extras.ooms = Some(extras.ooms.map_or(o, |s| s.max(o)));
            }
        }
        // A new peak: its cache is read from the first sample at or after it, the one whose
        // interval holds it (reserved grew to hold the spike; allocated is back down).
        for (slot_index, slot) in fold.slots.iter().enumerate() {
            let Some(peak) = slot.true_peak() else {
                continue;
            };
            let extras = self.extras.entry((path.clone(), slot_index)).or_default();
            let now = (peak.value, peak.at_ms);
            if extras.peak_seen != Some(now) {
                extras.peak_seen = Some(now);
                extras.reserved_at_peak = None;
                extras.status_reserved = slot
                    .device
                    .as_ref()
                    .and_then(|d| d.reserved.as_ref().ok().copied());
            }
        }
        for point in &points {
            let slot = usize::from(point.slot);
            let extras = self.extras.entry((path.clone(), slot)).or_default();
            let peak = fold.slots.get(slot).and_then(|s| s.true_peak());
            let after = extras.last_point_ms.replace(point.at_ms);
            if let Some(top) = point.peak.max(point.allocated) {
                // The sample that carries the true peak takes its step and phase (the
                // spike happened before the sample, maybe in another step); a later spike
                // as high is another moment, with its own sample's step.
                extras.rises.push_with(point.at_ms, top, || {
                    match peak.filter(|p| {
                        p.value == top
                            && p.at_ms <= point.at_ms
                            && after.is_none_or(|last| p.at_ms > last)
                    }) {
                        Some(p) => (p.step, p.phase.clone()),
                        None => (point.step, String::new()),
                    }
                });
            }
            if let Some(reserved) = point.reserved {
                raise(
                    &mut extras.peak_reserved,
                    reserved,
                    point.at_ms,
                    point.step,
                    "",
                );
                if extras.reserved_at_peak.is_none() && peak.is_some_and(|p| point.at_ms >= p.at_ms)
                {
                    extras.reserved_at_peak = Some(reserved);
                }
            }
        }
    }

    /// NVML's figure for each new OOM's process, as near its moment as the recording has.
    fn note_ooms(&mut self) {
        for (path, fold) in &self.folds.writers {
            for oom in &fold.ooms {
                let key = (path.clone(), oom.at_ms, oom.slot);
                if self.used_at_oom.contains_key(&key) {
                    continue;
                }
                let used = fold
                    .host_pid
                    .zip(fold.gpu_of_oom(oom))
                    .and_then(|at| self.process_used.get(&at).copied());
                if let Some(used) = used {
                    self.used_at_oom.insert(key, used);
                }
            }
        }
    }

    /// What NVML read beside the process on `gpu` when it was last listed.
    fn beside(&self, pid: u32, gpu: u32) -> NvmlBeside {
        self.process_beside
            .get(&(pid, gpu))
            .copied()
            .unwrap_or(NvmlBeside::NONE)
    }

    /// The explanation of one OOM of `fold`'s, from its figures and NVML's beside them, and
    /// its verdict.
    fn explain(&self, path: &str, fold: &WriterFold, oom: &Oom) -> (Vec<String>, Reading<Verdict>) {
        let used = self
            .used_at_oom
            .get(&(path.to_string(), oom.at_ms, oom.slot))
            .copied()
            .ok_or(Absent::NotAvailable);
        let slot = oom.slot.and_then(|s| fold.slots.get(usize::from(s)));
        let limit = slot
            .and_then(|s| s.device.as_ref())
            .and_then(|d| d.limit.as_ref().ok().copied());
        let allocator = match &fold.identity {
            Some(identity) if identity.kind == "PyTorch" => Allocator::Torch {
                config: &identity.allocator_config,
            },
            _ => Allocator::Other,
        };
        let figures = OomFigures {
            requested: oom.requested.clone(),
            device_free: oom.device_free.clone(),
            device_total: oom.device_total.clone(),
            limit,
            allocated: oom.allocated.clone(),
            reserved: oom.reserved.clone(),
            used,
            used_by: UsedBy::Process,
            allocator,
        };
        (
            oom_explain::explain(&figures),
            oom_explain::verdict(&figures),
        )
    }

    fn finish(self, header: Header, periods: Periods, ending: Ending) -> Report {
        let gpus = self
            .folds
            .devices()
            .iter()
            .map(|d| GpuSummary {
                index: d.index,
                name: d.display_name(),
                uuid: d.uuid.as_ref().ok().cloned(),
                total: d.memory_total.as_ref().ok().copied(),
                peak_used: self.gpu_peaks.get(&d.index).cloned().flatten(),
                peak_owner: self.gpu_peak_owners.get(&d.index).cloned(),
            })
            .collect();
        let mut processes: Vec<ProcessSummary> = self
            .process_peaks
            .iter()
            .map(|(&(pid, gpu_index), peak)| {
                let HostFacts {
                    command,
                    user,
                    pod,
                    starttime,
                } = self.hosts.get(&pid).cloned().unwrap_or_default();
                ProcessSummary {
                    pid,
                    gpu_index,
                    command,
                    user,
                    pod,
                    mig: self.process_mig.get(&(pid, gpu_index)).cloned(),
                    peak_nvml: peak.clone(),
                    allocator: self.allocator_of(pid, starttime, gpu_index),
                }
            })
            .collect();
        processes.sort_by_key(|p| {
            (
                std::cmp::Reverse(p.peak_nvml.as_ref().map_or(0, |a| a.value)),
                p.pid,
                p.gpu_index,
            )
        });
        let mut spikes: Vec<SpikeSummary> = Vec::new();
        for (index, rises) in &self.gpu_rises {
            for rise in rises.top() {
                spikes.push(SpikeSummary {
                    what: format!("GPU {index}"),
                    rise,
                    steps_from: StepOrigin::Job,
                });
            }
        }
        for ((path, slot), extras) in &self.extras {
            let Some(fold) = self.folds.writers.get(path) else {
                continue;
            };
            let gpu = fold.slots.get(*slot).and_then(|s| s.gpu);
            let what = match (fold.host_pid, gpu) {
                (Some(pid), Some(gpu)) => format!("pid {pid} on GPU {gpu} (allocated)"),
                (Some(pid), None) => format!("pid {pid}, device slot {slot} (allocated)"),
                _ => format!(
                    "{} slot {slot} (allocated)",
                    fold.identity.as_ref().map_or("?", |i| i.file.as_str())
                ),
            };
            for rise in extras.rises.top() {
                spikes.push(SpikeSummary {
                    what: what.clone(),
                    rise,
                    steps_from: fold.steps_from,
                });
            }
        }
        spikes.sort_by_key(|s| std::cmp::Reverse(s.rise.amount()));
        spikes.truncate(TOP_SPIKES);
        let mut ooms: Vec<OomSummary> = Vec::new();
        for (path, fold) in &self.folds.writers {
            for oom in &fold.ooms {
                let (explanation, verdict) = self.explain(path, fold, oom);
                ooms.push(OomSummary {
                    pid: fold.host_pid,
                    gpu_index: fold.gpu_of_oom(oom),
                    oom: oom.clone(),
                    steps_from: fold.steps_from,
                    explanation,
                    verdict,
                    held: fold.snapshot_of(oom).map(|n| reduced(path, n)),
                });
            }
        }
        ooms.sort_by_key(|o| o.oom.at_ms);
        Report {
            header,
            first_ms: self.first_ms,
            last_ms: self.last_ms,
            gpus,
            processes,
            ooms,
            spikes,
            damaged: ending.damage,
            skipped: ending.skipped,
            periods,
        }
    }

    /// The allocator figures of the writer that NVML listed as `pid`, for `gpu_index`: the
    /// channel its row joins by the monitor's rule (`joined_channel`: pid, start time and
    /// liveness), so a pid used again by another process never shows the first one's.
    fn allocator_of(
        &self,
        pid: u32,
        starttime: Option<u64>,
        gpu_index: u32,
    ) -> Option<AllocatorSummary> {
        let candidates: Vec<(&String, &WriterFold)> = self
            .folds
            .writers
            .iter()
            .filter(|(_, fold)| {
                fold.host_pid == Some(pid)
                    && fold.identity.is_some()
                    && fold.slot_on(gpu_index).is_some()
            })
            .collect();
        // The row joins as the monitor's row of the process would at the recording's end.
        // Still listed by its GPU: a channel not ended, else one its very process ended (the
        // same start time; without it no ended channel, which could be a dead namesake's).
        // Listed no more: as an exited row, an ended channel first.
        let process = if self.folds.lists(pid, gpu_index) {
            RowProcess::Listed { starttime }
        } else {
            RowProcess::Unlisted
        };
        let joined = joined_channel(
            candidates.iter(),
            |(_, fold)| fold.liveness,
            |(_, fold)| fold.identity.as_ref().and_then(|i| i.starttime()),
            process,
        );
        joined.and_then(|&(path, fold)| {
            let identity = fold.identity.as_ref()?;
            let (slot, track) = fold.slot_on(gpu_index)?;
            let extras = self.extras.get(&(path.clone(), slot));
            let peak = track.true_peak();
            Some(AllocatorSummary {
                kind: identity.kind.clone(),
                framework: identity.framework.clone(),
                rank: identity.rank,
                world_size: identity.world_size,
                steps_from: fold.steps_from,
                peak_allocated: peak.map(|p| At {
                    value: p.value,
                    at_ms: p.at_ms,
                    step: p.step,
                    phase: p.phase.clone(),
                }),
                peak_reserved: extras.and_then(|e| e.peak_reserved.clone()),
                cache_at_peak: peak.and_then(|p| {
                    let e = extras?;
                    let reserved = e.reserved_at_peak.or(e.status_reserved)?;
                    Some(reserved.saturating_sub(p.value))
                }),
                fragmentation: extras.and_then(|e| e.fragmentation),
                alloc_retries: extras.and_then(|e| e.retries),
                ooms: extras.and_then(|e| e.ooms),
                allocator_config: identity.allocator_config.clone(),
                writer_command: identity.command.clone(),
                forecast: fold.forecast(track, self.beside(pid, gpu_index)),
                ended: fold.liveness.is_ended(),
                held: fold.peak_snapshot(slot).map(|n| reduced(path, n)),
                snapshots_dropped: fold.snapshot_drops.dropped(),
                phase_peaks: track.phase_peaks.clone(),
                step_peaks: extras.map(|e| e.steps.clone()).unwrap_or_default(),
            })
        })
    }
}

/// `note` with its snapshot read and reduced now, if the file is still there (a file gone is
/// said so in its `sites`, not an error).
fn reduced(channel: &str, note: &SnapshotNote) -> SnapshotNote {
    let mut note = note.clone();
    if let Some(job) = SitesJob::of(channel, &note) {
        note.sites = reduce(&job);
    }
    note
}

/// Keeps the first time the highest value was reached; true when `value` is the new peak.
fn raise(peak: &mut Option<At>, value: u64, at_ms: u64, step: Option<u64>, phase: &str) -> bool {
    let higher = peak.as_ref().is_none_or(|p| value > p.value);
    if higher {
        *peak = Some(At {
            value,
            at_ms,
            step,
            phase: phase.to_string(),
        });
    }
    higher
}
