//! `vramscope serve` scraped directly: the scenario's figures under dcgm-exporter's names and
//! units, per-process and per-rank allocator figures from a channel writer in this process,
//! absent figures left out, both exposition formats, read-only endpoints, the grace period
//! of exited processes, and scrapes that never reach NVML.

mod common;
mod serve_support;

use common::*;
use serde_json::json;
use serve_support::*;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};
use vramscope::channel::{DeviceFigures, SampleFields, Writer};

const UUID1: &str = "GPU-00000000-0000-0000-0000-000000000001";

/// Our rank's figures on GPU 0: 20 GiB allocated, 24 reserved, a 30 GiB spike, 2 OOMs,
/// 3 retries, step 7.
fn our_writer(dir: &Path) -> Writer {
    let mut writer = rank_writer(dir);
    for peak in [20 * GIB, 30 * GIB, 20 * GIB] {
        writer.sample(&SampleFields {
            slot: 0,
            allocated: Some(20 * GIB),
            reserved: Some(24 * GIB),
            peak: Some(peak),
            step: Some(7),
            ..SampleFields::default()
        });
    }
    writer.publish_device(
        0,
        &DeviceFigures {
            allocated: Some(20 * GIB),
            allocated_peak: Some(30 * GIB),
            reserved: Some(24 * GIB),
            reserved_peak: Some(24 * GIB),
            ooms: Some(2),
            alloc_retries: Some(3),
            ..DeviceFigures::default()
        },
    );
    writer.status(Some(7), "train");
    writer
}

fn sleeper() -> Child {
    Command::new("sleep")
        .arg("120")
        .spawn()
        .expect("spawn sleep")
}

struct Setup {
    _scenario: Scenario,
    _work: tempfile::TempDir,
    writer: Option<Writer>,
    other: Child,
    served: Served,
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = self.other.kill();
        let _ = self.other.wait();
        if let Some(w) = self.writer.take() {
            let _ = w.finish(vramscope::channel::Exit::Clean);
        }
    }
}

/// Both GPUs, our writer, and a server that has published every process.
fn setup() -> Setup {
    let work = tempfile::tempdir().unwrap();
    let channels = work.path().join("channels");
    let writer = our_writer(&channels);
    let other = sleeper();
    let scenario = Scenario::new(&two_gpus(std::process::id(), Some(other.id())));
    let served = Served::start(
        &scenario,
        &["--interval", "250ms"],
        &[("VRAMSCOPE_DIR", &channels)],
    );
    let ours = std::process::id().to_string();
    let theirs = other.id().to_string();
    served.scrape_until(Duration::from_secs(20), |text| {
        let all = samples(text);
        value(
            &all,
            "vramscope_process_allocator_allocated_bytes",
            &[("pid", &ours)],
        )
        .is_some()
            && value(&all, "vramscope_process_running", &[("pid", &theirs)]).is_some()
    });
    Setup {
        _scenario: scenario,
        _work: work,
        writer: Some(writer),
        other,
        served,
    }
}

