//! The text of every cell the job and node views show, made once for the screen and
//! `--once` alike: absent figures are `n/a`, stale rows say their age and why.

use super::model::DetailState;
use super::view::{Freshness, GpuRow, JobGroup, NodeRow, OomNote, RankRow, clock};
use crate::model::NA;
use crate::model::figures::{Figure, device as gpu};
use crate::model::time::duration_label;
use crate::model::units;

pub const RANK_HEADINGS: [&str; 11] = [
    "RANK",
    "NODE",
    "GPU",
    "ALLOC",
    "RESERVED",
    "PEAK",
    "PEAK GROWTH",
    "STEP",
    "OOM IN",
    "OOMS",
    "STATE",
];

pub const NODE_HEADINGS: [&str; 6] = ["NODE", "GPUS", "MEMORY", "UTIL", "RANKS", "STATE"];

fn bytes(v: Option<u64>) -> String {
    v.map_or_else(|| NA.to_string(), units::bytes)
}

fn count(v: Option<u64>) -> String {
    v.map_or_else(|| NA.to_string(), |v| v.to_string())
}

/// `+12.0 MiB/s`, `0 B/s`, `n/a` before two readings.
pub fn growth(v: Option<f64>) -> String {
    match v {
        None => NA.to_string(),
        Some(g) if g.abs() < 0.5 => "0 B/s".to_string(),
        Some(g) => {
            let sign = if g > 0.0 { "+" } else { "-" };
            format!("{sign}{}/s", units::bytes(g.abs().round() as u64))
        }
    }
}

/// The state column: current, or since when and why not.
pub fn freshness(f: &Freshness) -> String {
    if let Some(since) = f.missing_since_ms {
        return format!("missing since {}", clock(since));
    }
    match &f.stale {
        Some(why) => format!("STALE {}: {why}", duration_label(f.age_ms)),
        None => String::new(),
    }
}

pub fn rank_cells(r: &RankRow) -> [String; 11] {
    let mut state: Vec<String> = Vec::new();
    if r.ooms.is_some_and(|n| n > 0) {
        state.push("OOM".into());
    }
    if r.nearest_oom {
        state.push("nearest OOM".into());
    }
    if r.fastest_growth {
        state.push("fastest growth".into());
    }
    if let Some(behind) = r.behind {
        state.push(format!("straggler -{behind}"));
    }
    if r.running == Some(false) {
        state.push("exited".into());
    }
    let fresh = freshness(&r.fresh);
    if !fresh.is_empty() {
        state.push(fresh);
    }
    [
        r.rank.map_or_else(|| NA.to_string(), |v| v.to_string()),
        r.node.clone(),
        r.gpu.to_string(),
        bytes(r.allocated),
        bytes(r.reserved),
        bytes(r.peak),
        growth(r.peak_growth),
        r.step
            .map_or_else(|| NA.to_string(), |s| r.steps_from.cell(s)),
        r.oom_in_steps
            .map_or_else(|| "-".to_string(), |s| format!("{s} steps")),
        count(r.ooms),
        state.join(", "),
    ]
}

/// `job-42: 8 ranks, median step 40`.
pub fn job_title(j: &JobGroup) -> String {
    let n = j.ranks.len();
    let median = j
        .median_step
        .map_or_else(String::new, |m| format!(", median step {m}"));
    format!(
        "job {}: {n} rank{}{median}",
        j.job,
        if n == 1 { "" } else { "s" }
    )
}

/// `OOM in job-42: rank 3 on node-b GPU 1 at 12:03:04 (1 OOM)`.
pub fn oom_line(job: &str, o: &OomNote) -> String {
    let rank = o
        .rank
        .map_or_else(|| "a process".to_string(), |r| format!("rank {r}"));
    let at = o.at_ms.map_or_else(
        || "before the view started".to_string(),
        |t| format!("at {}", clock(t)),
    );
    format!(
        "OOM in job {job}: {rank} on {} GPU {} {at} ({} OOM{})",
        o.node,
        o.gpu,
        o.count,
        if o.count == 1 { "" } else { "s" }
    )
}

pub fn node_cells(n: &NodeRow) -> [String; 6] {
    let ranks: usize = n.gpus.iter().map(|g| g.ranks.len()).sum();
    [
        n.node.clone(),
        n.gpus.len().to_string(),
        memory(n.used_bytes, n.total_bytes),
        n.util_percent
            .map_or_else(|| NA.to_string(), |u| format!("{u:.0}%")),
        ranks.to_string(),
        freshness(&n.fresh),
    ]
}

/// One GPU of an expanded node.
pub fn gpu_line(g: &GpuRow) -> String {
    let r = &g.reading;
    let mut parts = vec![
        format!("GPU {}", g.gpu),
        r.model.clone().unwrap_or_else(|| NA.to_string()),
        memory(r.used_bytes, r.total_bytes),
        r.util_percent
            .map_or_else(|| format!("util {NA}"), |u| format!("util {u:.0}%")),
    ];
    if !g.ranks.is_empty() {
        let list: Vec<String> = g.ranks.iter().map(u32::to_string).collect();
        parts.push(format!("ranks {}", list.join(",")));
    }
    if let Some(pod) = &r.pod {
        let ns = r
            .namespace
            .as_deref()
            .map_or_else(String::new, |n| format!("{n}/"));
        let container = r
            .container
            .as_deref()
            .map_or_else(String::new, |c| format!(" ({c})"));
        parts.push(format!("pod {ns}{pod}{container}"));
    }
    if r.lost {
        parts.push("LOST".into());
    } else if r.stale {
        parts.push("STALE at its exporter".into());
    }
    let fresh = freshness(&g.fresh);
    if !fresh.is_empty() {
        parts.push(fresh);
    }
    parts.join("  ")
}

