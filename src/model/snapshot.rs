//! The latest state of everything, joined: what one-shot output prints, what the exporter
//! publishes and what every panel of the TUI draws. It is the whole truth of its moment:
//! besides the latest figures it carries the all-time peaks as they stood then and the rows
//! of processes gone since (`exited`, remembered here and nowhere else), so a paused screen,
//! which keeps one snapshot, shows nothing that happened after it. History is read beside it
//! through a view capped at its moment (`state::History`).

use super::absent::Reading;
use super::allocator::{RowProcess, joined_channel};
use super::foresight::{Forecast, StepPeaks};
use super::host::by_pid;
use super::mig::RowInstance;
use super::peak_owner::PeakOwner;
use super::step_origin::StepOrigin;
use super::writer_fold::{NvmlBeside, Oom, PeakAt, room_of};
use super::{
    AllocatorDevice, AllocatorSnapshot, DeviceInfo, DeviceSample, DriverInfo, GpuProcess, HostLoad,
    HostMemory, HostProcess, NvmlProblem, WriterLiveness,
};
use crate::history::Peak;
use serde::Serialize;
use std::sync::Arc;

/// One GPU: its static facts and its latest sample.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceSnapshot {
    pub info: DeviceInfo,
    pub sample: Option<DeviceSample>,
    /// No sample arrived for several intervals: an NVML call is blocking. Figures shown are old.
    pub stale: bool,
    /// How much of the used memory the caching allocators of instrumented processes hold
    /// (their reserved bytes, summed over this GPU's process rows, `instrumented_reserved`);
    /// `None` when no live instrumented process uses this GPU.
    pub instrumented_reserved: Option<u64>,
    /// The highest memory used seen (the history's all-time peak) as it stood at the
    /// snapshot's moment.
    #[serde(skip)]
    pub memory_peak: Option<Peak>,
    /// Who made `memory_peak` (`peak_owner::owner_of`).
    #[serde(skip)]
    pub memory_peak_owner: Option<PeakOwner>,
    /// Who made the latest sample's interval peak (its `memory_peak`).
    #[serde(skip)]
    pub interval_peak_owner: Option<PeakOwner>,
}

impl DeviceSnapshot {
    /// Memory used when known.
    pub fn memory_used(&self) -> Option<u64> {
        self.sample.as_ref()?.memory.as_ref().ok().map(|m| m.used)
    }

    /// Memory total: from the sample, else the static facts.
    pub fn memory_total(&self) -> Option<u64> {
        if let Some(Ok(m)) = self.sample.as_ref().map(|s| &s.memory) {
            return Some(m.total);
        }
        self.info.memory_total.as_ref().ok().copied()
    }
}

/// One (process, GPU) pair joined with what the host knows about the process.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProcessRow {
    pub gpu_index: u32,
    /// Shared by every row on the GPU (serialised as a plain string).
    pub gpu_uuid: Arc<str>,
    pub nvml: GpuProcess,
    /// Shared with the monitor's latest host pass (serialised as the plain struct).
    pub host: Option<Arc<HostProcess>>,
    /// What the process's allocator published for this GPU, when it is instrumented.
    pub allocator: Option<ProcessAllocator>,
    /// The MIG instance it runs in, on a GPU in MIG mode.
    pub mig: Option<RowInstance>,
    /// Why `allocator` is empty although the process publishes a channel: every GPU its
    /// writer names is unknown here (`its GPU MIG-1234... is not on this host`), as `--once`
    /// says. `None` when it publishes none, or its figures joined.
    #[serde(skip)]
    pub unjoined: Option<String>,
    /// Its all-time peaks on this GPU as they stood at the snapshot's moment.
    #[serde(skip)]
    pub peaks: ProcessPeaks,
    /// The last user and command a host pass read for it, kept for a pass that could not
    /// read them (`None` when this pass did, or none ever has).
    #[serde(skip)]
    pub remembered: Remembered,
}

/// A process's all-time peaks on one GPU (its history's), as of a snapshot.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProcessPeaks {
    pub vram: Option<Peak>,
    pub host_rss: Option<Peak>,
}

/// What earlier host passes read of a process, for when the latest did not.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Remembered {
    pub user: Option<String>,
    pub command: Option<String>,
}

/// An instrumented process's allocator figures on one GPU.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProcessAllocator {
    pub device: AllocatorDevice,
    /// The true peak on this GPU and where it happened.
    pub peak: Option<PeakAt>,
    /// The OOMs on this GPU, oldest first.
    pub ooms: Vec<Oom>,
    pub step: Option<u64>,
    /// What `step` and the steps of `peak` and `ooms` count from.
    pub steps_from: StepOrigin,
    pub label: String,
    pub liveness: WriterLiveness,
    /// The writer's rank in its job (torchrun's `RANK`), when it says.
    pub rank: Option<i32>,
    /// The writer was started by `vramscope attach` in the running process.
    pub attached: bool,
    /// What the step peaks say about an OOM to come on this GPU.
    pub forecast: Forecast,
    /// The recent step peaks the forecast stands on.
    #[serde(skip)]
    pub step_peaks: StepPeaks,
}