#[test]
fn device_figures_keep_dcgm_exporters_names_units_and_labels() {
    let s = setup();
    let all = samples(&s.served.scrape());
    let gpu0 = [("gpu", "0"), ("UUID", UUID0)];
    // MiB, %, °C, W and MHz, as dcgm-exporter gives them.
    let expected = [
        ("DCGM_FI_DEV_FB_USED", 10_240.0),
        ("DCGM_FI_DEV_FB_FREE", 81_920.0 - 512.0 - 10_240.0),
        ("DCGM_FI_DEV_FB_TOTAL", 81_920.0),
        ("DCGM_FI_DEV_FB_RESERVED", 512.0),
        ("DCGM_FI_DEV_GPU_UTIL", 87.0),
        ("DCGM_FI_DEV_MEM_COPY_UTIL", 41.0),
        ("DCGM_FI_DEV_GPU_TEMP", 64.0),
        ("DCGM_FI_DEV_POWER_USAGE", 412.0),
        ("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", 700.0),
        ("DCGM_FI_DEV_SM_CLOCK", 1755.0),
        ("DCGM_FI_DEV_MEM_CLOCK", 2619.0),
        ("DCGM_FI_DEV_FAN_SPEED", 35.0),
        ("DCGM_FI_DEV_ENC_UTIL", 3.0),
        ("DCGM_FI_DEV_DEC_UTIL", 4.0),
        ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", 4.0),
        ("vramscope_gpu_memory_used_bytes", (10 * GIB) as f64),
        ("vramscope_gpu_memory_total_bytes", (80 * GIB) as f64),
        ("vramscope_gpu_processes", 1.0),
        ("vramscope_gpu_stale", 0.0),
    ];
    for (name, want) in expected {
        let labels: &[(&str, &str)] = if name.starts_with("DCGM") {
            &gpu0
        } else {
            &[("gpu", "0"), ("uuid", UUID0)]
        };
        assert_eq!(value(&all, name, labels), Some(want), "{name}");
    }
    let fb = &find(&all, "DCGM_FI_DEV_FB_USED", &[("gpu", "1")])[0];
    assert_eq!(fb.label("UUID"), Some(UUID1));
    assert_eq!(fb.label("modelName"), Some("NVIDIA H100 80GB HBM3"));
    assert_eq!(fb.label("pci_bus_id"), Some("00000000:19:00.0"));
    assert!(fb.label("Hostname").is_some_and(|h| !h.is_empty()));
    // No sensor, no fan: no sample at all, never a 0.
    assert_eq!(value(&all, "DCGM_FI_DEV_GPU_TEMP", &[("gpu", "1")]), None);
    assert_eq!(value(&all, "DCGM_FI_DEV_FAN_SPEED", &[("gpu", "1")]), None);
    assert_eq!(value(&all, "vramscope_nvml_available", &[]), Some(1.0));
    // The instrumented process's reserve counts towards its GPU.
    assert_eq!(
        value(
            &all,
            "vramscope_gpu_instrumented_reserved_bytes",
            &[("gpu", "0")]
        ),
        Some((24 * GIB) as f64)
    );
    assert_eq!(
        value(
            &all,
            "vramscope_gpu_instrumented_reserved_bytes",
            &[("gpu", "1")]
        ),
        None
    );
}

#[test]
fn processes_carry_nvml_and_allocator_figures_with_rank_labels() {
    let s = setup();
    let all = samples(&s.served.scrape());
    let ours = std::process::id().to_string();
    let mine = [("pid", ours.as_str()), ("gpu", "0"), ("uuid", UUID0)];
    let expected = [
        ("vramscope_process_running", 1.0),
        ("vramscope_process_memory_used_bytes", (25 * GIB) as f64),
        (
            "vramscope_process_allocator_allocated_bytes",
            (20 * GIB) as f64,
        ),
        (
            "vramscope_process_allocator_reserved_bytes",
            (24 * GIB) as f64,
        ),
        ("vramscope_process_allocator_peak_bytes", (30 * GIB) as f64),
        ("vramscope_process_allocator_ooms_total", 2.0),
        ("vramscope_process_allocator_retries_total", 3.0),
        ("vramscope_process_step", 7.0),
    ];
    for (name, want) in expected {
        assert_eq!(value(&all, name, &mine), Some(want), "{name}");
    }
    let row = &find(&all, "vramscope_process_memory_used_bytes", &mine)[0];
    assert_eq!(row.label("rank"), Some("1"));
    assert_eq!(row.label("local_rank"), Some("1"));
    assert_eq!(row.label("job_id"), Some("job-42"));
    assert!(row.label("user").is_some_and(|u| !u.is_empty()), "{row:?}");
    assert!(
        row.label("command")
            .is_some_and(|c| c.contains("serve_metrics")),
        "{row:?}"
    );
    // Not instrumented: NVML's figure and the host's, no allocator series, no rank.
    let theirs = s.other.id().to_string();
    let other = [("pid", theirs.as_str()), ("gpu", "1")];
    assert_eq!(
        value(&all, "vramscope_process_memory_used_bytes", &other),
        Some((3 * GIB) as f64)
    );
    let row = &find(&all, "vramscope_process_memory_used_bytes", &other)[0];
    assert_eq!(row.label("command"), Some("sleep 120"));
    assert_eq!(row.label("rank"), None);
    for name in [
        "vramscope_process_allocator_allocated_bytes",
        "vramscope_process_allocator_ooms_total",
        "vramscope_process_step",
    ] {
        assert_eq!(value(&all, name, &other), None, "{name}");
    }
}

