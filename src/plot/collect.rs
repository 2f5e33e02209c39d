//! One pass over a recording, keeping what the plot draws: per GPU NVML's used memory, per
//! process on it NVML's used memory, per instrumented process its allocated and reserved
//! bytes and every step; each writer's GPUs, true peak and OOMs (one per failure) from the
//! one fold of its stream (`recording::folds`). Each series is downsampled as it is read, so
//! memory stays bounded by the number of GPUs, processes and writers, never by the
//! recording's length.

use super::contents::{Contents, OomMark, Panel, Role, Series, clean};
use super::downsample::MaxBuckets;
use super::steps::StepTracker;
use crate::model::SourceEvent;
use crate::model::StepOrigin;
use crate::model::writer_fold::WriterFold;
use crate::model::{
    ChannelPoll, DeviceInfo, DeviceSample, EventKind, HostSample, Periods, Reading,
};
use crate::recording::folds::RecordedFolds;
use crate::recording::{Ending, Recording};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Longest command shown in a legend.
const COMMAND_CHARS: usize = 40;
/// No line bridges a silence longer than this (or ten sampling periods, if longer): the
/// same rule that calls a writer stalled.
const MIN_GAP_MS: u64 = 5_000;

/// The lines of one writer's device slot; its GPU, peak and OOMs are the fold's.
struct SlotLines {
    allocated: MaxBuckets,
    reserved: MaxBuckets,
}

struct Collector {
    points: usize,
    /// The refresh period: the header's, then each change recorded.
    periods: Periods,
    /// Every writer's stream, folded as the monitor folds it.
    folds: RecordedFolds,
    gpu_used: BTreeMap<u32, MaxBuckets>,
    gpu_total: BTreeMap<u32, u64>,
    process_used: BTreeMap<(u32, u32), MaxBuckets>,
    commands: HashMap<u32, String>,
    /// (channel path, slot) -> its lines.
    lines: BTreeMap<(String, u16), SlotLines>,
    steps: BTreeMap<String, StepTracker>,
    /// Observer OOM events per channel: more than its fold keeps are counted, not drawn.
    oom_events: HashMap<String, u64>,
    first_ms: Option<u64>,
    last_ms: Option<u64>,
}

/// Reads the whole recording, downsampling every series to at most `points` buckets. A
/// damaged record stops the reading; what came before is still plotted and the damage named.
pub fn collect(recording: Recording, points: usize) -> Contents {
    let header = recording.header().clone();
    let mut c = Collector {
        points,
        periods: Periods::constant(header.interval_ms),
        folds: RecordedFolds::default(),
        gpu_used: BTreeMap::new(),
        gpu_total: BTreeMap::new(),
        process_used: BTreeMap::new(),
        commands: HashMap::new(),
        lines: BTreeMap::new(),
        steps: BTreeMap::new(),
        oom_events: HashMap::new(),
        first_ms: None,
        last_ms: None,
    };
    let ending = recording.each_event(|at_ms, event| c.event(at_ms, event));
    c.finish(header.host.as_deref(), ending)
}

impl Collector {
    fn seen(&mut self, at_ms: u64) {
        self.first_ms = Some(self.first_ms.map_or(at_ms, |f| f.min(at_ms)));
        self.last_ms = Some(self.last_ms.map_or(at_ms, |l| l.max(at_ms)));
    }

    fn event(&mut self, at_ms: u64, event: SourceEvent) {
        self.seen(at_ms);
        match event {
            SourceEvent::Started { devices, .. } => self.folds.started(&devices),
            SourceEvent::Device(sample) => self.device(&sample),
            SourceEvent::Host(sample) => self.host(&sample),
            SourceEvent::Channels(batch) => {
                let at_ms = batch.at_ms;
                for poll in batch.polls {
                    self.poll(&poll);
                    self.folds.poll(poll, at_ms);
                }
                self.folds.gone(&batch.gone);
                self.folds.resolve();
            }
            // A recording gives a batch's members one by one.
            SourceEvent::Interval { ms } => self.periods.change(at_ms, ms),
            SourceEvent::NvmlUnavailable(_) | SourceEvent::Batch(_) => {}
        }
    }

