//! Ingests samples, keeps history, and answers what the view and outputs need.

use super::allocators::Allocators;
use super::series_set::{DeviceSeries, ProcessKey, ProcessSeries};
use crate::history::{Lingering, Series};
use crate::model::ForeignText;
use crate::model::SourceEvent;
use crate::model::allocator::RowProcess;
use crate::model::gpu_lists::GpuLists;
use crate::model::held_sites::{SitesJob, SitesState};
use crate::model::host;
use crate::model::mig::RowInstance;
use crate::model::peak_owner::{self, PeakHolders};
use crate::model::snapshot::forecasts_as_rows_see;
use crate::model::snapshot::{ExitedRow, ProcessPeaks, allocator_of, instrumented_reserved};
use crate::model::{
    AllocatorSnapshot, DeviceInfo, DeviceSample, DeviceSnapshot, DriverInfo, HostLoad, HostMemory,
    HostProcess, HostSample, NvmlProblem, ProcessRow, Reading, Snapshot,
};
use std::collections::BTreeMap;
use std::sync::Arc;

/// How long a device may stay silent before it is called stale.
#[derive(Clone, Copy, Debug)]
pub struct StaleAfter {
    threshold_ms: u64,
}

impl StaleAfter {
    /// For samplers ticking every `interval_ms`: a few missed ticks, never under 2 s.
    pub fn interval(interval_ms: u64) -> Self {
        Self {
            threshold_ms: interval_ms.saturating_mul(3).max(2_000),
        }
    }

    /// For synchronous sampling, which cannot fall behind.
    pub const NEVER: Self = Self {
        threshold_ms: u64::MAX,
    };
}

/// The newest host pass. Its processes are shared with every snapshot's rows rather than
/// copied into them each frame, three strings apiece.
#[derive(Clone)]
struct LatestHost {
    memory: Reading<HostMemory>,
    load: Option<HostLoad>,
    /// Sorted by pid, for the joins' binary searches.
    processes: Vec<Arc<HostProcess>>,
}

impl LatestHost {
    fn find(&self, pid: u32) -> Option<&Arc<HostProcess>> {
        host::by_pid(&self.processes, pid)
    }
}

/// Everything sampled so far. Cloned for replay's checkpoints, which it seeks back from.
#[derive(Clone, Default)]
pub struct Monitor {
    pub driver: Option<DriverInfo>,
    pub problem: Option<NvmlProblem>,
    devices: Vec<DeviceInfo>,
    // Ordered maps: with a handful of GPUs a few compares find one, cheaper than SipHash of
    // the index or UUID, and these are looked up several times a frame.
    latest: BTreeMap<u32, DeviceSample>,
    /// What each GPU's latest sample lists: the writers' GPUs are resolved by it.
    gpu_lists: GpuLists,
    host: Option<LatestHost>,
    device_series: BTreeMap<String, DeviceSeries>,
    process_series: Lingering<ProcessKey, ProcessSeries>,
    host_used: Series,
    allocators: Allocators,
    /// A channel batch or a changed GPU process list arrived: the channels' GPUs are
    /// resolved again once the event (a whole batch) is in.
    gpus_unresolved: bool,
    started_ms: u64,
}

impl Monitor {
    pub fn new(now_ms: u64) -> Self {
        Self {
            started_ms: now_ms,
            ..Self::default()
        }
    }

    /// A monitor that remembers processes and channels gone for at least `linger_ms`
    /// (never less than it usually does): the exporter's grace period, during which an
    /// exited process's row stays in every snapshot with its last figures.
    pub fn remembering(now_ms: u64, linger_ms: u64) -> Self {
        let linger_ms = linger_ms.max(Lingering::<ProcessKey, ProcessSeries>::DEFAULT_LINGER_MS);
        Self {
            process_series: Lingering::new(
                linger_ms,
                Lingering::<ProcessKey, ProcessSeries>::DEFAULT_MAX_ENTRIES,
            ),
            allocators: Allocators::lingering(linger_ms),
            ..Self::new(now_ms)
        }
    }

    /// Sets the moment the monitor counts from, where it is known only after it has taken
    /// events in: replay lays its checkpoints while first reading a recording, before it has
    /// found where the recording's first screen is.
    pub fn set_started_ms(&mut self, ms: u64) {
        self.started_ms = ms;
    }

    /// About how much memory the histories take (`Series::memory_bytes`): most of a
    /// monitor's size after a while, which replay's checkpoints budget by.
    pub fn history_bytes(&self) -> usize {
        let devices: usize = self
            .device_series
            .values()
            .map(|d| d.memory_used.memory_bytes() + d.gpu_util.memory_bytes())
            .sum();
        let processes: usize = self
            .process_series
            .iter()
            .map(|(_, p)| p.vram.memory_bytes() + p.host_rss.memory_bytes())
            .sum();
        devices + processes + self.host_used.memory_bytes() + self.allocators.history_bytes()
    }

