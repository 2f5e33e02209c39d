//! Why figures are missing, gathered once for the status line and the `w` overlay: faults a
//! person can act on (a lost or stale GPU, a refused channel, a call that failed, an OOM the
//! step peaks foresee), then facts
//! of the hardware ("fan: not supported on GPU 0,...,7" on a datacentre GPU), which are not
//! problems and so stay off the status line.

use crate::model::figures::device as gpu;
use crate::model::foresight::{Forecast, describe};
use crate::model::{Absent, DeviceSample, Snapshot};

/// How much a reason matters, most first; the panels pick a style from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Weight {
    /// A GPU lost.
    Critical,
    /// A call that failed, NVML unusable, host memory unreadable.
    Error,
    /// Stale samples, refused channel files.
    Warning,
    /// What the hardware or driver does not have: a fact, not a problem.
    Fact,
}

/// One line of explanation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reason {
    pub text: String,
    pub weight: Weight,
}

/// Every reason, faults first (in the order found), facts last. `channels_in_one`: every
/// refused channel file as one reason (the first in full, then how many more), as the one
/// status line wants; else one reason each.
pub fn collect(snapshot: &Snapshot, now_ms: u64, channels_in_one: bool) -> Vec<Reason> {
    let mut out = Vec::new();
    let mut push = |text: String, weight| out.push(Reason { text, weight });
    if let Some(problem) = &snapshot.nvml_problem {
        push(format!("NVML: {}", problem.cause()), Weight::Error);
    }
    let refused = &snapshot.rejected_channels;
    match refused.first() {
        Some(first) if channels_in_one && refused.len() > 1 => push(
            format!("channel refused: {first} (+{} more)", refused.len() - 1),
            Weight::Warning,
        ),
        _ => {
            for file in refused {
                push(format!("channel refused: {file}"), Weight::Warning);
            }
        }
    }
    for text in forecasts(snapshot) {
        push(text, Weight::Warning);
    }
    // A running writer the table cannot show: its figures are nowhere else on screen.
    for (a, why) in snapshot.writers_without_a_row() {
        if !a.liveness.is_ended() {
            push(
                format!(
                    "instrumented pid {} not in the table: {why}",
                    a.identity.pid
                ),
                Weight::Warning,
            );
        }
    }
    let mut items: Vec<Item> = Vec::new();
    for device in &snapshot.devices {
        let index = device.info.index;
        let Some(sample) = &device.sample else {
            continue;
        };
        if sample.lost {
            push(format!("GPU {index} lost"), Weight::Critical);
            continue;
        }
        if device.stale {
            let age = crate::model::time::age_label(sample.at_ms, now_ms);
            push(
                format!("GPU {index} stale: last sample {age}"),
                Weight::Warning,
            );
        }
        for (field, absent) in absences(sample) {
            let reason = absent.reason();
            match items
                .iter_mut()
                .find(|i| i.field == field && i.reason == reason)
            {
                Some(item) if !item.gpus.contains(&index) => item.gpus.push(index),
                Some(_) => {}
                None => items.push(Item {
                    field,
                    reason,
                    expected: absent.is_expected(),
                    gpus: vec![index],
                }),
            }
        }
    }
    if let Some(Err(absent)) = &snapshot.host_memory {
        push(format!("host memory: {absent}"), Weight::Error);
    }
    // Faults first: they are what the person can act on.
    items.sort_by_key(|i| i.expected);
    for item in items {
        let gpus: Vec<String> = item.gpus.iter().map(u32::to_string).collect();
        let text = format!("{}: {} on GPU {}", item.field, item.reason, gpus.join(","));
        push(
            text,
            if item.expected {
                Weight::Fact
            } else {
                Weight::Error
            },
        );
    }
    out
}

