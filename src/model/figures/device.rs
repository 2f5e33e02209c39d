//! A GPU's figures, in the order `--json` and `--csv` give them. Where dcgm-exporter has the
//! figure, its family is named so `serve` keeps dashboards working; vramscope's own family is
//! in base units.

use super::{Figure, Unit};

pub const INDEX: Figure = Figure::new("index", Unit::Id, "GPU");
pub const UUID: Figure = Figure::new("uuid", Unit::Text, "UUID");
pub const NAME: Figure = Figure::new("name", Unit::Text, "name");
pub const PCI_BUS_ID: Figure = Figure::new("pci_bus_id", Unit::Text, "bus id");
pub const SAMPLED_AT_MS: Figure = Figure::new("sampled_at_ms", Unit::UnixMillis, "sampled");
/// A driver call for the GPU hangs: its sampled figures are old.
pub const STALE: Figure =
    Figure::new("stale", Unit::Flag, "stale").in_family("vramscope_gpu_stale");
/// The GPU stopped answering (fell off the bus).
pub const LOST: Figure = Figure::new("lost", Unit::Flag, "lost").in_family("vramscope_gpu_lost");
pub const MEMORY_TOTAL: Figure = Figure::new("memory_total", Unit::Bytes, "mem total")
    .in_family("vramscope_gpu_memory_total_bytes")
    .as_dcgm("DCGM_FI_DEV_FB_TOTAL");
/// What the driver keeps for itself, where its memory call says.
pub const MEMORY_RESERVED: Figure =
    Figure::new("memory_reserved", Unit::Bytes, "mem reserved").as_dcgm("DCGM_FI_DEV_FB_RESERVED");
/// NVML's `used`.
pub const MEMORY_USED: Figure = Figure::new("memory_used", Unit::Bytes, "mem")
    .in_family("vramscope_gpu_memory_used_bytes")
    .as_dcgm("DCGM_FI_DEV_FB_USED");
pub const MEMORY_FREE: Figure =
    Figure::new("memory_free", Unit::Bytes, "mem free").as_dcgm("DCGM_FI_DEV_FB_FREE");
/// The highest memory in use between two samples, as the fast memory sampling read it.
pub const MEMORY_USED_PEAK: Figure = Figure::new("memory_used_peak", Unit::Bytes, "peak");
pub const MEMORY_USED_PEAK_AT_MS: Figure =
    Figure::new("memory_used_peak_at_ms", Unit::UnixMillis, "peak at");
/// The process that made that peak.
pub const MEMORY_USED_PEAK_PID: Figure =
    Figure::new("memory_used_peak_pid", Unit::Id, "peak owner");
pub const GPU_UTIL: Figure =
    Figure::new("gpu_util", Unit::Percent, "util").as_dcgm("DCGM_FI_DEV_GPU_UTIL");
pub const MEM_UTIL: Figure =
    Figure::new("mem_util", Unit::Percent, "mem util").as_dcgm("DCGM_FI_DEV_MEM_COPY_UTIL");
pub const TEMPERATURE_C: Figure = Figure::new("temperature_c", Unit::Celsius, "temp")
    .as_dcgm("DCGM_FI_DEV_GPU_TEMP")
    .was(&["temperature"]);
pub const POWER_MW: Figure = Figure::new("power_mw", Unit::Milliwatts, "power")
    .as_dcgm("DCGM_FI_DEV_POWER_USAGE")
    .was(&["power"]);
/// The enforced limit; dcgm-exporter's default counters give the management limit instead,
/// which the cluster view reads where the enforced one is missing.
pub const POWER_LIMIT_MW: Figure = Figure::new("power_limit_mw", Unit::Milliwatts, "power limit")
    .as_dcgm("DCGM_FI_DEV_ENFORCED_POWER_LIMIT")
    .dcgm_default("DCGM_FI_DEV_POWER_MGMT_LIMIT");
pub const SM_CLOCK_MHZ: Figure = Figure::new("sm_clock_mhz", Unit::Megahertz, "SM clock")
    .as_dcgm("DCGM_FI_DEV_SM_CLOCK")
    .was(&["sm_clock"]);
pub const MEM_CLOCK_MHZ: Figure = Figure::new("mem_clock_mhz", Unit::Megahertz, "mem clock")
    .as_dcgm("DCGM_FI_DEV_MEM_CLOCK")
    .was(&["mem_clock"]);
