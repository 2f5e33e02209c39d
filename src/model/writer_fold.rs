//! The one fold of a writer's allocator stream: every consumer (the monitor's state and so
//! the TUI, `--json`, serve and replay; report, plot and export over a recording) feeds a
//! writer's polls here and reads the same answers:
//!
//! - each slot's GPU, resolved once by one rule (UUID, else PCI bus id, else the one GPU
//!   NVML lists the writer's pid on while it lives; after it died, the last one known);
//! - each slot's true peak with the time, step and phase of the sample or new-peak event
//!   that made it (not the poll's label, which is whatever came after);
//! - one OOM per failure: the allocator observer's event and the uncaught error that
//!   follows it are merged into one, marked fatal, caught or not yet known, with the
//!   figures of the last sample where the event itself has none;
//! - the memory snapshots the writer announced, the newest few, each with what reducing it
//!   said once someone did (`held_sites`);
//! - a dead writer's last figures, kept for as long as the consumer keeps the fold.
//!
//! Points and events of one poll are folded in time order, so that a phase begun between
//! two samples is the phase of the second one.

use super::absent::{Absent, Reading};
use super::allocator_stream::{
    AllocatorDevice, AllocatorEvent, AllocatorPoint, ChannelPoll, EventKind, Gone, WriterIdentity,
    WriterLiveness,
};
use super::device::DeviceInfo;
use super::foresight::{Forecast, Room, StepPeak, StepPeaks};
use super::held_sites::{SitesState, SnapshotNote, SnapshotReason};
use super::mig::{MigUuid, legacy_parent_uuid};
use super::oom_message::figures_in;
use super::phase_peaks::PhasePeaks;
use super::snapshot_drops::SnapshotDrops;
use super::step_origin::StepOrigin;
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::Arc;

/// Events kept for the detail pane and JSON.
const RECENT_EVENTS: usize = 64;
/// OOMs kept per writer, apart from the busy stream of other events.
const KEPT_OOMS: usize = 64;
/// Step boundaries kept for the chart's ticks.
const STEP_TICKS: usize = 4096;
/// Device slots a channel can have (the spec's limit).
const MAX_SLOTS: usize = 64;
/// An uncaught OOM error this soon after the observer's OOM is the same failure unwinding.
const SAME_FAILURE_MS: u64 = 30_000;
/// Snapshots kept per writer: the writer itself keeps only the newest few files (3 by
/// default), so older notes would name files long deleted.
const KEPT_SNAPSHOTS: usize = 8;

/// A value and where in the run it happened.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PeakAt {
    pub value: u64,
    pub at_ms: u64,
    pub step: Option<u64>,
    /// The phase (`with vramscope.mark(...)` path) at that moment; empty outside any.
    pub phase: String,
    /// False when only the framework's own peak counter knows the value: when and where it
    /// happened are then the moment it was read, not the moment it happened.
    pub located: bool,
}

/// What became of the program after an OOM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OomOutcome {
    /// The program went on: a later step ended, it allocated into another OOM, or it ended
    /// cleanly.
    Caught,
    /// It killed the program: the error escaped, or the writer ended in error right after.
    Fatal,
    /// Nothing since says which (the program may still be unwinding).
    Pending,
}

impl OomOutcome {
    pub fn label(self) -> &'static str {
        match self {
            OomOutcome::Caught => "caught",
            OomOutcome::Fatal => "fatal",
            OomOutcome::Pending => "outcome not yet known",
        }
    }
}

/// One out-of-memory failure, however many events told of it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Oom {
    pub at_ms: u64,
    pub slot: Option<u16>,
    pub step: Option<u64>,
    pub phase: String,
    pub requested: Reading<u64>,
    pub device_free: Reading<u64>,
    pub device_total: Reading<u64>,
    pub allocated: Reading<u64>,
    pub reserved: Reading<u64>,
    pub outcome: OomOutcome,
    /// The error's message, when one escaped to the top of the program.
    pub message: Option<String>,
    /// The figures no event gave that were read from `message` (`oom_message`), by their
    /// JSON names: estimates to the message's two decimals.
    pub from_message: Vec<&'static str>,
}

impl Oom {
    /// Fills the figures still absent from what the error's message states.
    fn fill_from_message(&mut self, message: &str) {
        let stated = figures_in(message);
        for (name, figure, value) in [
            ("requested", &mut self.requested, stated.requested),
            ("device_free", &mut self.device_free, stated.device_free),
            ("device_total", &mut self.device_total, stated.device_total),
            ("allocated", &mut self.allocated, stated.allocated),
            ("reserved", &mut self.reserved, stated.reserved),
        ] {
            if let (Err(_), Some(value)) = (&figure, value) {
                *figure = Ok(value);
                self.from_message.push(name);
            }
        }
    }

    /// "free, total from the error's message", when any figure came from it.
    pub fn sources_note(&self) -> Option<String> {
        let names: Vec<&str> = self
            .from_message
            .iter()
            .map(|n| match *n {
                "device_free" => "free",
                "device_total" => "total",
                "requested" => "asked",
                other => other,
            })
            .collect();
        (!names.is_empty()).then(|| format!("{} from the error's message", names.join(", ")))
    }
}

/// One device slot, folded.
#[derive(Clone, Debug, Default)]
pub struct SlotFold {
    /// The latest figures; kept after the writer ended. Their `ooms` is the fold's count
    /// (`count_ooms`), not the writer's alone.
    pub device: Option<AllocatorDevice>,
    /// OOMs folded on this slot, those no longer kept included.
    oom_events: u64,
    /// NVML's index for it, as last resolved (kept after the writer ended).
    pub gpu: Option<u32>,
    peak: Option<PeakAt>,
    peak_witness: u8,
    /// The framework's counter is believed only above where it stood at the last reset.
    counter_floor: Option<u64>,
    /// The last sample's figures, for OOMs that carry none.
    last_allocated: Option<u64>,
    last_reserved: Option<u64>,
    pub step_peaks: StepPeaks,
    /// The highest allocation in each phase, over the whole run.
    pub phase_peaks: PhasePeaks,
}

impl SlotFold {
    /// The highest allocated seen, and where.
    pub fn true_peak(&self) -> Option<&PeakAt> {
        self.peak.as_ref()
    }

    /// What the step peaks say about an OOM to come, in the room the latest figures give
    /// with what NVML read beside them (`room_of`).
    pub fn forecast(&self, nvml: NvmlBeside) -> Forecast {
        let room = self
            .device
            .as_ref()
            .map_or(Room::default(), |d| room_of(d, nvml));
        self.step_peaks.foresee(room)
    }

    /// The slot's OOMs: the larger of the program's own count (PyTorch's `num_ooms`,
    /// `report(ooms=N)`) and the OOM events folded. Never their sum: an OOM the program
    /// counts may also be an event (its observer's, or the one it passed to
    /// `vramscope.oom()`), and each event is one OOM. Absent only while both are.
    fn count_ooms(&mut self) {
        let events = self.oom_events;
        if let Some(device) = &mut self.device {
            device.ooms = match &device.ooms {
                Ok(counted) => Ok((*counted).max(events)),
                Err(_) if events > 0 => Ok(events),
                Err(why) => Err(why.clone()),
            };
        }
    }

