//! C types of the NVML ABI (mirroring nvml-wrapper-sys 0.10.0 `bindings.rs`)
//! and the return codes the fake uses.

use std::ffi::c_void;
use std::mem::{offset_of, size_of};
use std::os::raw::{c_char, c_int, c_uint, c_ulonglong};

/// `nvmlReturn_t`.
pub type NvmlReturn = c_uint;
/// `nvmlDevice_t`: an opaque pointer. The fake hands out `(index + 1) as nvmlDevice_t`.
pub type NvmlDevice = *mut c_void;

pub const SUCCESS: NvmlReturn = 0;
pub const UNINITIALIZED: NvmlReturn = 1;
pub const INVALID_ARGUMENT: NvmlReturn = 2;
pub const NOT_SUPPORTED: NvmlReturn = 3;
pub const NOT_FOUND: NvmlReturn = 6;
pub const INSUFFICIENT_SIZE: NvmlReturn = 7;
pub const ARGUMENT_VERSION_MISMATCH: NvmlReturn = 25;
pub const UNKNOWN: NvmlReturn = 999;

/// `nvmlMemory_v2_t.version` expected by `nvmlDeviceGetMemoryInfo_v2`
/// (`sizeof(nvmlMemory_v2_t) | 2 << 24`).
pub const MEMORY_V2_VERSION: c_uint = 0x0200_0028;

/// `nvmlTemperature_v1_t.version` expected by `nvmlDeviceGetTemperatureV`
/// (`sizeof(nvmlTemperature_v1_t) | 1 << 24`).
pub const TEMPERATURE_V1_VERSION: c_uint = 0x0100_000C;

/// `nvmlProcessDetailList_v1_t.version` expected by `nvmlDeviceGetRunningProcessDetailList`
/// (`sizeof(nvmlProcessDetailList_v1_t) | 1 << 24`).
pub const PROCESS_DETAIL_LIST_V1_VERSION: c_uint = 0x0100_0018;

/// `nvmlProcessDetailList_t.mode` values (`NVML_PROCESS_MODE_*`).
pub const PROCESS_MODE_COMPUTE: c_uint = 0;
pub const PROCESS_MODE_GRAPHICS: c_uint = 1;
pub const PROCESS_MODE_MPS: c_uint = 2;

/// `NVML_VALUE_NOT_AVAILABLE` as written to `usedGpuMemory`.
pub const VALUE_NOT_AVAILABLE: u64 = u64::MAX;
/// Instance id meaning "no MIG instance".
pub const NO_INSTANCE: u32 = 0xFFFF_FFFF;

/// `nvmlMemory_t` (v1).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Memory {
    pub total: c_ulonglong,
    pub free: c_ulonglong,
    pub used: c_ulonglong,
}

/// `nvmlMemory_v2_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct MemoryV2 {
    pub version: c_uint,
    pub total: c_ulonglong,
    pub reserved: c_ulonglong,
    pub free: c_ulonglong,
    pub used: c_ulonglong,
}

/// `nvmlPciInfo_t` as filled by `nvmlDeviceGetPciInfo_v3`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct PciInfo {
    pub bus_id_legacy: [c_char; 16],
    pub domain: c_uint,
    pub bus: c_uint,
    pub device: c_uint,
    pub pci_device_id: c_uint,
    pub pci_sub_system_id: c_uint,
    pub bus_id: [c_char; 32],
}

/// `nvmlUtilization_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Utilization {
    pub gpu: c_uint,
    pub memory: c_uint,
}

/// `nvmlProcessInfo_t` (the v2 layout used by the `_v3` and `_v2` list functions).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessInfo {
    pub pid: c_uint,
    pub used_gpu_memory: c_ulonglong,
    pub gpu_instance_id: c_uint,
    pub compute_instance_id: c_uint,
}

/// `nvmlProcessInfo_v1_t`: the 16-byte layout of the unversioned list functions (drivers
/// before R450 knew no MIG instances).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessInfoV1 {
    pub pid: c_uint,
    pub used_gpu_memory: c_ulonglong,
}

/// `nvmlProcessUtilizationSample_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessUtilizationSample {
    pub pid: c_uint,
    pub time_stamp: c_ulonglong,
    pub sm_util: c_uint,
    pub mem_util: c_uint,
    pub enc_util: c_uint,
    pub dec_util: c_uint,
}

/// `nvmlTemperature_v1_t` (`nvmlDeviceGetTemperatureV`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct TemperatureV1 {
    pub version: c_uint,
    /// `nvmlTemperatureSensors_t`: only 0 (`NVML_TEMPERATURE_GPU`) exists.
    pub sensor_type: c_uint,
    /// °C (signed in the header).
    pub temperature: c_int,
}

