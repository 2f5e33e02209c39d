//! `--once`: a compact table of GPUs and processes for people, in the spirit of nvidia-smi
//! but narrow enough for 80 columns. Absent figures print `n/a`.

use crate::model::figures::device as gpu;
use crate::model::units::{MemoryUnits, bytes, short_bytes, watts};
use crate::model::{DeviceSnapshot, NA, ProcessRow, Reading, Snapshot, or_na};
use std::fmt::Write;

/// `command_cut`: the mark ending a command cut to its 60 columns, or `None` to print it whole
/// (output that is not a terminal). `cpu_column`: whether the table has CPU%, which is a
/// difference of two readings: only `--loop` has a reading before, and one snapshot would
/// print n/a in every row (measuring it over a window would add that window, 0.2 s, to a run
/// that otherwise takes a few ms). `units`: how the GPU memory figures are written (`--units`).
pub fn render(
    snapshot: &Snapshot,
    command_cut: Option<&str>,
    cpu_column: bool,
    units: MemoryUnits,
) -> String {
    let mut out = String::new();
    let driver = snapshot.driver.as_ref();
    let _ = writeln!(
        out,
        "vramscope {}  driver {}  CUDA {}",
        env!("CARGO_PKG_VERSION"),
        driver.map_or(NA.into(), |d| or_na(&d.driver_version, Clone::clone)),
        driver
            .and_then(|d| d.cuda_label())
            .unwrap_or_else(|| NA.into()),
    );
    // PCIe throughput is read only when `--pcie` asks for it; its column comes with it.
    let pcie = snapshot.devices.iter().any(|d| {
        d.sample
            .as_ref()
            .is_some_and(|s| s.pcie_tx_kbs.is_some() || s.pcie_rx_kbs.is_some())
    });
    let pcie_head = if pcie {
        format!(" {:>15}", "PCIE TX/RX")
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "{:>3}  {:<24} {:>21} {:>5} {:>5} {:>11} {:>4}{pcie_head}",
        "GPU", "NAME", "MEMORY USED / TOTAL", "UTIL", "TEMP", "POWER", "PST"
    );
    for d in &snapshot.devices {
        out += &device_line(d, pcie, units);
        out += &mig_lines(d);
    }
    let cpu = if cpu_column { "  CPU%" } else { "" };
    let _ = writeln!(
        out,
        "\n{:>8} {:>3} {:>4} {:>10} {:>4} {:>10}{cpu} {:<10} COMMAND",
        "PID", "GPU", "TYPE", "VRAM", "SM%", "HOST RSS", "USER"
    );
    if snapshot.processes.is_empty() {
        // Only lists that were read can say there are none; the reasons follow in the notes.
        let unread = snapshot.devices.iter().any(|d| {
            d.sample
                .as_ref()
                .is_none_or(|s| s.processes.is_err() || s.list_gaps != Default::default())
        });
        out += if unread {
            "       (process list n/a)\n"
        } else {
            "       (no GPU processes)\n"
        };
    }
    for p in &snapshot.processes {
        out += &process_line(p, command_cut, cpu_column, units);
    }
    out += &allocator_lines(snapshot);
    out += &notes(snapshot);
    out
}

/// Under a GPU in MIG mode, one line per instance (`MIG 3g.40gb  GI 1 CI 0  4.00 GiB /
/// 40.0 GiB  pids 4100`); under a GPU whose MIG mode changes at the next reset, that.
fn mig_lines(d: &DeviceSnapshot) -> String {
    let Some(mig) = d.sample.as_ref().and_then(|s| s.mig.as_ref()) else {
        return String::new();
    };
    let mut out = String::new();
    if let Some(note) = mig.pending_note() {
        let _ = writeln!(out, "     {note}");
    }
    if let Some(why) = &mig.mode_unread {
        let _ = writeln!(out, "     MIG mode {NA} ({why})");
    }
    if !mig.enabled {
        return out;
    }
    match &mig.instances {
        Err(why) => {
            let _ = writeln!(out, "     MIG instances {NA} ({why})");
        }
        Ok(list) if list.is_empty() => out += "     MIG: no instances\n",
        Ok(list) => {
            for i in list {
                let memory = match &i.memory {
                    Ok(m) => format!("{} / {}", bytes(m.used), bytes(m.total)),
                    Err(why) => format!("{NA} ({why})"),
                };
                let pids = match &i.processes {
                    Ok(p) if p.is_empty() => "no processes".to_string(),
                    Ok(p) => {
                        let list: Vec<String> = p.iter().map(|p| p.pid.to_string()).collect();
                        format!("pids {}", list.join(" "))
                    }
                    Err(why) => format!("processes {NA} ({why})"),
                };
                // SM utilisation only where GPM gave it (`--gpm`).
                let sm = i
                    .sm_util
                    .as_ref()
                    .map_or(String::new(), |v| format!("  sm {v}%"));
                let _ = writeln!(
                    out,
                    "     MIG {:<8} {}  {memory:>21}{sm}  {pids}",
                    i.profile.as_deref().unwrap_or(NA),
                    i.ids_label(),
                );
            }
        }
    }
    out
}