/// Every running writer whose step peaks foresee an OOM: `pid 4242 GPU 0: OOM in about
/// 120 steps (4 min)`. A leak with the ceiling far off, or silence, says nothing here. A
/// process row's forecast counts what NVML sees outside the allocator, as its detail pane
/// does; a writer without a row has only its own figures.
fn forecasts(snapshot: &Snapshot) -> Vec<String> {
    let mut out = Vec::new();
    let mut say = |who: String, gpu: Option<u32>, forecast: &Forecast| {
        if let (Forecast::OomIn { .. }, Some(words)) = (forecast, describe(forecast)) {
            let gpu = gpu.map_or(String::new(), |g| format!(" GPU {g}"));
            out.push(format!("{who}{gpu}: {words}"));
        }
    };
    let running = |liveness: &crate::model::WriterLiveness| liveness.is_running();
    for row in &snapshot.processes {
        if let Some(a) = row.allocator.as_ref().filter(|a| running(&a.liveness)) {
            say(
                format!("pid {}", row.nvml.pid),
                Some(row.gpu_index),
                &a.forecast,
            );
        }
    }
    for writer in snapshot.allocators.iter().filter(|a| running(&a.liveness)) {
        let has_row = |gpu: &Option<u32>| {
            snapshot.processes.iter().any(|r| {
                Some(r.nvml.pid) == writer.host_pid
                    && Some(r.gpu_index) == *gpu
                    && r.allocator.is_some()
            })
        };
        let who = match (writer.host_pid, writer.identity.rank) {
            (Some(pid), _) => format!("pid {pid}"),
            (None, Some(rank)) => format!("rank {rank}"),
            (None, None) => writer.identity.file.clone(),
        };
        for (forecast, gpu) in writer.forecasts.iter().zip(&writer.gpu_indices) {
            if !has_row(gpu) {
                say(who.clone(), *gpu, forecast);
            }
        }
    }
    out
}

/// One unreadable figure: what is missing, why, and on which GPUs.
struct Item {
    field: &'static str,
    reason: String,
    expected: bool,
    gpus: Vec<u32>,
}

/// Every unreadable figure of one sample, by its label (`model::figures`).
fn absences(s: &DeviceSample) -> Vec<(&'static str, &Absent)> {
    let pcie = [
        (&gpu::PCIE_TX_KBS, &s.pcie_tx_kbs),
        (&gpu::PCIE_RX_KBS, &s.pcie_rx_kbs),
    ]
    .into_iter()
    .filter_map(|(f, r)| Some((f, r.as_ref()?.as_ref().err()?)));
    [
        (&gpu::MEMORY_USED, s.memory.as_ref().err()),
        (&gpu::GPU_UTIL, s.gpu_util.as_ref().err()),
        (&gpu::MEM_UTIL, s.mem_util.as_ref().err()),
        (&gpu::TEMPERATURE_C, s.temperature_c.as_ref().err()),
        (&gpu::POWER_MW, s.power_mw.as_ref().err()),
        (&gpu::POWER_LIMIT_MW, s.power_limit_mw.as_ref().err()),
        (&gpu::SM_CLOCK_MHZ, s.sm_clock_mhz.as_ref().err()),
        (&gpu::MEM_CLOCK_MHZ, s.mem_clock_mhz.as_ref().err()),
        (&gpu::FAN_PERCENT, s.fan_percent.as_ref().err()),
        (&gpu::ENCODER_UTIL, s.encoder_util.as_ref().err()),
        (&gpu::DECODER_UTIL, s.decoder_util.as_ref().err()),
        (&gpu::THROTTLE_REASONS, s.throttle_reasons.as_ref().err()),
        (&gpu::PSTATE, s.pstate.as_ref().err()),
        (&gpu::ECC_CORRECTED, s.ecc_corrected.as_ref().err()),
        (&gpu::ECC_UNCORRECTED, s.ecc_uncorrected.as_ref().err()),
        (&gpu::PROCESS_COUNT, s.processes.as_ref().err()),
    ]
    .into_iter()
    .filter_map(|(figure, absent)| absent.map(|a| (figure, a)))
    .chain(pcie)
    .map(|(figure, absent)| (figure.label, absent))
    .collect()
}