#[test]
fn openmetrics_when_the_scraper_asks_and_the_text_format_otherwise() {
    let s = setup();
    let text = get(&s.served.url("/metrics"), None);
    assert_eq!(text.status, 200);
    assert_eq!(
        text.content_type,
        "text/plain; version=0.0.4; charset=utf-8"
    );
    assert!(
        text.body
            .contains("# TYPE vramscope_process_allocator_ooms_total counter\n")
    );
    assert!(!text.body.contains("# EOF"));
    let om = get(&s.served.url("/metrics"), Some(PROMETHEUS_ACCEPT));
    assert_eq!(om.status, 200);
    assert!(
        om.content_type
            .starts_with("application/openmetrics-text; version=1.0.0"),
        "{}",
        om.content_type
    );
    assert!(
        om.body
            .contains("# TYPE vramscope_process_allocator_ooms counter\n")
    );
    assert!(
        om.body
            .contains("# UNIT vramscope_process_memory_used_bytes bytes\n")
    );
    assert!(om.body.ends_with("# EOF\n"));
    // The same samples either way.
    let pick = |body: &str| {
        let mut all: Vec<(String, Vec<(String, String)>)> = samples(body)
            .into_iter()
            .filter(|l| l.name != "vramscope_snapshot_timestamp_seconds")
            .map(|l| (format!("{} {}", l.name, l.value), l.labels))
            .collect();
        all.sort();
        all
    };
    let (a, b) = (pick(&text.body), pick(&om.body));
    // Both scrapes may straddle a tick; figures in this scenario are constant.
    assert_eq!(a, b);
}

#[test]
fn promtool_checks_both_formats_without_a_finding() {
    if !tool_available("promtool", "--version", "apt-get install prometheus") {
        return;
    }
    let s = setup();
    let text = s.served.scrape();
    let om = get(&s.served.url("/metrics"), Some(PROMETHEUS_ACCEPT));
    assert!(om.content_type.starts_with("application/openmetrics-text"));
    for (format, body) in [("text", text), ("OpenMetrics", om.body)] {
        // promtool's lint finds one thing of ours, and only on dcgm-exporter's families: its
        // camelCase `modelName` label, kept so that dashboards built for dcgm-exporter keep
        // working (dcgm-exporter's own output gets the same finding). Any other line (a
        // family without HELP, a bad name, a parse error) fails.
        let findings = promtool_findings(&body, format);
        assert!(
            findings
                .iter()
                .any(|l| l.starts_with("DCGM_FI_DEV_FB_USED ")),
            "{format}: the modelName finding is gone: {findings:?}"
        );
        for line in &findings {
            assert!(
                line.starts_with("DCGM_FI_DEV_")
                    && line
                        .ends_with("label names should be written in 'snake_case' not 'camelCase'"),
                "{format}: promtool: {line}\n{findings:?}"
            );
        }
        // The same body without dcgm-exporter's camelCase label: nothing found.
        let snake = body.replace(",modelName=", ",model_name=");
        let findings = promtool_findings(&snake, format);
        assert!(findings.is_empty(), "{format}: promtool: {findings:?}");
    }
}

