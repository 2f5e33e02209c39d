//! The latest state of everything, joined: what one-shot output prints and what the TUI's
//! tables are built from. Recording and the exporter will read the same type.

use super::absent::Reading;
use super::{
    DeviceInfo, DeviceSample, DriverInfo, GpuProcess, HostMemory, HostProcess, NvmlProblem,
};
use serde::Serialize;

/// One GPU: its static facts and its latest sample.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceSnapshot {
    pub info: DeviceInfo,
    pub sample: Option<DeviceSample>,
    /// No sample arrived for several intervals: an NVML call is blocking. Figures shown are old.
    pub stale: bool,
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
    pub gpu_uuid: String,
    pub nvml: GpuProcess,
    pub host: Option<HostProcess>,
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
    pub host_memory: Option<Reading<HostMemory>>,
}

impl Snapshot {
    /// Joins device samples with host facts into process rows, GPU index then pid order.
    pub fn join_processes(devices: &[DeviceSnapshot], host: &[HostProcess]) -> Vec<ProcessRow> {
        let mut rows = Vec::new();
        for device in devices {
            let Some(sample) = &device.sample else {
                continue;
            };
            let Ok(processes) = &sample.processes else {
                continue;
            };
            for process in processes {
                rows.push(ProcessRow {
                    gpu_index: device.info.index,
                    gpu_uuid: device.info.key(),
                    nvml: process.clone(),
                    host: host.iter().find(|h| h.pid == process.pid).cloned(),
                });
            }
        }
        rows.sort_by_key(|r| (r.gpu_index, r.nvml.pid));
        rows
    }
}
