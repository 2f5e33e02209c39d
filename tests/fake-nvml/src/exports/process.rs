//! Running process lists and per-process utilisation samples.

#![allow(non_snake_case)]

use std::ffi::{c_uint, c_ulonglong};

use crate::call::{on_device, put_list};
use crate::ffi::{NOT_FOUND, NvmlDevice, NvmlReturn, ProcessInfo, ProcessUtilizationSample};
use crate::timeline::{process_info, processes_at, samples_after};

fn list_call(
    name: &'static str,
    device: NvmlDevice,
    infoCount: *mut c_uint,
    infos: *mut ProcessInfo,
    graphics: bool,
) -> NvmlReturn {
    on_device(name, device, |ctx, d| {
        let (compute_list, graphics_list) = processes_at(d, ctx.snap.t);
        let list: Vec<ProcessInfo> = if graphics {
            graphics_list
        } else {
            compute_list
        }
        .iter()
        .map(process_info)
        .collect();
        put_list(infoCount, infos, &list, Ok(()))
    })
}

/// Probe with `*infoCount = 0` / NULL: `INSUFFICIENT_SIZE` and the count
/// (success with count 0 when there are no processes).
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    device: NvmlDevice,
    infoCount: *mut c_uint,
    infos: *mut ProcessInfo,
) -> NvmlReturn {
    list_call(
        "nvmlDeviceGetComputeRunningProcesses_v3",
        device,
        infoCount,
        infos,
        false,
    )
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetGraphicsRunningProcesses_v3(
    device: NvmlDevice,
    infoCount: *mut c_uint,
    infos: *mut ProcessInfo,
) -> NvmlReturn {
    list_call(
        "nvmlDeviceGetGraphicsRunningProcesses_v3",
        device,
        infoCount,
        infos,
        true,
    )
}

/// Samples with `timeStamp > lastSeenTimeStamp`; none -> `NOT_FOUND`.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetProcessUtilization(
    device: NvmlDevice,
    utilization: *mut ProcessUtilizationSample,
    processSamplesCount: *mut c_uint,
    lastSeenTimeStamp: c_ulonglong,
) -> NvmlReturn {
    on_device("nvmlDeviceGetProcessUtilization", device, |ctx, d| {
        let samples = samples_after(d, ctx.snap.t, ctx.snap.wall_us, lastSeenTimeStamp);
        put_list(processSamplesCount, utilization, &samples, Err(NOT_FOUND))
    })
}