/// What `promtool check metrics` says of `body`, a line each, less (for OpenMetrics) the
/// findings that come from reading it as the classic text format (`counter_read_as_text`).
/// A failure without a finding is a finding.
fn promtool_findings(body: &str, format: &str) -> Vec<String> {
    let out = promtool_check(body);
    let report =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    let mut findings: Vec<String> = report
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter(|l| !(format == "OpenMetrics" && counter_read_as_text(l, body)))
        .map(str::to_string)
        .collect();
    if !out.status.success() && report.trim().is_empty() {
        findings.push(format!("failed without saying why: {}", out.status));
    }
    findings
}

/// Whether promtool's `finding` on an OpenMetrics `body` is `X_total no help text` for a
/// counter whose family `X` has its HELP: promtool 2.x's `check metrics` reads only the
/// classic text format, where a counter's family is named with `_total`, so the samples of
/// a family named as OpenMetrics requires (without `_total`, as prometheus-client and
/// client_golang write it) look to it like a family of their own without HELP. Prometheus
/// itself reads them as one family; `serve_prometheus` checks that every family it stored
/// has its HELP.
fn counter_read_as_text(finding: &str, body: &str) -> bool {
    let Some(family) = finding
        .strip_suffix(" no help text")
        .and_then(|name| name.strip_suffix("_total"))
    else {
        return false;
    };
    let help = body
        .lines()
        .find_map(|l| l.strip_prefix(&format!("# HELP {family} ")));
    help.is_some_and(|h| !h.trim().is_empty())
        && body.contains(&format!("\n# TYPE {family} counter\n"))
}

