//! The channel sampler: finds the channel files of instrumented programs (ours, and those
//! inside the containers of GPU processes), polls each once per tick, and translates the
//! reader's records into the model's types, so nothing above here knows the file format.
//! A dead writer's file stays readable: it is polled on, marked ended, until it is removed.

use crate::channel::discover;
use crate::channel::{
    Channel, DeviceSlot, EventKind as RawKind, EventRecord, Identity, Liveness, Policy,
    SampleRecord, Update, WriterKind, WriterState, monotonic_ns, uuid_string,
};
use crate::model::{
    Absent, AllocatorDevice, AllocatorEvent, AllocatorPoint, ChannelBatch, ChannelPoll, EventKind,
    Reading, WriterIdentity, WriterLiveness, now_ms,
};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// New files are looked for this often; open channels are polled every tick.
const SCAN_EVERY: Duration = Duration::from_secs(2);
/// Ended writers' files older than this are removed (ours only), per the spec's §6.
const STALE_AFTER: Duration = Duration::from_secs(3600);
const CLEAN_EVERY: Duration = Duration::from_secs(60);
/// Sample flag: the peak is the highest ever seen (spec §2.7).
const NEW_HIGH_WATER: u8 = 1 << 1;

struct Open {
    channel: Channel,
    identity_sent: bool,
    /// The writer's pid as NVML lists it, once mapped.
    host_pid: Option<u32>,
}

pub struct ChannelSampler {
    policy: Policy,
    open: BTreeMap<PathBuf, Open>,
    /// Files refused, with their reasons; tried again at each scan, since a file can be
    /// replaced.
    refused: BTreeMap<PathBuf, String>,
    last_scan: Option<Instant>,
    last_clean: Option<Instant>,
    /// NVML's pids: candidates for writers in other pid namespaces.
    nvml_pids: Vec<u32>,
    /// Per NVML pid: whether it lives in a pid namespace below ours (a container).
    in_container: HashMap<u32, bool>,
    host_namespace: bool,
    /// Refusals as last sent, so an unchanged list is not sent every tick.
    sent_refused: Vec<String>,
}

impl ChannelSampler {
    /// `from_start`: also read the history already in each file (one-shot output); the
    /// monitor reads only what comes after it opened a channel.
    pub fn new(from_start: bool) -> Self {
        ChannelSampler {
            policy: Policy {
                from_start,
                ..Policy::current()
            },
            open: BTreeMap::new(),
            refused: BTreeMap::new(),
            last_scan: None,
            last_clean: None,
            nvml_pids: Vec::new(),
            in_container: HashMap::new(),
            host_namespace: super::container::in_host_pid_namespace(),
            sent_refused: Vec::new(),
        }
    }

    /// The pids NVML lists now.
    pub fn set_pids(&mut self, pids: &[u32]) {
        if pids != self.nvml_pids {
            self.nvml_pids = pids.to_vec();
            self.in_container.retain(|pid, _| pids.contains(pid));
            // A new GPU process may bring a container's channel: look at once.
            self.last_scan = None;
        }
    }

    /// One pass: look for new files when due, poll every open channel. `None` when there is
    /// nothing to tell (no channels, no change in refusals).
    pub fn sample(&mut self) -> Option<ChannelBatch> {
        let now = Instant::now();
        let mut gone = Vec::new();
        if self
            .last_scan
            .is_none_or(|at| now.duration_since(at) >= SCAN_EVERY)
        {
            self.last_scan = Some(now);
            gone = self.scan();
        }
        if self
            .last_clean
            .is_none_or(|at| now.duration_since(at) >= CLEAN_EVERY)
        {
            self.last_clean = Some(now);
            for dir in discover::channel_dirs(self.policy.euid) {
                discover::remove_stale(&dir, self.policy.euid, STALE_AFTER);
            }
        }
        let at_ms = now_ms();
        let mono_ns = monotonic_ns();
        let mut polls = Vec::with_capacity(self.open.len());
        let mut dropped = Vec::new();
        for (path, open) in &mut self.open {
            match open.channel.poll() {
                Ok(update) => {
                    if open.host_pid.is_none() {
                        open.host_pid = host_pid_of(
                            open.channel.identity(),
                            &self.nvml_pids,
                            self.host_namespace,
                        );
                    }
                    let identity = (!open.identity_sent).then(|| writer_identity(open));
                    open.identity_sent = true;
                    polls.push(translate(
                        path,
                        identity,
                        open.host_pid,
                        update,
                        at_ms,
                        mono_ns,
                    ));
                }
                Err(rejected) => dropped.push((path.clone(), rejected.to_string())),
            }
        }
        for (path, reason) in dropped {
            self.open.remove(&path);
            gone.push(path.to_string_lossy().into_owned());
            self.refused.insert(path, reason);
        }
        let refused: Vec<String> = self.refused.values().cloned().collect();
        let refusals_changed = refused != self.sent_refused;
        if polls.is_empty() && gone.is_empty() && !refusals_changed {
            return None;
        }
        self.sent_refused.clone_from(&refused);
        Some(ChannelBatch {
            at_ms,
            polls,
            gone,
            rejected: refused,
        })
    }