    /// Takes one sampler event into the state. Evicted once per event, after its newest
    /// device sample: a tick's batch holds one sample per GPU, and each eviction walks every
    /// process's series.
    /// Foreign text is cleaned here, where every live sampler's text enters the model.
    pub fn ingest(&mut self, mut event: SourceEvent) {
        event.clean_text();
        if let Some(at_ms) = self.apply(event) {
            self.evict(at_ms);
        }
        if std::mem::take(&mut self.gpus_unresolved) {
            self.resolve_gpus();
        }
    }

    /// One event into the state, without eviction; the time of its newest device sample.
    fn apply(&mut self, event: SourceEvent) -> Option<u64> {
        match event {
            SourceEvent::Started { driver, devices } => {
                self.driver = Some(driver);
                for info in &devices {
                    self.device_series.entry(info.key()).or_default();
                }
                self.devices = devices;
            }
            SourceEvent::NvmlUnavailable(problem) => self.problem = Some(problem),
            SourceEvent::Device(sample) => {
                let at_ms = sample.at_ms;
                self.ingest_device(*sample);
                return Some(at_ms);
            }
            SourceEvent::Host(sample) => self.ingest_host(*sample),
            SourceEvent::Channels(batch) => {
                self.allocators.ingest(*batch);
                self.gpus_unresolved = true;
            }
            SourceEvent::Batch(events) => {
                return events.into_iter().filter_map(|e| self.apply(e)).max();
            }
            // The period is the sampling's (live) or the recording's (replay) to tell.
            SourceEvent::Interval { .. } => {}
        }
        None
    }

    /// Drops processes and channels unseen for longer than they are kept.
    fn evict(&mut self, now_ms: u64) {
        self.process_series.evict(now_ms);
        self.allocators.evict(now_ms);
    }

    fn ingest_device(&mut self, sample: DeviceSample) {
        let Some(info) = self.devices.iter().find(|d| d.index == sample.index) else {
            return;
        };
        let key = info.key();
        let uuid: Arc<str> = Arc::from(key.as_str());
        let series = self.device_series.entry(key).or_default();
        let all_time_before = series.memory_used.peak();
        // A spike the fast memory sampling caught between two samples: in the history (and so
        // in the charts' peak markers and the all-time peak) at the moment it was read.
        let between = sample
            .memory_peak
            .as_ref()
            .filter(|p| p.at_ms < sample.at_ms);
        if let Some(peak) = between {
            series
                .memory_used
                .push_between(peak.at_ms, peak.used as f64);
        }
        match &sample.memory {
            Ok(m) => series.memory_used.push(sample.at_ms, m.used as f64),
            Err(_) => series.memory_used.push_gap(sample.at_ms),
        }
        // The spike's owner: named once here, from what the sampler read at the peak, for
        // every output that shows the peak.
        let owner = peak_owner::owner_of(&sample, self.latest.get(&sample.index));
        if series.memory_used.peak() != all_time_before {
            series.peak_owner.clone_from(&owner);
        }
        series.interval_peak_owner = owner;
        match &sample.gpu_util {
            Ok(u) => series.gpu_util.push(sample.at_ms, f64::from(*u)),
            Err(_) => series.gpu_util.push_gap(sample.at_ms),
        }
        // Each process's figure at the spike, in its own history, so its PEAK and its chart
        // hold the spike it made.
        if let Some(peak) = between
            && let PeakHolders::Read(holders) = &peak.holders
        {
            for held in holders {
                let entry = self.process_on(held.pid, &uuid, sample.index, peak.at_ms);
                entry.vram.push_between(peak.at_ms, held.used as f64);
            }
        }
        if let Ok(processes) = &sample.processes {
            for p in processes {
                let entry = self.process_on(p.pid, &uuid, sample.index, sample.at_ms);
                entry.mig = sample
                    .mig_enabled()
                    .and_then(|m| m.instance_of_pid(p.pid))
                    .map(RowInstance::from);
                match &p.used_memory {
                    Ok(bytes) => entry.vram.push(sample.at_ms, *bytes as f64),
                    Err(_) => entry.vram.push_gap(sample.at_ms),
                }
            }
            // Off this GPU's list: a break, so its chart does not hold the last figure across
            // the time it was away.
            for (key, entry) in self.process_series.iter_mut() {
                if *key.gpu_uuid == *uuid && !processes.iter().any(|p| p.pid == key.pid) {
                    entry.vram.push_gap(sample.at_ms);
                }
            }
        }
        // A process joining or leaving, or a MIG instance created or destroyed, changes which
        // writer slots name this GPU.
        if self.gpu_lists.observe(&sample) {
            self.gpus_unresolved = true;
        }
        self.latest.insert(sample.index, sample);
    }

