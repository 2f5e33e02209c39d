//! The processes to export, drawn from the snapshot: each (process, GPU) row NVML lists,
//! with what the host and the process's allocator channel say about it, plus channels that
//! publish for a GPU on which NVML lists no row for their pid (a MIG instance, a device
//! hidden from NVML). A channel names a process only through the pid the channel sampler
//! verified (`host_pid`: same start time, and the file's owner owns the process), joined by
//! `channel_of` as `--json` and the TUI join it: the pid a file merely claims is never a
//! label, or any user could raise an OOM alert under root's job.

use crate::model::allocator::RowProcess;
use crate::model::foresight::Forecast;
use crate::model::mig::RowInstance;
use crate::model::snapshot::{ExitedRow, allocator_of, channel_of};
use crate::model::{AllocatorSnapshot, PodInfo, ProcessAllocator, ProcessRow, Reading, Snapshot};

/// Label values are cut to this many bytes: a command line can be long, and every byte of
/// a label is stored with every sample.
const MAX_LABEL_BYTES: usize = 128;

/// Who a process is, as labels. Facts not known are left out, never guessed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessLabels {
    pub gpu: u32,
    /// The GPU's UUID (a stand-in `index-N` when NVML cannot read it).
    pub uuid: String,
    /// The host pid as NVML lists it, or as the channel sampler verified it.
    pub pid: u32,
    pub user: Option<String>,
    pub command: Option<String>,
    /// The Kubernetes pod, namespace and container name, as dcgm-exporter labels them.
    pub pod: Option<String>,
    pub namespace: Option<String>,
    pub container: Option<String>,
    /// The MIG instance a process on a MIG GPU runs in, labelled as dcgm-exporter labels
    /// the instance's own series (`GPU_I_PROFILE`, `GPU_I_ID`), so they join.
    pub mig_profile: Option<String>,
    pub mig_gi: Option<u32>,
    pub rank: Option<i32>,
    pub local_rank: Option<i32>,
    pub job: Option<String>,
}

impl ProcessLabels {
    /// The labels of a process on one GPU (index, UUID, pid), listed, exited or known only
    /// from its channel: what the host and NVML said of it, and what the channel joined to
    /// it adds (its rank and job, and its command when the host's is not known).
    fn of(
        (gpu, uuid, pid): (u32, String, u32),
        user: Option<String>,
        command: Option<String>,
        pod: Option<&PodInfo>,
        mig: Option<&RowInstance>,
        channel: Option<&AllocatorSnapshot>,
    ) -> ProcessLabels {
        let id = channel.map(|c| &c.identity);
        ProcessLabels {
            gpu,
            uuid,
            pid,
            user,
            command: command.or_else(|| id.and_then(|i| non_empty(&i.command))),
            pod: pod_name(pod, |p| &p.name),
            namespace: pod_name(pod, |p| &p.namespace),
            container: pod_name(pod, |p| &p.container),
            mig_profile: mig.and_then(|i| i.profile.as_ref().ok().cloned()),
            mig_gi: mig.and_then(|i| i.gpu_instance_id.as_ref().ok().copied()),
            rank: id.and_then(|i| i.rank),
            local_rank: id.and_then(|i| i.local_rank),
            job: id.and_then(|i| non_empty(&i.job_id)),
        }
    }

    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = vec![
            ("gpu", self.gpu.to_string()),
            ("uuid", self.uuid.clone()),
            ("pid", self.pid.to_string()),
        ];
        let text = [
            ("user", &self.user),
            ("command", &self.command),
            ("pod", &self.pod),
            ("namespace", &self.namespace),
            ("container", &self.container),
            ("GPU_I_PROFILE", &self.mig_profile),
        ];
        pairs.extend(
            text.iter()
                .filter_map(|(n, v)| Some((*n, cut(v.as_ref()?)))),
        );
        if let Some(gi) = self.mig_gi {
            pairs.push(("GPU_I_ID", gi.to_string()));
        }
        let numbers = [("rank", self.rank), ("local_rank", self.local_rank)];
        pairs.extend(
            numbers
                .iter()
                .filter_map(|(n, v)| Some((*n, (*v)?.to_string()))),
        );
        // Not `job`: Prometheus gives every series its scrape job's name under that label
        // and would rename ours to `exported_job`.
        if let Some(job) = &self.job {
            pairs.push(("job_id", cut(job)));
        }
        pairs
    }
}

