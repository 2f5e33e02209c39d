//! What NVML tells us about a GPU: static facts read once, and one sample per tick.

use super::absent::{Absent, Reading};
pub use super::memory::MemoryInfo;
use super::mig::{MigState, MigUuid};
use super::peak_holders::PeakHolders;
use serde::Serialize;

/// Driver-wide facts, read once at start.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DriverInfo {
    pub driver_version: Reading<String>,
    /// CUDA driver API version as NVML encodes it (12040 = 12.4).
    pub cuda_version: Reading<i32>,
    pub nvml_version: Reading<String>,
}

impl DriverInfo {
    /// `12.4` from NVML's `12040`.
    pub fn cuda_label(&self) -> Option<String> {
        self.cuda_version
            .as_ref()
            .ok()
            .map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10))
    }
}

/// Facts about one GPU that do not change while it is plugged in.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceInfo {
    /// NVML index: unstable across reboots and not the CUDA index, hence the UUID key.
    pub index: u32,
    pub name: Reading<String>,
    pub uuid: Reading<String>,
    pub pci_bus_id: Reading<String>,
    pub memory_total: Reading<u64>,
    /// The power limit set by the administrator, shown when a sample lacks the enforced one.
    pub power_limit_mw: Reading<u32>,
}

impl DeviceInfo {
    /// The UUID when readable, else a stand-in stable for this run: keys history and joins.
    pub fn key(&self) -> String {
        match &self.uuid {
            Ok(uuid) => uuid.clone(),
            Err(_) => format!("index-{}", self.index),
        }
    }

    /// Name for headings; `GPU 3` when NVML cannot name it.
    pub fn display_name(&self) -> String {
        match &self.name {
            Ok(name) => name.clone(),
            Err(_) => format!("GPU {}", self.index),
        }
    }
}

/// Which NVML process lists a pid appeared in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessKind {
    Compute,
    Graphics,
    ComputeAndGraphics,
}

impl ProcessKind {
    /// nvidia-smi's one-letter type column.
    pub fn letter(self) -> &'static str {
        match self {
            ProcessKind::Compute => "C",
            ProcessKind::Graphics => "G",
            ProcessKind::ComputeAndGraphics => "C+G",
        }
    }
}

/// One process on one GPU, as NVML reports it (pid is the host pid).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GpuProcess {
    pub pid: u32,
    pub kind: ProcessKind,
    pub used_memory: Reading<u64>,
    pub sm_util: Reading<u32>,
    pub mem_util: Reading<u32>,
    pub enc_util: Reading<u32>,
    pub dec_util: Reading<u32>,
}

/// Why NVML's compute or graphics process list was not read (`None`: read, or `processes`
/// itself is absent with the reason).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ListGaps {
    pub compute: Option<Absent>,
    pub graphics: Option<Absent>,
}

/// The highest used device memory read since the GPU's previous sample, and when it was read.
/// The fast memory sampling (`--peak-interval`) reads used memory alone several times per
/// refresh, so a spike shorter than the refresh interval shows here although the sample's own
/// `memory` missed it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MemoryPeak {
    pub used: u64,
    pub at_ms: u64,
    /// What was read of the processes at that moment, so the fold can name the spike's owner
    /// (`peak_owner::owner_of`).
    pub holders: PeakHolders,
}

