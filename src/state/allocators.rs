//! What instrumented programs published: each channel's latest figures, its history of
//! allocated and reserved per device (every writer sample, not one per poll), its step ticks
//! and its recent events. Kept after the writer ends, marked ended, because the last figures
//! before a crash are what the user came for.

use crate::history::{Retained, Series, SeriesConfig};
use crate::model::allocator::joined_channel;
use crate::model::{
    AllocatorDevice, AllocatorEvent, AllocatorSnapshot, ChannelBatch, ChannelPoll, DeviceInfo,
    EventKind, Gone, WriterIdentity, WriterLiveness,
};
use std::collections::VecDeque;
use std::sync::Arc;

/// Events kept per channel for the detail pane and JSON.
const RECENT_EVENTS: usize = 64;
/// OOMs and exits kept per channel, apart from the busy stream of other events.
const NOTABLE_EVENTS: usize = 64;
/// Step boundaries kept per channel for the chart's ticks.
const STEP_TICKS: usize = 4096;
/// At most this many channels are remembered; the longest-silent one goes first.
const MAX_CHANNELS: usize = 512;
/// How long a channel no longer read (file removed, closed, unreachable) stays on screen.
const LINGER_MS: u64 = 10 * 60 * 1000;
/// Device slots a channel can have (the spec's limit).
const MAX_SLOTS: usize = 64;

/// The history of one device slot of one channel.
#[derive(Clone)]
pub struct SlotSeries {
    pub allocated: Series,
    pub reserved: Series,
}

impl Default for SlotSeries {
    fn default() -> Self {
        SlotSeries {
            allocated: Series::new(SeriesConfig::process()),
            reserved: Series::new(SeriesConfig::process()),
        }
    }
}

/// The true peak of one slot: the highest allocated seen in any sample or interval peak,
/// and the framework's own counter, counted only above where it stood at the last reset
/// (the `r` key), since the counter itself cannot be reset from here.
#[derive(Clone, Copy, Default)]
struct TruePeak {
    seen: Option<u64>,
    counter_floor: Option<u64>,
}

impl TruePeak {
    fn see(&mut self, value: u64) {
        self.seen = Some(self.seen.map_or(value, |s| s.max(value)));
    }

    fn with_counter(&self, counter: Option<u64>) -> Option<u64> {
        let counter = counter.filter(|c| self.counter_floor.is_none_or(|floor| *c > floor));
        match (self.seen, counter) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }
}

/// One channel's state.
#[derive(Clone)]
pub struct ChannelState {
    pub identity: Option<Arc<WriterIdentity>>,
    pub host_pid: Option<u32>,
    pub liveness: WriterLiveness,
    /// Sorted by slot.
    pub devices: Vec<AllocatorDevice>,
    pub step: Option<u64>,
    pub label: String,
    /// Indexed by slot.
    pub slots: Vec<SlotSeries>,
    true_peaks: Vec<TruePeak>,
    pub events: VecDeque<AllocatorEvent>,
    pub notable: VecDeque<AllocatorEvent>,
    /// `(at_ms, step)` of each step's end, for the chart.
    pub step_ticks: VecDeque<(u64, u64)>,
    pub lost_samples: u64,
    pub lost_events: u64,
}

impl Default for ChannelState {
    fn default() -> Self {
        ChannelState {
            identity: None,
            host_pid: None,
            liveness: WriterLiveness::Live,
            devices: Vec::new(),
            step: None,
            label: String::new(),
            slots: Vec::new(),
            true_peaks: Vec::new(),
            events: VecDeque::new(),
            notable: VecDeque::new(),
            step_ticks: VecDeque::new(),
            lost_samples: 0,
            lost_events: 0,
        }
    }
}

