//! The channel sampler: finds the channel files of instrumented programs (ours, and those
//! inside the containers of GPU processes), polls each once per tick, and translates the
//! reader's records into the model's types, so nothing above here knows the file format.
//! A dead writer's file stays readable: it is polled on, marked ended, until it is removed.

use super::dir_watch::DirWatch;
use crate::channel::cleaning::{self, Owners};
use crate::channel::discover;
use crate::channel::layout::sample::{
    FLAG_NEW_HIGH_WATER as NEW_HIGH_WATER, FLAG_STEP_SINCE_ATTACH as STEP_SINCE_ATTACH,
};
use crate::channel::{
    Channel, DeviceSlot, EventRecord, Identity, Liveness, Policy, Update, WriterKind, WriterState,
    monotonic_ns, slot_uuid_string,
};
use crate::model::{
    Absent, AllocatorDevice, AllocatorEvent, AllocatorPoint, ChannelBatch, ChannelPoll, EventKind,
    Gone, Reading, WriterIdentity, WriterLiveness, now_ms,
};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// New files are looked for this often (in our own directories only when they changed, see
/// `own_listing_due`); open channels are polled every tick.
const SCAN_EVERY: Duration = Duration::from_secs(2);
/// The directories are listed this often even when no change was reported: a net under
/// inotify, for what it may not see (a directory replaced by a mount, say).
const LIST_ANYWAY_EVERY: Duration = Duration::from_secs(60);
const CLEAN_EVERY: Duration = Duration::from_secs(60);
/// A channel whose writer ended this long ago is closed: its figures stay on screen, and
/// the open files stay bounded however many runs crash over days.
const RETIRE_AFTER: Duration = Duration::from_secs(600);
/// Files remembered as retired, so a scan does not open them again.
const MAX_RETIRED: usize = 4096;

/// A file's identity, the same whatever path reaches it (two ranks in one container see
/// the same file through two `/proc/PID/root` paths).
type FileId = (u64, u64);

struct Open {
    channel: Channel,
    file_id: FileId,
    identity: Arc<WriterIdentity>,
    /// Found through a container's root: its pid means nothing in our namespace.
    in_container: bool,
    /// The writer's pid as NVML lists it, once mapped.
    host_pid: Option<u32>,
    /// Mapping was tried against the current NVML pid list and failed. Its answer depends
    /// only on that list (and on facts of a live process that do not change), so it is
    /// tried again when the list changes, not on every poll: each try reads `/proc` for
    /// every NVML pid.
    unmapped: bool,
    /// When the writer was first seen ended.
    ended_at: Option<Instant>,
}

pub struct ChannelSampler {
    policy: Policy,
    open: BTreeMap<PathBuf, Open>,
    /// Files refused, with their reasons; tried again at each scan, since a file can be
    /// replaced.
    refused: BTreeMap<PathBuf, String>,
    retired: HashSet<FileId>,
    last_scan: Option<Instant>,
    /// When our own directories were last listed, and the files that listing found: while
    /// inotify reports no change of entries there, they are what a listing would find.
    last_listing: Option<Instant>,
    own_listed: Vec<PathBuf>,
    /// Tells whether the directories' entries changed since the last listing; `None` where
    /// inotify is unavailable, and every scan lists.
    dir_watch: Option<DirWatch>,
    last_clean: Option<Instant>,
    /// NVML's pids: candidates for writers in other pid namespaces.
    nvml_pids: Vec<u32>,
    /// Per NVML pid: whether it lives in a pid namespace below ours (a container).
    in_container: HashMap<u32, bool>,
    host_namespace: bool,
    our_pid_ns: Option<u64>,
    /// Refusals as last sent, so an unchanged list is not sent every tick.
    sent_refused: Vec<String>,
    /// What was left out of directories over `discover::MAX_FILES` files, ours (as of their
    /// last listing) and containers' (as of the last scan): sent with the refusals.
    skipped_own: Vec<String>,
    skipped_contained: Vec<String>,
}

impl Default for ChannelSampler {
    fn default() -> Self {
        Self::new()
    }
}

