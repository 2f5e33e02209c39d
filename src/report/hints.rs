//! Concrete advice from what the recording shows, only where the figures call for it.

use super::analysis::Report;
use crate::model::foresight::{Forecast, describe};
use crate::model::oom_explain::Verdict;
use crate::model::units::bytes;

/// Inactive split blocks above this share of reserved memory count as fragmentation.
const FRAGMENTED: f64 = 0.2;
/// A GPU with less than this share of its memory left at its peak ran close to its limit.
const CLOSE_TO_LIMIT: f64 = 0.05;

pub fn hints(report: &Report) -> Vec<String> {
    let mut out = Vec::new();
    for g in &report.gpus {
        if let (Some(left), Some(total)) = (g.headroom(), g.total)
            && total > 0
            && (left as f64) < total as f64 * CLOSE_TO_LIMIT
        {
            out.push(format!(
                "GPU {} came within {} of its {} at its peak: a larger batch or model will not fit",
                g.index,
                bytes(left),
                bytes(total)
            ));
        }
    }
    for p in &report.processes {
        let Some(a) = &p.allocator else { continue };
        // The step peaks say it: a leak, with an OOM to come when the process still ran at the
        // recording's end and foresight's gates allow one (as on the screen), and said to have
        // ended only when it had.
        let leak = match &a.forecast {
            Forecast::OomIn { bytes_per_step, .. } => {
                describe(&a.forecast).map(|when| (*bytes_per_step, format!(" ({when})")))
            }
            Forecast::Leak {
                bytes_per_step,
                fitted_steps,
            } => Some((
                *bytes_per_step,
                if a.ended {
                    format!(" (its last {fitted_steps} steps; it has ended)")
                } else {
                    format!(" (its last {fitted_steps} steps)")
                },
            )),
            Forecast::Silent(_) => None,
        };
        if let Some((bytes_per_step, said)) = leak {
            out.push(format!(
                "pid {} on GPU {}: memory leaks: each step's peak {} above the one before{said}; look for tensors kept across steps (a loss summed without .item(), a growing list or cache)",
                p.pid,
                p.gpu_index,
                bytes(bytes_per_step.round() as u64)
            ));
        }
        let expandable = a.allocator_config.contains("expandable_segments:True");
        let retries = a.alloc_retries.unwrap_or(0);
        let fragmented = a.fragmentation.filter(|(split, reserved)| {
            *reserved > 0 && *split as f64 > *reserved as f64 * FRAGMENTED
        });
        // Not where an OOM's own verdict says it would not have helped: all of the cache
        // reclaimed was still too little, or the free memory was enough.
        let ruled_out = report.ooms.iter().any(|o| {
            o.pid == Some(p.pid)
                && matches!(
                    o.verdict,
                    Ok(Verdict::TooLarge { .. } | Verdict::FreeWasEnough)
                )
        });
        if (retries > 0 || fragmented.is_some()) && !expandable && !ruled_out {
            let why = match fragmented {
                Some((split, reserved)) => format!(
                    "{} of its {} reserved sat in free but unreleasable split blocks",
                    bytes(split),
                    bytes(reserved)
                ),
                None => {
                    format!("its caching allocator had to free its cache and retry {retries} times")
                }
            };
            out.push(format!(
                "pid {}: {why}; set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to let segments grow instead of fragmenting",
                p.pid
            ));
        }
        let oomed = report.ooms.iter().any(|o| o.pid == Some(p.pid));
        if oomed
            && let (Some(cache), Some(reserved)) =
                (a.cache_at_peak, a.peak_reserved.as_ref().map(|r| r.value))
            && reserved > 0
            && cache as f64 > reserved as f64 * FRAGMENTED
        {
            out.push(format!(
                "pid {}: {} of its reserved memory was cached but unused at its peak; torch.cuda.empty_cache() inside the step will not help, lowering the peak (smaller micro-batches, activation checkpointing) will",
                p.pid,
                bytes(cache)
            ));
        }
    }
    out
}
