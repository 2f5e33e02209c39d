//! Step-wise evaluation of a device's timeline, process lists and samples at
//! scenario time `t`.

use std::ffi::c_uint;

use crate::call::Ctx;
use crate::ffi::{
    NO_INSTANCE, PROCESS_MODE_COMPUTE, PROCESS_MODE_GRAPHICS, PROCESS_MODE_MPS, ProcessDetail,
    ProcessInfo, ProcessInfoV1, ProcessUtilizationSample, VALUE_NOT_AVAILABLE,
};
use crate::mig::MigInstanceSpec;
use crate::scenario::{DeviceSpec, Point, Process, ProcessLists, UtilSample};

/// The device values in force at `t`: every point with `point.t <= t`
/// overlaid in order. Fields no such point sets stay `None` (NotSupported).
pub fn point_at(dev: &DeviceSpec, t: f64) -> Point {
    match dev.resolved_t.partition_point(|&at| at <= t) {
        0 => Point::default(),
        n => dev.resolved[n - 1].clone(),
    }
}

/// The process list of `mode` (`NVML_PROCESS_MODE_*`: compute, graphics, MPS) in force at
/// `t`: the last entry up to `t` that sets it (empty before the first); `None` for an unknown
/// mode.
pub fn processes_at(dev: &DeviceSpec, t: f64, mode: c_uint) -> Option<&[Process]> {
    lists_at(&dev.processes, t, mode)
}

/// The list of `mode` in force at `t` among step-wise `lists` (sorted by `t`).
pub fn lists_at(lists: &[ProcessLists], t: f64, mode: c_uint) -> Option<&[Process]> {
    let list: fn(&ProcessLists) -> Option<&[Process]> = match mode {
        PROCESS_MODE_COMPUTE => |p| p.compute.as_deref(),
        PROCESS_MODE_GRAPHICS => |p| p.graphics.as_deref(),
        PROCESS_MODE_MPS => |p| p.mps.as_deref(),
        _ => return None,
    };
    Some(
        lists
            .iter()
            .take_while(|p| p.t <= t)
            .filter_map(list)
            .last()
            .unwrap_or(&[]),
    )
}

/// The list of `mode` a call on `ctx`'s handle reads: a MIG device's own processes (with
/// its instance ids where the scenario leaves them out); on a GPU in MIG mode, the processes
/// of all its instances (what NVML gives a privileged caller on the parent handle); else the
/// GPU's list. `None` for an unknown mode.
pub fn processes_for(ctx: &Ctx, dev: &DeviceSpec, mode: c_uint) -> Option<Vec<Process>> {
    let t = ctx.snap.t;
    let with_ids = |inst: &MigInstanceSpec| -> Option<Vec<Process>> {
        let list = lists_at(&inst.processes, t, mode)?;
        Some(
            list.iter()
                .map(|p| Process {
                    gpu_instance_id: p.gpu_instance_id.or(Some(inst.gpu_instance_id)),
                    compute_instance_id: p.compute_instance_id.or(Some(inst.compute_instance_id)),
                    ..p.clone()
                })
                .collect(),
        )
    };
    if let Some(inst) = ctx.mig_instance() {
        return with_ids(inst);
    }
    match dev.mig.as_ref().filter(|m| m.current) {
        Some(mig) => {
            let mut all = Vec::new();
            for entry in mig.alive_entries(t) {
                all.extend(with_ids(&mig.instances[entry])?);
            }
            Some(all)
        }
        None => processes_at(dev, t, mode).map(<[Process]>::to_vec),
    }
}

/// The C struct for a scenario process.
pub fn process_info(p: &Process) -> ProcessInfo {
    ProcessInfo {
        pid: p.pid,
        used_gpu_memory: p.used_memory.unwrap_or(VALUE_NOT_AVAILABLE),
        gpu_instance_id: p.gpu_instance_id.unwrap_or(NO_INSTANCE),
        compute_instance_id: p.compute_instance_id.unwrap_or(NO_INSTANCE),
    }
}