impl ChannelState {
    fn ingest(&mut self, poll: ChannelPoll) {
        self.identity = Some(poll.identity);
        self.host_pid = poll.host_pid;
        self.liveness = poll.liveness;
        self.step = poll.step;
        self.label = poll.label;
        self.lost_samples = poll.lost_samples;
        self.lost_events = poll.lost_events;
        let slots = poll
            .devices
            .iter()
            .map(|d| usize::from(d.slot) + 1)
            .max()
            .unwrap_or(0)
            .min(MAX_SLOTS);
        if self.slots.len() < slots {
            self.slots.resize_with(slots, SlotSeries::default);
            self.true_peaks.resize(slots, TruePeak::default());
        }
        for point in &poll.points {
            let slot = usize::from(point.slot);
            let (Some(series), Some(true_peak)) =
                (self.slots.get_mut(slot), self.true_peaks.get_mut(slot))
            else {
                continue;
            };
            // The interval peak is what a poller misses: fold it into the plotted maximum so
            // the chart's column for this instant reaches the spike.
            let top = match (point.peak, point.allocated) {
                (Some(p), Some(a)) => Some(p.max(a)),
                (p, a) => p.or(a),
            };
            if let Some(top) = top {
                series.allocated.push(point.at_ms, top as f64);
                true_peak.see(top);
            }
            if let Some(reserved) = point.reserved {
                series.reserved.push(point.at_ms, reserved as f64);
            }
        }
        self.devices = poll.devices;
        self.devices.sort_by_key(|d| d.slot);
        for device in &mut self.devices {
            let Some(peak) = self.true_peaks.get_mut(usize::from(device.slot)) else {
                continue;
            };
            // The slot's own interval peak covers the time since the writer's last sample.
            for seen in [&device.allocated, &device.true_peak].into_iter().flatten() {
                peak.see(*seen);
            }
            match peak.with_counter(device.allocated_peak.as_ref().ok().copied()) {
                Some(best) => device.true_peak = Ok(best),
                None => device.true_peak = Err(crate::model::Absent::NotAvailable),
            }
        }
        for event in poll.events {
            if let (EventKind::StepEnd { .. }, Some(step)) = (&event.kind, event.step) {
                push_capped(&mut self.step_ticks, (event.at_ms, step), STEP_TICKS);
            }
            if event.kind.is_oom() || matches!(event.kind, EventKind::Exit { .. }) {
                push_capped(&mut self.notable, event.clone(), NOTABLE_EVENTS);
            }
            push_capped(&mut self.events, event, RECENT_EVENTS);
        }
    }

    /// The channel's device that NVML knows as `gpu_index`, and its slot's history.
    pub fn on_gpu(
        &self,
        gpu_index: u32,
        devices: &[DeviceInfo],
    ) -> Option<(&AllocatorDevice, Option<&SlotSeries>)> {
        let named = self
            .devices
            .iter()
            .find(|d| gpu_index_of(d, devices) == Some(gpu_index));
        // A lone device without UUID or PCI bus id (JAX) was joined by elimination: the only
        // GPU its process uses (see `Monitor::snapshot`).
        let anonymous = || match self.devices.as_slice() {
            [only] if only.uuid.is_none() && only.pci_bus_id.is_none() => Some(only),
            _ => None,
        };
        let device = named.or_else(anonymous)?;
        Some((device, self.slots.get(usize::from(device.slot))))
    }

    /// Events newest first: the recent ones, and older OOMs and exits that scrolled out.
    pub fn newest_events(&self) -> Vec<&AllocatorEvent> {
        let mut all: Vec<&AllocatorEvent> = self.events.iter().collect();
        all.extend(self.notable.iter().filter(|n| !self.events.contains(n)));
        all.sort_by_key(|e| std::cmp::Reverse(e.at_ms));
        all
    }
}

fn push_capped<T>(queue: &mut VecDeque<T>, item: T, cap: usize) {
    if queue.len() == cap {
        queue.pop_front();
    }
    queue.push_back(item);
}

/// Every channel seen, keyed by its file's path.
#[derive(Clone)]
pub struct Allocators {
    channels: Retained<String, ChannelState>,
    /// The last pass's refused files, for the status line.
    rejected: Vec<String>,
}

impl Default for Allocators {
    fn default() -> Self {
        Allocators {
            channels: Retained::new(LINGER_MS, MAX_CHANNELS),
            rejected: Vec::new(),
        }
    }
}

impl Allocators {
    /// About how much memory the channels' histories take (`Series::memory_bytes`).
    pub fn history_bytes(&self) -> usize {
        self.channels
            .iter()
            .flat_map(|(_, channel)| &channel.slots)
            .map(|slot| slot.allocated.memory_bytes() + slot.reserved.memory_bytes())
            .sum()
    }

    pub fn ingest(&mut self, batch: ChannelBatch) {
        for poll in batch.polls {
            let key = poll.path.clone();
            self.channels.touch(key, batch.at_ms).ingest(poll);
        }
        for (path, why) in &batch.gone {
            let Some(state) = self.channels.get_mut(path) else {
                continue;
            };
            match why {
                // A writer that exits cleanly removes its file: it ended, not crashed.
                Gone::Removed if !state.liveness.is_ended() => {
                    state.liveness = WriterLiveness::Ended {
                        crashed: false,
                        error: false,
                    };
                }
                Gone::Refused | Gone::Unreachable if !state.liveness.is_ended() => {
                    state.liveness = WriterLiveness::Unreadable;
                }
                _ => {}
            }
        }
        self.evict(batch.at_ms);
        self.rejected = batch.rejected;
    }