    /// `witness` ranks how well the candidate knows where it happened: the framework's
    /// counter (0) not at all, a sample (1) by the phase in force around it, a new-peak
    /// event (2) exactly (it carries the phase the writer was in).
    fn raise(&mut self, candidate: PeakAt, witness: u8) {
        let higher = self.peak.as_ref().is_none_or(|p| candidate.value > p.value);
        let better_placed = self
            .peak
            .as_ref()
            .is_some_and(|p| candidate.value == p.value && witness > self.peak_witness);
        if higher || better_placed {
            self.peak = Some(candidate);
            self.peak_witness = witness;
        }
    }
}

/// Of memory snapshots `notes`, oldest first, the one worth reducing and showing (see
/// `WriterFold::relevant_snapshot`); shared with the snapshot's copy of the notes.
pub fn relevant_snapshot<'a>(
    mut notes: impl DoubleEndedIterator<Item = &'a SnapshotNote> + Clone,
) -> Option<&'a SnapshotNote> {
    let newest = notes.clone().next_back()?;
    if newest.reason == SnapshotReason::Request {
        return Some(newest);
    }
    notes.rfind(|n| n.at_oom()).or(Some(newest))
}

/// One writer's stream, folded.
#[derive(Clone, Debug)]
pub struct WriterFold {
    /// The channel file's path, as the last poll gave it.
    pub path: String,
    pub identity: Option<Arc<WriterIdentity>>,
    pub host_pid: Option<u32>,
    pub liveness: WriterLiveness,
    pub step: Option<u64>,
    /// What `step` and every step the fold keeps count from.
    pub steps_from: StepOrigin,
    pub label: String,
    /// Indexed by slot.
    pub slots: Vec<SlotFold>,
    /// The newest OOMs, oldest first (at most `KEPT_OOMS`).
    pub ooms: VecDeque<Oom>,
    /// Every OOM folded, those no longer in `ooms` included.
    pub ooms_seen: u64,
    /// The memory snapshots announced, oldest first.
    pub snapshots: VecDeque<SnapshotNote>,
    /// Which of its snapshots the writer deleted to keep its bound.
    pub snapshot_drops: SnapshotDrops,
    /// The most recent events, oldest first.
    pub recent: VecDeque<AllocatorEvent>,
    /// `(at_ms, step)` of each step's end.
    pub step_ticks: VecDeque<(u64, u64)>,
    pub lost_samples: u64,
    pub lost_events: u64,
    /// The phase path in force at the last point or event folded.
    phase: String,
    /// When the last poll arrived.
    pub last_poll_ms: u64,
}

impl Default for WriterFold {
    fn default() -> Self {
        WriterFold {
            path: String::new(),
            identity: None,
            host_pid: None,
            liveness: WriterLiveness::Live,
            step: None,
            steps_from: StepOrigin::Job,
            label: String::new(),
            slots: Vec::new(),
            ooms: VecDeque::new(),
            ooms_seen: 0,
            snapshots: VecDeque::new(),
            snapshot_drops: SnapshotDrops::default(),
            recent: VecDeque::new(),
            step_ticks: VecDeque::new(),
            lost_samples: 0,
            lost_events: 0,
            phase: String::new(),
            last_poll_ms: 0,
        }
    }
}