/// The `nvmlProcessInfo_v1_t` for a scenario process: the same, without instance ids.
pub fn process_info_v1(p: &Process) -> ProcessInfoV1 {
    let info = process_info(p);
    ProcessInfoV1 {
        pid: info.pid,
        used_gpu_memory: info.used_gpu_memory,
    }
}

/// The `nvmlProcessDetail_v1_t` for a scenario process (no confidential computing: the
/// protected memory is 0).
pub fn process_detail(p: &Process) -> ProcessDetail {
    let info = process_info(p);
    ProcessDetail {
        pid: info.pid,
        used_gpu_memory: info.used_gpu_memory,
        gpu_instance_id: info.gpu_instance_id,
        compute_instance_id: info.compute_instance_id,
        used_gpu_cc_protected_memory: 0,
    }
}

/// CPU timestamp (µs since the Unix epoch) of scenario time `t`, given the
/// wall clock at the first successful init.
pub fn timestamp_us(wall_at_init_us: u64, t: f64) -> u64 {
    let offset = (t * 1e6).round();
    if offset.is_finite() && offset > 0.0 {
        wall_at_init_us.saturating_add(offset as u64)
    } else {
        wall_at_init_us
    }
}

/// Samples visible at `now` (`sample.t <= now`) whose timestamp is strictly
/// newer than `last_seen`, in time order (repeats of `every` entries included).
pub fn samples_after(
    dev: &DeviceSpec,
    now: f64,
    wall_at_init_us: u64,
    last_seen: u64,
) -> Vec<ProcessUtilizationSample> {
    // Sorted by `t`, and the timestamp grows with `t`: both ends are binary searches.
    let all = &dev.utilization_once;
    let times = &dev.utilization_once_t;
    let end = times.partition_point(|&t| t <= now);
    let start = times[..end].partition_point(|&t| timestamp_us(wall_at_init_us, t) <= last_seen);
    let mut out: Vec<(f64, &UtilSample)> = all[start..end].iter().map(|s| (s.t, s)).collect();
    if !dev.utilization_every.is_empty() {
        for s in &dev.utilization_every {
            repeats_after(s, now, wall_at_init_us, last_seen, |t| out.push((t, s)));
        }
        // Stable: samples at the same time keep the scenario's order.
        out.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out.into_iter()
        .map(|(t, s)| ProcessUtilizationSample {
            pid: s.pid,
            time_stamp: timestamp_us(wall_at_init_us, t),
            sm_util: s.sm,
            mem_util: s.mem,
            enc_util: s.enc,
            dec_util: s.dec,
        })
        .collect()
}

/// Calls `emit` with each time `s.t + k * every` (k >= 0) that is visible at `now`, before
/// `s.until`, and whose timestamp is newer than `last_seen`, in order.
fn repeats_after(
    s: &UtilSample,
    now: f64,
    wall_us: u64,
    last_seen: u64,
    mut emit: impl FnMut(f64),
) {
    let Some(every) = s.every else { return };
    let at = |k: u64| s.t + k as f64 * every;
    let shown = |t: f64| t <= now && s.until.is_none_or(|u| t < u);
    let newer = |t: f64| timestamp_us(wall_us, t) > last_seen;
    if !shown(s.t) {
        return;
    }
    // A first guess from the cursor, corrected by the exact tests on either side.
    let since = (last_seen.saturating_sub(wall_us) as f64 / 1e6 - s.t) / every;
    let mut k = if since.is_finite() && since > 0.0 {
        since.floor() as u64
    } else {
        0
    };
    while k > 0 && newer(at(k - 1)) {
        k -= 1;
    }
    while shown(at(k)) && !newer(at(k)) {
        k += 1;
    }
    while shown(at(k)) {
        emit(at(k));
        k += 1;
    }
}