    /// Forgets channels no longer read for longer than the linger time. Called with every
    /// GPU sample too, since a quiet channel sampler sends nothing.
    pub fn evict(&mut self, now_ms: u64) {
        self.channels.evict(now_ms);
    }

    pub fn rejected(&self) -> &[String] {
        &self.rejected
    }

    /// The channel of the process NVML lists as `host_pid`: the one its row joins in the
    /// snapshot (`joined_channel`), so the detail pane shows the same writer.
    pub fn for_pid(&self, host_pid: u32, process_alive: bool) -> Option<&ChannelState> {
        let candidates = self
            .channels
            .iter()
            .map(|(_, state)| state)
            .filter(|s| s.host_pid == Some(host_pid) && s.identity.is_some());
        joined_channel(candidates, |s| s.liveness, process_alive)
    }

    /// Every channel, joined to NVML's devices by UUID, else PCI bus id.
    pub fn snapshot(&self, devices: &[DeviceInfo]) -> Vec<AllocatorSnapshot> {
        self.channels
            .iter()
            .filter_map(|(_, state)| {
                let identity = state.identity.clone()?;
                Some(AllocatorSnapshot {
                    identity,
                    host_pid: state.host_pid,
                    liveness: state.liveness,
                    step: state.step,
                    label: state.label.clone(),
                    gpu_indices: state
                        .devices
                        .iter()
                        .map(|d| gpu_index_of(d, devices))
                        .collect(),
                    devices: state.devices.clone(),
                    recent_events: state.events.iter().cloned().collect(),
                    notable_events: state.notable.iter().cloned().collect(),
                    lost_samples: state.lost_samples,
                    lost_events: state.lost_events,
                })
            })
            .collect()
    }

    /// Forget true peaks (the `r` key), as for NVML's peaks.
    pub fn reset_peaks(&mut self) {
        for (_, state) in self.channels.iter_mut() {
            for (slot, peak) in state.true_peaks.iter_mut().enumerate() {
                let counter = state
                    .devices
                    .iter()
                    .find(|d| usize::from(d.slot) == slot)
                    .and_then(|d| d.allocated_peak.as_ref().ok().copied());
                *peak = TruePeak {
                    seen: None,
                    counter_floor: counter.or(peak.counter_floor),
                };
            }
            for slot in &mut state.slots {
                slot.allocated.reset_peak();
                slot.reserved.reset_peak();
            }
        }
    }
}

/// The NVML index of the device an allocator slot describes. `CUDA_VISIBLE_DEVICES`
/// renumbers the framework's ordinals, so only UUID and PCI bus id can join. A slot that
/// names a UUID is joined by it alone: a UUID NVML does not list is a GPU elsewhere (another
/// host's file on a shared `/dev/shm`, a container with other GPUs) whose bus id may match
/// one of ours by chance. The PCI bus id is for writers that give no UUID.
pub fn gpu_index_of(device: &AllocatorDevice, devices: &[DeviceInfo]) -> Option<u32> {
    if let Some(uuid) = &device.uuid {
        return devices
            .iter()
            .find(|d| d.uuid.as_ref().is_ok_and(|u| u.eq_ignore_ascii_case(uuid)))
            .map(|d| d.index);
    }
    let wanted = device.pci_bus_id.as_deref().and_then(parse_pci)?;
    devices
        .iter()
        .find(|d| {
            d.pci_bus_id
                .as_deref()
                .ok()
                .and_then(parse_pci)
                .is_some_and(|p| p == wanted)
        })
        .map(|d| d.index)
}