    fn device(&mut self, sample: &DeviceSample) {
        self.folds.device(sample);
        let points = self.points;
        // A spike the fast memory sampling caught between two samples, at its own time.
        if let Some(peak) = sample
            .memory_peak
            .as_ref()
            .filter(|p| p.at_ms < sample.at_ms)
        {
            self.seen(peak.at_ms);
            self.gpu_used
                .entry(sample.index)
                .or_insert_with(|| MaxBuckets::new(points))
                .push(peak.at_ms, peak.used);
        }
        if let Ok(memory) = &sample.memory {
            self.seen(sample.at_ms);
            self.gpu_used
                .entry(sample.index)
                .or_insert_with(|| MaxBuckets::new(points))
                .push(sample.at_ms, memory.used);
            self.gpu_total.insert(sample.index, memory.total);
        }
        if let Ok(processes) = &sample.processes {
            for p in processes {
                if let Ok(used) = p.used_memory {
                    self.process_used
                        .entry((p.pid, sample.index))
                        .or_insert_with(|| MaxBuckets::new(points))
                        .push(sample.at_ms, used);
                }
            }
        }
    }

    fn host(&mut self, sample: &HostSample) {
        for p in &sample.processes {
            if let Ok(command) = &p.command {
                self.commands.insert(p.pid, clean(command, COMMAND_CHARS));
            }
        }
    }

    /// The lines and steps of a poll's samples (the fold keeps figures, not lines).
    fn poll(&mut self, poll: &ChannelPoll) {
        let points = self.points;
        let steps = self.steps.entry(poll.path.clone()).or_default();
        for point in &poll.points {
            let slot = self
                .lines
                .entry((poll.path.clone(), point.slot))
                .or_insert_with(|| SlotLines {
                    allocated: MaxBuckets::new(points),
                    reserved: MaxBuckets::new(points),
                });
            // `peak` is the highest allocated since the writer's previous sample: a spike
            // between two samples still reaches the line.
            if let Some(allocated) = point.peak.max(point.allocated) {
                slot.allocated.push(point.at_ms, allocated);
            }
            if let Some(reserved) = point.reserved {
                slot.reserved.push(point.at_ms, reserved);
            }
            if let Some(step) = point.step {
                steps.point(step, point.at_ms);
            }
        }
        let figure = |r: &Reading<u64>| r.as_ref().ok().copied();
        for event in &poll.events {
            match &event.kind {
                EventKind::StepEnd { duration_ns, .. } => {
                    if let Some(step) = event.step {
                        steps.ended(step, event.at_ms, figure(duration_ns));
                    }
                }
                EventKind::Oom { .. } => {
                    *self.oom_events.entry(poll.path.clone()).or_default() += 1;
                }
                _ => {}
            }
        }
        let times: Vec<u64> = poll
            .points
            .iter()
            .map(|p| p.at_ms)
            .chain(poll.events.iter().map(|e| e.at_ms))
            .collect();
        for t in times {
            self.seen(t);
        }
    }

