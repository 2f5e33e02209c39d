//! Exporter benchmark: prints figures, asserts nothing about time.
//!
//! `vramscope serve` runs against the fake NVML with 8 GPUs and 64 GPU processes (real
//! `sleep` processes, so the host sampler does real work) at a 1 s interval. First it runs
//! unscraped, then a local load generator scrapes it at 200 requests per second (4
//! keep-alive connections, each sending on a fixed schedule with Prometheus's `Accept`
//! header, so OpenMetrics), each phase for 30 s. Printed: median, p99 and max latency
//! (measured from each request's scheduled send time, so a stall is not hidden by the
//! requests it delays), vramscope's CPU per scrape (its threads' schedstat under load minus
//! unscraped, per scrape), and NVML calls per second in both phases from the fake's counters,
//! which scraping must not change. Then, for each storm (200 idle clients, 300 slowloris
//! clients and 300 clients connecting and closing, each reconnecting as soon as it is
//! dropped, at the default 64 connections), a kept-alive scraper and a fresh-connection
//! scraper each scrape 10 times a second: printed are their successes and latencies. Run
//! with `cargo bench --bench serve` (add `-- SECS` to change the 30 s phases; storms last
//! a third of that, at least 5 s).

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/serve_support/mod.rs"]
mod serve_support;
mod support;

use common::read_counts;
use serde_json::{Value, json};
use serve_support::storm::{KeepAlive, Misbehaviour, Storm};
use serve_support::{PROMETHEUS_ACCEPT, Served};
use std::path::Path;
use std::time::{Duration, Instant};
use support::{Children, cpu_ns};

const GPUS: usize = 8;
const PROCS_PER_GPU: usize = 8;
const RATE: u32 = 200;
const CONNECTIONS: u32 = 4;

fn main() {
    let seconds: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(30);
    let sleepers = Children::sleeps(GPUS * PROCS_PER_GPU, 900);
    let pids = sleepers.pids();
    let scenario = common::Scenario::new(&scenario_json(&pids));
    let counts_dir = support::counts_dir("vramscope-serve");
    let counts = counts_dir.path().join("counts.json");
    let served = Served::start(
        &scenario,
        &["--interval", "1s"],
        &[("FAKE_NVML_COUNTS", &counts)],
    );
    let pid = served.child.id();
    // Every process with its host facts, so the payload is the steady one.
    let payload = served.scrape_until(Duration::from_secs(30), |t| {
        t.matches("vramscope_process_host_rss_bytes{").count() == pids.len()
    });
    std::thread::sleep(Duration::from_secs(2));
    println!(
        "vramscope serve: {GPUS} GPUs, {} processes, 1 s interval; {} B per text scrape; {seconds} s per phase",
        pids.len(),
        payload.len()
    );

    let idle = Phase::measure(pid, &counts, || {
        std::thread::sleep(Duration::from_secs(seconds))
    });
    let mut latencies = Vec::new();
    let mut bytes = 0;
    let loaded = Phase::measure(pid, &counts, || {
        let (l, b) = load(&served.url("/metrics"), seconds);
        latencies = l;
        bytes = b;
    });
    drop(sleepers);

    let scrapes = latencies.len();
    let failed = latencies.iter().filter(|l| l.is_none()).count();
    let mut ok: Vec<Duration> = latencies.into_iter().flatten().collect();
    ok.sort();
    let pick = |q: f64| ok[((ok.len() as f64 * q) as usize).min(ok.len() - 1)];
    println!(
        "load: {scrapes} scrapes in {:.1} s ({:.0}/s), {failed} failed, {:.0} B per OpenMetrics scrape",
        loaded.seconds,
        scrapes as f64 / loaded.seconds,
        bytes as f64 / ok.len().max(1) as f64
    );
    if !ok.is_empty() {
        println!(
            "latency from scheduled send: median {:.3} ms, p99 {:.3} ms, max {:.3} ms",
            ms(pick(0.5)),
            ms(pick(0.99)),
            ms(*ok.last().unwrap_or(&Duration::ZERO))
        );
    }
    let extra_ns = loaded.cpu_ns - idle.cpu_ns * loaded.seconds / idle.seconds;
    println!(
        "vramscope CPU: {:.2} % unscraped, {:.2} % under load; {:.1} µs per scrape (schedstat)",
        idle.cpu_ns / idle.seconds / 1e7,
        loaded.cpu_ns / loaded.seconds / 1e7,
        extra_ns / scrapes.max(1) as f64 / 1e3
    );
    println!(
        "NVML calls per second: {:.1} unscraped, {:.1} under load",
        idle.calls / idle.calls_seconds,
        loaded.calls / loaded.calls_seconds
    );
    for (clients, how) in [
        (200, Misbehaviour::Idle),
        (300, Misbehaviour::Trickle),
        (300, Misbehaviour::Churn),
    ] {
        storm(&served, clients, how, (seconds / 3).max(5));
    }
}