/// What an instrumented process's allocator says about one GPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocatorFigures {
    pub allocated: Option<u64>,
    pub reserved: Option<u64>,
    /// The highest allocated seen in any sample since the channel opened.
    pub peak: Option<u64>,
    /// The fold's count of the process's OOMs on this GPU (`SlotFold::count_ooms`).
    pub ooms: Option<u64>,
    pub retries: Option<u64>,
    pub step: Option<u64>,
    /// 1 where `step` counts the steps since an attach, 0 where the job's; absent with it.
    pub steps_since_attach: Option<u64>,
    /// Steps, and seconds, until the step peaks reach the room the allocator has, when the
    /// forecast is confident (`model::foresight`); absent otherwise.
    pub oom_in_steps: Option<u64>,
    pub oom_in_ms: Option<u64>,
}

impl AllocatorFigures {
    fn of(allocator: &ProcessAllocator) -> Self {
        let device = &allocator.device;
        Self {
            allocated: device.allocated.as_ref().ok().copied(),
            reserved: device.reserved.as_ref().ok().copied(),
            peak: allocator.peak.as_ref().map(|p| p.value),
            ooms: device.ooms.as_ref().ok().copied(),
            retries: device.alloc_retries.as_ref().ok().copied(),
            step: allocator.step,
            steps_since_attach: allocator
                .step
                .map(|_| u64::from(allocator.steps_from.since_attach())),
            oom_in_steps: match &allocator.forecast {
                Forecast::OomIn { steps, .. } if allocator.liveness.is_running() => Some(*steps),
                _ => None,
            },
            oom_in_ms: match &allocator.forecast {
                Forecast::OomIn { eta_ms, .. } if allocator.liveness.is_running() => *eta_ms,
                _ => None,
            },
        }
    }
}

/// One process on one GPU.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessEntry {
    pub labels: ProcessLabels,
    /// Listed now; false during the grace period after it went away.
    pub running: bool,
    /// The host has said who runs it (user and command), so its labels are settled.
    pub host_known: bool,
    /// NVML's figure.
    pub used_bytes: Option<u64>,
    pub sm_util_percent: Option<u32>,
    pub host_rss_bytes: Option<u64>,
    pub allocator: Option<AllocatorFigures>,
    /// When NVML last listed a process no longer listed (the snapshot's exited row), which
    /// its grace period runs from; `None` while it is listed.
    pub last_listed_ms: Option<u64>,
}

impl ProcessEntry {
    /// The identity kept across ticks.
    pub fn key(&self) -> (String, u32) {
        (self.labels.uuid.clone(), self.labels.pid)
    }

    /// The entry after its process went away: what it held is gone (no longer reported); its
    /// final counts, peak and step stay, so that a scrape after the exit still sees them.
    pub fn exited(mut self) -> Self {
        self.running = false;
        self.used_bytes = None;
        self.sm_util_percent = None;
        self.host_rss_bytes = None;
        if let Some(a) = &mut self.allocator {
            a.allocated = None;
            a.reserved = None;
            // A process that ended will not run out of memory.
            a.oom_in_steps = None;
            a.oom_in_ms = None;
        }
        self
    }
}

/// Every process to export now, in GPU then pid order: those NVML lists, running channels
/// it lists on no GPU, and (marked not running) the snapshot's exited rows, those it listed
/// recently, with their last figures, for `Retention` to export through the grace period.
pub fn from_snapshot(snapshot: &Snapshot) -> Vec<ProcessEntry> {
    let mut entries: Vec<ProcessEntry> = snapshot
        .processes
        .iter()
        .map(|row| from_row(row, &snapshot.allocators))
        .collect();
    entries.extend(unlisted_channels(snapshot));
    entries.extend(snapshot.exited.iter().map(|row| from_exited(row, snapshot)));
    entries.sort_by_key(|e| (e.labels.gpu, e.labels.pid));
    entries
}

fn from_row(row: &ProcessRow, allocators: &[AllocatorSnapshot]) -> ProcessEntry {
    let host = row.host.as_ref();
    let user = host.and_then(|h| h.user.as_ref().ok().cloned());
    let command = host.and_then(|h| h.command.as_ref().ok().cloned());
    // The channel the row's allocator figures come from: its rank and job label the process
    // on every GPU, published for or not.
    let channel = channel_of(
        allocators,
        row.nvml.pid,
        RowProcess::listed(host.map(|h| &**h)),
    );
    let pod = host.and_then(|h| h.pod.as_ref());
    ProcessEntry {
        host_known: user.is_some() && command.is_some(),
        labels: ProcessLabels::of(
            (row.gpu_index, row.gpu_uuid.to_string(), row.nvml.pid),
            user,
            command,
            pod,
            row.mig.as_ref(),
            channel,
        ),
        running: true,
        used_bytes: row.nvml.used_memory.as_ref().ok().copied(),
        sm_util_percent: row.nvml.sm_util.as_ref().ok().copied(),
        host_rss_bytes: host.and_then(|h| h.rss_bytes.as_ref().ok().copied()),
        allocator: row.allocator.as_ref().map(AllocatorFigures::of),
        last_listed_ms: None,
    }
}