/// `promtool check metrics` run on `body`.
fn promtool_check(body: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn only_reading_is_possible() {
    let s = setup();
    let index = get(&s.served.url("/"), None);
    assert_eq!(index.status, 200);
    assert!(index.body.contains("href=\"/metrics\""), "{}", index.body);
    assert_eq!(request("HEAD", &s.served.url("/metrics"), None).status, 200);
    let post = request("POST", &s.served.url("/metrics"), None);
    assert_eq!(post.status, 405);
    assert_eq!(get(&s.served.url("/metrics/../admin"), None).status, 404);
    assert_eq!(get(&s.served.url("/quit"), None).status, 404);
    // Still serving after all that.
    assert!(s.served.scrape().contains("DCGM_FI_DEV_FB_USED"));
}

#[test]
fn an_exited_process_leaves_after_the_grace_period() {
    let work = tempfile::tempdir().unwrap();
    let mut other = sleeper();
    let pid = other.id();
    let scenario = Scenario::new(&two_gpus(1, Some(pid)));
    let served = Served::start(&scenario, &["--interval", "250ms", "--grace", "2s"], &[]);
    let theirs = pid.to_string();
    let with = [("pid", theirs.as_str())];
    served.scrape_until(Duration::from_secs(20), |text| {
        value(&samples(text), "vramscope_process_running", &with) == Some(1.0)
    });
    // NVML stops listing it.
    let _ = other.kill();
    let _ = other.wait();
    scenario.rewrite(&two_gpus(1, Some(2)));
    let gone_at = Instant::now();
    let text = served.scrape_until(Duration::from_secs(10), |text| {
        value(&samples(text), "vramscope_process_running", &with) == Some(0.0)
    });
    // What it held is no longer reported; it is still there, marked exited.
    let all = samples(&text);
    assert_eq!(
        value(&all, "vramscope_process_memory_used_bytes", &with),
        None
    );
    served.scrape_until(Duration::from_secs(10), |text| {
        find(&samples(text), "vramscope_process_running", &with).is_empty()
    });
    assert!(
        gone_at.elapsed() >= Duration::from_millis(1500),
        "left before its grace period: {:?}",
        gone_at.elapsed()
    );
    drop(work);
}

#[test]
fn scrapes_read_the_snapshot_and_never_call_nvml() {
    let work = tempfile::tempdir().unwrap();
    let counts = work.path().join("counts.json");
    let scenario = Scenario::new(&two_gpus(1, Some(2)));
    let served = Served::start(
        &scenario,
        &["--interval", "250ms"],
        &[("FAKE_NVML_COUNTS", &counts)],
    );
    served.scrape_until(Duration::from_secs(20), |t| {
        t.contains("DCGM_FI_DEV_FB_USED")
    });
    // Utilisation, not memory: the fast memory sampling reads memory between ticks too.
    let memory_calls = || -> u64 {
        let counts = read_counts(&counts);
        counts
            .get("nvmlDeviceGetUtilizationRates")
            .copied()
            .unwrap_or(0.0) as u64
    };
    // The fake writes its counts at most once a second: wait for a fresh write.
    std::thread::sleep(Duration::from_millis(1100));
    let before = memory_calls();
    let started = Instant::now();
    let mut scrapes = 0_u32;
    while started.elapsed() < Duration::from_secs(2) {
        assert!(served.scrape().contains("DCGM_FI_DEV_FB_USED"));
        scrapes += 1;
    }
    std::thread::sleep(Duration::from_millis(1100));
    let after = memory_calls();
    let window = started.elapsed().as_secs_f64();
    // Two GPUs every 250 ms over the window, plus a second of slack at each end for the
    // counts file's own once-a-second writes.
    let ticks = (window + 2.0) / 0.25;
    assert!(scrapes >= 20, "only {scrapes} scrapes");
    assert!(
        ((after - before) as f64) <= 2.0 * ticks,
        "{} utilisation calls for {scrapes} scrapes in {window:.1} s",
        after - before
    );
    assert!(after > before, "the samplers stopped");
}

#[test]
fn a_bad_address_or_a_taken_port_is_one_line_and_a_failure() {
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let out = scenario
        .command()
        .args(["serve", "--listen", "localhost:9400"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("vramscope: --listen `localhost:9400` is not IP:PORT"),
        "{err}"
    );

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = scenario
        .command()
        .args(["serve", "--listen", &addr])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!("vramscope: cannot listen on {addr}: ")),
        "{err}"
    );
}

#[test]
fn without_nvml_it_keeps_serving_and_says_why() {
    let scenario = Scenario::new(&json!({ "devices": [h100(0)], "init_error": "DriverNotLoaded" }));
    let served = Served::start(&scenario, &["--interval", "250ms"], &[]);
    let text = served.scrape_until(Duration::from_secs(20), |t| {
        t.contains("vramscope_nvml_available")
    });
    let all = samples(&text);
    assert_eq!(value(&all, "vramscope_nvml_available", &[]), Some(0.0));
    assert!(find(&all, "DCGM_FI_DEV_FB_USED", &[]).is_empty(), "{text}");
    let later = std::iter::from_fn(|| served.stderr.recv_timeout(Duration::from_secs(10)).ok());
    let said = served
        .early
        .iter()
        .cloned()
        .chain(later)
        .find(|line| line.starts_with("vramscope: "))
        .expect("vramscope says why on stderr");
    assert!(said.starts_with("vramscope: "), "{said}");
    assert!(said.ends_with("; serving without GPU figures"), "{said}");
}

#[test]
fn serve_refuses_the_one_shot_options_instead_of_serving() {
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    for option in ["--once", "--csv", "--json", "--ascii"] {
        let mut child = scenario
            .command()
            .args(["serve", "--listen", "127.0.0.1:0", option])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if child.try_wait().unwrap().is_none() {
            let _ = child.kill();
            let _ = child.wait();
            panic!("serve {option} started a server");
        }
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{option}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!("vramscope: {option} does not apply to `vramscope serve`\n")
        );
        assert!(out.stdout.is_empty());
    }
}