/// Scrapes on one kept-alive connection and on fresh connections, 10 a second each, while
/// `clients` clients misbehave as `how` says; prints how many succeeded and how fast.
fn storm(served: &Served, clients: usize, how: Misbehaviour, seconds: u64) {
    let mut kept = KeepAlive::connect(served.addr);
    let _ = kept.scrape();
    let storm = Storm::start(served.addr, clients, how, Duration::from_secs(seconds + 30));
    std::thread::sleep(Duration::from_secs(1));
    let end = Instant::now() + Duration::from_secs(seconds);
    let url = served.url("/metrics");
    let fresh = std::thread::spawn(move || {
        let mut out = Vec::new();
        while Instant::now() < end {
            let started = Instant::now();
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .timeout_global(Some(Duration::from_secs(5)))
                .build()
                .into();
            let ok = agent
                .get(&url)
                .call()
                .ok()
                .and_then(|mut r| r.body_mut().read_to_string().ok())
                .is_some();
            out.push(ok.then(|| started.elapsed()));
            std::thread::sleep(Duration::from_millis(100));
        }
        out
    });
    let mut kept_out = Vec::new();
    while Instant::now() < end {
        let started = Instant::now();
        kept_out.push(kept.scrape().ok().map(|_| started.elapsed()));
        std::thread::sleep(Duration::from_millis(100));
    }
    let fresh_out = fresh.join().expect("fresh scraper");
    let connections = storm.stop();
    println!(
        "storm of {clients} {how:?} clients for {seconds} s ({connections} connections): {}; {}",
        summary("kept-alive", &kept_out),
        summary("fresh connection", &fresh_out)
    );
}

/// `NAME ok/all, median and max latency`.
fn summary(name: &str, scrapes: &[Option<Duration>]) -> String {
    let mut ok: Vec<Duration> = scrapes.iter().flatten().copied().collect();
    ok.sort();
    let latency = match (ok.get(ok.len() / 2), ok.last()) {
        (Some(median), Some(max)) => {
            format!("median {:.2} ms, max {:.2} ms", ms(*median), ms(*max))
        }
        _ => "no latency".to_string(),
    };
    format!("{name} {}/{} answered, {latency}", ok.len(), scrapes.len())
}

/// One phase's CPU time and NVML calls.
struct Phase {
    seconds: f64,
    cpu_ns: f64,
    calls: f64,
    /// The window the call counts cover, on average: the phase and the wait after it.
    calls_seconds: f64,
}

impl Phase {
    fn measure(pid: u32, counts: &Path, run: impl FnOnce()) -> Phase {
        // The fake writes its counts at most once a second: read them a second apart from
        // any write, and allow for that second in the window.
        let calls_before = total_calls(counts);
        let cpu_before = cpu_ns(pid).expect("task dir");
        let started = Instant::now();
        run();
        let cpu_after = cpu_ns(pid).expect("task dir");
        let seconds = started.elapsed().as_secs_f64();
        std::thread::sleep(Duration::from_millis(1100));
        let calls_after = total_calls(counts);
        Phase {
            seconds,
            cpu_ns: cpu_after - cpu_before,
            calls: calls_after - calls_before,
            calls_seconds: started.elapsed().as_secs_f64(),
        }
    }
}

/// `RATE` requests a second for `seconds`, over `CONNECTIONS` keep-alive connections, each
/// on a fixed schedule. Each request's latency (`None` for a failure), and the bytes read.
fn load(url: &str, seconds: u64) -> (Vec<Option<Duration>>, usize) {
    let period = Duration::from_secs(1) * CONNECTIONS / RATE;
    let start = Instant::now() + Duration::from_millis(100);
    let end = start + Duration::from_secs(seconds);
    let workers: Vec<_> = (0..CONNECTIONS)
        .map(|c| {
            let url = url.to_string();
            std::thread::spawn(move || {
                let agent: ureq::Agent = ureq::Agent::config_builder()
                    .timeout_global(Some(Duration::from_secs(5)))
                    .build()
                    .into();
                let mut out = Vec::new();
                let mut bytes = 0;
                let mut due = start + period * c / CONNECTIONS;
                while due < end {
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    let body = agent
                        .get(&url)
                        .header("Accept", PROMETHEUS_ACCEPT)
                        .call()
                        .ok()
                        .and_then(|mut r| r.body_mut().read_to_string().ok());
                    out.push(body.map(|b| {
                        bytes += b.len();
                        due.elapsed()
                    }));
                    due += period;
                }
                (out, bytes)
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut bytes = 0;
    for w in workers {
        let (out, b) = w.join().expect("load worker");
        all.extend(out);
        bytes += b;
    }
    (all, bytes)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn scenario_json(pids: &[u32]) -> Value {
    let devices: Vec<Value> = (0..GPUS)
        .map(|g| {
            let mine = &pids[g * PROCS_PER_GPU..(g + 1) * PROCS_PER_GPU];
            let util = mine
                .iter()
                .map(|pid| json!({ "t": 0, "pid": pid, "sm": 40, "mem": 10 }))
                .collect();
            let timeline = vec![support::timeline_point(0, 0, 50, 400_000)];
            support::h100(g, format!("GPU-bench-{g}"), mine, timeline, util)
        })
        .collect();
    json!({ "devices": devices })
}

/// Every NVML call the fake has counted so far, summed.
fn total_calls(path: &Path) -> f64 {
    read_counts(path).values().sum()
}
