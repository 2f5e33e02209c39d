//! MIG device enumeration: the GPU's slots, MIG device handles, their parent and their
//! GPU / compute instance ids (see `mig.rs` for how handles stay tied to one instance).

#![allow(non_snake_case)]

use std::ffi::c_uint;

use crate::call::{on_any, on_device, put};
use crate::ffi::{INVALID_ARGUMENT, NOT_FOUND, NOT_SUPPORTED, NvmlDevice, NvmlReturn};
use crate::mig::handle_of;

/// `max_devices` while MIG is on; 0 when the GPU has no MIG or it is off ("Returns zero if
/// MIG is not supported or enabled").
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMaxMigDeviceCount(
    device: NvmlDevice,
    count: *mut c_uint,
) -> NvmlReturn {
    on_device("nvmlDeviceGetMaxMigDeviceCount", device, |_, d| {
        let n = d
            .mig
            .as_ref()
            .filter(|m| m.current)
            .map_or(0, |m| m.max_devices);
        put(count, n)
    })
}

/// The handle of the `index`-th instance alive now (scenario order). MIG off or absent: 3;
/// `index` past `max_devices`: 2; no instance at `index`: 6 `NOT_FOUND`.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMigDeviceHandleByIndex(
    device: NvmlDevice,
    index: c_uint,
    migDevice: *mut NvmlDevice,
) -> NvmlReturn {
    on_device("nvmlDeviceGetMigDeviceHandleByIndex", device, |ctx, d| {
        if migDevice.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        let mig = d.mig.as_ref().filter(|m| m.current).ok_or(NOT_SUPPORTED)?;
        if index >= mig.max_devices {
            return Err(INVALID_ARGUMENT);
        }
        let entry = *mig
            .alive_entries(ctx.snap.t)
            .get(index as usize)
            .ok_or(NOT_FOUND)?;
        put(migDevice, handle_of(ctx.index()?, entry) as NvmlDevice)
    })
}

/// The GPU a MIG device handle belongs to; a GPU's own handle: 2.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetDeviceHandleFromMigDeviceHandle(
    migDevice: NvmlDevice,
    device: *mut NvmlDevice,
) -> NvmlReturn {
    on_any(
        "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
        migDevice,
        |ctx, _| {
            ctx.mig_instance().ok_or(INVALID_ARGUMENT)?;
            put(device, (ctx.index()? + 1) as NvmlDevice)
        },
    )
}

/// A MIG device's GPU instance id; a GPU's own handle: 3.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetGpuInstanceId(device: NvmlDevice, id: *mut c_uint) -> NvmlReturn {
    on_any("nvmlDeviceGetGpuInstanceId", device, |ctx, _| {
        put(id, ctx.mig_instance().ok_or(NOT_SUPPORTED)?.gpu_instance_id)
    })
}

/// A MIG device's compute instance id; a GPU's own handle: 3.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetComputeInstanceId(
    device: NvmlDevice,
    id: *mut c_uint,
) -> NvmlReturn {
    on_any("nvmlDeviceGetComputeInstanceId", device, |ctx, _| {
        put(
            id,
            ctx.mig_instance().ok_or(NOT_SUPPORTED)?.compute_instance_id,
        )
    })
}