/// What instrumented processes publish, beside NVML's figure for them:
/// `  1234 GPU 0  allocated 10.0 GiB  reserved 14.0 GiB  outside 1.00 GiB  peak 12.0 GiB  step 41  forward`,
/// then writers that have no row, and refused channel files, each with why.
fn allocator_lines(snapshot: &Snapshot) -> String {
    let rows: Vec<&ProcessRow> = snapshot
        .processes
        .iter()
        .filter(|p| p.allocator.is_some())
        .collect();
    let mut out = String::new();
    if !rows.is_empty() {
        out += "\ninstrumented (allocator figures):\n";
    }
    for p in &rows {
        let Some(a) = &p.allocator else { continue };
        let d = &a.device;
        let outside = match (&p.nvml.used_memory, &d.allocated, &d.reserved) {
            (Ok(used), Ok(allocated), Ok(reserved)) => {
                bytes(crate::model::allocator::split(*allocated, *reserved, *used).outside)
            }
            _ => NA.into(),
        };
        let _ = writeln!(
            out,
            "{:>8} GPU {}  allocated {}  reserved {}  outside {}  peak {}  {}  {}{}",
            p.nvml.pid,
            p.gpu_index,
            or_na(&d.allocated, |b| bytes(*b)),
            or_na(&d.reserved, |b| bytes(*b)),
            outside,
            a.peak.as_ref().map_or(NA.into(), |p| bytes(p.value)),
            a.step.map_or("step -".into(), |s| a.steps_from.words(s)),
            a.label,
            match a.liveness {
                crate::model::WriterLiveness::Live => String::new(),
                other => format!(" [{}]", other.label()),
            },
        );
    }
    let mut unshown = String::new();
    for (a, why) in snapshot.writers_without_a_row() {
        let _ = writeln!(
            unshown,
            "instrumented pid {} ({}) not in the table: {why}",
            a.identity.pid, a.identity.file
        );
    }
    for refused in &snapshot.rejected_channels {
        let _ = writeln!(unshown, "channel refused: {refused}");
    }
    if !unshown.is_empty() {
        out.push('\n');
        out += &unshown;
    }
    out
}

fn device_line(d: &DeviceSnapshot, pcie_column: bool, units: MemoryUnits) -> String {
    let name: String = d.info.display_name().chars().take(24).collect();
    let Some(s) = &d.sample else {
        return format!("{:>3}  {name:<24} (no sample)\n", d.info.index);
    };
    let memory = or_na(&s.memory, |m| {
        format!("{} / {}", units.bytes(m.used), units.bytes(m.total))
    });
    let flag = if s.lost {
        "  [LOST]"
    } else if d.stale {
        "  [STALE]"
    } else {
        ""
    };
    let pcie = if pcie_column {
        format!(" {:>15}", pcie_rates(s))
    } else {
        String::new()
    };
    format!(
        "{:>3}  {name:<24} {memory:>21} {:>5} {:>5} {:>11} {:>4}{pcie}{flag}\n",
        d.info.index,
        or_na(&s.gpu_util, |u| format!("{u}%")),
        or_na(&s.temperature_c, |t| format!("{t}C")),
        power(&s.power_mw, &s.power_limit_mw),
        or_na(&s.pstate, |p| format!("P{p}")),
    )
}

/// `977K/1.9M/s`: transmit and receive, bytes per second, each `n/a` when unreadable (one
/// `n/a` when both are).
fn pcie_rates(s: &crate::model::DeviceSample) -> String {
    let rate = |r: Option<&Reading<u32>>| match r {
        Some(Ok(kbs)) => short_bytes(u64::from(*kbs).saturating_mul(1024)),
        _ => NA.into(),
    };
    let (tx, rx) = (rate(s.pcie_tx_kbs.as_ref()), rate(s.pcie_rx_kbs.as_ref()));
    if tx == NA && rx == NA {
        return NA.into();
    }
    format!("{tx}/{rx}/s")
}

