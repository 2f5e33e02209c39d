//! Static device properties: identity, PCI, memory, limits, fans, persistence.

#![allow(non_snake_case)]

use std::ffi::{c_char, c_uint};

use crate::call::{CallResult, get, on_any, on_device, put, put_str, supported};
use crate::ffi::{
    ARGUMENT_VERSION_MISMATCH, ConfComputeMemSizeInfo, INVALID_ARGUMENT, MEMORY_V2_VERSION, Memory,
    MemoryV2, NOT_SUPPORTED, NvmlDevice, NvmlReturn, PciInfo, UNKNOWN,
};
use crate::scenario::{DeviceSpec, parse_pci_bus_id};

/// `nvmlClockType_t` values.
pub const CLOCK_GRAPHICS: c_uint = 0;
pub const CLOCK_SM: c_uint = 1;
pub const CLOCK_MEM: c_uint = 2;
pub const CLOCK_VIDEO: c_uint = 3;

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetName(
    device: NvmlDevice,
    name: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    on_any("nvmlDeviceGetName", device, |ctx, d| {
        match ctx.mig_instance() {
            // NVML's name for a MIG device: the GPU's name and the profile.
            Some(inst) => put_str(name, length, &format!("{} MIG {}", d.name, inst.profile)),
            None => put_str(name, length, &d.name),
        }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetUUID(
    device: NvmlDevice,
    uuid: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    on_any("nvmlDeviceGetUUID", device, |ctx, d| {
        match ctx.mig_instance() {
            Some(inst) => put_str(uuid, length, &inst.uuid),
            None => put_str(uuid, length, &d.uuid),
        }
    })
}

/// Copies `s` into a fixed C char array, always leaving a NUL.
fn fill(dst: &mut [c_char], s: &str) {
    let n = s.len().min(dst.len().saturating_sub(1));
    for (d, b) in dst.iter_mut().zip(&s.as_bytes()[..n]) {
        *d = *b as c_char;
    }
}

/// The `nvmlPciInfo_t` for a device.
pub fn pci_info(d: &DeviceSpec) -> Result<PciInfo, NvmlReturn> {
    let loc = parse_pci_bus_id(&d.pci_bus_id).map_err(|_| INVALID_ARGUMENT)?;
    let mut info = PciInfo {
        domain: loc.domain,
        bus: loc.bus,
        device: loc.device,
        pci_device_id: d.pci_device_id,
        pci_sub_system_id: d.pci_subsystem_id,
        ..PciInfo::default()
    };
    let legacy = format!(
        "{:04X}:{:02X}:{:02X}.{:X}",
        loc.domain & 0xFFFF,
        loc.bus,
        loc.device,
        loc.function
    );
    fill(&mut info.bus_id_legacy, &legacy);
    fill(&mut info.bus_id, &d.pci_bus_id);
    Ok(info)
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetPciInfo_v3(device: NvmlDevice, pci: *mut PciInfo) -> NvmlReturn {
    on_device("nvmlDeviceGetPciInfo_v3", device, |_, d| {
        put(pci, pci_info(d)?)
    })
}

/// `(total, reserved, used)` in bytes at the call's time; a MIG device's own (nothing
/// reserved).
fn memory(ctx: &crate::call::Ctx, d: &DeviceSpec) -> Result<(u64, u64, u64), NvmlReturn> {
    if let Some(inst) = ctx.mig_instance() {
        let used = supported(inst.memory_used_at(ctx.snap.t))?;
        return Ok((inst.memory_total, 0, used));
    }
    let total = supported(d.memory_total)?;
    let used = supported(ctx.point()?.memory_used)?;
    Ok((total, d.memory_reserved, used))
}

/// v2: `used` excludes `reserved`; `free = total - reserved - used` (saturating).
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMemoryInfo_v2(
    device: NvmlDevice,
    memory_out: *mut MemoryV2,
) -> NvmlReturn {
    on_any("nvmlDeviceGetMemoryInfo_v2", device, |ctx, d| {
        let version = get(memory_out.cast_const())?.version;
        if version != MEMORY_V2_VERSION {
            return Err(ARGUMENT_VERSION_MISMATCH);
        }
        let (total, reserved, used) = memory(ctx, d)?;
        let info = MemoryV2 {
            version,
            total,
            reserved,
            free: total.saturating_sub(reserved).saturating_sub(used),
            used,
        };
        put(memory_out, info)
    })
}

/// v1: `used` includes `reserved`.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMemoryInfo(
    device: NvmlDevice,
    memory_out: *mut Memory,
) -> NvmlReturn {
    on_any("nvmlDeviceGetMemoryInfo", device, |ctx, d| {
        let (total, reserved, used) = memory(ctx, d)?;
        let info = Memory {
            total,
            free: total.saturating_sub(reserved).saturating_sub(used),
            used: used.saturating_add(reserved),
        };
        put(memory_out, info)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetEnforcedPowerLimit(
    device: NvmlDevice,
    limit: *mut c_uint,
) -> NvmlReturn {
    on_device("nvmlDeviceGetEnforcedPowerLimit", device, |_, d| {
        put(limit, supported(d.power_limit)?)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetPowerManagementLimit(
    device: NvmlDevice,
    limit: *mut c_uint,
) -> NvmlReturn {
    on_device("nvmlDeviceGetPowerManagementLimit", device, |_, d| {
        put(limit, supported(d.power_limit)?)
    })
}

fn max_clock(d: &DeviceSpec, clock_type: c_uint) -> Result<u32, NvmlReturn> {
    let v = match clock_type {
        CLOCK_GRAPHICS => d.max_graphics_clock.or(d.max_sm_clock),
        CLOCK_SM => d.max_sm_clock,
        CLOCK_MEM => d.max_mem_clock,
        CLOCK_VIDEO => d.max_video_clock,
        _ => return Err(INVALID_ARGUMENT),
    };
    supported(v)
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMaxClockInfo(
    device: NvmlDevice,
    type_: c_uint,
    clock: *mut c_uint,
) -> NvmlReturn {
    on_device("nvmlDeviceGetMaxClockInfo", device, |_, d| {
        put(clock, max_clock(d, type_)?)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetNumFans(device: NvmlDevice, numFans: *mut c_uint) -> NvmlReturn {
    on_device("nvmlDeviceGetNumFans", device, |_, d| {
        put(numFans, supported(d.num_fans)?)
    })
}

/// `NVML_FEATURE_ENABLED` (1) / `NVML_FEATURE_DISABLED` (0).
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetPersistenceMode(
    device: NvmlDevice,
    mode: *mut c_uint,
) -> NvmlReturn {
    on_device(
        "nvmlDeviceGetPersistenceMode",
        device,
        |_, d| -> CallResult { put(mode, c_uint::from(supported(d.persistence_mode)?)) },
    )
}

/// The device's NVML index (the handle's index).
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetIndex(device: NvmlDevice, index: *mut c_uint) -> NvmlReturn {
    on_device("nvmlDeviceGetIndex", device, |ctx, _| {
        put(index, c_uint::try_from(ctx.index()?).map_err(|_| UNKNOWN)?)
    })
}

/// `nvmlComputeMode_t` from `compute_mode`.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetComputeMode(device: NvmlDevice, mode: *mut c_uint) -> NvmlReturn {
    on_device("nvmlDeviceGetComputeMode", device, |_, d| {
        put(mode, supported(d.compute_mode)?)
    })
}

/// `NVML_FEATURE_ENABLED` (1) / `NVML_FEATURE_DISABLED` (0) from `display_mode`.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetDisplayMode(device: NvmlDevice, display: *mut c_uint) -> NvmlReturn {
    on_device("nvmlDeviceGetDisplayMode", device, |_, d| {
        put(display, c_uint::from(supported(d.display_mode)?))
    })
}

/// `NVML_FEATURE_ENABLED` (1) / `NVML_FEATURE_DISABLED` (0) from `display_active`.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetDisplayActive(
    device: NvmlDevice,
    isActive: *mut c_uint,
) -> NvmlReturn {
    on_device("nvmlDeviceGetDisplayActive", device, |_, d| {
        put(isActive, c_uint::from(supported(d.display_active)?))
    })
}

/// `NVML_DEVICE_MIG_ENABLE` (1) / `NVML_DEVICE_MIG_DISABLE` (0): from `mig` (`current`,
/// `pending`), or from `mig_mode` for both.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMigMode(
    device: NvmlDevice,
    currentMode: *mut c_uint,
    pendingMode: *mut c_uint,
) -> NvmlReturn {
    on_device("nvmlDeviceGetMigMode", device, |_, d| {
        if currentMode.is_null() || pendingMode.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        let (current, pending) = match &d.mig {
            Some(m) => (m.current, m.pending()),
            None => {
                let mode = supported(d.mig_mode)?;
                (mode, mode)
            }
        };
        put(currentMode, c_uint::from(current))?;
        put(pendingMode, c_uint::from(pending))
    })
}

/// 1 for a MIG device handle, 0 for a GPU's.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceIsMigDeviceHandle(
    device: NvmlDevice,
    isMigDevice: *mut c_uint,
) -> NvmlReturn {
    on_any("nvmlDeviceIsMigDeviceHandle", device, |ctx, _| {
        put(isMigDevice, c_uint::from(ctx.mig_instance().is_some()))
    })
}

/// Windows only (WDDM / TCC / MCDM): `NOT_SUPPORTED` on Linux, as here; 2 if both
/// out-pointers are NULL.
fn driver_model(current: *mut c_uint, pending: *mut c_uint) -> CallResult {
    if current.is_null() && pending.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    Err(NOT_SUPPORTED)
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetDriverModel(
    device: NvmlDevice,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> NvmlReturn {
    on_device("nvmlDeviceGetDriverModel", device, |_, _| {
        driver_model(current, pending)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetDriverModel_v2(
    device: NvmlDevice,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> NvmlReturn {
    on_device("nvmlDeviceGetDriverModel_v2", device, |_, _| {
        driver_model(current, pending)
    })
}

/// Confidential computing is never enabled: `NOT_SUPPORTED` (2 for a NULL pointer). Exported
/// together with `nvmlDeviceGetRunningProcessDetailList` as in drivers >= 550: nvitop takes
/// this one without that one for an R535 driver and reads process lists with a 32-byte stride.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetConfComputeMemSizeInfo(
    device: NvmlDevice,
    memInfo: *mut ConfComputeMemSizeInfo,
) -> NvmlReturn {
    on_device("nvmlDeviceGetConfComputeMemSizeInfo", device, |_, _| {
        if memInfo.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        Err(NOT_SUPPORTED)
    })
}
