//! GPM (GPU Performance Monitoring, Hopper and newer) per MIG GPU instance: samples are
//! allocated, filled with a GPU instance's state at the call's time, and two of them give
//! the instance's SM utilisation over the interval between them (the scenario's `sm_util`
//! at the later one).
//!
//! A sample handle is a number the fake hands out, never a pointer it follows: a freed or
//! invented handle is 2 `INVALID_ARGUMENT`, not a crash.

#![allow(non_snake_case)]

use std::collections::HashMap;
use std::ffi::{c_uint, c_void};
use std::sync::{Mutex, PoisonError};

use crate::call::{Target, get, on_device, put, run};
use crate::ffi::{
    ARGUMENT_VERSION_MISMATCH, GPM_METRIC_SM_UTIL, GPM_METRICS_GET_VERSION, GpmMetricsGet,
    INVALID_ARGUMENT, NOT_SUPPORTED, NvmlDevice, NvmlReturn, SUCCESS,
};

/// What a filled sample holds: whose it is and when it was taken.
#[derive(Clone, Copy, Debug)]
struct Filled {
    device: usize,
    gpu_instance_id: u32,
    t: f64,
}

struct Samples {
    next: usize,
    live: Option<HashMap<usize, Option<Filled>>>,
}

static SAMPLES: Mutex<Samples> = Mutex::new(Samples {
    next: 0,
    live: None,
});

/// Handles start here: far from anything a caller could mistake for a pointer it owns.
const HANDLE_BASE: usize = 0x6770_0000;

fn with_samples<T>(f: impl FnOnce(&mut Samples) -> T) -> T {
    f(&mut SAMPLES.lock().unwrap_or_else(PoisonError::into_inner))
}

/// A new, empty sample.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmSampleAlloc(gpmSample: *mut *mut c_void) -> NvmlReturn {
    run("nvmlGpmSampleAlloc", Target::System, |_| {
        let handle = with_samples(|s| {
            s.next += 1;
            let handle = HANDLE_BASE + s.next;
            s.live.get_or_insert_with(HashMap::new).insert(handle, None);
            handle
        });
        put(gpmSample, handle as *mut c_void)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmSampleFree(gpmSample: *mut c_void) -> NvmlReturn {
    run("nvmlGpmSampleFree", Target::System, |_| {
        let removed = with_samples(|s| {
            s.live
                .as_mut()
                .and_then(|l| l.remove(&(gpmSample as usize)))
        });
        removed.map(|_| ()).ok_or(INVALID_ARGUMENT)
    })
}

/// Fills `gpmSample` with GPU instance `gpuInstanceId` of `device` now. No GPM on the GPU
/// (`mig.gpm` false, or no MIG): 3; no such live GPU instance: 2.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmMigSampleGet(
    device: NvmlDevice,
    gpuInstanceId: c_uint,
    gpmSample: *mut c_void,
) -> NvmlReturn {
    on_device("nvmlGpmMigSampleGet", device, |ctx, d| {
        let mig = d
            .mig
            .as_ref()
            .filter(|m| m.gpm && m.current)
            .ok_or(NOT_SUPPORTED)?;
        let t = ctx.snap.t;
        let alive = mig
            .alive_entries(t)
            .into_iter()
            .any(|e| mig.instances[e].gpu_instance_id == gpuInstanceId);
        if !alive {
            return Err(INVALID_ARGUMENT);
        }
        let filled = Filled {
            device: ctx.index()?,
            gpu_instance_id: gpuInstanceId,
            t,
        };
        with_samples(|s| {
            let slot = s
                .live
                .as_mut()
                .and_then(|l| l.get_mut(&(gpmSample as usize)))
                .ok_or(INVALID_ARGUMENT)?;
            *slot = Some(filled);
            Ok(())
        })
    })
}

/// Version 1 only (else 25). Both samples filled, of the same GPU instance (else 2). Per
/// metric: `NVML_GPM_METRIC_SM_UTIL` is the instance's `sm_util` at the later sample (3 while
/// the timeline has none); any other metric 3.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmMetricsGet(metricsGet: *mut GpmMetricsGet) -> NvmlReturn {
    run("nvmlGpmMetricsGet", Target::System, |ctx| {
        let mut request = get(metricsGet.cast_const())?;
        if request.version != GPM_METRICS_GET_VERSION {
            return Err(ARGUMENT_VERSION_MISMATCH);
        }
        let filled = |h: *mut c_void| {
            with_samples(|s| s.live.as_ref()?.get(&(h as usize)).copied().flatten())
        };
        let (Some(first), Some(second)) = (filled(request.sample1), filled(request.sample2)) else {
            return Err(INVALID_ARGUMENT);
        };
        if (first.device, first.gpu_instance_id) != (second.device, second.gpu_instance_id) {
            return Err(INVALID_ARGUMENT);
        }
        let n = (request.num_metrics as usize).min(request.metrics.len());
        let later = if second.t >= first.t { second } else { first };
        let sm_util = ctx
            .snap
            .scenario
            .devices
            .get(later.device)
            .and_then(|d| d.mig.as_ref())
            .and_then(|m| {
                m.instances
                    .iter()
                    .find(|i| i.gpu_instance_id == later.gpu_instance_id)
            })
            .and_then(|i| i.sm_util_at(later.t));
        for metric in &mut request.metrics[..n] {
            match (metric.metric_id, sm_util) {
                (GPM_METRIC_SM_UTIL, Some(v)) => {
                    metric.nvml_return = SUCCESS;
                    metric.value = v;
                }
                _ => metric.nvml_return = NOT_SUPPORTED,
            }
        }
        put(metricsGet, request)
    })
}
