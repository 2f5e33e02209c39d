//! One pass over a recording, keeping what the plot draws: per GPU NVML's used memory, per
//! process on it NVML's used memory, per instrumented process its allocated and reserved
//! bytes, every OOM and every step. Each series is downsampled as it is read, so memory stays
//! bounded by the number of GPUs, processes and writers, never by the recording's length.

use super::downsample::MaxBuckets;
use super::steps::StepTracker;
use super::timeline::{OomMark, Panel, Role, Series, Timeline, clean};
use crate::model::{
    AllocatorDevice, ChannelPoll, DeviceInfo, DeviceSample, EventKind, HostSample, Reading,
    WriterIdentity,
};
use crate::record::{Ending, Recording};
use crate::sources::runner::SourceEvent;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// OOMs kept for markers; an OOM storm beyond this is counted, not drawn.
const MAX_OOMS: usize = 10_000;
/// Longest command shown in a legend.
const COMMAND_CHARS: usize = 40;
/// No line bridges a silence longer than this (or ten sampling periods, if longer): the
/// same rule that calls a writer stalled.
const MIN_GAP_MS: u64 = 5_000;

struct SlotTrack {
    gpu: Option<u32>,
    total: Option<u64>,
    allocated: MaxBuckets,
    reserved: MaxBuckets,
}

struct ChannelTrack {
    identity: Arc<WriterIdentity>,
    host_pid: Option<u32>,
    slots: BTreeMap<u16, SlotTrack>,
    steps: StepTracker,
}

struct PendingOom {
    path: String,
    slot: Option<u16>,
    mark: OomMark,
}

struct Collector {
    points: usize,
    interval_ms: u64,
    devices: Vec<DeviceInfo>,
    gpu_used: BTreeMap<u32, MaxBuckets>,
    gpu_total: BTreeMap<u32, u64>,
    process_used: BTreeMap<(u32, u32), MaxBuckets>,
    commands: HashMap<u32, String>,
    channels: BTreeMap<String, ChannelTrack>,
    ooms: Vec<PendingOom>,
    ooms_dropped: u64,
    first_ms: Option<u64>,
    last_ms: Option<u64>,
}

