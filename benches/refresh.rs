//! Overhead benchmark: prints figures, asserts nothing about time.
//!
//! vramscope runs in a 200x50 tmux pane against the fake NVML library with 8 GPUs and 64 GPU
//! processes (real `sleep` processes, so the host side does real work), at 1 s and 100 ms
//! refresh. Printed per interval: CPU time per refresh (utime+stime from /proc/PID/stat over
//! the run, and the same from the threads' schedstat in ns, since stat counts 10 ms ticks
//! over the run), time from start to first frame, peak RSS (VmHWM), and NVML calls per refresh
//! (from the fake's counters). Run with `cargo bench --bench refresh` (add `-- SECS` to
//! change the 30 s measuring window).

#[path = "../tests/common/mod.rs"]
mod common;

use common::tmux::{self, Tmux};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

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
    let mut sleepers: Vec<Child> = (0..GPUS * PROCS_PER_GPU)
        .map(|_| {
            Command::new("sleep")
                .arg("600")
                .spawn()
                .expect("spawn sleep")
        })
        .collect();
    let pids: Vec<u32> = sleepers.iter().map(Child::id).collect();
    let scenario = dir.path().join("scenario.json");
    std::fs::write(&scenario, scenario_json(&pids).to_string()).expect("write scenario");
    println!(
        "vramscope overhead: {GPUS} GPUs, {} processes, 200x50 tmux pane, {seconds} s per run",
        pids.len()
    );
    println!(
        "{:>9} {:>14} {:>14} {:>12} {:>12} {:>10} {:>16}",
        "interval",
        "CPU/refresh",
        "(schedstat)",
        "CPU %",
        "first frame",
        "peak RSS",
        "NVML calls/ref."
    );
    for interval_ms in [1000u64, 100] {
        let r = measure(dir.path(), &scenario, interval_ms, seconds);
        println!(
            "{:>7}ms {:>11.3} ms {:>11.3} ms {:>11.3}% {:>9.1} ms {:>7.1} MB {:>16.1}",
            interval_ms,
            r.cpu_ms_per_refresh,
            r.cpu_ns_ms_per_refresh,
            r.cpu_percent,
            r.first_frame_ms,
            r.peak_rss_mb,
            r.calls_per_refresh
        );
        for (name, per) in &r.calls_by_function {
            println!("            {name}: {per:.2}/refresh");
        }
    }
    for s in &mut sleepers {
        let _ = s.kill();
        let _ = s.wait();
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

fn measure(dir: &Path, scenario: &Path, interval_ms: u64, seconds: u64) -> Result {
    let run_dir = dir.join(format!("run-{interval_ms}ms"));
    std::fs::create_dir_all(&run_dir).expect("run dir");
    // On tmpfs where there is one: the fake rewrites this file every second from inside
    // vramscope, and an ext4 write-back there was counted as vramscope's CPU.
    let counts_dir = tempfile::Builder::new()
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .expect("counts dir");
    let counts = counts_dir.path().join("counts.json");
    let first_frame = run_dir.join("first-frame");
    let command = format!(
        "env FAKE_NVML_SCENARIO={scenario} FAKE_NVML_COUNTS={counts} \
         VRAMSCOPE_FIRST_FRAME_FILE={first} {exe} --nvml-lib {lib} --interval {interval_ms}ms",
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
    let cpu_before = cpu_ticks(pid);
    let ns_before = cpu_ns(pid);
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs(seconds));
    let cpu_after = cpu_ticks(pid);
    let ns_after = cpu_ns(pid);
    let elapsed = start.elapsed().as_secs_f64();
    let calls_after = read_counts(&counts);
    let peak_rss_mb = peak_rss_kb(pid) / 1024.0;
    drop(pane);
    // SAFETY: sysconf only reads a system constant.
    let ticks_per_sec = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let cpu_s = (cpu_after - cpu_before) / ticks_per_sec;
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
            let procs: Vec<Value> = pids[g * PROCS_PER_GPU..(g + 1) * PROCS_PER_GPU]
                .iter()
                .enumerate()
                .map(|(i, pid)| json!({ "pid": pid, "used_memory": (i as u64 + 1) << 30 }))
                .collect();
            let util: Vec<Value> = (0..600)
                .flat_map(|s| {
                    pids[g * PROCS_PER_GPU..(g + 1) * PROCS_PER_GPU].iter().map(
                        move |pid| json!({ "t": s as f64 * 0.5, "pid": pid, "sm": 40, "mem": 10 }),
                    )
                })
                .collect();
            let timeline: Vec<Value> = (0..600)
                .map(|s| {
                    json!({ "t": s as f64 * 0.5, "memory_used": (40u64 << 30) + (s % 7) * (1 << 30),
                    "gpu_util": 50 + s % 40, "mem_util": 30, "temperature": 60, "power": 400_000,
                    "sm_clock": 1700, "mem_clock": 2619, "fan": 40, "encoder": 0, "decoder": 0,
                    "throttle_reasons": 0, "ecc_corrected": 0, "ecc_uncorrected": 0, "pstate": 0 })
                })
                .collect();
            json!({
                "name": "NVIDIA H100 80GB HBM3",
                "uuid": format!("GPU-bench-{g}"),
                "pci_bus_id": format!("00000000:{:02X}:00.0", 0x18 + g),
                "memory_total": 80u64 << 30, "memory_reserved": 512u64 << 20,
                "max_sm_clock": 1980, "max_mem_clock": 2619, "power_limit": 700_000,
                "num_fans": 1, "persistence_mode": true,
                "timeline": timeline,
                "processes": [{ "t": 0, "compute": procs, "graphics": [] }],
                "process_utilization": util,
            })
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

/// utime + stime in clock ticks (fields 14 and 15 of /proc/PID/stat).
fn cpu_ticks(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let after_comm = &stat[stat.rfind(')').expect("comm") + 2..];
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    // after_comm starts at field 3 (state): utime is field 14, stime field 15.
    let utime: f64 = fields[11].parse().expect("utime");
    let stime: f64 = fields[12].parse().expect("stime");
    utime + stime
}

/// CPU time in ns summed over the process's threads (first field of each
/// /proc/PID/task/TID/schedstat): the same clock as utime+stime, without its 10 ms ticks,
/// which over 30 s at 1 s refresh are a third of a millisecond per refresh.
fn cpu_ns(pid: u32) -> f64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("task dir")
        .filter_map(|t| t.ok())
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .sum()
}

fn peak_rss_kb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

fn read_counts(path: &Path) -> BTreeMap<String, f64> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let value: Value = serde_json::from_str(&text).unwrap_or(json!({}));
    value
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| (k.clone(), v.as_f64().unwrap_or(0.0)))
                .collect()
        })
        .unwrap_or_default()
}