/// A process NVML listed recently and lists no more (exited, or gone from the GPU), labelled
/// as while it ran: user, command, pod and MIG instance as the monitor last saw them, rank
/// and job from the channel its exited row joined.
fn from_exited(row: &ExitedRow, snapshot: &Snapshot) -> ProcessEntry {
    let channel = channel_of(&snapshot.allocators, row.pid, RowProcess::Unlisted);
    ProcessEntry {
        labels: ProcessLabels::of(
            (row.gpu_index, row.gpu_uuid.to_string(), row.pid),
            row.user.clone(),
            row.command.clone(),
            row.pod.as_ref(),
            row.mig.as_ref(),
            channel,
        ),
        running: false,
        host_known: true,
        used_bytes: None,
        sm_util_percent: None,
        host_rss_bytes: None,
        allocator: row.allocator.as_ref().map(AllocatorFigures::of),
        last_listed_ms: Some(row.last_listed_ms),
    }
    // What it held is gone, whatever its writer last said.
    .exited()
}

/// Running channels publishing for a GPU on which NVML lists no row for their pid. Only
/// the channel `channel_of` joins to a verified pid counts; one without a verified pid is
/// left out (the TUI and `--once` say why it has no row).
fn unlisted_channels(snapshot: &Snapshot) -> Vec<ProcessEntry> {
    let mut entries = Vec::new();
    for channel in snapshot
        .allocators
        .iter()
        .filter(|a| a.liveness.is_running())
    {
        let Some(pid) = channel.host_pid else {
            continue;
        };
        let joined = channel_of(
            &snapshot.allocators,
            pid,
            RowProcess::Listed { starttime: None },
        );
        if !joined.is_some_and(|j| std::ptr::eq(j, channel)) {
            continue;
        }
        for gpu in channel.gpu_indices.iter().flatten().copied() {
            let listed = snapshot
                .processes
                .iter()
                .any(|r| r.gpu_index == gpu && r.nvml.pid == pid);
            let info = snapshot.devices.iter().find(|d| d.info.index == gpu);
            let (false, Some(info)) = (listed, info) else {
                continue;
            };
            entries.push(ProcessEntry {
                labels: ProcessLabels::of(
                    (gpu, info.info.key(), pid),
                    None,
                    None,
                    None,
                    None,
                    Some(channel),
                ),
                running: true,
                // Nothing more will come from the host about a pid it cannot see.
                host_known: true,
                used_bytes: None,
                sm_util_percent: None,
                host_rss_bytes: None,
                allocator: allocator_of(
                    &snapshot.allocators,
                    pid,
                    gpu,
                    RowProcess::Listed { starttime: None },
                )
                .as_ref()
                .map(AllocatorFigures::of),
                last_listed_ms: None,
            });
        }
    }
    entries
}

/// One of a pod's names, when the pod's names are known.
fn pod_name(pod: Option<&PodInfo>, read: fn(&PodInfo) -> &Reading<String>) -> Option<String> {
    pod.and_then(|p| read(p).as_ref().ok().cloned())
}

fn non_empty(text: &str) -> Option<String> {
    (!text.is_empty()).then(|| text.to_string())
}

