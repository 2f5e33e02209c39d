//! Overhead benchmark: prints figures, asserts nothing about time.
//!
//! vramscope runs in a 200x50 tmux pane against the fake NVML library with 8 GPUs and 64 GPU
//! processes (real `sleep` processes, so the host side does real work), at 1 s refresh with the
//! fast memory sampling every 100, 200 and 250 ms, at 1 s with it off (`--peak-interval off`:
//! its cost is the difference), and at 100 ms refresh (no fast sampling: every refresh reads
//! memory).
//! After the table, the cost of one peek (the fast memory sampling's read of every GPU between
//! refreshes): the CPU a second the 1 s runs with peeks cost over the one without, divided by
//! the peeks a second they made (from the fake's count of memory reads beyond the refreshes'),
//! beside what a thread that does nothing but sleep 100 ms and wake costs per wake here: the
//! least any peek can cost on this machine.
//! Printed per run: CPU time per refresh and per second (utime+stime from /proc/PID/stat over
//! the run, and the same from the threads' schedstat in ns, since stat counts 10 ms ticks over
//! the run), time from start to first frame, peak RSS (VmHWM), and NVML calls per refresh and
//! per second (from the fake's counters). Run with `cargo bench --bench refresh` (add `-- SECS`
//! to change the 30 s measuring window).

#[path = "../tests/common/mod.rs"]
mod common;
mod support;

use common::read_counts;
use common::tmux::{self, Tmux};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};
use support::{Children, cpu_ns, cpu_ticks, peak_rss_kb};

const GPUS: usize = 8;
const PROCS_PER_GPU: usize = 8;