impl ChannelSampler {
    /// A sampler for a monitor that scans again and again: its directories are watched, so
    /// they are listed only when their entries change.
    pub fn new() -> Self {
        Self {
            dir_watch: DirWatch::new().ok(),
            ..Self::unwatched()
        }
    }

    /// A sampler that lists its directories at every scan, with no watch: for a one-shot
    /// run, which scans once. Setting up a watch costs little, but closing it waits on the
    /// kernel (0.1 to 16 ms), more than the whole run's reading of the channels.
    pub fn unwatched() -> Self {
        ChannelSampler {
            // The history already in a file is read too: for a writer that died before the
            // monitor started, it is the whole post-mortem.
            policy: Policy {
                from_start: true,
                ..Policy::current()
            },
            open: BTreeMap::new(),
            refused: BTreeMap::new(),
            retired: HashSet::new(),
            last_scan: None,
            last_listing: None,
            own_listed: Vec::new(),
            dir_watch: None,
            last_clean: None,
            nvml_pids: Vec::new(),
            in_container: HashMap::new(),
            host_namespace: super::container::in_host_pid_namespace(),
            our_pid_ns: crate::channel::pid_ns_inode(None),
            sent_refused: Vec::new(),
            skipped_own: Vec::new(),
            skipped_contained: Vec::new(),
        }
    }