/// Reads the whole recording, downsampling every series to at most `points` buckets. A
/// damaged record stops the reading; what came before is still plotted and the damage named.
pub fn collect(recording: Recording, points: usize) -> Timeline {
    let header = recording.header().clone();
    let mut c = Collector {
        points,
        interval_ms: header.interval_ms,
        devices: Vec::new(),
        gpu_used: BTreeMap::new(),
        gpu_total: BTreeMap::new(),
        process_used: BTreeMap::new(),
        commands: HashMap::new(),
        channels: BTreeMap::new(),
        ooms: Vec::new(),
        ooms_dropped: 0,
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
            SourceEvent::Started { devices, .. } => self.devices = devices,
            SourceEvent::Device(sample) => self.device(&sample),
            SourceEvent::Host(sample) => self.host(&sample),
            SourceEvent::Channels(batch) => {
                for poll in &batch.polls {
                    self.poll(poll);
                }
            }
            // A recording gives a batch's members one by one.
            SourceEvent::NvmlUnavailable(_) | SourceEvent::Batch(_) => {}
        }
    }

    fn device(&mut self, sample: &DeviceSample) {
        let points = self.points;
        // A spike the fast memory sampling caught between two samples, at its own time.
        if let Some(peak) = sample.memory_peak.filter(|p| p.at_ms < sample.at_ms) {
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

    fn poll(&mut self, poll: &ChannelPoll) {
        let points = self.points;
        let devices = &self.devices;
        let channel = self
            .channels
            .entry(poll.path.clone())
            .or_insert_with(|| ChannelTrack {
                identity: Arc::clone(&poll.identity),
                host_pid: None,
                slots: BTreeMap::new(),
                steps: StepTracker::default(),
            });
        if poll.host_pid.is_some() {
            channel.host_pid = poll.host_pid;
        }
        let new_slot = || SlotTrack {
            gpu: None,
            total: None,
            allocated: MaxBuckets::new(points),
            reserved: MaxBuckets::new(points),
        };
        for device in &poll.devices {
            let slot = channel.slots.entry(device.slot).or_insert_with(new_slot);
            if let Some(gpu) = gpu_of(device, devices) {
                slot.gpu = Some(gpu);
            }
            if let Ok(total) = device.total {
                slot.total = Some(total);
            }
        }
        let mut times = Vec::with_capacity(poll.points.len() + poll.events.len());
        for point in &poll.points {
            let slot = channel.slots.entry(point.slot).or_insert_with(new_slot);
            // `peak` is the highest allocated since the writer's previous sample: a spike
            // between two samples still reaches the line.
            if let Some(allocated) = point.peak.max(point.allocated) {
                slot.allocated.push(point.at_ms, allocated);
            }
            if let Some(reserved) = point.reserved {
                slot.reserved.push(point.at_ms, reserved);
            }
            if let Some(step) = point.step {
                channel.steps.point(step, point.at_ms);
            }
            times.push(point.at_ms);
        }
        for event in &poll.events {
            times.push(event.at_ms);
            let figure = |r: &Reading<u64>| r.as_ref().ok().copied();
            let (bytes, requested) = match &event.kind {
                EventKind::StepEnd { duration_ns, .. } => {
                    if let Some(step) = event.step {
                        channel.steps.ended(step, event.at_ms, figure(duration_ns));
                    }
                    continue;
                }
                EventKind::Oom {
                    requested,
                    allocated,
                    reserved,
                    ..
                } => (figure(reserved).or(figure(allocated)), requested),
                EventKind::OomError { requested } => (None, requested),
                _ => continue,
            };
            if self.ooms.len() >= MAX_OOMS {
                self.ooms_dropped += 1;
                continue;
            }
            self.ooms.push(PendingOom {
                path: poll.path.clone(),
                slot: event.slot,
                mark: OomMark {
                    at_ms: event.at_ms,
                    bytes,
                    requested: figure(requested),
                    pid: channel.host_pid,
                },
            });
        }
        for t in times {
            self.seen(t);
        }
    }

    fn finish(self, host: Option<&str>, ending: Ending) -> Timeline {
        let damaged = ending.damage;
        let gap = |period_ms: u64| Some(MIN_GAP_MS.max(period_ms.saturating_mul(10)));
        let nvml_gap = gap(self.interval_ms);
        let mut indices: BTreeSet<u32> = self.devices.iter().map(|d| d.index).collect();
        indices.extend(self.gpu_used.keys());
        let mut panels: BTreeMap<Option<u32>, Panel> = BTreeMap::new();
        let mut gpu_used = self.gpu_used;
        for index in indices {
            let info = self.devices.iter().find(|d| d.index == index);
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
                    gap_ms: nvml_gap,
                });
            }
            panels.insert(Some(index), panel);
        }
        let mut process_used = self.process_used;
        let mut processes_on: BTreeMap<Option<u32>, usize> = BTreeMap::new();
        // Where each writer's OOMs go: the GPU of the slot named, else every GPU it used.
        let mut slot_gpus: HashMap<(String, u16), Option<u32>> = HashMap::new();
        let mut channel_gpus: HashMap<String, Vec<Option<u32>>> = HashMap::new();
        for (path, channel) in self.channels {
            let who = writer_name(&channel, &self.commands);
            let allocator_gap = match channel.identity.sample_period_us {
                0 => None,
                us => gap(u64::from(us) / 1000),
            };
            let single_slot = channel.slots.len() == 1;
            for (slot_no, slot) in channel.slots {
                slot_gpus.insert((path.clone(), slot_no), slot.gpu);
                if slot.allocated.is_empty() && slot.reserved.is_empty() {
                    continue;
                }
                let panel = panels.entry(slot.gpu).or_insert_with(|| match slot.gpu {
                    Some(index) => Panel::new(format!("GPU {index}"), None),
                    None => Panel::new("GPU not identified (allocator figures only)".into(), None),
                });
                if slot.gpu.is_none() {
                    panel.limit = panel.limit.max(slot.total);
                }
                let used_gpus = channel_gpus.entry(path.clone()).or_default();
                if !used_gpus.contains(&slot.gpu) {
                    used_gpus.push(slot.gpu);
                }
                let ordinal = processes_on.entry(slot.gpu).or_default();
                let process = Some(*ordinal);
                *ordinal += 1;
                let base = if single_slot || slot.gpu.is_some() {
                    who.clone()
                } else {
                    format!("{who} slot {slot_no}")
                };
                let mut push = |role: Role, buckets: MaxBuckets, gap_ms: Option<u64>| {
                    if !buckets.is_empty() {
                        panel.series.push(Series {
                            label: format!("{base}: {}", role.name()),
                            role,
                            process,
                            buckets: buckets.finish(),
                            gap_ms,
                        });
                    }
                };
                push(Role::Allocated, slot.allocated, allocator_gap);
                push(Role::Reserved, slot.reserved, allocator_gap);
                if let (Some(pid), Some(gpu)) = (channel.host_pid, slot.gpu)
                    && let Some(used) = process_used.remove(&(pid, gpu))
                {
                    push(Role::ProcessUsed, used, nvml_gap);
                }
                if panel.steps.is_empty() && !panel.steps_overflow && !channel.steps.is_empty() {
                    panel.steps = channel.steps.spans();
                    panel.steps_overflow = channel.steps.overflowed();
                    panel.steps_of = channel.host_pid.map(|pid| format!("pid {pid}"));
                }
            }
        }
        for pending in self.ooms {
            let gpus = oom_panels(&pending, &slot_gpus, &channel_gpus, &panels);
            for key in gpus {
                if let Some(panel) = panels.get_mut(&key) {
                    panel.ooms.push(pending.mark.clone());
                }
            }
        }
        // Known GPUs in index order, then the allocator figures that joined none.
        let mut panels: Vec<(Option<u32>, Panel)> = panels.into_iter().collect();
        panels.sort_by_key(|(key, _)| key.is_none());
        let first_ms = self.first_ms.unwrap_or(0);
        Timeline {
            host: host.map(|h| clean(h, 60)),
            first_ms,
            last_ms: self.last_ms.unwrap_or(first_ms),
            panels: panels.into_iter().map(|(_, p)| p).collect(),
            ooms_dropped: self.ooms_dropped,
            damaged,
            skipped: ending.skipped,
        }
    }
}

