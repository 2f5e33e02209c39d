//! Init/shutdown, error strings, system queries, device count and handles.

#![allow(non_snake_case)]

use std::ffi::{c_char, c_int, c_uint};
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::call::{Target, guarded, put, put_str, run};
use crate::counters;
use crate::errors::error_string;
use crate::ffi::{INVALID_ARGUMENT, NOT_FOUND, NvmlDevice, NvmlReturn, SUCCESS, UNKNOWN};
use crate::state;

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit_v2() -> NvmlReturn {
    guarded("nvmlInit_v2", state::init)
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit() -> NvmlReturn {
    guarded("nvmlInit", state::init)
}

/// Flags are accepted and ignored.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> NvmlReturn {
    guarded("nvmlInitWithFlags", state::init)
}

/// Counts the init ref-count down and writes the counts file (if configured).
#[unsafe(no_mangle)]
pub extern "C" fn nvmlShutdown() -> NvmlReturn {
    guarded("nvmlShutdown", || {
        let code = state::shutdown();
        let _ = counters::write_to_env_path();
        code
    })
}

/// Returns a static, NUL-terminated description of `result`.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlErrorString(result: NvmlReturn) -> *const c_char {
    counters::record("nvmlErrorString");
    catch_unwind(|| error_string(result).as_ptr()).unwrap_or(c"Unknown Error".as_ptr())
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlSystemGetDriverVersion(version: *mut c_char, length: c_uint) -> NvmlReturn {
    run("nvmlSystemGetDriverVersion", Target::System, |ctx| {
        put_str(version, length, &ctx.snap.scenario.driver_version)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlSystemGetNVMLVersion(version: *mut c_char, length: c_uint) -> NvmlReturn {
    run("nvmlSystemGetNVMLVersion", Target::System, |ctx| {
        put_str(version, length, &ctx.snap.scenario.nvml_version)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlSystemGetCudaDriverVersion(cudaDriverVersion: *mut c_int) -> NvmlReturn {
    run("nvmlSystemGetCudaDriverVersion", Target::System, |ctx| {
        put(cudaDriverVersion, ctx.snap.scenario.cuda_version)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlSystemGetCudaDriverVersion_v2(cudaDriverVersion: *mut c_int) -> NvmlReturn {
    run("nvmlSystemGetCudaDriverVersion_v2", Target::System, |ctx| {
        put(cudaDriverVersion, ctx.snap.scenario.cuda_version)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetCount_v2(deviceCount: *mut c_uint) -> NvmlReturn {
    run("nvmlDeviceGetCount_v2", Target::System, |ctx| {
        let n = u32::try_from(ctx.snap.scenario.devices.len()).map_err(|_| UNKNOWN)?;
        put(deviceCount, n)
    })
}

/// Hands out `(index + 1) as nvmlDevice_t`.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    device: *mut NvmlDevice,
) -> NvmlReturn {
    run(
        "nvmlDeviceGetHandleByIndex_v2",
        Target::Index(index),
        |ctx| {
            if index as usize >= ctx.snap.scenario.devices.len() {
                return Err(INVALID_ARGUMENT);
            }
            put(device, (index as usize + 1) as NvmlDevice)
        },
    )
}

/// Not NVML: forces a write of the call counts to `$FAKE_NVML_COUNTS`.
/// Returns 0 on success, 6 (NOT_FOUND) when the variable is unset, 999 on an
/// I/O error. Not counted.
#[unsafe(no_mangle)]
pub extern "C" fn fakeNvmlWriteCounts() -> NvmlReturn {
    catch_unwind(AssertUnwindSafe(counters::write_to_env_path)).map_or(UNKNOWN, |r| match r {
        Ok(true) => SUCCESS,
        Ok(false) => NOT_FOUND,
        Err(_) => UNKNOWN,
    })
}