/// Everything read from one GPU in one tick.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceSample {
    pub index: u32,
    /// Wall time the sample was taken, ms since the Unix epoch.
    pub at_ms: u64,
    pub memory: Reading<MemoryInfo>,
    /// The highest used memory since the previous sample, this sample's own reading included;
    /// `None` where the fast memory sampling is off or read nothing.
    pub memory_peak: Option<MemoryPeak>,
    pub gpu_util: Reading<u32>,
    pub mem_util: Reading<u32>,
    pub temperature_c: Reading<u32>,
    pub power_mw: Reading<u32>,
    pub power_limit_mw: Reading<u32>,
    pub sm_clock_mhz: Reading<u32>,
    pub mem_clock_mhz: Reading<u32>,
    /// Fan speed in percent of the first fan; datacentre GPUs have none.
    pub fan_percent: Reading<u32>,
    pub encoder_util: Reading<u32>,
    pub decoder_util: Reading<u32>,
    /// NVML clock-throttle reason bits.
    pub throttle_reasons: Reading<u64>,
    pub pstate: Reading<u32>,
    pub ecc_corrected: Reading<u64>,
    pub ecc_uncorrected: Reading<u64>,
    /// PCIe throughput in KB/s; `None` when not sampled (off by default: the call blocks ~20 ms).
    pub pcie_tx_kbs: Option<Reading<u32>>,
    pub pcie_rx_kbs: Option<Reading<u32>>,
    pub processes: Reading<Vec<GpuProcess>>,
    /// A process list that could not be read while the other could: `processes` then holds
    /// the other list's processes, and this says which list is missing and why.
    pub list_gaps: ListGaps,
    /// The GPU stopped answering (`GpuIsLost`): the panel says so rather than showing old figures.
    pub lost: bool,
    /// MIG mode and instances; `None` for a GPU without MIG, or with MIG off and nothing
    /// pending.
    pub mig: Option<MigState>,
}

impl DeviceSample {
    /// A sample of a GPU none of whose figures could be read, each absent for `why`.
    pub fn unreadable(index: u32, at_ms: u64, why: Absent) -> Self {
        fn e<T>(why: &Absent) -> Reading<T> {
            Err(why.clone())
        }
        DeviceSample {
            index,
            at_ms,
            memory: e(&why),
            memory_peak: None,
            gpu_util: e(&why),
            mem_util: e(&why),
            temperature_c: e(&why),
            power_mw: e(&why),
            power_limit_mw: e(&why),
            sm_clock_mhz: e(&why),
            mem_clock_mhz: e(&why),
            fan_percent: e(&why),
            encoder_util: e(&why),
            decoder_util: e(&why),
            throttle_reasons: e(&why),
            pstate: e(&why),
            ecc_corrected: e(&why),
            ecc_uncorrected: e(&why),
            pcie_tx_kbs: None,
            pcie_rx_kbs: None,
            processes: e(&why),
            list_gaps: ListGaps::default(),
            lost: why == Absent::GpuLost,
            mig: None,
        }
    }

    /// The MIG state when MIG is on (instances exist or may).
    pub fn mig_enabled(&self) -> Option<&MigState> {
        self.mig.as_ref().filter(|m| m.enabled)
    }
}

/// Names of the throttle reasons set in NVML's bitmask, most important first.
pub fn throttle_reason_names(bits: u64) -> Vec<&'static str> {
    // Bit values from nvml.h's nvmlClocksThrottleReason* constants.
    const NAMES: [(u64, &str); 9] = [
        (0x08, "hw-slowdown"),
        (0x40, "hw-thermal"),
        (0x80, "hw-power-brake"),
        (0x20, "sw-thermal"),
        (0x04, "power-cap"),
        (0x10, "sync-boost"),
        (0x02, "app-clocks"),
        (0x100, "display-clocks"),
        (0x01, "idle"),
    ];
    NAMES
        .iter()
        .filter(|(bit, _)| bits & bit != 0)
        .map(|(_, name)| *name)
        .collect()
}

/// The MIG device UUIDs of a sample's instances.
pub fn mig_uuids(sample: &DeviceSample) -> Vec<MigUuid> {
    let Some(Ok(instances)) = sample.mig_enabled().map(|m| &m.instances) else {
        return Vec::new();
    };
    instances
        .iter()
        .filter_map(|i| i.uuid.as_ref().ok())
        .map(|uuid| MigUuid {
            uuid: uuid.clone(),
            gpu: sample.index,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Absent;

    #[test]
    fn cuda_version_reads_like_nvidia_smi() {
        let info = DriverInfo {
            driver_version: Ok("550.54.15".into()),
            cuda_version: Ok(12040),
            nvml_version: Err(Absent::NotSupported),
        };
        assert_eq!(info.cuda_label().as_deref(), Some("12.4"));
    }

    #[test]
    fn throttle_bits_name_each_reason() {
        assert_eq!(throttle_reason_names(0x1 | 0x4), vec!["power-cap", "idle"]);
        assert!(throttle_reason_names(0).is_empty());
    }
}
