//! Step-wise evaluation of a device's timeline, process lists and samples at
//! scenario time `t`.

use crate::ffi::{NO_INSTANCE, ProcessInfo, ProcessUtilizationSample, VALUE_NOT_AVAILABLE};
use crate::scenario::{DeviceSpec, Point, Process};

/// The device values in force at `t`: every point with `point.t <= t`
/// overlaid in order. Fields no such point sets stay `None` (NotSupported).
pub fn point_at(dev: &DeviceSpec, t: f64) -> Point {
    match dev.resolved.partition_point(|p| p.t <= t) {
        0 => Point::default(),
        n => dev.resolved[n - 1].clone(),
    }
}

/// The compute and graphics process lists in force at `t` (empty before the
/// first entry).
pub fn processes_at(dev: &DeviceSpec, t: f64) -> (&[Process], &[Process]) {
    let mut compute: &[Process] = &[];
    let mut graphics: &[Process] = &[];
    for entry in dev.processes.iter().take_while(|p| p.t <= t) {
        if let Some(list) = &entry.compute {
            compute = list;
        }
        if let Some(list) = &entry.graphics {
            graphics = list;
        }
    }
    (compute, graphics)
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
/// newer than `last_seen`, in time order.
pub fn samples_after(
    dev: &DeviceSpec,
    now: f64,
    wall_at_init_us: u64,
    last_seen: u64,
) -> Vec<ProcessUtilizationSample> {
    // Sorted by `t`, and the timestamp grows with `t`: both ends are binary searches.
    let all = &dev.process_utilization;
    let end = all.partition_point(|s| s.t <= now);
    let start = all[..end].partition_point(|s| timestamp_us(wall_at_init_us, s.t) <= last_seen);
    all[start..end]
        .iter()
        .map(|s| ProcessUtilizationSample {
            pid: s.pid,
            time_stamp: timestamp_us(wall_at_init_us, s.t),
            sm_util: s.sm,
            mem_util: s.mem,
            enc_util: s.enc,
            dec_util: s.dec,
        })
        .collect()
}