    fn finish(self, host: Option<&str>, ending: Ending) -> Contents {
        let damaged = ending.damage;
        let gap = |period_ms: u64| MIN_GAP_MS.max(period_ms.saturating_mul(10));
        let nvml_gap = Some(self.periods.map(gap));
        let devices = self.folds.devices();
        let mut indices: BTreeSet<u32> = devices.iter().map(|d| d.index).collect();
        indices.extend(self.gpu_used.keys());
        let mut panels: BTreeMap<Option<u32>, Panel> = BTreeMap::new();
        let mut gpu_used = self.gpu_used;
        for index in indices {
            let info = devices.iter().find(|d| d.index == index);
            let name = info.map_or_else(|| format!("GPU {index}"), DeviceInfo::display_name);
            let limit = info
                .and_then(|d| d.memory_total.as_ref().ok().copied())
                .or_else(|| self.gpu_total.get(&index).copied());
            let mut panel = Panel::new(format!("GPU {index} · {}", clean(&name, 60)), limit);
            if let Some(used) = gpu_used.remove(&index) {
                panel.series.push(Series {
                    label: format!("GPU {index} {}", Role::GpuUsed.name()),
                    role: Role::GpuUsed,
                    process: None,
                    buckets: used.finish(),
                    gap_ms: nvml_gap.clone(),
                    peak_where: None,
                });
            }
            panels.insert(Some(index), panel);
        }
        let mut process_used = self.process_used;
        let mut processes_on: BTreeMap<Option<u32>, usize> = BTreeMap::new();
        // Where each writer's OOMs go when their slot's GPU is not known: every GPU it used.
        let mut channel_gpus: HashMap<&str, Vec<Option<u32>>> = HashMap::new();
        let mut slots_of: HashMap<String, usize> = HashMap::new();
        for (path, _) in self.lines.keys() {
            *slots_of.entry(path.clone()).or_default() += 1;
        }
        for ((path, slot_no), lines) in self.lines {
            let Some(fold) = self.folds.writers.get(&path) else {
                continue;
            };
            let Some(identity) = &fold.identity else {
                continue;
            };
            let slot = fold.slots.get(usize::from(slot_no));
            let gpu = slot.and_then(|s| s.gpu);
            let total = slot
                .and_then(|s| s.device.as_ref())
                .and_then(|d| d.total.as_ref().ok().copied());
            if lines.allocated.is_empty() && lines.reserved.is_empty() {
                continue;
            }
            let who = writer_name(fold, &self.commands);
            let allocator_gap = match identity.sample_period_us {
                0 => None,
                us => Some(Periods::constant(gap(u64::from(us) / 1000))),
            };
            let panel = panels.entry(gpu).or_insert_with(|| match gpu {
                Some(index) => Panel::new(format!("GPU {index}"), None),
                None => Panel::new("GPU not identified (allocator figures only)".into(), None),
            });
            if gpu.is_none() {
                panel.limit = panel.limit.max(total);
            }
            let used_gpus = channel_gpus
                .entry(
                    self.folds
                        .writers
                        .get_key_value(&path)
                        .map_or("", |(k, _)| k),
                )
                .or_default();
            if !used_gpus.contains(&gpu) {
                used_gpus.push(gpu);
            }
            let ordinal = processes_on.entry(gpu).or_default();
            let process = Some(*ordinal);
            *ordinal += 1;
            let base = if slots_of.get(&path) == Some(&1) || gpu.is_some() {
                who.clone()
            } else {
                format!("{who} slot {slot_no}")
            };
            // The true peak's place, said at the line's peak when the line reaches it.
            let peak = slot.and_then(|s| s.true_peak());
            let mut push = |role: Role, buckets: MaxBuckets, gap_ms: Option<Periods>| {
                if buckets.is_empty() {
                    return;
                }
                let buckets = buckets.finish();
                let top = buckets.iter().map(|b| b.value).max();
                let peak_where = peak
                    .filter(|p| role == Role::Allocated && Some(p.value) == top)
                    .map(|p| place(p.step, fold.steps_from, &p.phase));
                panel.series.push(Series {
                    label: format!("{base}: {}", role.name()),
                    role,
                    process,
                    buckets,
                    gap_ms,
                    peak_where,
                });
            };
            push(Role::Allocated, lines.allocated, allocator_gap.clone());
            push(Role::Reserved, lines.reserved, allocator_gap);
            if let (Some(pid), Some(gpu)) = (fold.host_pid, gpu)
                && let Some(used) = process_used.remove(&(pid, gpu))
            {
                push(Role::ProcessUsed, used, nvml_gap.clone());
            }
            if let Some(steps) = self.steps.get(&path)
                && panel.steps.is_empty()
                && !panel.steps_overflow
                && !steps.is_empty()
            {
                panel.steps = steps.spans();
                panel.steps_overflow = steps.overflowed();
                // The bands' `step N` labels are the writer's count: said once in the note.
                panel.steps_of = match (fold.host_pid, fold.steps_from) {
                    (Some(pid), StepOrigin::Job) => Some(format!("pid {pid}")),
                    (Some(pid), StepOrigin::Attach) => {
                        Some(format!("pid {pid}, counted since attach"))
                    }
                    (None, StepOrigin::Job) => None,
                    (None, StepOrigin::Attach) => Some("a writer, counted since attach".into()),
                };
            }
        }
        let mut ooms_dropped = 0;
        for (path, fold) in &self.folds.writers {
            let seen = self.oom_events.get(path).copied().unwrap_or(0);
            ooms_dropped += seen.saturating_sub(fold.ooms.len() as u64);
            for oom in &fold.ooms {
                let mark = OomMark {
                    at_ms: oom.at_ms,
                    bytes: figure(&oom.reserved).or(figure(&oom.allocated)),
                    requested: figure(&oom.requested),
                    device_free: figure(&oom.device_free),
                    place: place(oom.step, fold.steps_from, &oom.phase),
                    outcome: oom.outcome,
                    pid: fold.host_pid,
                };
                let gpus = match fold.gpu_of_oom(oom) {
                    Some(gpu) if panels.contains_key(&Some(gpu)) => vec![Some(gpu)],
                    _ => match channel_gpus.get(path.as_str()) {
                        Some(gpus) if !gpus.is_empty() => gpus.clone(),
                        _ => panels.keys().copied().collect(),
                    },
                };
                for key in gpus {
                    if let Some(panel) = panels.get_mut(&key) {
                        panel.ooms.push(mark.clone());
                    }
                }
            }
        }
        for panel in panels.values_mut() {
            panel.ooms.sort_by_key(|o| o.at_ms);
        }
        // Known GPUs in index order, then the allocator figures that joined none.
        let mut panels: Vec<(Option<u32>, Panel)> = panels.into_iter().collect();
        panels.sort_by_key(|(key, _)| key.is_none());
        let first_ms = self.first_ms.unwrap_or(0);
        Contents {
            host: host.map(|h| clean(h, 60)),
            first_ms,
            last_ms: self.last_ms.unwrap_or(first_ms),
            panels: panels.into_iter().map(|(_, p)| p).collect(),
            ooms_dropped,
            damaged,
            skipped: ending.skipped,
        }
    }
}

