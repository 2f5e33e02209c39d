//! One pass over a recording's events, keeping only what a summary needs: per GPU and per
//! process the peaks with their time (and, for instrumented processes, step and phase), every
//! OOM, the largest rises within a short window, and the allocator's cache and fragmentation
//! at its peak. Memory stays bounded by the number of GPUs, processes and writers, never by
//! the recording's length.

use super::spikes::{Rise, RiseTracker};
use crate::model::{
    Absent, AllocatorDevice, ChannelPoll, DeviceInfo, DeviceSample, EventKind, HostSample, Reading,
    WriterIdentity,
};
use crate::record::{Ending, Header, Recording};
use crate::sources::runner::SourceEvent;
use std::collections::BTreeMap;
use std::sync::Arc;

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
    pub peak_allocated: Option<At>,
    pub peak_reserved: Option<At>,
    /// Reserved minus allocated in the sample of the allocated peak: the cache.
    pub cache_at_peak: Option<u64>,
    /// Largest inactive split (free but not releasable) seen, and reserved at that moment.
    pub fragmentation: Option<(u64, u64)>,
    pub alloc_retries: Option<u64>,
    pub ooms: Option<u64>,
    pub allocator_config: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ProcessSummary {
    pub pid: u32,
    pub gpu_index: u32,
    pub command: Option<String>,
    pub user: Option<String>,
    pub peak_nvml: Option<At>,
    pub allocator: Option<AllocatorSummary>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct OomSummary {
    pub at_ms: u64,
    pub pid: Option<u32>,
    pub gpu_index: Option<u32>,
    /// Caught by the allocator's observer, or an error that escaped to the top.
    pub caught: bool,
    pub requested: Reading<u64>,
    pub device_free: Reading<u64>,
    pub allocated: Reading<u64>,
    pub reserved: Reading<u64>,
    pub step: Option<u64>,
    pub label: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SpikeSummary {
    /// `GPU 0` or `pid 4242 on GPU 0 (allocated)`.
    pub what: String,
    pub rise: Rise,
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
}

/// How many spikes the report lists.
const TOP_SPIKES: usize = 5;

/// One writer's device slot, followed through the recording.
#[derive(Default)]
struct SlotTrack {
    peak_allocated: Option<At>,
    peak_reserved: Option<At>,
    cache_at_peak: Option<u64>,
    fragmentation: Option<(u64, u64)>,
    retries: Option<u64>,
    ooms: Option<u64>,
    rises: RiseTracker,
    /// The slot's latest figures, for its GPU and the OOMs' join.
    device: Option<AllocatorDevice>,
}

#[derive(Default)]
struct ChannelTrack {
    identity: Option<Arc<WriterIdentity>>,
    host_pid: Option<u32>,
    slots: BTreeMap<u16, SlotTrack>,
}

#[derive(Default)]
struct Analysis {
    devices: Vec<DeviceInfo>,
    /// The peaks per GPU and per (pid, GPU): an entry is `Some` as soon as `raise` makes it.
    gpu_peaks: BTreeMap<u32, Option<At>>,
    gpu_rises: BTreeMap<u32, RiseTracker>,
    process_peaks: BTreeMap<(u32, u32), Option<At>>,
    hosts: BTreeMap<u32, (Option<String>, Option<String>)>,
    channels: BTreeMap<String, ChannelTrack>,
    ooms: Vec<OomSummary>,
    first_ms: Option<u64>,
    last_ms: Option<u64>,
}

/// Reads the whole recording and summarises it. A damaged record stops the reading; what
/// came before is still summarised, and the damage is named.
pub fn analyse(recording: Recording) -> Report {
    let header = recording.header().clone();
    let mut analysis = Analysis::default();
    let ending = recording.each_event(|at_ms, event| analysis.event(at_ms, event));
    analysis.finish(header, ending)
}

impl Analysis {
    fn event(&mut self, at_ms: u64, event: SourceEvent) {
        self.first_ms.get_or_insert(at_ms);
        self.last_ms = Some(self.last_ms.map_or(at_ms, |l| l.max(at_ms)));
        match event {
            SourceEvent::Started { devices, .. } => self.devices = devices,
            SourceEvent::Device(sample) => self.device(&sample),
            SourceEvent::Host(sample) => self.host(&sample),
            SourceEvent::Channels(batch) => {
                for poll in batch.polls {
                    self.poll(poll);
                }
            }
            // A recording gives a batch's members one by one.
            SourceEvent::NvmlUnavailable(_) | SourceEvent::Batch(_) => {}
        }
    }

    fn device(&mut self, sample: &DeviceSample) {
        // A spike the fast memory sampling caught between two samples.
        if let Some(peak) = sample.memory_peak {
            raise(
                self.gpu_peaks.entry(sample.index).or_default(),
                peak.used,
                peak.at_ms,
                None,
                "",
            );
        }
        if let Ok(memory) = &sample.memory {
            raise(
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
        if let Ok(processes) = &sample.processes {
            for p in processes {
                if let Ok(used) = p.used_memory {
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
    }

    fn host(&mut self, sample: &HostSample) {
        for p in &sample.processes {
            let entry = self.hosts.entry(p.pid).or_default();
            if let Ok(command) = &p.command {
                entry.0 = Some(command.clone());
            }
            if let Ok(user) = &p.user {
                entry.1 = Some(user.clone());
            }
        }
    }

    fn poll(&mut self, poll: ChannelPoll) {
        let channel = self.channels.entry(poll.path.clone()).or_default();
        channel.identity = Some(Arc::clone(&poll.identity));
        if poll.host_pid.is_some() {
            channel.host_pid = poll.host_pid;
        }
        // The points came before this poll; its step and label are the writer's status when
        // it was read, the nearest the recording has to "where the program was".
        for point in &poll.points {
            let slot = channel.slots.entry(point.slot).or_default();
            let step = point.step.or(poll.step);
            if let Some(top) = point.peak.max(point.allocated) {
                if raise(
                    &mut slot.peak_allocated,
                    top,
                    point.at_ms,
                    step,
                    &poll.label,
                ) {
                    slot.cache_at_peak = point
                        .reserved
                        .zip(point.allocated)
                        .map(|(r, a)| r.saturating_sub(a));
                }
                slot.rises
                    .push_with(point.at_ms, top, || (step, poll.label.clone()));
            }
            if let Some(reserved) = point.reserved {
                raise(
                    &mut slot.peak_reserved,
                    reserved,
                    point.at_ms,
                    step,
                    &poll.label,
                );
            }
        }
        for device in &poll.devices {
            let slot = channel.slots.entry(device.slot).or_default();
            if let (Ok(split), Ok(reserved)) = (&device.inactive_split, &device.reserved)
                && slot.fragmentation.is_none_or(|(worst, _)| *split > worst)
            {
                slot.fragmentation = Some((*split, *reserved));
            }
            if let Ok(r) = device.alloc_retries {
                slot.retries = Some(slot.retries.map_or(r, |s| s.max(r)));
            }
            if let Ok(o) = device.ooms {
                slot.ooms = Some(slot.ooms.map_or(o, |s| s.max(o)));
            }
            slot.device = Some(device.clone());
        }
        for event in &poll.events {
            let absent = || Err(Absent::NotSupported);
            let (caught, requested, device_free, allocated, reserved) = match &event.kind {
                EventKind::Oom {
                    requested,
                    device_free,
                    allocated,
                    reserved,
                    ..
                } => (
                    true,
                    requested.clone(),
                    device_free.clone(),
                    allocated.clone(),
                    reserved.clone(),
                ),
                EventKind::OomError { requested } => {
                    (false, requested.clone(), absent(), absent(), absent())
                }
                _ => continue,
            };
            self.ooms.push(OomSummary {
                at_ms: event.at_ms,
                pid: channel.host_pid,
                gpu_index: event
                    .slot
                    .and_then(|s| channel.slots.get(&s))
                    .and_then(|slot| slot.device.as_ref())
                    .and_then(|d| crate::model::writer_fold::gpu_index_of(d, &self.devices)),
                caught,
                requested,
                device_free,
                allocated,
                reserved,
                step: event.step,
                label: event.label.clone(),
            });
        }
    }

    fn finish(self, header: Header, ending: Ending) -> Report {
        let gpus = self
            .devices
            .iter()
            .map(|d| GpuSummary {
                index: d.index,
                name: d.display_name(),
                uuid: d.uuid.as_ref().ok().cloned(),
                total: d.memory_total.as_ref().ok().copied(),
                peak_used: self.gpu_peaks.get(&d.index).cloned().flatten(),
            })
            .collect();
        let mut processes: Vec<ProcessSummary> = self
            .process_peaks
            .iter()
            .map(|(&(pid, gpu_index), peak)| {
                let (command, user) = self.hosts.get(&pid).cloned().unwrap_or_default();
                ProcessSummary {
                    pid,
                    gpu_index,
                    command,
                    user,
                    peak_nvml: peak.clone(),
                    allocator: self.allocator_of(pid, gpu_index),
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
                });
            }
        }
        for channel in self.channels.values() {
            for (slot, track) in &channel.slots {
                let gpu = track
                    .device
                    .as_ref()
                    .and_then(|d| crate::model::writer_fold::gpu_index_of(d, &self.devices));
                let what = match (channel.host_pid, gpu) {
                    (Some(pid), Some(gpu)) => format!("pid {pid} on GPU {gpu} (allocated)"),
                    (Some(pid), None) => format!("pid {pid}, device slot {slot} (allocated)"),
                    _ => format!(
                        "{} slot {slot} (allocated)",
                        channel.identity.as_ref().map_or("?", |i| i.file.as_str())
                    ),
                };
                for rise in track.rises.top() {
                    spikes.push(SpikeSummary {
                        what: what.clone(),
                        rise,
                    });
                }
            }
        }
        spikes.sort_by_key(|s| std::cmp::Reverse(s.rise.amount()));
        spikes.truncate(TOP_SPIKES);
        Report {
            header,
            first_ms: self.first_ms,
            last_ms: self.last_ms,
            gpus,
            processes,
            ooms: self.ooms,
            spikes,
            damaged: ending.damage,
            skipped: ending.skipped,
        }
    }

    /// The allocator figures of the writer that NVML listed as `pid`, for `gpu_index`.
    fn allocator_of(&self, pid: u32, gpu_index: u32) -> Option<AllocatorSummary> {
        self.channels
            .values()
            .filter(|c| c.host_pid == Some(pid))
            .find_map(|channel| {
                let identity = channel.identity.as_ref()?;
                let (_, track) = channel.slots.iter().find(|(_, t)| {
                    t.device.as_ref().is_some_and(|d| {
                        crate::model::writer_fold::gpu_index_of(d, &self.devices) == Some(gpu_index)
                            || (channel.slots.len() == 1
                                && d.uuid.is_none()
                                && d.pci_bus_id.is_none())
                    })
                })?;
                Some(AllocatorSummary {
                    kind: identity.kind.clone(),
                    framework: identity.framework.clone(),
                    rank: identity.rank,
                    world_size: identity.world_size,
                    peak_allocated: track.peak_allocated.clone(),
                    peak_reserved: track.peak_reserved.clone(),
                    cache_at_peak: track.cache_at_peak,
                    fragmentation: track.fragmentation,
                    alloc_retries: track.retries,
                    ooms: track.ooms,
                    allocator_config: identity.allocator_config.clone(),
                })
            })
    }
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