    /// Opens new files and forgets vanished ones; returns the vanished channels.
    fn scan(&mut self) -> Vec<String> {
        let mut dirs = discover::channel_dirs(self.policy.euid);
        for &pid in &self.nvml_pids {
            let contained = *self
                .in_container
                .entry(pid)
                .or_insert_with(|| discover::nspids(pid).is_some_and(|ns| ns.len() > 1));
            let known = self.open.values().any(|o| o.host_pid == Some(pid));
            if contained && !known {
                dirs.extend(discover::container_dirs(pid));
            }
        }
        let mut seen: Vec<PathBuf> = Vec::new();
        for dir in &dirs {
            // A directory that fails its checks is skipped quietly: it is someone else's.
            let Ok(files) = discover::list(dir, self.policy.euid) else {
                continue;
            };
            seen.extend(files.into_iter().map(|f| f.path));
        }
        for path in &seen {
            if self.open.contains_key(path) {
                continue;
            }
            match Channel::open(path, &self.policy) {
                Ok(channel) => {
                    self.refused.remove(path);
                    self.open.insert(
                        path.clone(),
                        Open {
                            channel,
                            identity_sent: false,
                            host_pid: None,
                        },
                    );
                }
                Err(rejected) => {
                    self.refused.insert(path.clone(), rejected.to_string());
                }
            }
        }
        self.refused.retain(|path, _| seen.contains(path));
        let vanished: Vec<PathBuf> = self
            .open
            .keys()
            .filter(|p| !seen.contains(p))
            .cloned()
            .collect();
        vanished
            .into_iter()
            .map(|path| {
                self.open.remove(&path);
                path.to_string_lossy().into_owned()
            })
            .collect()
    }
}

/// The writer's pid as NVML lists it: its own pid when it shares our (host) pid namespace,
/// else found among NVML's pids through their `NSpid` lines.
fn host_pid_of(identity: &Identity, nvml_pids: &[u32], host_namespace: bool) -> Option<u32> {
    let ns_pid = u32::try_from(identity.pid).ok()?;
    if let Some(pid_ns) = identity.pid_ns
        && let Some(host) = discover::host_pid(pid_ns, identity.pid, nvml_pids.iter().copied())
    {
        return Some(host);
    }
    let ours = std::fs::metadata("/proc/self/ns/pid")
        .ok()
        .map(|m| std::os::unix::fs::MetadataExt::ino(&m));
    (host_namespace && (identity.pid_ns.is_none() || identity.pid_ns == ours)).then_some(ns_pid)
}

fn writer_identity(open: &Open) -> WriterIdentity {
    let id = open.channel.identity();
    WriterIdentity {
        file: file_name(open.channel.path()),
        pid: u32::try_from(id.pid).unwrap_or(u32::MAX),
        kind: kind_name(id.kind),
        framework: id.framework.clone(),
        rank: id.rank,
        local_rank: id.local_rank,
        world_size: id.world_size,
        job_id: id.job_id.clone(),
        command: id.cmdline.clone(),
        allocator_config: id.allocator_config.clone(),
        exact_peaks: id.flags & crate::channel::layout::flags::PEAK_RESET != 0,
        sample_period_us: id.sample_period_us,
    }
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into(),
    )
}

fn kind_name(kind: WriterKind) -> String {
    match kind {
        WriterKind::PyTorch => "PyTorch".into(),
        WriterKind::Jax => "JAX".into(),
        WriterKind::TensorFlow => "TensorFlow".into(),
        WriterKind::CuPy => "CuPy".into(),
        WriterKind::Python => "Python".into(),
        WriterKind::C => "C".into(),
        WriterKind::Rust => "Rust".into(),
        WriterKind::Unknown(code) => format!("writer kind {code}"),
    }
}