    /// `pid`'s series on the GPU `gpu_uuid` (index `gpu_index`), seen at `at_ms`.
    fn process_on(
        &mut self,
        pid: u32,
        gpu_uuid: &Arc<str>,
        gpu_index: u32,
        at_ms: u64,
    ) -> &mut ProcessSeries {
        let key = ProcessKey {
            pid,
            gpu_uuid: Arc::clone(gpu_uuid),
        };
        let entry = self.process_series.touch(key, at_ms);
        entry.gpu_index = gpu_index;
        entry
    }

    fn ingest_host(&mut self, sample: HostSample) {
        if let Ok(m) = &sample.memory {
            self.host_used.push(sample.at_ms, m.used as f64);
        }
        let mut processes: Vec<Arc<HostProcess>> =
            sample.processes.into_iter().map(Arc::new).collect();
        processes.sort_unstable_by_key(|p| p.pid);
        let latest = LatestHost {
            memory: sample.memory,
            load: sample.load,
            processes,
        };
        for (key, series) in self.process_series.iter_mut() {
            let Some(host) = latest.find(key.pid) else {
                // Off every GPU's list, the host pass no longer reads it: whether it still
                // runs is checked here, once a pass, not by the table every frame.
                series.identity = series.identity.filter(|&(local, start)| {
                    // A new process given the same pid has another start time.
                    crate::channel::starttime(Some(local)).is_ok_and(|now| now == start)
                });
                continue;
            };
            if let Ok(rss) = host.rss_bytes {
                series.host_rss.push(sample.at_ms, rss as f64);
            }
            if let Ok(cmd) = &host.command {
                series.command = Some(cmd.clone());
            }
            if let Ok(user) = &host.user {
                series.user = Some(user.clone());
            }
            if host.pod.is_some() && series.pod != host.pod {
                series.pod.clone_from(&host.pod);
            }
            if let (Some(local), Some(start)) = (host.local_pid, host.starttime) {
                series.identity = Some((local, start));
            }
        }
        self.host = Some(latest);
    }

    /// Joined latest state. A device silent for longer than `stale` is marked stale.
    pub fn snapshot(&self, now_ms: u64, stale: StaleAfter) -> Snapshot {
        let mut allocators = self.allocators.snapshot();
        let devices: Vec<DeviceSnapshot> = self
            .devices
            .iter()
            .map(|info| {
                let sample = self.latest.get(&info.index).cloned();
                let last = sample.as_ref().map_or(self.started_ms, |s| s.at_ms);
                DeviceSnapshot {
                    info: info.clone(),
                    sample,
                    stale: now_ms.saturating_sub(last) > stale.threshold_ms,
                    // From the joined rows, below.
                    instrumented_reserved: None,
                    memory_peak: self
                        .device_series
                        .get(&info.key())
                        .and_then(|s| s.memory_used.peak()),
                    memory_peak_owner: self
                        .device_series
                        .get(&info.key())
                        .and_then(|s| s.peak_owner.clone()),
                    interval_peak_owner: self
                        .device_series
                        .get(&info.key())
                        .and_then(|s| s.interval_peak_owner.clone()),
                }
            })
            .collect();
        let host_processes = self.host.as_ref().map_or(&[][..], |h| &h.processes[..]);
        let mut processes = Snapshot::join_processes(&devices, host_processes, &allocators);
        forecasts_as_rows_see(&mut allocators, &processes);
        self.add_history_facts(&mut processes);
        let exited = self.exited_rows(&processes, &allocators, now_ms);
        let devices = devices
            .into_iter()
            .map(|device| DeviceSnapshot {
                instrumented_reserved: instrumented_reserved(&processes, device.info.index),
                ..device
            })
            .collect();
        Snapshot {
            taken_at_ms: now_ms,
            driver: self.driver.clone(),
            nvml_problem: self.problem.clone(),
            processes,
            exited,
            devices,
            host_memory: self.host.as_ref().map(|h| h.memory.clone()),
            host_load: self.host.as_ref().and_then(|h| h.load),
            rejected_channels: self.allocators.rejected().to_vec(),
            allocators,
        }
    }