/// A point or an event, for folding both in time order.
enum Item<'a> {
    Point(&'a AllocatorPoint),
    Event(&'a AllocatorEvent),
}

impl WriterFold {
    /// One of its slots' forecast as every output gives it: in the room `room_of` leaves,
    /// and no OOM to come once the writer no longer runs (`Forecast::once_ended`).
    pub fn forecast(&self, slot: &SlotFold, nvml: NvmlBeside) -> Forecast {
        let forecast = slot.forecast(nvml);
        if self.liveness.is_running() {
            forecast
        } else {
            forecast.once_ended()
        }
    }

    /// Folds one poll read at `at_ms`.
    pub fn ingest(&mut self, poll: ChannelPoll, at_ms: u64) {
        if self.path != poll.path {
            self.path = poll.path;
        }
        // Another writer on the path counts its steps afresh: its samples will say from what.
        if self
            .identity
            .as_ref()
            .is_some_and(|old| *old != poll.identity)
        {
            self.steps_from = StepOrigin::Job;
        }
        self.identity = Some(poll.identity);
        if poll.host_pid.is_some() {
            self.host_pid = poll.host_pid;
        }
        self.lost_samples = poll.lost_samples;
        self.lost_events = poll.lost_events;
        self.last_poll_ms = at_ms;
        let slots = poll
            .devices
            .iter()
            .map(|d| usize::from(d.slot) + 1)
            .chain(poll.points.iter().map(|p| usize::from(p.slot) + 1))
            .max()
            .unwrap_or(0)
            .min(MAX_SLOTS);
        if self.slots.len() < slots {
            self.slots.resize_with(slots, SlotFold::default);
        }
        // The status's figures first: an OOM error without figures of its own takes the
        // device's free and total from them. Peaks from them come after the samples'.
        for device in &poll.devices {
            if let Some(slot) = self.slots.get_mut(usize::from(device.slot)) {
                slot.device = Some(device.clone());
            }
        }
        let mut items: Vec<(u64, Item)> = poll
            .points
            .iter()
            .map(|p| (p.at_ms, Item::Point(p)))
            .chain(poll.events.iter().map(|e| (e.at_ms, Item::Event(e))))
            .collect();
        // Within one millisecond the order is lost: a phase's beginning goes before the
        // samples of that millisecond and its end after them (a phase holds its samples),
        // other events after the sample that caused them.
        items.sort_by_key(|(at, item)| {
            let rank = match item {
                Item::Event(e) if matches!(e.kind, EventKind::PhaseBegin) => 0,
                Item::Point(_) => 1,
                Item::Event(_) => 2,
            };
            (*at, rank)
        });
        for (_, item) in items {
            match item {
                Item::Point(point) => self.point(point),
                Item::Event(event) => self.event(event.clone()),
            }
        }
        // The status is read last: it is the newest word on step, phase and figures.
        self.step = poll.step;
        self.label = poll.label;
        for device in &poll.devices {
            self.status_peak(device, at_ms);
        }
        for slot in &mut self.slots {
            slot.count_ooms();
        }
        self.set_liveness(poll.liveness);
    }

    /// A new OOM: kept among the newest, and counted on its slot and for the writer.
    fn add_oom(&mut self, oom: Oom) {
        self.ooms_seen += 1;
        if let Some(slot) = oom.slot.and_then(|s| self.slots.get_mut(usize::from(s))) {
            slot.oom_events += 1;
        }
        push_capped(&mut self.ooms, oom, KEPT_OOMS);
    }

    /// OOMs folded that are no longer kept.
    pub fn ooms_dropped(&self) -> u64 {
        self.ooms_seen.saturating_sub(self.ooms.len() as u64)
    }

    /// The writer's file went away, or can no longer be read.
    pub fn gone(&mut self, why: Gone) {
        match why {
            // A writer that exits cleanly removes its file: it ended, not crashed.
            Gone::Removed if !self.liveness.is_ended() => {
                self.set_liveness(WriterLiveness::Ended {
                    crashed: false,
                    error: false,
                })
            }
            Gone::Refused | Gone::Unreachable if !self.liveness.is_ended() => {
                self.liveness = WriterLiveness::Unreadable;
            }
            _ => {}
        }
    }

    fn set_liveness(&mut self, liveness: WriterLiveness) {
        if let WriterLiveness::Ended { crashed, error } = liveness {
            self.settle_pending(if crashed || error {
                OomOutcome::Fatal
            } else {
                OomOutcome::Caught
            });
        }
        self.liveness = liveness;
    }

    fn settle_pending(&mut self, outcome: OomOutcome) {
        for oom in &mut self.ooms {
            if oom.outcome == OomOutcome::Pending {
                oom.outcome = outcome;
            }
        }
    }

    fn point(&mut self, point: &AllocatorPoint) {
        // A writer that counts from its attach does so from its first step to its end.
        if point.steps_since_attach {
            self.steps_from = StepOrigin::Attach;
        }
        let phase = self.phase.clone();
        let Some(slot) = self.slots.get_mut(usize::from(point.slot)) else {
            return;
        };
        slot.last_allocated = point.allocated.or(slot.last_allocated);
        slot.last_reserved = point.reserved.or(slot.last_reserved);
        // The interval peak is what a poller misses: the spike between two samples.
        let top = match (point.peak, point.allocated) {
            (Some(p), Some(a)) => Some(p.max(a)),
            (p, a) => p.or(a),
        };
        if let Some(value) = top {
            slot.phase_peaks.raise(&phase, value, point.at_ms);
            slot.raise(
                PeakAt {
                    value,
                    at_ms: point.at_ms,
                    step: point.step,
                    phase,
                    located: true,
                },
                1,
            );
        }
    }

    fn event(&mut self, event: AllocatorEvent) {
        // The phase's own peak, measured by the writer: before the phase is left.
        if let EventKind::PhaseEnd { peak: Ok(peak) } = &event.kind
            && let Some(slot) = event.slot.and_then(|s| self.slots.get_mut(usize::from(s)))
        {
            slot.phase_peaks.raise(&event.label, *peak, event.at_ms);
        }
        match &event.kind {
            EventKind::PhaseBegin => self.phase = event.label.clone(),
            EventKind::PhaseEnd { .. } if self.phase == event.label => {
                self.phase = parent_phase(&event.label).to_string();
            }
            EventKind::PhaseEnd { .. } => {}
            _ if !event.phase.is_empty() => self.phase = event.phase.clone(),
            _ => {}
        }
        match &event.kind {
            EventKind::StepEnd { .. } => {
                if let Some(step) = event.step {
                    push_capped(&mut self.step_ticks, (event.at_ms, step), STEP_TICKS);
                }
                let slot = event.slot.and_then(|s| self.slots.get_mut(usize::from(s)));
                if let (Some(slot), Some(step_peak)) = (slot, StepPeak::from_event(&event)) {
                    slot.step_peaks.push(step_peak);
                }
                self.settle_pending(OomOutcome::Caught);
            }
            EventKind::NewHighWater {
                peak: Ok(value), ..
            } => {
                let phase = self.phase.clone();
                if let Some(slot) = event.slot.and_then(|s| self.slots.get_mut(usize::from(s))) {
                    slot.phase_peaks.raise(&phase, *value, event.at_ms);
                    slot.raise(
                        PeakAt {
                            value: *value,
                            at_ms: event.at_ms,
                            step: event.step,
                            phase,
                            located: true,
                        },
                        2,
                    );
                }
            }
            EventKind::Oom {
                requested,
                device_free,
                device_total,
                allocated,
                reserved,
                ..
            } => {
                // The program allocated again after an earlier OOM: that one was caught.
                self.settle_pending(OomOutcome::Caught);
                let slot = event.slot.and_then(|s| self.slots.get(usize::from(s)));
                let oom = Oom {
                    at_ms: event.at_ms,
                    slot: event.slot,
                    step: event.step,
                    phase: self.phase.clone(),
                    requested: requested.clone(),
                    device_free: device_free.clone(),
                    device_total: device_total.clone(),
                    allocated: or_last(allocated, slot.and_then(|s| s.last_allocated)),
                    reserved: or_last(reserved, slot.and_then(|s| s.last_reserved)),
                    outcome: OomOutcome::Pending,
                    message: None,
                    from_message: Vec::new(),
                };
                self.add_oom(oom);
            }
            EventKind::OomError { requested } => self.oom_error(&event, requested),
            EventKind::SnapshotWritten {
                path,
                size,
                peak,
                reason,
                allocated,
                max_entries,
                deleted,
            } => {
                // A refused name is its own answer: nothing will be read.
                let sites = match path {
                    Ok(_) => SitesState::NotRead,
                    Err(why) => SitesState::Failed { why: why.reason() },
                };
                let note = SnapshotNote {
                    at_ms: event.at_ms,
                    slot: event.slot,
                    name: event.label.clone(),
                    path: path.clone(),
                    size: size.clone(),
                    reason: SnapshotReason::from_code(reason),
                    peak: peak.clone(),
                    allocated: allocated.clone(),
                    step: event.step,
                    phase: self.phase.clone(),
                    max_entries: max_entries.clone(),
                    deleted: deleted.clone(),
                    sites,
                };
                self.snapshot_drops.announced(&event.label, deleted);
                push_capped(&mut self.snapshots, note, KEPT_SNAPSHOTS);
            }
            EventKind::Exit { error } => self.settle_pending(if *error {
                OomOutcome::Fatal
            } else {
                OomOutcome::Caught
            }),
            _ => {}
        }
        push_capped(&mut self.recent, event, RECENT_EVENTS);
    }

    /// An OOM error escaped: the observer's OOM it follows is fatal, or, where no observer
    /// saw it (JAX, a custom allocator), it is an OOM of its own.
    fn oom_error(&mut self, event: &AllocatorEvent, requested: &Reading<u64>) {
        let same = self.ooms.iter_mut().rev().find(|o| {
            o.outcome == OomOutcome::Pending
                && event.at_ms.saturating_sub(o.at_ms) <= SAME_FAILURE_MS
                && (o.slot.is_none() || event.slot.is_none() || o.slot == event.slot)
        });
        if let Some(oom) = same {
            oom.outcome = OomOutcome::Fatal;
            oom.message = Some(event.label.clone());
            if oom.requested.is_err() {
                oom.requested = requested.clone();
            }
            oom.fill_from_message(&event.label);
            return;
        }
        // Without a slot the writer's only device is the one that failed.
        let slot_index = event.slot.or_else(|| (self.slots.len() == 1).then_some(0));
        let slot = slot_index.and_then(|s| self.slots.get(usize::from(s)));
        let last = |f: fn(&AllocatorDevice) -> &Reading<u64>| {
            slot.and_then(|s| s.device.as_ref())
                .map_or(Err(Absent::NotAvailable), |d| f(d).clone())
        };
        let mut oom = Oom {
            at_ms: event.at_ms,
            slot: slot_index,
            step: event.step,
            phase: if event.phase.is_empty() {
                self.phase.clone()
            } else {
                event.phase.clone()
            },
            requested: requested.clone(),
            device_free: last(|d| &d.device_free),
            device_total: last(|d| &d.total),
            allocated: or_last(
                &Err(Absent::NotAvailable),
                slot.and_then(|s| s.last_allocated),
            ),
            reserved: or_last(
                &Err(Absent::NotAvailable),
                slot.and_then(|s| s.last_reserved),
            ),
            outcome: OomOutcome::Fatal,
            message: Some(event.label.clone()),
            from_message: Vec::new(),
        };
        oom.fill_from_message(&event.label);
        self.add_oom(oom);
    }

    fn status_peak(&mut self, device: &AllocatorDevice, at_ms: u64) {
        let step = self.step;
        let phase = self.phase.clone();
        let Some(slot) = self.slots.get_mut(usize::from(device.slot)) else {
            return;
        };
        // Figures read from the status between two samples: where they happened is only
        // known as "by now".
        let mut candidates = vec![];
        for seen in [&device.allocated, &device.interval_peak]
            .into_iter()
            .flatten()
        {
            candidates.push(*seen);
        }
        if let Ok(counter) = &device.allocated_peak
            && slot.counter_floor.is_none_or(|floor| *counter > floor)
        {
            candidates.push(*counter);
        }
        for value in candidates {
            if slot.peak.as_ref().is_none_or(|p| value > p.value) {
                let located = Some(value) == device.allocated.as_ref().ok().copied();
                slot.raise(
                    PeakAt {
                        value,
                        at_ms,
                        step,
                        phase: phase.clone(),
                        located,
                    },
                    u8::from(located),
                );
            }
        }
    }

    /// Resolves each slot's GPU among NVML's `devices` and MIG `instances`; `listed_on` are
    /// the GPUs NVML lists the writer's pid on now (empty when it is not listed, or dead).
    pub fn resolve_gpus(
        &mut self,
        devices: &[DeviceInfo],
        instances: &[MigUuid],
        listed_on: &[u32],
    ) {
        for slot in &mut self.slots {
            let Some(device) = &slot.device else {
                continue;
            };
            if device.uuid.is_some() || device.pci_bus_id.is_some() {
                slot.gpu = gpu_index_of(device, devices, instances)
                    .or(slot.gpu.filter(|_| devices.is_empty()));
            }
        }
        // A writer that cannot name its GPU (JAX gives neither UUID nor PCI bus id): its one
        // anonymous slot is the one GPU NVML lists its pid on that no named slot claims.
        let anonymous: Vec<usize> = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                s.device
                    .as_ref()
                    .is_some_and(|d| d.uuid.is_none() && d.pci_bus_id.is_none())
            })
            .map(|(i, _)| i)
            .collect();
        let claimed: Vec<u32> = self.slots.iter().filter_map(|s| s.gpu).collect();
        let free: Vec<u32> = listed_on
            .iter()
            .copied()
            .filter(|g| !claimed.contains(g))
            .collect();
        if let ([only], [gpu]) = (anonymous.as_slice(), free.as_slice()) {
            self.slots[*only].gpu = Some(*gpu);
        }
    }

    /// The snapshot worth reducing and showing: the newest one asked for, unless an OOM's
    /// came after it; else the newest OOM's; else the newest (a new peak's).
    pub fn relevant_snapshot(&self) -> Option<&SnapshotNote> {
        relevant_snapshot(self.snapshots.iter())
    }

    /// The newest snapshot of the peak on `slot` (dumped at a new high or on request, not at
    /// an OOM): what held the memory at the run's peak as the writer last saw it.
    pub fn peak_snapshot(&self, slot: usize) -> Option<&SnapshotNote> {
        self.snapshots
            .iter()
            .rev()
            .find(|n| !n.at_oom() && n.slot.is_none_or(|s| usize::from(s) == slot))
    }

    /// The snapshot that an OOM left: the OOM observer's dump, written just after it on the
    /// same device. A dump belongs to the newest OOM before it (`oom_of`), so an earlier OOM's
    /// dump never stands for a later one that had none of its own.
    pub fn snapshot_of(&self, oom: &Oom) -> Option<&SnapshotNote> {
        self.snapshots
            .iter()
            .rev()
            .find(|n| n.at_oom() && self.oom_of(n) == Some(oom))
    }

    /// The OOM an OOM dump was written for: the newest one at or before it, within moments,
    /// on its device.
    pub fn oom_of(&self, note: &SnapshotNote) -> Option<&Oom> {
        self.ooms.iter().rev().find(|o| {
            o.at_ms <= note.at_ms
                && note.at_ms - o.at_ms <= SAME_FAILURE_MS
                && (note.slot.is_none() || o.slot.is_none() || note.slot == o.slot)
        })
    }

    /// Sets what reducing the snapshot at `path` said; false when no note names it (it
    /// scrolled out while being read).
    pub fn set_sites(&mut self, path: &str, sites: SitesState) -> bool {
        match self
            .snapshots
            .iter_mut()
            .find(|n| n.path.as_deref() == Ok(path))
        {
            Some(note) => {
                note.sites = sites;
                true
            }
            None => false,
        }
    }

    /// The slot NVML knows as `gpu_index`, with its index: the one rule every reader joins a
    /// GPU's row to the writer's figures by (no slot whose GPU is unknown is guessed onto it).
    pub fn slot_on(&self, gpu_index: u32) -> Option<(usize, &SlotFold)> {
        self.slots
            .iter()
            .enumerate()
            .find(|(_, s)| s.gpu == Some(gpu_index))
    }

    /// The slot NVML knows as `gpu_index`.
    pub fn on_gpu(&self, gpu_index: u32) -> Option<&SlotFold> {
        self.slot_on(gpu_index).map(|(_, slot)| slot)
    }

    /// Where an OOM is placed, for every reader: the GPU of the slot it names; without a
    /// slot, the writer's one GPU, when every device it published is joined to that one.
    /// `None` where there is no one GPU (its slot joined to none, or a slotless OOM of a
    /// writer on several, or on one known and one not): it is then shown on each of the
    /// writer's GPUs (`ooms_on`) and counted once.
    pub fn gpu_of_oom(&self, oom: &Oom) -> Option<u32> {
        match oom.slot {
            Some(slot) => self.slots.get(usize::from(slot)).and_then(|s| s.gpu),
            None => {
                let mut gpus = self
                    .slots
                    .iter()
                    .filter(|s| s.device.is_some())
                    .map(|s| s.gpu);
                let first = gpus.next().flatten();
                first.filter(|g| gpus.all(|other| other == Some(*g)))
            }
        }
    }

    /// OOMs placed on `gpu_index`, or on no one GPU (`gpu_of_oom`), oldest first.
    pub fn ooms_on(&self, gpu_index: u32) -> impl Iterator<Item = &Oom> {
        self.ooms
            .iter()
            .filter(move |o| self.gpu_of_oom(o).is_none_or(|g| g == gpu_index))
    }

    /// Forget true peaks (the `r` key), as for NVML's peaks: the framework's counter is
    /// believed again only once it rises past where it stands now.
    pub fn reset_peaks(&mut self) {
        for slot in &mut self.slots {
            let counter = slot
                .device
                .as_ref()
                .and_then(|d| d.allocated_peak.as_ref().ok().copied());
            slot.counter_floor = counter.or(slot.counter_floor);
            slot.peak = None;
            slot.peak_witness = 0;
            slot.phase_peaks = PhasePeaks::default();
        }
    }
}