fn power(usage: &Reading<u32>, limit: &Reading<u32>) -> String {
    match (usage, limit) {
        (Ok(u), Ok(l)) => format!("{}/{}", watts(*u), watts(*l)),
        (Ok(u), Err(_)) => watts(*u),
        _ => NA.into(),
    }
}

/// Characters of COMMAND a terminal line shows, its cut mark included.
const COMMAND_CHARS: usize = 60;

fn process_line(
    p: &ProcessRow,
    command_cut: Option<&str>,
    cpu_column: bool,
    units: MemoryUnits,
) -> String {
    let host = p.host.as_ref();
    let pid = match host.and_then(|h| h.local_pid) {
        Some(local) if local != p.nvml.pid => format!("{local}({})", p.nvml.pid),
        Some(_) => p.nvml.pid.to_string(),
        None => format!("{}*", p.nvml.pid),
    };
    let user: String = host
        .map_or(NA.into(), |h| or_na(&h.user, Clone::clone))
        .chars()
        .take(10)
        .collect();
    let mut command = host.map_or(NA.into(), |h| or_na(&h.command, Clone::clone));
    // A pod names the process better than its container's id does.
    if let Some(pod) = host.and_then(|h| h.pod.as_ref()) {
        command = format!("[{}] {command}", pod.full_label());
    } else if let Some(container) = host.and_then(|h| h.container.as_ref()) {
        command = format!("[{container}] {command}");
    }
    if let Some(mark) = command_cut
        && command.chars().count() > COMMAND_CHARS
    {
        let keep = COMMAND_CHARS.saturating_sub(mark.chars().count());
        command = command.chars().take(keep).collect::<String>() + mark;
    }
    let cpu = if cpu_column {
        let share = host.map_or(NA.into(), |h| or_na(&h.cpu_percent, |c| format!("{c:.0}")));
        format!(" {share:>5}")
    } else {
        String::new()
    };
    format!(
        "{pid:>8} {:>3} {:>4} {:>10} {:>4} {:>10}{cpu} {user:<10} {command}\n",
        p.gpu_index,
        p.nvml.kind.letter(),
        or_na(&p.nvml.used_memory, |b| units.bytes(*b)),
        or_na(&p.nvml.sm_util, |u| u.to_string()),
        host.map_or(NA.into(), |h| or_na(&h.rss_bytes, |b| bytes(*b))),
    )
}

/// Footnotes: why figures are absent, and what a `*` pid means.
fn notes(snapshot: &Snapshot) -> String {
    let mut reasons: Vec<String> = Vec::new();
    for d in &snapshot.devices {
        let Some(s) = &d.sample else {
            reasons.push(format!("GPU {}: no sample yet", d.info.index));
            continue;
        };
        let reason = |absent: Option<&crate::model::Absent>| absent.map(|e| e.reason());
        let checks = [
            (&gpu::MEMORY_USED, reason(s.memory.as_ref().err())),
            (&gpu::GPU_UTIL, reason(s.gpu_util.as_ref().err())),
            (&gpu::TEMPERATURE_C, reason(s.temperature_c.as_ref().err())),
            (&gpu::POWER_MW, reason(s.power_mw.as_ref().err())),
            (&gpu::PROCESS_COUNT, reason(s.processes.as_ref().err())),
            (
                &gpu::COMPUTE_PROCESS_COUNT,
                reason(s.list_gaps.compute.as_ref()),
            ),
            (
                &gpu::GRAPHICS_PROCESS_COUNT,
                reason(s.list_gaps.graphics.as_ref()),
            ),
        ];
        for (figure, why) in checks {
            if let Some(why) = why {
                let label = figure.label;
                reasons.push(format!("GPU {} {label}: {why}", d.info.index));
            }
        }
    }
    let mut out = String::new();
    if snapshot
        .processes
        .iter()
        .any(|p| p.host.as_ref().and_then(|h| h.local_pid).is_none())
    {
        out += "* pid not found here: exited, or hidden by a container's pid namespace (use --pid=host)\n";
    }
    if !reasons.is_empty() {
        let _ = writeln!(out, "n/a: {}", reasons.join("; "));
    }
    out
}