fn figure(r: &Reading<u64>) -> Option<u64> {
    r.as_ref().ok().copied()
}

/// `step 40, backward`; empty when neither is known.
fn place(step: Option<u64>, steps: StepOrigin, phase: &str) -> String {
    let phase = clean(phase, 40);
    match (step, phase.is_empty()) {
        (Some(step), false) => format!("{}, {phase}", steps.words(step)),
        (Some(step), true) => steps.words(step),
        (None, false) => phase,
        (None, true) => String::new(),
    }
}

/// `pid 4242 python train.py [PyTorch, rank 0]`: the host's command line for the pid when
/// the recording has it (the writer's own may be shortened), else the writer's.
fn writer_name(fold: &WriterFold, commands: &HashMap<u32, String>) -> String {
    let Some(identity) = &fold.identity else {
        return String::new();
    };
    let who = match fold.host_pid {
        Some(pid) => {
            let command = commands
                .get(&pid)
                .cloned()
                .unwrap_or_else(|| clean(&identity.command, COMMAND_CHARS));
            format!("pid {pid} {command}")
        }
        None => format!("{} (pid not mapped)", clean(&identity.file, 40)),
    };
    let kind = clean(&identity.kind, 20);
    match identity.rank {
        Some(rank) => format!("{who} [{kind}, rank {rank}]"),
        None => format!("{who} [{kind}]"),
    }
}