/// What NVML read beside a writer's slot in one device sample: the process's used memory and
/// the device's free memory. Both absent where no sample lists the process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NvmlBeside {
    pub process_used: Option<u64>,
    pub device_free: Option<u64>,
}

impl NvmlBeside {
    /// Nothing from NVML: the writer's own figures alone.
    pub const NONE: NvmlBeside = NvmlBeside {
        process_used: None,
        device_free: None,
    };
}

/// The memory a slot's allocator can grow into, the one rule every output's forecast uses:
/// the device's total, free memory and the allocator's limit and reserved as the writer gave
/// them, NVML's free memory in place of the writer's where a sample has it, and what NVML
/// counts for the process beyond the allocator's reserved (its CUDA context, libraries).
pub fn room_of(device: &AllocatorDevice, nvml: NvmlBeside) -> Room {
    let reserved = device.reserved.as_ref().ok().copied();
    Room {
        total: device.total.as_ref().ok().copied(),
        limit: device.limit.as_ref().ok().copied(),
        outside: nvml
            .process_used
            .zip(reserved)
            .map(|(used, reserved)| used.saturating_sub(reserved)),
        free: nvml
            .device_free
            .or_else(|| device.device_free.as_ref().ok().copied()),
        reserved,
    }
}

/// The enclosing phase of `a/b/c`: `a/b`.
fn parent_phase(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(parent, _)| parent)
}

