//! Running process lists and per-process utilisation samples.

#![allow(non_snake_case)]

use std::ffi::{c_uint, c_ulonglong};

use crate::call::{get, on_device, put, put_list};
use crate::ffi::{
    ARGUMENT_VERSION_MISMATCH, INVALID_ARGUMENT, NOT_FOUND, NvmlDevice, NvmlReturn,
    PROCESS_DETAIL_LIST_V1_VERSION, PROCESS_MODE_COMPUTE, PROCESS_MODE_GRAPHICS, PROCESS_MODE_MPS,
    ProcessDetail, ProcessDetailList, ProcessInfo, ProcessUtilizationSample,
};
use crate::scenario::{DeviceSpec, Process};
use crate::timeline::{
    mps_processes_at, process_detail, process_info, processes_at, samples_after,
};

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

/// The scenario's `mps` list, with the same protocol as the compute list.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetMPSComputeRunningProcesses_v3(
    device: NvmlDevice,
    infoCount: *mut c_uint,
    infos: *mut ProcessInfo,
) -> NvmlReturn {
    on_device(
        "nvmlDeviceGetMPSComputeRunningProcesses_v3",
        device,
        |ctx, d| {
            let list: Vec<ProcessInfo> = mps_processes_at(d, ctx.snap.t)
                .iter()
                .map(process_info)
                .collect();
            put_list(infoCount, infos, &list, Ok(()))
        },
    )
}

/// The list a `NVML_PROCESS_MODE_*` names at `t`.
fn list_for_mode(d: &DeviceSpec, t: f64, mode: c_uint) -> Result<&[Process], NvmlReturn> {
    let (compute, graphics) = processes_at(d, t);
    match mode {
        PROCESS_MODE_COMPUTE => Ok(compute),
        PROCESS_MODE_GRAPHICS => Ok(graphics),
        PROCESS_MODE_MPS => Ok(mps_processes_at(d, t)),
        _ => Err(INVALID_ARGUMENT),
    }
}

/// Versioned process list (`version` `0x01000018`, else 25) of 32-byte entries. The same
/// protocol as the `_v3` lists through `numProcArrayEntries`: none -> 0 and success; a NULL
/// `procArray` or too little room -> the count and `INSUFFICIENT_SIZE`; else written.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetRunningProcessDetailList(
    device: NvmlDevice,
    plist: *mut ProcessDetailList,
) -> NvmlReturn {
    on_device("nvmlDeviceGetRunningProcessDetailList", device, |ctx, d| {
        let mut list = get(plist.cast_const())?;
        if list.version != PROCESS_DETAIL_LIST_V1_VERSION {
            return Err(ARGUMENT_VERSION_MISMATCH);
        }
        let details: Vec<ProcessDetail> = list_for_mode(d, ctx.snap.t, list.mode)?
            .iter()
            .map(process_detail)
            .collect();
        let result = put_list(
            &raw mut list.num_proc_array_entries,
            list.proc_array,
            &details,
            Ok(()),
        );
        put(plist, list)?;
        result
    })
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