/// At most `MAX_LABEL_BYTES`, cut at a character boundary.
fn cut(text: &str) -> String {
    text[..text.floor_char_boundary(MAX_LABEL_BYTES)].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels() -> ProcessLabels {
        ProcessLabels {
            gpu: 1,
            uuid: "GPU-1".into(),
            pid: 42,
            user: Some("alice".into()),
            command: Some("é".repeat(100)),
            pod: None,
            namespace: None,
            container: None,
            mig_profile: None,
            mig_gi: None,
            rank: Some(3),
            local_rank: None,
            job: Some("job-7".into()),
        }
    }

    #[test]
    fn labels_leave_out_what_is_unknown_and_cut_long_values() {
        let pairs = labels().pairs();
        let names: Vec<&str> = pairs.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            ["gpu", "uuid", "pid", "user", "command", "rank", "job_id"]
        );
        let command = &pairs[4].1;
        assert_eq!(command.len(), MAX_LABEL_BYTES);
        assert!(command.chars().all(|c| c == 'é'));
        assert_eq!(pairs[5].1, "3");
    }

    /// The pids exported for one running channel on GPU 0 whose writer claims pid 1,
    /// with the pid the channel sampler verified (if any), and NVML listing nothing.
    fn exported_pids(verified: Option<u32>) -> Vec<u32> {
        use crate::model::SourceEvent;
        use crate::model::{
            Absent, AllocatorDevice, ChannelBatch, ChannelPoll, DeviceInfo, DriverInfo,
            WriterIdentity, WriterLiveness,
        };
        use crate::state::{Monitor, StaleAfter};
        use std::sync::Arc;
        fn no<T>() -> crate::model::Reading<T> {
            Err(Absent::NotSupported)
        }
        let mut monitor = Monitor::new(0);
        monitor.ingest(SourceEvent::Started {
            driver: DriverInfo {
                driver_version: no(),
                cuda_version: no(),
                nvml_version: no(),
            },
            devices: vec![DeviceInfo {
                index: 0,
                name: no(),
                uuid: Ok("GPU-0".into()),
                pci_bus_id: no(),
                memory_total: no(),
                power_limit_mw: no(),
            }],
        });
        let device = AllocatorDevice {
            slot: 0,
            ordinal: 0,
            uuid: Some("GPU-0".into()),
            pci_bus_id: None,
            total: no(),
            allocated: Ok(1 << 30),
            allocated_peak: no(),
            reserved: Ok(2 << 30),
            reserved_peak: no(),
            active: no(),
            inactive_split: no(),
            requested: no(),
            alloc_retries: no(),
            ooms: Ok(5),
            device_free: no(),
            limit: no(),
            interval_peak: no(),
            step_peak: no(),
        };
        let poll = ChannelPoll {
            path: "/dev/shm/vramscope-1000/1-1.vsc".into(),
            identity: Arc::new(WriterIdentity {
                file: "1-1.vsc".into(),
                pid: 1,
                kind: "PyTorch".into(),
                framework: String::new(),
                rank: None,
                local_rank: None,
                world_size: None,
                job_id: "fake-alert".into(),
                command: "init".into(),
                allocator_config: String::new(),
                exact_peaks: false,
                attached: false,
                sample_period_us: 50_000,
                sites: false,
            }),
            host_pid: verified,
            liveness: WriterLiveness::Live,
            devices: vec![device],
            step: None,
            label: String::new(),
            points: Vec::new(),
            events: Vec::new(),
            lost_samples: 0,
            lost_events: 0,
        };
        monitor.ingest(SourceEvent::Channels(Box::new(ChannelBatch {
            at_ms: 0,
            polls: vec![poll],
            gone: Vec::new(),
            rejected: Vec::new(),
        })));
        let snapshot = monitor.snapshot(0, StaleAfter::interval(1000));
        from_snapshot(&snapshot)
            .iter()
            .map(|e| e.labels.pid)
            .collect()
    }

    #[test]
    fn a_channel_is_exported_under_its_verified_pid_never_under_its_claim() {
        assert_eq!(exported_pids(Some(1)), [1]);
        assert_eq!(exported_pids(None), Vec::<u32>::new());
    }

    #[test]
    fn an_exited_process_keeps_counts_and_peak_but_holds_nothing() {
        let entry = ProcessEntry {
            labels: labels(),
            running: true,
            host_known: true,
            used_bytes: Some(10),
            sm_util_percent: Some(50),
            host_rss_bytes: Some(5),
            allocator: Some(AllocatorFigures {
                allocated: Some(1),
                reserved: Some(2),
                peak: Some(3),
                ooms: Some(4),
                retries: Some(5),
                step: Some(6),
                steps_since_attach: Some(1),
                oom_in_steps: Some(7),
                oom_in_ms: Some(8),
            }),
            last_listed_ms: None,
        };
        let gone = entry.exited();
        assert!(!gone.running);
        assert_eq!(
            (gone.used_bytes, gone.sm_util_percent, gone.host_rss_bytes),
            (None, None, None)
        );
        assert_eq!(
            gone.allocator,
            Some(AllocatorFigures {
                allocated: None,
                reserved: None,
                peak: Some(3),
                ooms: Some(4),
                retries: Some(5),
                step: Some(6),
                steps_since_attach: Some(1),
                oom_in_steps: None,
                oom_in_ms: None,
            })
        );
    }
}
