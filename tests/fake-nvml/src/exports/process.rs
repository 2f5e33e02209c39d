//! Running process lists and per-process utilisation samples.

#![allow(non_snake_case)]

use std::ffi::{c_uint, c_ulonglong};

use crate::call::{get, on_any, put, put_list};
use crate::ffi::{
    ARGUMENT_VERSION_MISMATCH, INVALID_ARGUMENT, NOT_FOUND, NOT_SUPPORTED, NvmlDevice, NvmlReturn,
    PROCESS_DETAIL_LIST_V1_VERSION, PROCESS_MODE_COMPUTE, PROCESS_MODE_GRAPHICS, PROCESS_MODE_MPS,
    ProcessDetail, ProcessDetailList, ProcessInfo, ProcessInfoV1, ProcessUtilizationSample,
};
use crate::mig::mig_enabled;
use crate::scenario::Process;
use crate::timeline::{
    process_detail, process_info, process_info_v1, processes_for, samples_after,
};

/// A process list export: the list of `mode` (`NVML_PROCESS_MODE_*`), each process written as
/// `entry` lays it out (24 bytes for `_v3` and `_v2`, 16 for the unversioned calls).
fn list_call<T: Copy>(
    name: &'static str,
    device: NvmlDevice,
    infoCount: *mut c_uint,
    infos: *mut T,
    mode: c_uint,
    entry: fn(&Process) -> T,
) -> NvmlReturn {
    on_any(name, device, |ctx, d| {
        let list: Vec<T> = processes_for(ctx, d, mode)
            .unwrap_or_default()
            .iter()
            .map(entry)
            .collect();
        put_list(infoCount, infos, &list, Ok(()))
    })
}

/// One `extern "C"` process list export per line: its name (also the name its call counts
/// and faults go by), its entry type, the list it reads and how an entry is laid out.
macro_rules! list_exports {
    ($($(#[$doc:meta])* $name:ident: $entry:ty, $mode:ident, $fill:ident;)*) => {$(
        $(#[$doc])*
        #[unsafe(no_mangle)]
        pub extern "C" fn $name(
            device: NvmlDevice,
            infoCount: *mut c_uint,
            infos: *mut $entry,
        ) -> NvmlReturn {
            list_call(stringify!($name), device, infoCount, infos, $mode, $fill)
        }
    )*};
}

list_exports! {
    /// Probe with `*infoCount = 0` / NULL: `INSUFFICIENT_SIZE` and the count
    /// (success with count 0 when there are no processes).
    nvmlDeviceGetComputeRunningProcesses_v3: ProcessInfo, PROCESS_MODE_COMPUTE, process_info;
    nvmlDeviceGetGraphicsRunningProcesses_v3: ProcessInfo, PROCESS_MODE_GRAPHICS, process_info;
    /// The scenario's `mps` list, with the same protocol as the compute list.
    nvmlDeviceGetMPSComputeRunningProcesses_v3: ProcessInfo, PROCESS_MODE_MPS, process_info;
    /// The R450-R470 compute list: the `_v3` protocol and the same 24-byte entries.
    nvmlDeviceGetComputeRunningProcesses_v2: ProcessInfo, PROCESS_MODE_COMPUTE, process_info;
    nvmlDeviceGetGraphicsRunningProcesses_v2: ProcessInfo, PROCESS_MODE_GRAPHICS, process_info;
    /// The oldest compute list: the same protocol with 16-byte `nvmlProcessInfo_v1_t` entries
    /// (pid and memory, no instance ids).
    nvmlDeviceGetComputeRunningProcesses: ProcessInfoV1, PROCESS_MODE_COMPUTE, process_info_v1;
    nvmlDeviceGetGraphicsRunningProcesses: ProcessInfoV1, PROCESS_MODE_GRAPHICS, process_info_v1;
}

/// Versioned process list (`version` `0x01000018`, else 25) of 32-byte entries. The same
/// protocol as the `_v3` lists through `numProcArrayEntries`: none -> 0 and success; a NULL
/// `procArray` or too little room -> the count and `INSUFFICIENT_SIZE`; else written.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetRunningProcessDetailList(
    device: NvmlDevice,
    plist: *mut ProcessDetailList,
) -> NvmlReturn {
    on_any("nvmlDeviceGetRunningProcessDetailList", device, |ctx, d| {
        let mut list = get(plist.cast_const())?;
        if list.version != PROCESS_DETAIL_LIST_V1_VERSION {
            return Err(ARGUMENT_VERSION_MISMATCH);
        }
        let details: Vec<ProcessDetail> = processes_for(ctx, d, list.mode)
            .ok_or(INVALID_ARGUMENT)?
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

/// Samples with `timeStamp > lastSeenTimeStamp`; none -> `NOT_FOUND`. Not in MIG mode (on
/// the GPU or on a MIG device): `NOT_SUPPORTED`, as NVML.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetProcessUtilization(
    device: NvmlDevice,
    utilization: *mut ProcessUtilizationSample,
    processSamplesCount: *mut c_uint,
    lastSeenTimeStamp: c_ulonglong,
) -> NvmlReturn {
    on_any("nvmlDeviceGetProcessUtilization", device, |ctx, d| {
        if ctx.mig_instance().is_some() || mig_enabled(d) {
            return Err(NOT_SUPPORTED);
        }
        let samples = samples_after(d, ctx.snap.t, ctx.snap.wall_us, lastSeenTimeStamp);
        put_list(processSamplesCount, utilization, &samples, Err(NOT_FOUND))
    })
}