fn or_last(reading: &Reading<u64>, last: Option<u64>) -> Reading<u64> {
    match (reading, last) {
        (Ok(v), _) => Ok(*v),
        (Err(_), Some(v)) => Ok(v),
        (Err(why), None) => Err(why.clone()),
    }
}

fn push_capped<T>(queue: &mut VecDeque<T>, item: T, cap: usize) {
    if queue.len() == cap {
        queue.pop_front();
    }
    queue.push_back(item);
}

/// The NVML index of the device an allocator slot describes. `CUDA_VISIBLE_DEVICES`
/// renumbers the framework's ordinals, so only UUID and PCI bus id can join. A slot that
/// names a UUID is joined by it alone: a UUID NVML does not list is a GPU elsewhere (another
/// host's file on a shared `/dev/shm`, a container with other GPUs) whose bus id may match
/// one of ours by chance. The PCI bus id is for writers that give no UUID.
///
/// A writer on a MIG device names it by its `MIG-<uuid>` (what CUDA and
/// `CUDA_VISIBLE_DEVICES` call it): that joins to the GPU NVML lists the instance on
/// (`instances`), and the instance itself is found by the same UUID in that GPU's sample
/// (`MigState::instance_by_uuid`). The legacy `MIG-GPU-<uuid>/<GI>/<CI>` joins by the GPU's
/// UUID in it.
pub fn gpu_index_of(
    device: &AllocatorDevice,
    devices: &[DeviceInfo],
    instances: &[MigUuid],
) -> Option<u32> {
    if let Some(uuid) = &device.uuid {
        if let Some(gpu_uuid) = legacy_parent_uuid(uuid) {
            return devices
                .iter()
                .find(|d| d.uuid.as_ref().is_ok_and(|u| same_uuid(u, gpu_uuid)))
                .map(|d| d.index);
        }
        if let Some(instance) = instances.iter().find(|i| same_uuid(&i.uuid, uuid)) {
            return Some(instance.gpu);
        }
        return devices
            .iter()
            .find(|d| d.uuid.as_ref().is_ok_and(|u| same_uuid(u, uuid)))
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

/// Whether two UUIDs name the same device: the same 16 bytes, whatever their `GPU-` or
/// `MIG-` prefix and case. A writer that cannot tell a MIG device publishes its UUID's bytes
/// under `GPU-`; UUIDs are random, so the bytes alone never join two devices.
fn same_uuid(a: &str, b: &str) -> bool {
    fn body(s: &str) -> &str {
        for prefix in ["GPU-", "MIG-"] {
            if s.get(..4).is_some_and(|p| p.eq_ignore_ascii_case(prefix)) {
                return &s[4..];
            }
        }
        s
    }
    body(a).eq_ignore_ascii_case(body(b))
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

/// Builders for the fold's tests and its consumers' tests.
#[cfg(test)]
pub mod test_support {
    use crate::model::{
        Absent, AllocatorDevice, AllocatorEvent, AllocatorPoint, ChannelPoll, DeviceInfo,
        EventKind, WriterIdentity, WriterLiveness,
    };
    use std::sync::Arc;

    pub fn device(uuid: Option<&str>, pci: Option<&str>) -> AllocatorDevice {
        AllocatorDevice {
            slot: 0,
            ordinal: 0,
            uuid: uuid.map(str::to_string),
            pci_bus_id: pci.map(str::to_string),
            total: Ok(80 << 30),
            allocated: Ok(100),
            allocated_peak: Err(Absent::NotSupported),
            reserved: Ok(200),
            reserved_peak: Err(Absent::NotSupported),
            active: Err(Absent::NotSupported),
            inactive_split: Err(Absent::NotSupported),
            requested: Err(Absent::NotSupported),
            alloc_retries: Ok(0),
            ooms: Ok(0),
            device_free: Ok(1 << 30),
            limit: Err(Absent::NotSupported),
            interval_peak: Err(Absent::NotSupported),
            step_peak: Err(Absent::NotAvailable),
        }
    }

    pub fn info(index: u32, uuid: &str, pci: &str) -> DeviceInfo {
        DeviceInfo {
            index,
            name: Ok("GPU".into()),
            uuid: Ok(uuid.into()),
            pci_bus_id: Ok(pci.into()),
            memory_total: Ok(80 << 30),
            power_limit_mw: Err(Absent::NotSupported),
        }
    }

    pub fn poll(points: Vec<AllocatorPoint>, events: Vec<AllocatorEvent>) -> ChannelPoll {
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
                attached: false,
                sample_period_us: 50_000,
                sites: false,
            }),
            host_pid: Some(7),
            liveness: WriterLiveness::Live,
            devices: vec![device(Some("GPU-b"), None)],
            step: Some(3),
            label: "optimizer".into(),
            points,
            events,
            lost_samples: 0,
            lost_events: 0,
        }
    }

    pub fn point(at_ms: u64, allocated: u64, peak: u64) -> AllocatorPoint {
        AllocatorPoint {
            at_ms,
            slot: 0,
            allocated: Some(allocated),
            reserved: Some(allocated + 100),
            peak: Some(peak),
            step: Some(3),
            new_high_water: false,
            steps_since_attach: false,
        }
    }

    pub fn event(at_ms: u64, kind: EventKind, label: &str) -> AllocatorEvent {
        AllocatorEvent {
            at_ms,
            kind,
            slot: Some(0),
            step: Some(3),
            label: label.into(),
            phase: String::new(),
        }
    }

    pub fn oom(requested: u64) -> EventKind {
        EventKind::Oom {
            requested: Ok(requested),
            device_free: Ok(2),
            device_total: Ok(3),
            allocated: Err(Absent::NotSupported),
            reserved: Ok(5),
            retries: Ok(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;

    fn folded(polls: Vec<ChannelPoll>) -> WriterFold {
        let mut fold = WriterFold::default();
        for (i, p) in polls.into_iter().enumerate() {
            fold.ingest(p, 10_000 + i as u64 * 1_000);
        }
        fold
    }

    #[test]
    fn an_oom_is_placed_by_one_rule_and_the_snapshot_places_it_the_same() {
        let devices = [info(0, "GPU-a", "0:18"), info(1, "GPU-b", "0:3b")];
        let slotless = |at_ms| AllocatorEvent {
            slot: None,
            ..event(at_ms, oom(1 << 30), "")
        };
        let on_slot = |at_ms, slot| AllocatorEvent {
            slot: Some(slot),
            ..event(at_ms, oom(1 << 30), "")
        };
        let mut one = poll(vec![], vec![on_slot(1_000, 0), slotless(2_000)]);
        one.devices = vec![device(Some("GPU-b"), None)];
        let mut fold = folded(vec![one]);
        fold.resolve_gpus(&devices, &[], &[]);
        let placed: Vec<_> = fold.ooms.iter().map(|o| fold.gpu_of_oom(o)).collect();
        assert_eq!(
            placed,
            [Some(1), Some(1)],
            "a one-GPU writer's OOMs are on its GPU"
        );
        assert_eq!(fold.ooms_on(0).count(), 0);
        assert_eq!(fold.slot_on(1).map(|(i, _)| i), Some(0));
        assert!(
            fold.slot_on(0).is_none(),
            "no slot is guessed onto another GPU"
        );

        // On two GPUs, an OOM that names no slot is on no one GPU: shown on both.
        let mut two = poll(vec![], vec![on_slot(1_000, 1), slotless(2_000)]);
        let mut second = device(Some("GPU-a"), None);
        second.slot = 1;
        two.devices = vec![device(Some("GPU-b"), None), second];
        let mut fold = folded(vec![two]);
        fold.resolve_gpus(&devices, &[], &[]);
        let placed: Vec<_> = fold.ooms.iter().map(|o| fold.gpu_of_oom(o)).collect();
        assert_eq!(placed, [Some(0), None]);
        assert_eq!(fold.ooms_on(0).count(), 2);
        assert_eq!(fold.ooms_on(1).count(), 1);
        let snapshot = crate::model::AllocatorSnapshot::of(&fold).unwrap();
        for gpu in [0, 1] {
            let live: Vec<u64> = snapshot.ooms_on_gpu(gpu).iter().map(|o| o.at_ms).collect();
            let folded: Vec<u64> = fold.ooms_on(gpu).map(|o| o.at_ms).collect();
            assert_eq!(live, folded, "GPU {gpu}");
        }
    }

    #[test]
    fn joins_by_uuid_whatever_the_ordinal_and_by_pci_bus_id_only_without_a_uuid() {
        let devices = [
            info(0, "GPU-a", "00000000:18:00.0"),
            info(1, "GPU-b", "00000000:3B:00.0"),
        ];
        assert_eq!(
            gpu_index_of(&device(Some("gpu-B"), None), &devices, &[]),
            Some(1)
        );
        assert_eq!(
            gpu_index_of(&device(None, Some("0000:18:00.0")), &devices, &[]),
            Some(0)
        );
        // A UUID that is not here names a GPU elsewhere, whatever its bus id says.
        assert_eq!(
            gpu_index_of(&device(Some("GPU-zz"), Some("0000:3b:00.0")), &devices, &[]),
            None
        );
        assert_eq!(
            gpu_index_of(&device(Some("GPU-zz"), None), &devices, &[]),
            None
        );
    }

    #[test]
    fn a_mig_uuid_joins_the_gpu_its_instance_is_on() {
        let devices = [
            info(0, "GPU-a", "00000000:18:00.0"),
            info(1, "GPU-b", "00000000:3B:00.0"),
        ];
        let instances = [MigUuid {
            uuid: "MIG-1111".into(),
            gpu: 1,
        }];
        assert_eq!(
            gpu_index_of(&device(Some("mig-1111"), None), &devices, &instances),
            Some(1)
        );
        // An instance NVML does not list (destroyed, or on another host) joins nothing.
        assert_eq!(
            gpu_index_of(&device(Some("MIG-2222"), None), &devices, &instances),
            None
        );
        assert_eq!(
            gpu_index_of(&device(Some("MIG-GPU-a/1/0"), None), &devices, &[]),
            Some(0)
        );
        // A writer that printed the MIG device's bytes under `GPU-` joins by the bytes.
        assert_eq!(
            gpu_index_of(&device(Some("GPU-1111"), None), &devices, &instances),
            Some(1)
        );
    }

    #[test]
    fn the_true_peak_keeps_the_step_and_phase_of_the_sample_that_made_it() {
        let begin = event(1_040, EventKind::PhaseBegin, "backward");
        let end = event(
            1_080,
            EventKind::PhaseEnd { peak: Ok(12 << 30) },
            "backward",
        );
        let mut spike = point(1_060, 9 << 30, 12 << 30);
        spike.step = Some(40);
        let fold = folded(vec![poll(
            vec![
                point(1_000, 9 << 30, 9 << 30),
                spike,
                point(1_100, 9 << 30, 9 << 30),
            ],
            vec![begin, end],
        )]);
        let peak = fold.slots[0].true_peak().unwrap();
        // The poll's own label says "optimizer": the phase is the one in force at 1 060 ms.
        assert_eq!(
            (
                peak.value,
                peak.at_ms,
                peak.step,
                peak.phase.as_str(),
                peak.located
            ),
            (12 << 30, 1_060, Some(40), "backward", true)
        );
    }

    #[test]
    fn within_one_millisecond_a_phase_holds_its_samples_and_a_new_peak_event_says_where() {
        // Begun, sampled and ended in the same millisecond as the samples around it.
        let begin = event(1_000, EventKind::PhaseBegin, "backward");
        let end = event(1_000, EventKind::PhaseEnd { peak: Ok(700) }, "backward");
        let fold = folded(vec![poll(vec![point(1_000, 700, 700)], vec![begin, end])]);
        assert_eq!(fold.slots[0].true_peak().unwrap().phase, "backward");
        // The sample's phase is a guess from the events around it; the new-peak event the
        // writer wrote beside it carries its phase, and wins at the same value.
        let mut high = event(
            2_000,
            EventKind::NewHighWater {
                peak: Ok(900),
                previous: Ok(700),
            },
            "",
        );
        high.phase = "backward/attn".into();
        let fold = folded(vec![poll(vec![point(2_000, 900, 900)], vec![high])]);
        assert_eq!(fold.slots[0].true_peak().unwrap().phase, "backward/attn");
    }

    #[test]
    fn an_oom_the_program_counts_and_reports_is_one_oom() {
        // The program's own count holds the OOM it also reported: one, not two.
        let mut counted = poll(vec![], vec![event(1_100, oom(1 << 30), "train")]);
        counted.devices[0].ooms = Ok(1);
        let fold = folded(vec![counted]);
        assert_eq!(fold.slots[0].device.as_ref().unwrap().ooms, Ok(1));
        // A program that counts none: the events are the count.
        let mut uncounted = poll(vec![], vec![event(1_100, oom(1 << 30), "train")]);
        uncounted.devices[0].ooms = Err(Absent::NotSupported);
        let fold = folded(vec![uncounted]);
        assert_eq!(fold.slots[0].device.as_ref().unwrap().ooms, Ok(1));
        // A count above the events seen (events lost to the ring) stands.
        let mut more = poll(vec![], vec![event(1_100, oom(1 << 30), "train")]);
        more.devices[0].ooms = Ok(5);
        let fold = folded(vec![more]);
        assert_eq!(fold.slots[0].device.as_ref().unwrap().ooms, Ok(5));
        // No count and no event: absent, with the writer's reason.
        let mut none = poll(vec![], vec![]);
        none.devices[0].ooms = Err(Absent::NotSupported);
        let fold = folded(vec![none]);
        assert_eq!(
            fold.slots[0].device.as_ref().unwrap().ooms,
            Err(Absent::NotSupported)
        );
    }

    #[test]
    fn ooms_beyond_those_kept_are_still_counted() {
        let extra = 6;
        let events = (0..(KEPT_OOMS + extra) as u64)
            .map(|i| {
                let mut e = event(1_000 + 31_000 * i, oom(1 << 20), "train");
                e.step = Some(i);
                e
            })
            .collect();
        let mut many = poll(vec![], events);
        many.devices[0].ooms = Err(Absent::NotSupported);
        let fold = folded(vec![many]);
        assert_eq!(fold.ooms.len(), KEPT_OOMS);
        assert_eq!(fold.ooms_seen, (KEPT_OOMS + extra) as u64);
        assert_eq!(fold.ooms_dropped(), extra as u64);
        assert_eq!(
            fold.slots[0].device.as_ref().unwrap().ooms,
            Ok((KEPT_OOMS + extra) as u64)
        );
    }

    #[test]
    fn the_observers_oom_and_the_uncaught_error_are_one_fatal_oom() {
        let mut error = event(
            1_200,
            EventKind::OomError {
                requested: Err(Absent::NotSupported),
            },
            "CUDA out of memory. Tried to allocate 6.00 GiB",
        );
        error.slot = None;
        let mut fold = folded(vec![poll(
            vec![point(1_000, 9 << 30, 9 << 30)],
            vec![event(1_100, oom(6 << 30), "backward"), error],
        )]);
        assert_eq!(fold.ooms.len(), 1);
        let only = &fold.ooms[0];
        assert_eq!(only.outcome, OomOutcome::Fatal);
        assert_eq!(only.requested, Ok(6 << 30));
        // The observer gave no allocated figure: the last sample's.
        assert_eq!(only.allocated, Ok(9 << 30));
        assert!(
            only.message
                .as_deref()
                .unwrap()
                .contains("Tried to allocate")
        );
        // The writer then dies: still one OOM, still fatal.
        let mut last = poll(vec![], vec![]);
        last.liveness = WriterLiveness::Ended {
            crashed: false,
            error: true,
        };
        fold.ingest(last, 20_000);
        assert_eq!(fold.ooms.len(), 1);
        assert_eq!(fold.ooms[0].outcome, OomOutcome::Fatal);
    }

    #[test]
    fn an_oom_the_program_survives_is_caught_once_a_step_ends() {
        let step_end = event(
            1_500,
            EventKind::StepEnd {
                peak_allocated: Ok(9 << 30),
                peak_reserved: Ok(10 << 30),
                duration_ns: Ok(1),
            },
            "",
        );
        let mut fold = folded(vec![poll(
            vec![],
            vec![event(1_100, oom(6 << 30), "backward")],
        )]);
        assert_eq!(fold.ooms[0].outcome, OomOutcome::Pending);
        fold.ingest(poll(vec![], vec![step_end]), 11_000);
        assert_eq!(fold.ooms[0].outcome, OomOutcome::Caught);
        assert_eq!(fold.slots[0].step_peaks.held(), 1);
    }

    #[test]
    fn an_uncaught_error_without_an_observer_is_an_oom_with_the_last_figures() {
        // JAX: no observer, no UUID; the error's phase is its own.
        let mut error = event(
            1_200,
            EventKind::OomError {
                requested: Ok(6 << 30),
            },
            "RESOURCE_EXHAUSTED",
        );
        error.slot = None;
        error.phase = "train_step".into();
        let mut p = poll(vec![point(1_000, 9 << 30, 9 << 30)], vec![error]);
        p.devices[0].uuid = None;
        let fold = folded(vec![p]);
        let only = &fold.ooms[0];
        assert_eq!(
            (only.outcome, only.slot, only.phase.as_str()),
            (OomOutcome::Fatal, Some(0), "train_step")
        );
        assert_eq!(only.allocated, Ok(9 << 30));
        assert_eq!(only.device_free, Ok(1 << 30));
    }

    #[test]
    fn an_oom_with_no_free_figure_takes_it_from_pytorch_s_message_and_says_so() {
        // `vramscope.oom(0, requested)` without `free`, then PyTorch's error escapes.
        let explicit = EventKind::Oom {
            requested: Ok(6 << 30),
            device_free: Err(Absent::NotAvailable),
            device_total: Ok(80 << 30),
            allocated: Ok(70 << 30),
            reserved: Err(Absent::NotAvailable),
            retries: Ok(0),
        };
        let message = "train: CUDA out of memory. Tried to allocate 6.00 GiB. GPU 0 has a total \
            capacity of 79.19 GiB of which 2.82 GiB is free. Of the allocated memory 70.00 GiB is \
            allocated by PyTorch, and 1.98 GiB is reserved by PyTorch but unallocated.";
        let error = event(
            1_200,
            EventKind::OomError {
                requested: Ok(6 << 30),
            },
            message,
        );
        let fold = folded(vec![poll(
            vec![],
            vec![event(1_100, explicit, "train"), error],
        )]);
        let only = &fold.ooms[0];
        let gib = |x: f64| (x * (1u64 << 30) as f64).round() as u64;
        assert_eq!(only.device_free, Ok(gib(2.82)));
        assert_eq!(only.reserved, Ok(gib(71.98)));
        // The event's own figures stand: its total and allocated are not replaced.
        assert_eq!(
            (&only.device_total, &only.allocated),
            (&Ok(80 << 30), &Ok(70 << 30))
        );
        assert_eq!(only.from_message, ["device_free", "reserved"]);
        assert_eq!(
            only.sources_note().as_deref(),
            Some("free, reserved from the error's message")
        );
    }

    #[test]
    fn an_anonymous_slot_joins_the_one_gpu_its_pid_is_listed_on_and_keeps_it_after_death() {
        let mut p = poll(vec![], vec![]);
        p.devices[0].uuid = None;
        let mut fold = folded(vec![p]);
        let devices = [info(0, "GPU-a", "x"), info(1, "GPU-b", "y")];
        fold.resolve_gpus(&devices, &[], &[0, 1]);
        assert_eq!(fold.slots[0].gpu, None, "two GPUs: ambiguous");
        fold.resolve_gpus(&devices, &[], &[1]);
        assert_eq!(fold.slots[0].gpu, Some(1));
        // Dead: NVML lists it nowhere; the last GPU known stays.
        fold.resolve_gpus(&devices, &[], &[]);
        assert_eq!(fold.slots[0].gpu, Some(1));
    }

    fn snapshot(at_ms: u64, reason: u64, path: Reading<String>) -> AllocatorEvent {
        event(
            at_ms,
            EventKind::SnapshotWritten {
                path,
                size: Ok(100),
                peak: Ok(9 << 30),
                reason: Ok(reason),
                allocated: Ok(8 << 30),
                max_entries: Ok(1000),
                deleted: Ok(0),
            },
            "7-9.vsc.snap-1-peak.pickle",
        )
    }

    #[test]
    fn each_oom_has_its_own_dump_or_none_never_an_earlier_oom_s() {
        let path = |n: u32| Ok(format!("/dev/shm/vramscope-0/7-9.vsc.snap-{n}.pickle"));
        // A caught 5 GiB OOM and its dump, a fatal 6 GiB one 3 s later and its dump.
        let both = folded(vec![poll(
            vec![],
            vec![
                event(1_000, oom(5 << 30), "train"),
                snapshot(1_010, 0, path(1)),
                event(4_000, oom(6 << 30), "train"),
                snapshot(4_010, 0, path(2)),
            ],
        )]);
        assert_eq!(both.ooms.len(), 2);
        assert_eq!(both.snapshot_of(&both.ooms[0]).unwrap().path, path(1));
        assert_eq!(both.snapshot_of(&both.ooms[1]).unwrap().path, path(2));
        // The second one's dump missing: it has none, not the first one's.
        let one = folded(vec![poll(
            vec![],
            vec![
                event(1_000, oom(5 << 30), "train"),
                snapshot(1_010, 0, path(1)),
                event(4_000, oom(6 << 30), "train"),
            ],
        )]);
        assert_eq!(one.snapshot_of(&one.ooms[0]).unwrap().path, path(1));
        assert!(one.snapshot_of(&one.ooms[1]).is_none());
    }

    #[test]
    fn snapshots_are_kept_newest_few_with_the_oom_s_preferred_and_a_refused_name_failed() {
        let path = |n: u32| Ok(format!("/dev/shm/vramscope-0/7-9.vsc.snap-{n}.pickle"));
        let mut fold = folded(vec![poll(
            vec![],
            vec![
                snapshot(1_000, 1, path(1)),
                event(1_100, oom(6 << 30), "backward"),
                snapshot(1_101, 0, path(2)),
                snapshot(1_200, 1, path(3)),
            ],
        )]);
        assert_eq!(fold.snapshots.len(), 3);
        // A newer peak's snapshot does not hide the OOM's.
        let relevant = fold.relevant_snapshot().unwrap();
        assert_eq!(relevant.path, path(2));
        assert_eq!(relevant.sites, SitesState::NotRead);
        let oom = fold.ooms[0].clone();
        assert_eq!(fold.snapshot_of(&oom).unwrap().path, path(2));
        assert_eq!(fold.peak_snapshot(0).unwrap().path, path(3));
        assert!(fold.set_sites(
            "/dev/shm/vramscope-0/7-9.vsc.snap-2.pickle",
            SitesState::Reading
        ));
        assert!(!fold.set_sites("/elsewhere", SitesState::Reading));
        assert_eq!(fold.relevant_snapshot().unwrap().sites, SitesState::Reading);
        // One asked for wins; a refused name is its own answer.
        let refused = Err(Absent::Error("snapshot name refused: \"../x\"".into()));
        fold.ingest(
            poll(
                vec![],
                vec![snapshot(2_000, 1, refused), snapshot(2_100, 2, path(5))],
            ),
            12_000,
        );
        assert_eq!(fold.relevant_snapshot().unwrap().path, path(5));
        let failed = &fold.snapshots[fold.snapshots.len() - 2];
        assert!(matches!(&failed.sites, SitesState::Failed { why } if why.contains("refused")));
        for n in 0..20 {
            fold.ingest(poll(vec![], vec![snapshot(3_000 + n, 1, path(9))]), 13_000);
        }
        assert_eq!(fold.snapshots.len(), KEPT_SNAPSHOTS);
    }

    #[test]
    fn resetting_peaks_ignores_the_frameworks_counter_until_it_rises_again() {
        let mut fold = WriterFold::default();
        let ingest = |fold: &mut WriterFold, at_ms: u64, counter: u64| {
            let mut p = poll(vec![point(at_ms, 10 << 30, 10 << 30)], vec![]);
            p.devices[0].allocated_peak = Ok(counter);
            fold.ingest(p, at_ms);
            fold.slots[0].true_peak().map(|p| p.value)
        };
        assert_eq!(ingest(&mut fold, 1_000, 12 << 30), Some(12 << 30));
        fold.reset_peaks();
        // The counter still says 12 GiB, from before the reset: the samples rule.
        assert_eq!(ingest(&mut fold, 2_000, 12 << 30), Some(10 << 30));
        // It rose past where it stood: a new peak, exactly.
        assert_eq!(ingest(&mut fold, 3_000, 13 << 30), Some(13 << 30));
    }
}
