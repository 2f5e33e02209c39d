//! Per-process families: what dcgm-exporter cannot give. Labels `gpu`, `uuid`, `pid`,
//! `user`, `command`; `pod`, `namespace`, `container` (dcgm-exporter's names) for a process in
//! a Kubernetes pod; `rank`, `local_rank`, `job_id` where the process's channel says; and the
//! node's `hostname`, so that a rank's series name its node whoever scrapes them.
//! Base units throughout; the counters are the allocator's own, cumulative since the
//! process started.

use super::families::{Family, Labels, Metric, Number, bytes, counter, gauge};
use super::processes::{AllocatorFigures, ProcessEntry};
use super::published::Published;
use crate::model::figures::{process, slot};
use std::sync::Arc;

type P = ProcessEntry;

const PROCESS: &[Metric<P>] = &[
    gauge(
        "vramscope_process_running",
        "1 while NVML lists the process; 0 during the grace period after it exited, when only its final counts, peak and step remain.",
        |p| Some(Number::Int(u64::from(p.running))),
    ),
    bytes(
        process::USED_MEMORY.prometheus(),
        "GPU memory NVML accounts to the process on this GPU.",
        |p| p.used_bytes.map(Number::Int),
    ),
    gauge(
        process::SM_UTIL.prometheus(),
        "Share of the time the process kept the GPU's SMs busy over NVML's last sample (0 to 1).",
        |p| {
            p.sm_util_percent
                .map(|v| Number::Float(f64::from(v) / 100.0))
        },
    ),
    bytes(
        process::HOST_RSS.prometheus(),
        "The process's resident host memory.",
        |p| p.host_rss_bytes.map(Number::Int),
    ),
    bytes(
        process::ALLOCATED.prometheus(),
        "Bytes in live tensors, as the process's allocator reports them.",
        |p| alloc(p, |a| a.allocated),
    ),
    bytes(
        process::RESERVED.prometheus(),
        "Bytes the process's caching allocator holds from the driver.",
        |p| alloc(p, |a| a.reserved),
    ),
    bytes(
        process::TRUE_PEAK.prometheus(),
        "Highest allocated bytes in any allocator sample since the process began publishing, spikes between scrapes included.",
        |p| alloc(p, |a| a.peak),
    ),
    counter(
        slot::OOMS.prometheus(),
        "Out-of-memory errors of the process on this GPU: its allocator's counter, or the OOMs it reported (the one that killed it included) if more.",
        |p| alloc(p, |a| a.ooms),
    ),
    counter(
        slot::ALLOC_RETRIES.prometheus(),
        "Allocations the allocator retried after freeing its cache.",
        |p| alloc(p, |a| a.retries),
    ),
    gauge(
        "vramscope_process_allocator_oom_forecast_steps",
        "Steps until the process's per-step allocated peaks, rising steadily, reach the memory its allocator can grow into; present only while the trend is confident.",
        |p| alloc(p, |a| a.oom_in_steps),
    ),
    gauge(
        "vramscope_process_allocator_oom_forecast_seconds",
        "The same forecast in seconds, at the recent time per step.",
        |p| {
            p.allocator
                .as_ref()
                .and_then(|a| a.oom_in_ms)
                .map(|ms| Number::Float(ms as f64 / 1000.0))
        },
    ),
    gauge(
        process::STEP.prometheus(),
        "The training step the process last reported.",
        |p| alloc(p, |a| a.step),
    ),
    gauge(
        process::STEPS_FROM.prometheus(),
        "1 where the step counts the steps since vramscope attach (the job kept no count), 0 where it is the job's own.",
        |p| alloc(p, |a| a.steps_since_attach),
    ),
];

/// Every per-process family.
pub fn families(published: &Published) -> Vec<Family> {
    let items: Vec<(Labels, &P)> = published
        .processes
        .iter()
        .map(|p| {
            let mut pairs = p.labels.pairs();
            if let Some(host) = &published.hostname {
                pairs.push(("hostname", host.clone()));
            }
            (Arc::from(pairs), p)
        })
        .collect();
    PROCESS.iter().map(|m| m.family(&items)).collect()
}

fn alloc(p: &P, pick: fn(&AllocatorFigures) -> Option<u64>) -> Option<Number> {
    p.allocator.as_ref().and_then(pick).map(Number::Int)
}
