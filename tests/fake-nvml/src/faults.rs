//! Fault (error injection) and block (slow call) windows.

use crate::ffi::NvmlReturn;
use crate::scenario::Scenario;

fn applies(pattern: &str, function: &str) -> bool {
    pattern == function || (pattern == "*" && function.starts_with("nvmlDevice"))
}

fn in_window(from: f64, until: Option<f64>, t: f64) -> bool {
    from <= t && until.is_none_or(|u| t < u)
}

fn device_matches(wanted: Option<u32>, device: Option<u32>) -> bool {
    wanted.is_none() || wanted == device
}

/// The error the first matching fault injects into `function` on `device` at `t`.
pub fn fault_for(s: &Scenario, function: &str, device: Option<u32>, t: f64) -> Option<NvmlReturn> {
    s.faults
        .iter()
        .find(|f| {
            applies(&f.function, function)
                && device_matches(f.device, device)
                && in_window(f.from, f.until, t)
        })
        .map(|f| f.error.0)
}

/// Total seconds matching blocks make this call sleep.
pub fn block_seconds(s: &Scenario, function: &str, device: Option<u32>, t: f64) -> f64 {
    s.blocks
        .iter()
        .filter(|b| {
            applies(&b.function, function)
                && device_matches(b.device, device)
                && in_window(b.from, b.until, t)
        })
        .map(|b| b.seconds)
        .sum()
}