impl ProcessAllocator {
    /// The forecast again, in the room NVML's sample leaves (`room_of`): what the process
    /// holds beyond the allocator's reserved (CUDA context, libraries) and what the device
    /// has free after every other process and the driver's reserve.
    pub fn seen_by_nvml(mut self, nvml: NvmlBeside) -> Self {
        if nvml != NvmlBeside::NONE && self.liveness.is_running() {
            self.forecast = self.step_peaks.foresee(room_of(&self.device, nvml));
        }
        self
    }
}

impl Snapshot {
    /// The instrumented processes whose figures no row of the table shows (no row joined to
    /// them), each with why: ended, in a namespace whose pids we cannot map, or on a GPU NVML
    /// does not match (a MIG instance, a device hidden from us). Every output that says so
    /// asks this.
    pub fn writers_without_a_row(&self) -> Vec<(&AllocatorSnapshot, String)> {
        self.allocators
            .iter()
            .filter(|a| {
                !self
                    .processes
                    .iter()
                    .any(|r| r.allocator.is_some() && Some(r.nvml.pid) == a.host_pid)
            })
            .map(|a| {
                let why = match (a.host_pid, a.liveness.is_ended(), a.gpu_elsewhere()) {
                    (_, true, _) => a.liveness.label().to_string(),
                    // Said before the pid: another host's pid means nothing here either.
                    (_, false, Some(gpu)) => format!("its GPU {gpu} is not on this host"),
                    (None, false, None) => "its pid is not among NVML's processes here".into(),
                    (Some(_), false, None) => {
                        "no GPU of its matches NVML's by UUID or PCI bus id".into()
                    }
                };
                (a, why)
            })
            .collect()
    }
}

/// Each writer's forecast per GPU made the one its process row shows (`seen_by_nvml`: in
/// the room NVML's figure for the process leaves), so that `--json`'s writer section, the
/// screen and the exporter give one figure, not one with and one without the memory the
/// allocator does not hold. A GPU no row lists for the writer keeps the writer's own.
pub fn forecasts_as_rows_see(allocators: &mut [AllocatorSnapshot], rows: &[ProcessRow]) {
    for writer in allocators.iter_mut() {
        let Some(pid) = writer.host_pid else {
            continue;
        };
        for (gpu, forecast) in writer.gpu_indices.iter().zip(writer.forecasts.iter_mut()) {
            let row = rows
                .iter()
                .find(|r| Some(r.gpu_index) == *gpu && r.nvml.pid == pid);
            if let Some(allocator) = row.and_then(|r| r.allocator.as_ref()) {
                forecast.clone_from(&allocator.forecast);
            }
        }
    }
}

/// A (process, GPU) pair NVML listed recently and lists no more. The snapshot carries it
/// so that the table, a paused screen, replay and the exporter's grace period all read the
/// same dead writer's last figures and OOMs, joined once.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExitedRow {
    pub gpu_index: u32,
    pub gpu_uuid: Arc<str>,
    pub pid: u32,
    /// When NVML last listed it.
    pub last_listed_ms: u64,
    /// Its process still runs: it left the GPU, it did not exit.
    pub left_gpu: bool,
    /// The last user and command the host read for it.
    pub user: Option<String>,
    pub command: Option<String>,
    /// The Kubernetes pod it ran in, when it ran in one.
    pub pod: Option<super::PodInfo>,
    /// The MIG instance it last ran in, on a GPU in MIG mode.
    #[serde(skip)]
    pub mig: Option<RowInstance>,
    /// What its allocator last published for this GPU (`RowProcess::Unlisted` join).
    pub allocator: Option<ProcessAllocator>,
    /// Its all-time peaks on this GPU, which outlive it.
    #[serde(skip)]
    pub peaks: ProcessPeaks,
}

/// Everything vramscope knows at one moment.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Snapshot {
    pub taken_at_ms: u64,
    pub driver: Option<DriverInfo>,
    /// Set when NVML could not be used at all.
    pub nvml_problem: Option<NvmlProblem>,
    pub devices: Vec<DeviceSnapshot>,
    pub processes: Vec<ProcessRow>,
    /// Rows NVML listed recently and no longer lists, GPU index then pid order.
    pub exited: Vec<ExitedRow>,
    pub host_memory: Option<Reading<HostMemory>>,
    /// The host's CPU busy share and load average, from the latest host pass.
    pub host_load: Option<HostLoad>,
    /// Every instrumented process vramscope reads a channel from, live or ended.
    pub allocators: Vec<AllocatorSnapshot>,
    /// Channel files refused, each with its reason.
    pub rejected_channels: Vec<String>,
}