pub const FAN_PERCENT: Figure =
    Figure::new("fan_percent", Unit::Percent, "fan").as_dcgm("DCGM_FI_DEV_FAN_SPEED");
pub const ENCODER_UTIL: Figure =
    Figure::new("encoder_util", Unit::Percent, "enc").as_dcgm("DCGM_FI_DEV_ENC_UTIL");
pub const DECODER_UTIL: Figure =
    Figure::new("decoder_util", Unit::Percent, "dec").as_dcgm("DCGM_FI_DEV_DEC_UTIL");
pub const PSTATE: Figure =
    Figure::new("pstate", Unit::Level, "pstate").as_dcgm("DCGM_FI_DEV_PSTATE");
pub const THROTTLE_REASONS: Figure = Figure::new("throttle_reasons", Unit::Bitmask, "throttle")
    .as_dcgm("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS");
/// Both ECC counters are `ECC` to a reader of reasons: one call fails for both.
pub const ECC_CORRECTED: Figure = Figure::new("ecc_corrected", Unit::Count, "ECC")
    .in_family("vramscope_gpu_ecc_corrected_errors_total");
pub const ECC_UNCORRECTED: Figure = Figure::new("ecc_uncorrected", Unit::Count, "ECC")
    .in_family("vramscope_gpu_ecc_uncorrected_errors_total");
pub const PCIE_TX_KBS: Figure = Figure::new("pcie_tx_kbs", Unit::KilobytesPerSecond, "PCIe")
    .in_family("vramscope_gpu_pcie_tx_bytes_per_second");
pub const PCIE_RX_KBS: Figure = Figure::new("pcie_rx_kbs", Unit::KilobytesPerSecond, "PCIe")
    .in_family("vramscope_gpu_pcie_rx_bytes_per_second");
/// What the caching allocators of running instrumented processes hold on the GPU.
pub const INSTRUMENTED_RESERVED: Figure = Figure::new(
    "instrumented_reserved",
    Unit::Bytes,
    "instrumented reserved",
)
.in_family("vramscope_gpu_instrumented_reserved_bytes");
/// Processes NVML lists on the GPU (a pid in both lists counts once).
pub const PROCESS_COUNT: Figure =
    Figure::new("process_count", Unit::Count, "processes").in_family("vramscope_gpu_processes");
pub const COMPUTE_PROCESS_COUNT: Figure =
    Figure::new("compute_process_count", Unit::Count, "compute process list");
pub const GRAPHICS_PROCESS_COUNT: Figure = Figure::new(
    "graphics_process_count",
    Unit::Count,
    "graphics process list",
);
pub const MIG_MODE: Figure = Figure::new("mig_mode", Unit::Text, "MIG");
pub const MIG_PENDING: Figure = Figure::new("mig_pending", Unit::Text, "MIG pending");
pub const MIG_INSTANCE_COUNT: Figure =
    Figure::new("mig_instance_count", Unit::Count, "MIG instances");

/// Every GPU figure, in output order.
pub const ALL: &[&Figure] = &[
    &INDEX,
    &UUID,
    &NAME,
    &PCI_BUS_ID,
    &SAMPLED_AT_MS,
    &STALE,
    &LOST,
    &MEMORY_TOTAL,
    &MEMORY_RESERVED,
    &MEMORY_USED,
    &MEMORY_FREE,
    &MEMORY_USED_PEAK,
    &MEMORY_USED_PEAK_AT_MS,
    &MEMORY_USED_PEAK_PID,
    &GPU_UTIL,
    &MEM_UTIL,
    &TEMPERATURE_C,
    &POWER_MW,
    &POWER_LIMIT_MW,
    &SM_CLOCK_MHZ,
    &MEM_CLOCK_MHZ,
    &FAN_PERCENT,
    &ENCODER_UTIL,
    &DECODER_UTIL,
    &PSTATE,
    &THROTTLE_REASONS,
    &ECC_CORRECTED,
    &ECC_UNCORRECTED,
    &PCIE_TX_KBS,
    &PCIE_RX_KBS,
    &INSTRUMENTED_RESERVED,
    &PROCESS_COUNT,
    &COMPUTE_PROCESS_COUNT,
    &GRAPHICS_PROCESS_COUNT,
    &MIG_MODE,
    &MIG_PENDING,
    &MIG_INSTANCE_COUNT,
];
