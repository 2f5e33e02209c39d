//! Exporter footprint over a long run: prints and records figures, asserts nothing.
//!
//! `vramscope serve` runs against the fake NVML with 8 GPUs and 8 GPU processes each (64
//! real `sleep` processes, so the host sampler does real work) at its default 1 s interval,
//! and is scraped once a second with Prometheus's `Accept` header (OpenMetrics), as one
//! Prometheus would. Every minute one GPU's 8 processes exit and 8 new ones take their place
//! (the scenario is rewritten), so per-process state that is never dropped shows as growth.
//! Its RSS (VmRSS), peak RSS (VmHWM), anonymous RSS and thread count are read from /proc at
//! the start and every `EVERY` seconds, printed and appended to `target/serve-footprint.txt`
//! as they come (so a run cut short still leaves its figures), with a closing line giving the
//! growth from start to end.
//!
//! `cargo bench --profile dist --bench serve_footprint -- [MINUTES [EVERY]]` (60 and 60 by
//! default): the dist profile is the one the wheel ships (Cargo.toml), so this measures that
//! binary. `VRAMSCOPE_FOOTPRINT_OUT` names another output file.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/serve_support/mod.rs"]
mod serve_support;
mod support;

use serde_json::{Value, json};
use serve_support::{PROMETHEUS_ACCEPT, Served};
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use support::Children;

const GPUS: usize = 8;
const PROCS_PER_GPU: usize = 8;
/// How often one GPU's processes are replaced.
const CHURN: Duration = Duration::from_secs(60);

fn main() {
    let mut numbers = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse::<u64>().ok());
    let minutes = numbers.next().unwrap_or(60);
    let every = Duration::from_secs(numbers.next().unwrap_or(60).max(1));
    let out_path = std::env::var_os("VRAMSCOPE_FOOTPRINT_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/serve-footprint.txt")
        });
    let mut out =
        std::fs::File::create(&out_path).unwrap_or_else(|e| panic!("{}: {e}", out_path.display()));

    // One set of sleepers per GPU, so one GPU's can be replaced at a time.
    let mut gpus: Vec<Children> = (0..GPUS)
        .map(|_| Children::sleeps(PROCS_PER_GPU, 86_400))
        .collect();
    let scenario = common::Scenario::new(&scenario_json(&gpus));
    let served = Served::start(&scenario, &[], &[]);
    let pid = served.child.id();
    let total = GPUS * PROCS_PER_GPU;
    let first = served.scrape_until(Duration::from_secs(60), |t| {
        t.matches("vramscope_process_host_rss_bytes{").count() == total
    });
    let mut log = |line: String| {
        println!("{line}");
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    };
    log(format!(
        "# vramscope serve footprint: {GPUS} GPUs x {PROCS_PER_GPU} processes ({total}), 1 s interval, \
         one OpenMetrics scrape a second, one GPU's processes replaced every {} s, {minutes} min; \
         {} B per text scrape; binary {}",
        CHURN.as_secs(),
        first.len(),
        env!("CARGO_BIN_EXE_vramscope")
    ));
    log("# minute\tscrapes\tfailed\trss_kib\thwm_kib\tanon_kib\tthreads".into());

    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .into();
    let url = served.url("/metrics");
    let started = Instant::now();
    let end = started + Duration::from_secs(minutes * 60);
    let mut next_report = started;
    let mut next_churn = started + CHURN;
    let mut churned = 0usize;
    let mut due = started;
    let (mut scrapes, mut failed) = (0u64, 0u64);
    let mut first_rss = None;
    let mut last = None;
    loop {
        let now = Instant::now();
        if now >= next_report {
            let Some(status) = Status::of(pid) else {
                log(format!("# vramscope serve (pid {pid}) is gone"));
                break;
            };
            let minute = started.elapsed().as_secs_f64() / 60.0;
            log(format!(
                "{minute:.1}\t{scrapes}\t{failed}\t{}\t{}\t{}\t{}",
                status.rss, status.hwm, status.anon, status.threads
            ));
            first_rss.get_or_insert(status.rss);
            last = Some(status);
            next_report += every;
        }
        if now >= end {
            break;
        }
        if now >= next_churn {
            let g = churned % GPUS;
            gpus[g] = Children::sleeps(PROCS_PER_GPU, 86_400);
            scenario.rewrite(&scenario_json(&gpus));
            churned += 1;
            next_churn += CHURN;
        }
        let body = agent
            .get(&url)
            .header("Accept", PROMETHEUS_ACCEPT)
            .call()
            .ok()
            .and_then(|mut r| r.body_mut().read_to_string().ok());
        scrapes += 1;
        if body.is_none_or(|b| !b.contains("vramscope_process_host_rss_bytes{")) {
            failed += 1;
        }
        due += Duration::from_secs(1);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    if let (Some(first), Some(last)) = (first_rss, last) {
        log(format!(
            "# after {:.1} min, {scrapes} scrapes ({failed} failed), {} process replacements: \
             RSS {:.1} MiB at start, {:.1} MiB at the end ({:+.1} MiB), peak {:.1} MiB; {} threads",
            started.elapsed().as_secs_f64() / 60.0,
            churned * PROCS_PER_GPU,
            first as f64 / 1024.0,
            last.rss as f64 / 1024.0,
            (last.rss as f64 - first as f64) / 1024.0,
            last.hwm as f64 / 1024.0,
            last.threads
        ));
    }
}

/// The figures of /proc/PID/status this benchmark reads, in KiB (threads: a count).
struct Status {
    rss: u64,
    hwm: u64,
    anon: u64,
    threads: u64,
}

impl Status {
    fn of(pid: u32) -> Option<Status> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let field = |name: &str| -> Option<u64> {
            text.lines()
                .find_map(|l| l.strip_prefix(name))?
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .ok()
        };
        Some(Status {
            rss: field("VmRSS:")?,
            hwm: field("VmHWM:")?,
            anon: field("RssAnon:")?,
            threads: field("Threads:")?,
        })
    }
}

fn scenario_json(gpus: &[Children]) -> Value {
    let devices: Vec<Value> = gpus
        .iter()
        .enumerate()
        .map(|(g, children)| {
            let mine = children.pids();
            let util = mine
                .iter()
                .map(|pid| json!({ "t": 0, "pid": pid, "sm": 40, "mem": 10 }))
                .collect();
            let timeline = vec![support::timeline_point(0, 0, 50, 400_000)];
            support::h100(g, format!("GPU-bench-{g}"), &mine, timeline, util)
        })
        .collect();
    json!({ "devices": devices })
}