fn memory(used: Option<u64>, total: Option<u64>) -> String {
    match (used, total) {
        (Some(u), Some(t)) => units::bytes_pair(u, t),
        (Some(u), None) => format!("{} / {NA}", units::bytes(u)),
        (None, Some(t)) => format!("{NA} / {}", units::bytes(t)),
        (None, None) => NA.to_string(),
    }
}

/// One of an open GPU's single-node figures: its text when read, else why it is `n/a`.
#[derive(Clone, Debug, PartialEq)]
pub struct DetailFigure {
    /// Its key, as vramscope's `--json` names it (`model::figures`).
    pub key: &'static str,
    /// In the unit its key says (milliwatts for power, as `--json` gives it).
    pub value: Option<f64>,
    /// `temp 41 C`, or the reason it is absent.
    pub shown: Result<String, String>,
}

/// An open GPU's temperature, power and limit, clocks and process count, each with the
/// reason when absent: not read yet, the query failed, or its exporter does not serve it
/// (vramscope leaves out what NVML does not give; dcgm-exporter collects what its counters
/// file lists).
pub fn detail_figures(g: &GpuRow) -> Vec<DetailFigure> {
    let r = &g.reading;
    let processes = r.processes.map(|n| n as f64);
    // The figure, its value as the cluster read it, the unit shown, and how many of the
    // figure's own units make one shown unit (exporters give watts; the key says mW).
    let figures: [(&Figure, Option<f64>, &str, f64); 6] = [
        (&gpu::TEMPERATURE_C, r.temperature_c, "C", 1.0),
        (&gpu::POWER_MW, r.power_w, "W", 1000.0),
        (&gpu::POWER_LIMIT_MW, r.power_limit_w, "W", 1000.0),
        (&gpu::SM_CLOCK_MHZ, r.sm_clock_mhz, "MHz", 1.0),
        (&gpu::MEM_CLOCK_MHZ, r.mem_clock_mhz, "MHz", 1.0),
        (&gpu::PROCESS_COUNT, processes, "", 1.0),
    ];
    figures
        .into_iter()
        .map(|(figure, value, unit, per_shown)| {
            let name = figure.label;
            let shown = match (value, &g.detail) {
                (Some(v), _) => {
                    let number = if v.fract() == 0.0 || unit.is_empty() {
                        format!("{v:.0}")
                    } else {
                        format!("{v:.1}")
                    };
                    Ok(format!("{name} {number}{}{unit}", if unit.is_empty() { "" } else { " " }))
                }
                (None, DetailState::NotAsked) => Err(format!("{name} {NA}: not read yet")),
                (None, DetailState::Failed(why)) => {
                    Err(format!("{name} {NA}: the query for it failed: {why}"))
                }
                (None, DetailState::Read) if r.from_vramscope => Err(format!(
                    "{name} {NA}: its vramscope exporter serves none (NVML does not give it for this GPU)"
                )),
                (None, DetailState::Read) => match figure.dcgm_default.or(figure.dcgm) {
                    None => Err(format!("{name} {NA}: dcgm-exporter serves no such figure")),
                    Some(dcgm) => Err(format!(
                        "{name} {NA}: its dcgm-exporter does not collect {dcgm} (add it to its counters file)"
                    )),
                },
            };
            DetailFigure {
                key: figure.key,
                // Whole milliwatts: a float's last digits after `* 1000` are noise.
                value: value.map(|v| match per_shown {
                    1.0 => v,
                    scale => (v * scale).round(),
                }),
                shown,
            }
        })
        .collect()
}

/// The lines under an open GPU: its figures on one line, one line for each absent one with
/// why, then its processes (pid, rank and job, command, user, memory).
pub fn gpu_detail_lines(g: &GpuRow) -> Vec<String> {
    let figures = detail_figures(g);
    let mut lines = Vec::new();
    let read: Vec<&str> = figures
        .iter()
        .filter_map(|f| f.shown.as_ref().ok().map(String::as_str))
        .collect();
    if !read.is_empty() {
        lines.push(read.join("  "));
    }
    if g.detail == DetailState::NotAsked {
        lines.push(format!(
            "temperature, power, clocks {NA}: not read yet (read from the next refresh)"
        ));
    } else {
        lines.extend(figures.into_iter().filter_map(|f| f.shown.err()));
    }
    for p in &g.processes {
        let mut parts = vec![format!("pid {}", p.pid)];
        if let Some(rank) = p.rank {
            parts.push(format!("rank {rank}"));
        }
        if let Some(job) = &p.job {
            parts.push(format!("job {job}"));
        }
        parts.push(p.command.clone().unwrap_or_else(|| NA.to_string()));
        if let Some(user) = &p.user {
            parts.push(format!("user {user}"));
        }
        parts.push(format!("used {}", bytes(p.used_bytes)));
        if p.allocated.is_some() || p.reserved.is_some() {
            parts.push(format!(
                "alloc {}  reserved {}",
                bytes(p.allocated),
                bytes(p.reserved)
            ));
        }
        lines.push(parts.join("  "));
    }
    lines
}