/// `(domain, bus, device, function)` from `0000:18:00.0` or NVML's `00000000:18:00.0`.
fn parse_pci(text: &str) -> Option<(u32, u32, u32, u32)> {
    let text = text.trim_end_matches('\0').trim();
    let (domain, rest) = text.split_once(':')?;
    let (bus, rest) = rest.split_once(':')?;
    let (device, function) = rest.split_once('.')?;
    Some((
        u32::from_str_radix(domain, 16).ok()?,
        u32::from_str_radix(bus, 16).ok()?,
        u32::from_str_radix(device, 16).ok()?,
        u32::from_str_radix(function, 16).ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Absent, AllocatorPoint, EventKind};

    fn device(uuid: Option<&str>, pci: Option<&str>) -> AllocatorDevice {
        AllocatorDevice {
            slot: 0,
            ordinal: 0,
            uuid: uuid.map(str::to_string),
            pci_bus_id: pci.map(str::to_string),
            total: Ok(80 << 30),
            allocated: Ok(10 << 30),
            allocated_peak: Ok(12 << 30),
            reserved: Ok(14 << 30),
            reserved_peak: Ok(14 << 30),
            active: Err(Absent::NotSupported),
            inactive_split: Err(Absent::NotSupported),
            requested: Err(Absent::NotSupported),
            alloc_retries: Ok(0),
            ooms: Ok(0),
            device_free: Err(Absent::NotSupported),
            limit: Err(Absent::NotSupported),
            true_peak: Err(Absent::NotAvailable),
            step_peak: Err(Absent::NotAvailable),
        }
    }

    fn info(index: u32, uuid: &str, pci: &str) -> DeviceInfo {
        DeviceInfo {
            index,
            name: Ok("GPU".into()),
            uuid: Ok(uuid.into()),
            pci_bus_id: Ok(pci.into()),
            memory_total: Ok(80 << 30),
            power_limit_mw: Err(Absent::NotSupported),
        }
    }

    fn poll(points: Vec<AllocatorPoint>, events: Vec<AllocatorEvent>) -> ChannelPoll {
        ChannelPoll {
            path: "/dev/shm/vramscope-0/7-9.vsc".into(),
            identity: Arc::new(WriterIdentity {
                file: "7-9.vsc".into(),
                pid: 7,
                kind: "PyTorch".into(),
                framework: "torch 2.5.1".into(),
                rank: None,
                local_rank: None,
                world_size: None,
                job_id: String::new(),
                command: "python train.py".into(),
                allocator_config: String::new(),
                exact_peaks: false,
                sample_period_us: 50_000,
            }),
            host_pid: Some(7),
            liveness: WriterLiveness::Live,
            devices: vec![device(Some("GPU-b"), None)],
            step: Some(3),
            label: "backward".into(),
            points,
            events,
            lost_samples: 0,
            lost_events: 0,
        }
    }

    fn point(at_ms: u64, allocated: u64, peak: u64) -> AllocatorPoint {
        AllocatorPoint {
            at_ms,
            slot: 0,
            allocated: Some(allocated),
            reserved: Some(allocated + 100),
            peak: Some(peak),
            step: Some(3),
            new_high_water: false,
        }
    }

    #[test]
    fn joins_by_uuid_whatever_the_ordinal_and_by_pci_bus_id_only_without_a_uuid() {
        let devices = [
            info(0, "GPU-a", "00000000:18:00.0"),
            info(1, "GPU-b", "00000000:3B:00.0"),
        ];
        assert_eq!(
            gpu_index_of(&device(Some("gpu-B"), None), &devices),
            Some(1)
        );
        assert_eq!(
            gpu_index_of(&device(None, Some("0000:18:00.0")), &devices),
            Some(0)
        );
        // A UUID that is not here names a GPU elsewhere, whatever its bus id says.
        assert_eq!(
            gpu_index_of(&device(Some("GPU-zz"), Some("0000:3b:00.0")), &devices),
            None
        );
        assert_eq!(gpu_index_of(&device(Some("GPU-zz"), None), &devices), None);
    }

    #[test]
    fn a_spike_between_two_polls_sets_the_true_peak_and_the_plotted_maximum() {
        let mut state = Allocators::default();
        let points = vec![
            point(1_000, 100, 100),
            point(1_050, 100, 900),
            point(1_100, 120, 120),
        ];
        state.ingest(ChannelBatch {
            at_ms: 1_200,
            polls: vec![poll(points, vec![])],
            ..ChannelBatch::default()
        });
        let snap = state.snapshot(&[info(4, "GPU-b", "00000000:3B:00.0")]);
        assert_eq!(snap.len(), 1);
        // The framework's own peak counter (12 GiB) is higher still, and it wins.
        assert_eq!(snap[0].devices[0].true_peak, Ok(12 << 30));
        assert_eq!(snap[0].gpu_indices, vec![Some(4)]);
        let channel = state.for_pid(7, true).unwrap();
        let peak = channel.slots[0].allocated.peak().unwrap();
        assert_eq!((peak.value, peak.at_ms), (900.0, 1_050));
        assert_eq!(channel.slots[0].reserved.last(), Some((1_100, 220.0)));
    }

    #[test]
    fn step_ends_become_ticks_and_a_removed_file_ends_its_channel_cleanly() {
        let mut state = Allocators::default();
        let step_end = AllocatorEvent {
            at_ms: 1_000,
            kind: EventKind::StepEnd {
                peak_allocated: Ok(5),
                peak_reserved: Ok(6),
                duration_ns: Ok(7),
            },
            slot: Some(0),
            step: Some(3),
            label: String::new(),
        };
        state.ingest(ChannelBatch {
            at_ms: 1_000,
            polls: vec![poll(vec![], vec![step_end])],
            ..ChannelBatch::default()
        });
        state.ingest(ChannelBatch {
            at_ms: 2_000,
            gone: vec![("/dev/shm/vramscope-0/7-9.vsc".into(), Gone::Removed)],
            rejected: vec!["x.vsc: wrong magic".into()],
            ..ChannelBatch::default()
        });
        // A live process with that pid (a reused one) must not show the ended writer's
        // figures; the exited row does.
        assert!(state.for_pid(7, true).is_none());
        let channel = state.for_pid(7, false).unwrap();
        assert_eq!(channel.step_ticks, VecDeque::from([(1_000, 3)]));
        assert_eq!(channel.events.len(), 1);
        assert_eq!(
            channel.liveness,
            WriterLiveness::Ended {
                crashed: false,
                error: false
            }
        );
        assert_eq!(state.rejected(), ["x.vsc: wrong magic"]);
    }

    fn oom(at_ms: u64) -> AllocatorEvent {
        AllocatorEvent {
            at_ms,
            kind: EventKind::Oom {
                requested: Ok(1),
                device_free: Ok(2),
                device_total: Ok(3),
                allocated: Ok(4),
                reserved: Ok(5),
                retries: Ok(0),
            },
            slot: Some(0),
            step: Some(1),
            label: String::new(),
        }
    }

    #[test]
    fn a_caught_oom_outlives_a_busy_stream_of_other_events() {
        let mut state = Allocators::default();
        let mut events = vec![oom(1_000)];
        events.extend((0..500).map(|i| AllocatorEvent {
            at_ms: 1_001 + i,
            kind: EventKind::Mark,
            slot: None,
            step: None,
            label: format!("mark {i}"),
        }));
        state.ingest(ChannelBatch {
            at_ms: 2_000,
            polls: vec![poll(vec![], events)],
            ..ChannelBatch::default()
        });
        let channel = state.for_pid(7, true).unwrap();
        assert_eq!(channel.events.len(), RECENT_EVENTS);
        assert!(channel.events.iter().all(|e| !e.kind.is_oom()));
        let newest = channel.newest_events();
        assert_eq!(newest[0].label, "mark 499");
        assert!(
            newest.iter().any(|e| e.kind.is_oom()),
            "the OOM is still listed"
        );
        assert_eq!(state.snapshot(&[]).first().unwrap().notable_events.len(), 1);
    }

    #[test]
    fn figures_follow_their_slot_index_not_their_position() {
        let mut state = Allocators::default();
        let mut p = poll(
            vec![AllocatorPoint {
                slot: 2,
                ..point(1_000, 100, 700)
            }],
            vec![],
        );
        // Only slot 2 is readable yet: it is the first and only device in the poll.
        p.devices[0].slot = 2;
        state.ingest(ChannelBatch {
            at_ms: 1_100,
            polls: vec![p],
            ..ChannelBatch::default()
        });
        let channel = state.for_pid(7, true).unwrap();
        assert_eq!(channel.slots.len(), 3);
        assert!(channel.slots[0].allocated.peak().is_none());
        assert_eq!(channel.slots[2].allocated.peak().unwrap().value, 700.0);
        let devices = [info(4, "GPU-b", "00000000:3B:00.0")];
        let (device, series) = channel.on_gpu(4, &devices).unwrap();
        assert_eq!(device.slot, 2);
        assert_eq!(series.unwrap().allocated.last(), Some((1_000, 700.0)));
    }

    #[test]
    fn resetting_peaks_ignores_the_frameworks_counter_until_it_rises_again() {
        let mut state = Allocators::default();
        let ingest = |state: &mut Allocators, at_ms: u64, counter: u64| {
            let mut p = poll(vec![point(at_ms, 100, 100)], vec![]);
            p.devices[0].allocated_peak = Ok(counter);
            state.ingest(ChannelBatch {
                at_ms,
                polls: vec![p],
                ..ChannelBatch::default()
            });
            state.snapshot(&[])[0].devices[0].true_peak.clone()
        };
        assert_eq!(ingest(&mut state, 1_000, 12 << 30), Ok(12 << 30));
        state.reset_peaks();
        // The counter still says 12 GiB, from before the reset: the samples rule.
        assert_eq!(ingest(&mut state, 2_000, 12 << 30), Ok(10 << 30));
        // It rose past where it stood: a new peak, exactly.
        assert_eq!(ingest(&mut state, 3_000, 13 << 30), Ok(13 << 30));
    }
}
