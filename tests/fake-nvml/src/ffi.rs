//! C types of the NVML ABI (mirroring nvml-wrapper-sys 0.10.0 `bindings.rs`)
//! and the return codes the fake uses.

use std::ffi::c_void;
use std::mem::{offset_of, size_of};
use std::os::raw::{c_char, c_uint, c_ulonglong};

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

/// `nvmlProcessInfo_t` (the v2 layout used by the `_v3` list functions).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessInfo {
    pub pid: c_uint,
    pub used_gpu_memory: c_ulonglong,
    pub gpu_instance_id: c_uint,
    pub compute_instance_id: c_uint,
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
const _: () = assert!(size_of::<ProcessUtilizationSample>() == 32);
const _: () = assert!(offset_of!(ProcessUtilizationSample, time_stamp) == 8);
const _: () = assert!(offset_of!(ProcessUtilizationSample, sm_util) == 16);
const _: () = assert!(size_of::<NvmlDevice>() == size_of::<usize>());