    /// What the histories know of each listed row: its all-time peaks, and the user and
    /// command an earlier host pass read where this one could not.
    fn add_history_facts(&self, rows: &mut [ProcessRow]) {
        for row in rows {
            let key = ProcessKey {
                pid: row.nvml.pid,
                gpu_uuid: Arc::clone(&row.gpu_uuid),
            };
            let Some(series) = self.process_series.get(&key) else {
                continue;
            };
            row.peaks = peaks_of(series);
            // Copied only where the host pass lacks them: most rows never need these.
            let host = row.host.as_deref();
            if host.is_none_or(|h| h.user.is_err()) {
                row.remembered.user.clone_from(&series.user);
            }
            if host.is_none_or(|h| h.command.is_err()) {
                row.remembered.command.clone_from(&series.command);
            }
        }
    }

    /// The processes seen recently that NVML no longer lists (`listed`), each joined with
    /// the channel its pid wrote, as an unlisted process joins (`RowProcess::Unlisted`).
    fn exited_rows(
        &self,
        listed: &[ProcessRow],
        allocators: &[AllocatorSnapshot],
        now_ms: u64,
    ) -> Vec<ExitedRow> {
        // Sorted and binary-searched: cheaper than hashing a UUID twice per row.
        let mut live: Vec<(u32, &str)> =
            listed.iter().map(|p| (p.nvml.pid, &*p.gpu_uuid)).collect();
        live.sort_unstable();
        let mut rows: Vec<ExitedRow> = self
            .process_series
            .iter_seen()
            // A snapshot of an earlier moment (replay seeking) has not seen later processes.
            .filter(|(key, _, seen)| {
                *seen <= now_ms && live.binary_search(&(key.pid, &*key.gpu_uuid)).is_err()
            })
            .map(|(key, series, seen)| ExitedRow {
                gpu_index: series.gpu_index,
                gpu_uuid: Arc::clone(&key.gpu_uuid),
                pid: key.pid,
                last_listed_ms: seen,
                // The monitor drops the identity once the process is gone.
                left_gpu: series.identity.is_some(),
                user: series.user.clone(),
                command: series.command.clone(),
                pod: series.pod.clone(),
                mig: series.mig.clone(),
                // A dead writer's last figures stay with its row: often they are why it died.
                allocator: allocator_of(
                    allocators,
                    key.pid,
                    series.gpu_index,
                    RowProcess::Unlisted,
                ),
                peaks: peaks_of(series),
            })
            .collect();
        rows.sort_by_key(|r| (r.gpu_index, r.pid));
        rows
    }

    /// Resolves the channels' GPUs (`WriterFold::resolve_gpus`) against NVML's latest
    /// process lists.
    fn resolve_gpus(&mut self) {
        let instances = self.gpu_lists.instances();
        let lists = &self.gpu_lists;
        self.allocators
            .resolve_gpus(&self.devices, &instances, |pid| lists.gpus_listing(pid));
    }

    /// Every GPU has sent a sample, or NVML has said why it cannot: the screen is complete.
    pub fn has_first_data(&self) -> bool {
        self.problem.is_some()
            || (!self.devices.is_empty()
                && self
                    .devices
                    .iter()
                    .all(|d| self.latest.contains_key(&d.index)))
    }

    pub fn devices(&self) -> &[DeviceInfo] {
        &self.devices
    }

    pub fn device_series(&self, key: &str) -> Option<&DeviceSeries> {
        self.device_series.get(key)
    }

    pub fn process_series(&self, key: &ProcessKey) -> Option<&ProcessSeries> {
        self.process_series.get(key)
    }

    /// What instrumented programs published.
    pub fn allocators(&self) -> &Allocators {
        &self.allocators
    }

    /// The channels' snapshots to reduce now, marked as being read (`Allocators`).
    pub fn reductions_wanted(&mut self) -> Vec<SitesJob> {
        self.allocators.reductions_wanted()
    }

    /// What reducing a snapshot said, into the state the snapshot is taken from.
    pub fn sites_done(&mut self, channel: &str, path: &str, sites: SitesState) {
        self.allocators.sites_done(channel, path, sites);
    }

    pub fn host_used(&self) -> &Series {
        &self.host_used
    }

    /// Forget all-time peaks (the `r` key): the next samples set new ones.
    pub fn reset_peaks(&mut self) {
        for series in self.device_series.values_mut() {
            series.memory_used.reset_peak();
            series.peak_owner = None;
            series.gpu_util.reset_peak();
        }
        for (_, series) in self.process_series.iter_mut() {
            series.vram.reset_peak();
            series.host_rss.reset_peak();
        }
        self.allocators.reset_peaks();
    }
}

/// A process's all-time peaks as its history holds them now.
fn peaks_of(series: &ProcessSeries) -> ProcessPeaks {
    ProcessPeaks {
        vram: series.vram.peak(),
        host_rss: series.host_rss.peak(),
    }
}