impl Snapshot {
    /// Joins device samples with host facts (`host` sorted by pid) and allocator figures into
    /// process rows, GPU index then pid order.
    pub fn join_processes(
        devices: &[DeviceSnapshot],
        host: &[Arc<HostProcess>],
        allocators: &[AllocatorSnapshot],
    ) -> Vec<ProcessRow> {
        let mut rows = Vec::new();
        for device in devices {
            let Some(sample) = &device.sample else {
                continue;
            };
            let Ok(processes) = &sample.processes else {
                continue;
            };
            let gpu_uuid: Arc<str> = Arc::from(device.info.key());
            for process in processes {
                let host = by_pid(host, process.pid).cloned();
                let listed = RowProcess::listed(host.as_deref());
                let mig = sample
                    .mig_enabled()
                    .and_then(|m| m.instance_of_pid(process.pid))
                    .map(RowInstance::from);
                let allocator = allocator_of(allocators, process.pid, device.info.index, listed)
                    .map(|a| {
                        a.seen_by_nvml(NvmlBeside {
                            process_used: process.used_memory.as_ref().ok().copied(),
                            device_free: sample.memory.as_ref().ok().map(|m| m.free),
                        })
                    });
                let unjoined = match allocator {
                    Some(_) => None,
                    None => channel_of(allocators, process.pid, listed)
                        .filter(|c| !c.liveness.is_ended())
                        .and_then(AllocatorSnapshot::gpu_elsewhere)
                        .map(|gpu| format!("its GPU {gpu} is not on this host")),
                };
                rows.push(ProcessRow {
                    mig,
                    gpu_index: device.info.index,
                    gpu_uuid: Arc::clone(&gpu_uuid),
                    nvml: process.clone(),
                    allocator,
                    unjoined,
                    host,
                    // From the history, by the monitor that holds it.
                    peaks: ProcessPeaks::default(),
                    remembered: Remembered::default(),
                });
            }
        }
        rows.sort_by_key(|r| (r.gpu_index, r.nvml.pid));
        rows
    }
}

/// The allocator figures a process published for one GPU, from the channel `joined_channel`
/// picks for it.
pub fn allocator_of(
    allocators: &[AllocatorSnapshot],
    pid: u32,
    gpu_index: u32,
    process: RowProcess,
) -> Option<ProcessAllocator> {
    let channel = channel_of(allocators, pid, process)?;
    Some(ProcessAllocator {
        device: channel.on_gpu(gpu_index)?.clone(),
        peak: channel.peak_on_gpu(gpu_index).cloned(),
        ooms: channel.ooms_on_gpu(gpu_index),
        step: channel.step,
        steps_from: channel.steps_from,
        label: channel.label.clone(),
        liveness: channel.liveness,
        rank: channel.identity.rank,
        attached: channel.identity.attached,
        forecast: channel.forecast_on_gpu(gpu_index, NvmlBeside::NONE),
        step_peaks: channel.step_peaks_on_gpu(gpu_index),
    })
}

/// The channel host pid `pid`'s rows join (see `joined_channel`): its figures on each GPU,
/// and its rank and job for every row of the process.
pub fn channel_of(
    allocators: &[AllocatorSnapshot],
    pid: u32,
    process: RowProcess,
) -> Option<&AllocatorSnapshot> {
    let candidates = allocators.iter().filter(|a| a.host_pid == Some(pid));
    joined_channel(
        candidates,
        |a| a.liveness,
        |a| a.identity.starttime(),
        process,
    )
}

/// Reserved bytes of live instrumented processes on `gpu_index`, summed over the GPU's
/// process rows (`join_processes`): a channel counts only through the row of the pid the
/// channel sampler verified and NVML lists on this GPU, the one join every output uses. A
/// file whose pid is unverified (another user's claim, another pid namespace), or whose
/// process NVML lists on another GPU or on none, adds nothing to any GPU's share.
pub fn instrumented_reserved(rows: &[ProcessRow], gpu_index: u32) -> Option<u64> {
    let mut sum = None;
    let on_gpu = rows.iter().filter(|r| r.gpu_index == gpu_index);
    for allocator in on_gpu.filter_map(|r| r.allocator.as_ref()) {
        if let (true, Ok(reserved)) = (allocator.liveness.is_running(), &allocator.device.reserved)
        {
            // Saturating: the figures come from files other users' programs write.
            sum = Some(sum.unwrap_or(0_u64).saturating_add(*reserved));
        }
    }
    sum
}