/// `pid 4242 python train.py [PyTorch, rank 0]`: the host's command line for the pid when
/// the recording has it (the writer's own may be shortened), else the writer's.
fn writer_name(channel: &ChannelTrack, commands: &HashMap<u32, String>) -> String {
    let identity = &channel.identity;
    let who = match channel.host_pid {
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

/// The GPU of an allocator's device slot: by UUID or PCI bus id; or, on a one-GPU machine, a
/// slot that names neither is that GPU.
fn gpu_of(device: &AllocatorDevice, devices: &[DeviceInfo]) -> Option<u32> {
    crate::model::writer_fold::gpu_index_of(device, devices).or_else(|| {
        let anonymous = device.uuid.is_none() && device.pci_bus_id.is_none();
        match devices {
            [only] if anonymous => Some(only.index),
            _ => None,
        }
    })
}

/// Which panels show an OOM: its slot's GPU; else every GPU its writer used; else all.
fn oom_panels(
    oom: &PendingOom,
    slot_gpus: &HashMap<(String, u16), Option<u32>>,
    channel_gpus: &HashMap<String, Vec<Option<u32>>>,
    panels: &BTreeMap<Option<u32>, Panel>,
) -> Vec<Option<u32>> {
    let slot_gpu = oom
        .slot
        .and_then(|s| slot_gpus.get(&(oom.path.clone(), s)).copied());
    if let Some(gpu) = slot_gpu
        && panels.contains_key(&gpu)
    {
        return vec![gpu];
    }
    match channel_gpus.get(&oom.path) {
        Some(gpus) if !gpus.is_empty() => gpus.clone(),
        _ => panels.keys().copied().collect(),
    }
}