fn translate(
    path: &Path,
    identity: Option<WriterIdentity>,
    host_pid: Option<u32>,
    update: Update,
    at_ms: u64,
    mono_ns: u64,
) -> ChannelPoll {
    let wall = |t_ns: u64| wall_ms(t_ns, at_ms, mono_ns);
    let phase_name = |phase: u16| -> String {
        usize::from(phase)
            .checked_sub(1)
            .and_then(|i| update.phases.get(i))
            .cloned()
            .unwrap_or_default()
    };
    let points = update
        .samples
        .iter()
        .map(|s: &SampleRecord| AllocatorPoint {
            at_ms: wall(s.t_ns),
            slot: u16::from(s.slot),
            allocated: s.allocated,
            reserved: s.reserved,
            peak: s.peak,
            step: s.step,
            new_high_water: s.flags & NEW_HIGH_WATER != 0,
        })
        .collect();
    let events = update
        .events
        .iter()
        .map(|e| AllocatorEvent {
            at_ms: wall(e.t_ns),
            kind: event_kind(e),
            slot: e.slot,
            step: e.step,
            label: if e.text.is_empty() {
                phase_name(e.phase)
            } else {
                e.text.clone()
            },
        })
        .collect();
    let (step, label) = match &update.status {
        Some(status) => (status.step, status.label.clone()),
        None => (None, String::new()),
    };
    ChannelPoll {
        path: path.to_string_lossy().into_owned(),
        identity,
        host_pid,
        liveness: liveness(update.liveness, update.state),
        devices: update.devices.iter().map(device).collect(),
        step,
        label,
        points,
        events,
        lost_samples: update.lost_samples,
        lost_events: update.lost_events,
    }
}

/// A writer's monotonic timestamp as wall time: both processes read the same
/// `CLOCK_MONOTONIC`, so the age of a record is the difference of the two clocks.
fn wall_ms(t_ns: u64, now_wall_ms: u64, now_mono_ns: u64) -> u64 {
    let age_ms = now_mono_ns.saturating_sub(t_ns) / 1_000_000;
    now_wall_ms.saturating_sub(age_ms)
}

fn liveness(liveness: Liveness, state: WriterState) -> WriterLiveness {
    match liveness {
        Liveness::Alive => WriterLiveness::Live,
        Liveness::Stalled { heartbeat_age_ns } => WriterLiveness::Stalled {
            silent_ms: heartbeat_age_ns / 1_000_000,
        },
        Liveness::Ended { crashed } => WriterLiveness::Ended {
            crashed,
            error: state == WriterState::ExitedError,
        },
    }
}

/// What the writer stored as absent: it cannot read that figure.
fn figure(value: Option<u64>) -> Reading<u64> {
    value.ok_or(Absent::NotSupported)
}

fn device(slot: &DeviceSlot) -> AllocatorDevice {
    AllocatorDevice {
        ordinal: slot.ordinal,
        uuid: slot.uuid.as_ref().map(uuid_string),
        pci_bus_id: slot.pci_bus_id.clone(),
        total: figure(slot.total),
        allocated: figure(slot.allocated),
        allocated_peak: figure(slot.allocated_peak),
        reserved: figure(slot.reserved),
        reserved_peak: figure(slot.reserved_peak),
        active: figure(slot.active),
        inactive_split: figure(slot.inactive_split),
        requested: figure(slot.requested),
        alloc_retries: figure(slot.alloc_retries),
        ooms: figure(slot.ooms),
        device_free: figure(slot.device_free),
        limit: figure(slot.limit),
        // The interval peak is folded into the true peak by the state, with the samples'.
        true_peak: figure(slot.interval_peak),
        step_peak: figure(slot.step_peak),
    }
}

/// The spec's §2.8 arguments, named.
fn event_kind(e: &EventRecord) -> EventKind {
    let a = |i: usize| {
        let v = e.args[i];
        if v == crate::channel::ABSENT {
            Err(Absent::NotSupported)
        } else {
            Ok(v)
        }
    };
    match e.kind {
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
            error: e.args[0] == 1,
        },
        RawKind::SnapshotWritten => EventKind::SnapshotWritten,
        RawKind::ForeignPeakReset => EventKind::ForeignPeakReset {
            before: a(0),
            after: a(1),
        },
        RawKind::EmptyCache => EventKind::EmptyCache {
            before: a(0),
            after: a(1),
        },
        RawKind::Unknown(code) => EventKind::Unknown { code },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writer_timestamps_become_wall_time_by_their_age() {
        // A record 1.5 s old on the monotonic clock is 1.5 s before now on the wall clock.
        assert_eq!(
            wall_ms(8_500_000_000, 1_700_000_010_000, 10_000_000_000),
            1_700_000_008_500
        );
        // A timestamp "from the future" (clock skew in a hostile file) is now, not later.
        assert_eq!(
            wall_ms(20_000_000_000, 1_700_000_010_000, 10_000_000_000),
            1_700_000_010_000
        );
    }
}