    /// The pids NVML lists now.
    pub fn set_pids(&mut self, pids: &[u32]) {
        if pids != self.nvml_pids {
            self.nvml_pids = pids.to_vec();
            self.in_container.retain(|pid, _| pids.contains(pid));
            for open in self.open.values_mut() {
                open.unmapped = false;
            }
            // A new GPU process may bring a container's channel: look at once. (Our own
            // directories report their changes themselves.)
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
            let list_own = self.own_listing_due(now);
            if list_own {
                self.last_listing = Some(now);
            }
            gone = self.scan(list_own);
        }
        if self
            .last_clean
            .is_none_or(|at| now.duration_since(at) >= CLEAN_EVERY)
        {
            self.last_clean = Some(now);
            for dir in cleaning::cleaning_dirs(self.policy.euid) {
                cleaning::remove_stale_in(
                    &dir,
                    self.policy.euid,
                    cleaning::STALE_AFTER,
                    Owners::Ours,
                );
            }
        }
        let at_ms = now_ms();
        let mono_ns = monotonic_ns();
        let mut polls = Vec::with_capacity(self.open.len());
        let mut dropped = Vec::new();
        for (path, open) in &mut self.open {
            match open.channel.poll() {
                Ok(update) => {
                    let ended = matches!(update.liveness, Liveness::Ended { .. });
                    if ended {
                        open.ended_at.get_or_insert(now);
                    } else if open.host_pid.is_none() && !open.unmapped {
                        // Mapped only while the writer lives: the pid of a dead one may
                        // already belong to someone else.
                        open.host_pid = host_pid_of(
                            &open.channel,
                            open.in_container,
                            &self.nvml_pids,
                            self.host_namespace,
                            self.our_pid_ns,
                        );
                        open.unmapped = open.host_pid.is_none();
                    }
                    polls.push(translate(path, open, update, at_ms, mono_ns));
                    if open
                        .ended_at
                        .is_some_and(|at| now.duration_since(at) >= RETIRE_AFTER)
                    {
                        dropped.push((path.clone(), Gone::Retired, None));
                    }
                }
                Err(rejected) => {
                    dropped.push((path.clone(), Gone::Refused, Some(rejected.to_string())))
                }
            }
        }
        for (path, why, reason) in dropped {
            if let Some(open) = self.open.remove(&path)
                && why == Gone::Retired
                && self.retired.len() < MAX_RETIRED
            {
                self.retired.insert(open.file_id);
            }
            if let Some(reason) = reason {
                self.refused.insert(path.clone(), reason);
            }
            gone.push((path.to_string_lossy().into_owned(), why));
        }
        let refused: Vec<String> = self
            .skipped_own
            .iter()
            .chain(&self.skipped_contained)
            .chain(self.refused.values())
            .cloned()
            .collect();
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

    /// Whether our own directories must be listed: something in them changed, or it
    /// cannot be known (no inotify, or a minute has passed).
    fn own_listing_due(&mut self, now: Instant) -> bool {
        // Asked first, so that what it has pending is drained whatever the answer.
        let changed = self.dir_watch.as_mut().is_none_or(DirWatch::changed);
        changed
            || self
                .last_listing
                .is_none_or(|at| now.duration_since(at) >= LIST_ANYWAY_EVERY)
    }

    /// Opens new files and forgets vanished ones; returns the vanished channels. Our own
    /// directories are listed only when `list_own`, else their last listing stands; the
    /// directories inside containers always (they are not watched: finding them means
    /// reading each process's environment anyway). Every file found is looked at, refused
    /// ones included (one may be rewritten in place, which is no change of entries).
    fn scan(&mut self, list_own: bool) -> Vec<(String, Gone)> {
        let euid = self.policy.euid;
        if list_own {
            self.own_listed.clear();
            self.skipped_own.clear();
            for dir in self.own_dirs_watched() {
                // A directory that fails its checks is skipped quietly: it is someone else's.
                let Ok(listing) = discover::list_all(&dir, euid) else {
                    continue;
                };
                self.skipped_own.extend(listing.skipped_note(&dir));
                self.own_listed
                    .extend(listing.files.into_iter().map(|f| f.path));
            }
        }
        let mut files: Vec<(PathBuf, bool)> =
            self.own_listed.iter().map(|p| (p.clone(), false)).collect();
        let mut unreachable = false;
        self.skipped_contained.clear();
        for &pid in &self.nvml_pids {
            let contained = *self
                .in_container
                .entry(pid)
                .or_insert_with(|| discover::nspids(pid).is_some_and(|ns| ns.len() > 1));
            if !contained {
                continue;
            }
            for dir in discover::container_dirs(pid) {
                match discover::list_all(&dir, euid) {
                    Ok(listing) => {
                        self.skipped_contained.extend(listing.skipped_note(&dir));
                        files.extend(listing.files.into_iter().map(|f| (f.path, true)));
                    }
                    Err(_) => unreachable = true,
                }
            }
        }
        let mut seen: HashSet<PathBuf> = HashSet::new();
        let mut open_ids: HashSet<FileId> = self.open.values().map(|o| o.file_id).collect();
        for (path, in_container) in files {
            if self.open.contains_key(&path) {
                seen.insert(path);
                continue;
            }
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let id = (meta.dev(), meta.ino());
            if self.retired.contains(&id) {
                seen.insert(path);
                continue;
            }
            if open_ids.contains(&id) {
                // The same file through another container path: read it once.
                continue;
            }
            seen.insert(path.clone());
            match Channel::open(&path, &self.policy) {
                Ok(channel) => {
                    self.refused.remove(&path);
                    open_ids.insert(id);
                    let identity = Arc::new(writer_identity(&channel));
                    self.open.insert(
                        path,
                        Open {
                            channel,
                            file_id: id,
                            identity,
                            in_container,
                            host_pid: None,
                            unmapped: false,
                            ended_at: None,
                        },
                    );
                }
                Err(rejected) => {
                    self.refused.insert(path, rejected.to_string());
                }
            }
        }
        self.refused.retain(|path, _| seen.contains(path));
        let vanished: Vec<PathBuf> = self
            .open
            .keys()
            .filter(|p| !seen.contains(*p))
            .cloned()
            .collect();
        vanished
            .into_iter()
            .filter_map(|path| {
                let open = self.open.remove(&path)?;
                // A container path that vanished with its container may have been a crash:
                // only a file gone from a directory we still see was removed.
                let why = if open.in_container && (unreachable || !path.exists()) {
                    Gone::Unreachable
                } else {
                    Gone::Removed
                };
                Some((path.to_string_lossy().into_owned(), why))
            })
            .collect()
    }
    /// Our own channel directories, each watched before it is listed so that nothing
    /// added meanwhile goes unseen: where ours may be first, then the others root finds in
    /// /dev/shm.
    fn own_dirs_watched(&mut self) -> Vec<PathBuf> {
        let euid = self.policy.euid;
        let candidates = discover::candidate_dirs(euid);
        if let Some(watch) = &mut self.dir_watch {
            watch.watch(candidates.iter().map(PathBuf::as_path));
        }
        let dirs = discover::channel_dirs(euid);
        if let Some(watch) = &mut self.dir_watch {
            let others = dirs.iter().filter(|d| !candidates.contains(d));
            watch.watch(others.map(PathBuf::as_path));
        }
        dirs
    }
}

/// The writer's pid as NVML lists it. In a container: the NVML pid whose `NSpid` names
/// it in the writer's pid namespace. Else its own pid, when we share the host's namespace.
/// Either way the process must have the channel's start time (a pid is reused once its
/// process dies) and, for files found in our own directories, belong to the file's owner (a
/// root monitor reads every user's files, and a user must not dress up another's process).
fn host_pid_of(
    channel: &Channel,
    in_container: bool,
    nvml_pids: &[u32],
    host_namespace: bool,
    our_pid_ns: Option<u64>,
) -> Option<u32> {
    let identity = channel.identity();
    let candidate = match identity.pid_ns {
        Some(ns) if Some(ns) != our_pid_ns => {
            discover::host_pid(ns, identity.pid, nvml_pids.iter().copied())?
        }
        // Same namespace, or no namespace recorded: only trusted for our own directories.
        _ if !in_container && host_namespace => u32::try_from(identity.pid).ok()?,
        _ => return None,
    };
    let proc_dir = std::fs::metadata(format!("/proc/{candidate}")).ok()?;
    let (owner, _) = channel.file_id();
    // Clock ticks since boot: the same in every pid namespace.
    let same_start = crate::channel::starttime(Some(candidate)).ok() == Some(identity.starttime);
    (same_start && (in_container || proc_dir.uid() == owner)).then_some(candidate)
}

fn writer_identity(channel: &Channel) -> WriterIdentity {
    let id: &Identity = channel.identity();
    WriterIdentity {
        file: file_name(channel.path()),
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
        sites: id.flags & crate::channel::layout::flags::SITES != 0,
        attached: id.flags & crate::channel::layout::flags::ATTACHED != 0,
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

fn translate(path: &Path, open: &Open, update: Update, at_ms: u64, mono_ns: u64) -> ChannelPoll {
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
        .map(|s| AllocatorPoint {
            at_ms: wall(s.t_ns),
            slot: u16::from(s.slot),
            allocated: s.allocated,
            reserved: s.reserved,
            peak: s.peak,
            step: s.step,
            new_high_water: s.flags & NEW_HIGH_WATER != 0,
            steps_since_attach: s.flags & STEP_SINCE_ATTACH != 0,
        })
        .collect();
    let events = update
        .events
        .iter()
        .map(|e| AllocatorEvent {
            at_ms: wall(e.t_ns),
            kind: event_kind(e, path),
            slot: e.slot,
            step: e.step,
            label: if e.text.is_empty() {
                phase_name(e.phase)
            } else {
                e.text.clone()
            },
            phase: phase_name(e.phase),
        })
        .collect();
    let (step, label) = match &update.status {
        Some(status) => (status.step, status.label.clone()),
        None => (None, String::new()),
    };
    ChannelPoll {
        path: path.to_string_lossy().into_owned(),
        identity: Arc::clone(&open.identity),
        host_pid: open.host_pid,
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
        slot: u16::try_from(slot.index).unwrap_or(u16::MAX),
        ordinal: slot.ordinal,
        uuid: slot
            .uuid
            .as_ref()
            .map(|raw| slot_uuid_string(raw, slot.uuid_is_mig)),
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
        interval_peak: figure(slot.interval_peak),
        step_peak: figure(slot.step_peak),
    }
}

/// The record's kind and arguments (`EventKind::from_record`). `channel`: the channel file's
/// path, beside which a snapshot the event announces lies.
fn event_kind(e: &EventRecord, channel: &Path) -> EventKind {
    EventKind::from_record(e.kind, e.args, || {
        crate::channel::snapshot_path(channel, &e.text, e.text_intact)
            .map(|p| p.to_string_lossy().into_owned())
            .map_err(Absent::Error)
    })
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