/// `nvmlProcessDetail_v1_t`: a 32-byte process entry with the confidential-computing
/// protected memory (what the R535 `_v3` list functions briefly wrote by mistake).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessDetail {
    pub pid: c_uint,
    pub used_gpu_memory: c_ulonglong,
    pub gpu_instance_id: c_uint,
    pub compute_instance_id: c_uint,
    pub used_gpu_cc_protected_memory: c_ulonglong,
}

/// `nvmlProcessDetailList_v1_t`: the caller owns `proc_array` of `num_proc_array_entries`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ProcessDetailList {
    pub version: c_uint,
    /// `NVML_PROCESS_MODE_*`: compute 0, graphics 1, MPS 2.
    pub mode: c_uint,
    /// In: room in `proc_array`; out: the number of processes.
    pub num_proc_array_entries: c_uint,
    pub proc_array: *mut ProcessDetail,
}

/// `nvmlConfComputeMemSizeInfo_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ConfComputeMemSizeInfo {
    pub protected_mem_size_kib: c_ulonglong,
    pub unprotected_mem_size_kib: c_ulonglong,
}

/// `nvmlGpmMetric_t`: a metric's id in, its return code, value and names out.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GpmMetric {
    pub metric_id: c_uint,
    pub nvml_return: NvmlReturn,
    pub value: f64,
    pub short_name: *const c_char,
    pub long_name: *const c_char,
    pub unit: *const c_char,
}

/// `nvmlGpmMetricsGet_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GpmMetricsGet {
    pub version: c_uint,
    pub num_metrics: c_uint,
    pub sample1: *mut c_void,
    pub sample2: *mut c_void,
    pub metrics: [GpmMetric; 210],
}

/// `NVML_GPM_METRICS_GET_VERSION`.
pub const GPM_METRICS_GET_VERSION: c_uint = 1;
/// `NVML_GPM_METRIC_SM_UTIL`.
pub const GPM_METRIC_SM_UTIL: c_uint = 2;

// Layout guards: these must match the C header (NVML 13.0.39 via nvml-wrapper-sys 0.10.0).
const _: () = assert!(size_of::<Memory>() == 24);
const _: () = assert!(size_of::<MemoryV2>() == 40);
const _: () = assert!(offset_of!(MemoryV2, total) == 8);
const _: () = assert!(offset_of!(MemoryV2, used) == 32);
const _: () = assert!(size_of::<MemoryV2>() as u32 | (2 << 24) == MEMORY_V2_VERSION);
const _: () = assert!(size_of::<PciInfo>() == 68);
const _: () = assert!(offset_of!(PciInfo, domain) == 16);
const _: () = assert!(offset_of!(PciInfo, bus_id) == 36);
const _: () = assert!(size_of::<Utilization>() == 8);
const _: () = assert!(size_of::<ProcessInfo>() == 24);
const _: () = assert!(offset_of!(ProcessInfo, used_gpu_memory) == 8);
const _: () = assert!(offset_of!(ProcessInfo, gpu_instance_id) == 16);
const _: () = assert!(size_of::<ProcessInfoV1>() == 16);
const _: () = assert!(offset_of!(ProcessInfoV1, used_gpu_memory) == 8);
const _: () = assert!(size_of::<ProcessUtilizationSample>() == 32);
const _: () = assert!(offset_of!(ProcessUtilizationSample, time_stamp) == 8);
const _: () = assert!(offset_of!(ProcessUtilizationSample, sm_util) == 16);
const _: () = assert!(size_of::<NvmlDevice>() == size_of::<usize>());
const _: () = assert!(size_of::<TemperatureV1>() == 12);
const _: () = assert!(size_of::<TemperatureV1>() as u32 | (1 << 24) == TEMPERATURE_V1_VERSION);
const _: () = assert!(size_of::<ProcessDetail>() == 32);
const _: () = assert!(offset_of!(ProcessDetail, used_gpu_memory) == 8);
const _: () = assert!(offset_of!(ProcessDetail, gpu_instance_id) == 16);
const _: () = assert!(offset_of!(ProcessDetail, used_gpu_cc_protected_memory) == 24);
const _: () = assert!(size_of::<ProcessDetailList>() == 24);
const _: () = assert!(offset_of!(ProcessDetailList, proc_array) == 16);
const _: () =
    assert!(size_of::<ProcessDetailList>() as u32 | (1 << 24) == PROCESS_DETAIL_LIST_V1_VERSION);
const _: () = assert!(size_of::<ConfComputeMemSizeInfo>() == 16);
const _: () = assert!(size_of::<GpmMetric>() == 40);
const _: () = assert!(offset_of!(GpmMetric, value) == 8);
const _: () = assert!(offset_of!(GpmMetricsGet, metrics) == 24);
const _: () = assert!(size_of::<GpmMetricsGet>() == 24 + 210 * 40);