fn main() {
    let seconds: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(30);
    if !tmux::available() {
        std::process::exit(2);
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let sleepers = Children::sleeps(GPUS * PROCS_PER_GPU, 600);
    let pids = sleepers.pids();
    let scenario = dir.path().join("scenario.json");
    std::fs::write(&scenario, scenario_json(&pids).to_string()).expect("write scenario");
    println!(
        "vramscope overhead: {GPUS} GPUs, {} processes, 200x50 tmux pane, {seconds} s per run",
        pids.len()
    );
    println!(
        "{:>9} {:>6} {:>14} {:>14} {:>12} {:>10} {:>12} {:>10} {:>16} {:>12}",
        "interval",
        "peaks",
        "CPU/refresh",
        "(schedstat)",
        "CPU ms/s",
        "CPU %",
        "first frame",
        "peak RSS",
        "NVML calls/ref.",
        "NVML calls/s"
    );
    let mut at_one_second = Vec::new();
    for (interval_ms, peaks) in [
        (1000u64, "100ms"),
        (1000, "200ms"),
        (1000, "250ms"),
        (1000, "off"),
        (100, "off"),
    ] {
        let label = format!("{interval_ms}ms-peaks-{peaks}");
        let r = measure(dir.path(), &label, &scenario, interval_ms, peaks, seconds);
        let per_second = 1000.0 / interval_ms as f64;
        println!(
            "{:>7}ms {:>6} {:>11.3} ms {:>11.3} ms {:>9.3} ms {:>9.3}% {:>9.1} ms {:>7.1} MB {:>16.1} {:>12.1}",
            interval_ms,
            peaks,
            r.cpu_ms_per_refresh,
            r.cpu_ns_ms_per_refresh,
            r.cpu_ns_ms_per_refresh * per_second,
            r.cpu_percent,
            r.first_frame_ms,
            r.peak_rss_mb,
            r.calls_per_refresh,
            r.calls_per_refresh * per_second
        );
        for (name, per) in &r.calls_by_function {
            println!(
                "            {name}: {per:.2}/refresh, {:.1}/s",
                per * per_second
            );
        }
        if interval_ms == 1000 {
            at_one_second.push((peaks, r));
        }
    }
    print_peek_cost(&at_one_second);
    print_attribution_cost(dir.path(), &pids, seconds);
}

/// The call a spike's attribution adds: the compute list, read by the peek that saw the rise.
const LIST_CALL: &str = "nvmlDeviceGetComputeRunningProcesses_v3";

/// The same 1 s refresh with 100 ms peeks on two scenarios where every GPU spikes for 250 ms
/// each second, its last process with it: by 20 GiB (each spike attributed, the compute list
/// read at it) and by 128 MiB (under the rise that reads the list: attribution off, the same
/// new highs otherwise). The difference is what attributing costs.
fn print_attribution_cost(dir: &Path, pids: &[u32], seconds: u64) {
    let mut runs = Vec::new();
    for (name, rise_mib) in [("on", 20 * 1024), ("off", 128)] {
        let scenario = dir.join(format!("spiky-{name}.json"));
        std::fs::write(&scenario, spiky_scenario(pids, rise_mib).to_string())
            .expect("write scenario");
        let label = format!("spikes-attribution-{name}");
        runs.push((
            name,
            measure(dir, &label, &scenario, 1000, "100ms", seconds),
        ));
    }
    let lists = |r: &Result| r.calls_by_function.get(LIST_CALL).copied().unwrap_or(0.0);
    println!(
        "spike attribution ({GPUS} GPUs, one 250 ms spike per GPU per second, 1000ms refresh, 100ms peeks):"
    );
    for (name, r) in &runs {
        println!(
            "  {name:>3}: {:.3} ms/s of CPU ({:.3} ms per refresh), {:.1} compute-list reads/s",
            r.cpu_ns_ms_per_refresh,
            r.cpu_ns_ms_per_refresh,
            lists(r)
        );
    }
    if let [(_, on), (_, off)] = &runs[..] {
        // Per refresh, which is per second at 1 s.
        let attributions = lists(on) - lists(off);
        if attributions > 0.0 {
            let extra_ms = on.cpu_ns_ms_per_refresh - off.cpu_ns_ms_per_refresh;
            println!(
                "  {attributions:.1} attributions/s more, {extra_ms:+.3} ms/s of CPU: {:.1} µs per attributed spike",
                extra_ms * 1000.0 / attributions
            );
        }
    }
}

/// [`scenario_json`]'s GPUs, each spiking by `rise_mib` from `k + 0.375` s to `k + 0.625` s
/// of every second, its last process's figure with it.
fn spiky_scenario(pids: &[u32], rise_mib: u64) -> Value {
    let rise = rise_mib << 20;
    let devices: Vec<Value> = (0..GPUS)
        .map(|g| {
            let mine = &pids[g * PROCS_PER_GPU..(g + 1) * PROCS_PER_GPU];
            let list = |extra: u64| -> Value {
                let procs: Vec<Value> = mine
                    .iter()
                    .enumerate()
                    .map(|(i, pid)| {
                        let used =
                            ((i as u64 + 1) << 30) + if i + 1 == mine.len() { extra } else { 0 };
                        json!({ "pid": pid, "used_memory": used })
                    })
                    .collect();
                json!(procs)
            };
            let mut timeline = Vec::new();
            let mut processes = vec![json!({ "t": 0, "compute": list(0), "graphics": [] })];
            for k in 0..300u64 {
                let base = support::timeline_point(k as f64, 0, 50 + k % 40, 400_000);
                let mut spike = base.clone();
                spike["t"] = json!(k as f64 + 0.375);
                spike["memory_used"] = json!((40u64 << 30) + rise);
                let mut back = base.clone();
                back["t"] = json!(k as f64 + 0.625);
                timeline.extend([base, spike, back]);
                processes.push(json!({ "t": k as f64 + 0.375, "compute": list(rise) }));
                processes.push(json!({ "t": k as f64 + 0.625, "compute": list(0) }));
            }
            let mut gpu = support::h100(g, format!("GPU-bench-{g}"), mine, timeline, Vec::new());
            gpu["processes"] = json!(processes);
            gpu
        })
        .collect();
    json!({ "devices": devices })
}

/// The NVML call a peek makes, once per GPU.
const PEEK_CALL: &str = "nvmlDeviceGetMemoryInfo_v2";

/// Each 1 s run with peeks against the one without: CPU per second more, over peeks per second
/// more (memory reads a second beyond the run without peeks', one per GPU per peek).
fn print_peek_cost(runs: &[(&str, Result)]) {
    let Some((_, off)) = runs.iter().find(|(peaks, _)| *peaks == "off") else {
        return;
    };
    let reads = |r: &Result| r.calls_by_function.get(PEEK_CALL).copied().unwrap_or(0.0);
    // A peek cannot cost less than the wake-up after its sleep, whatever it does once awake.
    let floor = support::idle_wake_cost_us(std::time::Duration::from_millis(100), 50);
    println!("cost per peek ({GPUS} GPUs, 1000ms refresh, against peaks off):");
    for (peaks, r) in runs.iter().filter(|(peaks, _)| *peaks != "off") {
        let peeks_per_second = (reads(r) - reads(off)) / GPUS as f64;
        let extra_ms = r.cpu_ns_ms_per_refresh - off.cpu_ns_ms_per_refresh;
        if peeks_per_second <= 0.0 {
            println!("  {peaks:>6}: no peeks counted");
            continue;
        }
        let per_peek_us = extra_ms * 1000.0 / peeks_per_second;
        let above_floor = floor.map_or(String::new(), |f| {
            format!(
                ", {:.1} µs per GPU read above the wake-up",
                (per_peek_us - f) / GPUS as f64
            )
        });
        println!(
            "  {peaks:>6}: {peeks_per_second:.1} peeks/s, {extra_ms:+.3} ms/s of CPU: {per_peek_us:.1} µs per peek{above_floor}"
        );
    }
    if let Some(floor) = floor {
        println!(
            "  the wake-up: a thread that only sleeps 100 ms and wakes costs {floor:.1} µs per wake here"
        );
    }
}

struct Result {
    cpu_ms_per_refresh: f64,
    cpu_ns_ms_per_refresh: f64,
    cpu_percent: f64,
    first_frame_ms: f64,
    peak_rss_mb: f64,
    calls_per_refresh: f64,
    calls_by_function: BTreeMap<String, f64>,
}

fn measure(
    dir: &Path,
    label: &str,
    scenario: &Path,
    interval_ms: u64,
    peaks: &str,
    seconds: u64,
) -> Result {
    let run_dir = dir.join(format!("run-{label}"));
    std::fs::create_dir_all(&run_dir).expect("run dir");
    let counts_dir = support::counts_dir("vramscope-refresh");
    let counts = counts_dir.path().join("counts.json");
    let first_frame = run_dir.join("first-frame");
    let command = format!(
        "env FAKE_NVML_SCENARIO={scenario} FAKE_NVML_COUNTS={counts} \
         VRAMSCOPE_FIRST_FRAME_FILE={first} {exe} --nvml-lib {lib} --interval {interval_ms}ms \
         --peak-interval {peaks}",
        scenario = scenario.display(),
        counts = counts.display(),
        first = first_frame.display(),
        exe = env!("CARGO_BIN_EXE_vramscope"),
        lib = common::fake_nvml().display(),
    );
    let pane = Tmux::start(&run_dir, 200, 50, &command);
    let pid = pane.pid();
    let first_frame_ms = wait_for_number(&first_frame) / 1000.0;
    // Warm-up over; measure a steady state.
    std::thread::sleep(Duration::from_secs(1));
    let calls_before = read_counts(&counts);
    let cpu_before = cpu_ticks(pid).expect("stat");
    let ns_before = cpu_ns(pid).expect("task dir");
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs(seconds));
    let cpu_after = cpu_ticks(pid).expect("stat");
    let ns_after = cpu_ns(pid).expect("task dir");
    let elapsed = start.elapsed().as_secs_f64();
    let calls_after = read_counts(&counts);
    let peak_rss_mb = peak_rss_kb(pid).expect("VmHWM") / 1024.0;
    drop(pane);
    let cpu_s = (cpu_after - cpu_before) / support::ticks_per_second();
    let refreshes = elapsed * 1000.0 / interval_ms as f64;
    let mut calls_by_function = BTreeMap::new();
    let mut total = 0.0;
    for (name, after) in &calls_after {
        let delta = after - calls_before.get(name).copied().unwrap_or(0.0);
        if delta > 0.0 {
            calls_by_function.insert(name.clone(), delta / refreshes);
            total += delta;
        }
    }
    Result {
        cpu_ms_per_refresh: cpu_s * 1000.0 / refreshes,
        cpu_ns_ms_per_refresh: (ns_after - ns_before) / 1e6 / refreshes,
        cpu_percent: cpu_s / elapsed * 100.0,
        first_frame_ms,
        peak_rss_mb,
        calls_per_refresh: total / refreshes,
        calls_by_function,
    }
}

fn scenario_json(pids: &[u32]) -> Value {
    let devices: Vec<Value> = (0..GPUS)
        .map(|g| {
            let mine = &pids[g * PROCS_PER_GPU..(g + 1) * PROCS_PER_GPU];
            let util: Vec<Value> = (0..600)
                .flat_map(|s| {
                    mine.iter().map(
                        move |pid| json!({ "t": s as f64 * 0.5, "pid": pid, "sm": 40, "mem": 10 }),
                    )
                })
                .collect();
            let timeline: Vec<Value> = (0..600)
                .map(|s| support::timeline_point(s as f64 * 0.5, s % 7, 50 + s % 40, 400_000))
                .collect();
            support::h100(g, format!("GPU-bench-{g}"), mine, timeline, util)
        })
        .collect();
    json!({ "devices": devices })
}

fn wait_for_number(path: &Path) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}
