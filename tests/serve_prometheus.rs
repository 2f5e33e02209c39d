//! End to end through a real Prometheus: it scrapes `vramscope serve` (fake NVML, and a
//! channel writer in this process) every second, and the values it stored, read back through
//! its HTTP query API, must equal the scenario's. The Grafana dashboard's queries are run
//! against the same Prometheus.

mod common;
mod serve_support;

use common::*;
use serde_json::{Value, json};
use serve_support::prometheus::Prometheus;
use serve_support::*;
use std::time::{Duration, Instant};
use vramscope::channel::{DeviceFigures, SampleFields, Writer};

const DASHBOARD: &str = include_str!("../assets/grafana-dashboard.json");

/// Rank 1 of `job-42` on GPU 0: 20 GiB allocated, 24 reserved, 30 peak, `ooms` OOMs.
fn publish(writer: &mut Writer, ooms: u64) {
    writer.sample(&SampleFields {
        slot: 0,
        allocated: Some(20 * GIB),
        reserved: Some(24 * GIB),
        peak: Some(30 * GIB),
        step: Some(7),
        ..SampleFields::default()
    });
    writer.publish_device(
        0,
        &DeviceFigures {
            allocated: Some(20 * GIB),
            reserved: Some(24 * GIB),
            ooms: Some(ooms),
            alloc_retries: Some(3),
            ..DeviceFigures::default()
        },
    );
    writer.status(Some(7), "train");
}

#[test]
fn prometheus_stores_the_scenarios_values() {
    if !tool_available("prometheus", "--version", "apt-get install prometheus") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let channels = work.path().join("channels");
    let mut writer = rank_writer(&channels);
    publish(&mut writer, 2);
    let pid = std::process::id();
    let scenario = Scenario::new(&two_gpus(pid, None));
    let served = Served::start(
        &scenario,
        &["--interval", "250ms"],
        &[("VRAMSCOPE_DIR", &channels)],
    );
    let prometheus = Prometheus::start(served.addr);
    let ours = format!("pid=\"{pid}\"");
    prometheus.wait_until(
        Duration::from_secs(60),
        "stored the allocator's figures",
        || {
            !prometheus
                .query(&format!(
                    "vramscope_process_allocator_allocated_bytes{{{ours}}}"
                ))
                .is_empty()
        },
    );
    assert_eq!(prometheus.one("up{job=\"vramscope\"}"), 1.0);

    // Device figures under dcgm-exporter's names, in its units.
    let gpu0 = format!("gpu=\"0\",UUID=\"{UUID0}\"");
    for (metric, want) in [
        ("DCGM_FI_DEV_FB_USED", 10_240.0),
        ("DCGM_FI_DEV_FB_FREE", 81_920.0 - 512.0 - 10_240.0),
        ("DCGM_FI_DEV_GPU_UTIL", 87.0),
        ("DCGM_FI_DEV_GPU_TEMP", 64.0),
        ("DCGM_FI_DEV_POWER_USAGE", 412.0),
        ("DCGM_FI_DEV_SM_CLOCK", 1755.0),
        ("DCGM_FI_DEV_MEM_CLOCK", 2619.0),
    ] {
        assert_eq!(
            prometheus.one(&format!("{metric}{{{gpu0}}}")),
            want,
            "{metric}"
        );
    }
    let (labels, _) = &prometheus.query(&format!("DCGM_FI_DEV_FB_USED{{{gpu0}}}"))[0];
    assert_eq!(labels["modelName"], json!("NVIDIA H100 80GB HBM3"));
    assert_eq!(labels["pci_bus_id"], json!("00000000:18:00.0"));
    assert!(labels["Hostname"].as_str().is_some_and(|h| !h.is_empty()));
    // Absent figures were never stored as 0.
    assert!(
        prometheus
            .query("DCGM_FI_DEV_GPU_TEMP{gpu=\"1\"}")
            .is_empty()
    );
    assert!(
        prometheus
            .query("DCGM_FI_DEV_FAN_SPEED{gpu=\"1\"}")
            .is_empty()
    );
    assert_eq!(prometheus.one("DCGM_FI_DEV_FAN_SPEED{gpu=\"0\"}"), 35.0);

    // Per process and per rank, in bytes.
    for (metric, want) in [
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
    ] {
        let query = format!("{metric}{{{ours},gpu=\"0\",rank=\"1\",job_id=\"job-42\"}}");
        assert_eq!(prometheus.one(&query), want, "{query}");
    }
    let (labels, _) = &prometheus.query(&format!("vramscope_process_step{{{ours}}}"))[0];
    // Prometheus's own `job` label is the scrape job's; the writer's job is `job_id`.
    assert_eq!(labels["job"], json!("vramscope"));
    assert_eq!(labels["local_rank"], json!("1"));
    assert_eq!(labels["uuid"], json!(UUID0));

    // Prometheus negotiated OpenMetrics: the counter's family is named without `_total`,
    // and units were declared.
    let metadata =
        prometheus.get_json("/api/v1/targets/metadata?match_target=%7Bjob%3D%22vramscope%22%7D");
    let entries = metadata["data"].as_array().unwrap();
    let entry = |name: &str| {
        entries
            .iter()
            .find(|e| e["metric"] == json!(name))
            .unwrap_or_else(|| panic!("no metadata for {name}: {metadata}"))
    };
    assert_eq!(
        entry("vramscope_process_allocator_ooms")["type"],
        json!("counter")
    );
    assert_eq!(
        entry("vramscope_process_memory_used_bytes")["unit"],
        json!("bytes")
    );
    assert_eq!(entry("DCGM_FI_DEV_FB_USED")["type"], json!("gauge"));
    // Every family it stored came with its HELP, counters included.
    for e in entries {
        assert!(
            e["help"].as_str().is_some_and(|h| !h.trim().is_empty()),
            "no HELP reached Prometheus for {}",
            e["metric"]
        );
    }
    assert!(entries.len() > 20, "{} families only", entries.len());

    // A new OOM reaches Prometheus, and the dashboard's annotation query marks it.
    publish(&mut writer, 3);
    prometheus.wait_until(Duration::from_secs(30), "saw the third OOM", || {
        prometheus
            .query(&format!("vramscope_process_allocator_ooms_total{{{ours}}}"))
            .first()
            .is_some_and(|(_, v)| *v == 3.0)
    });
    let annotation = dashboard_expr_of_annotation("OOM");
    let marked = prometheus.query(&grafana_to_promql(&annotation));
    assert_eq!(marked.len(), 1, "{annotation}: {marked:?}");
    assert_eq!(marked[0].0["pid"], json!(pid.to_string()));

    // Every query of the dashboard is valid PromQL for this Prometheus; the per-rank ones
    // find rank 1.
    for expr in dashboard_exprs() {
        prometheus.query(&grafana_to_promql(&expr));
    }
    let per_rank = prometheus.query(&grafana_to_promql(
        &dashboard_exprs()
            .into_iter()
            .find(|e| {
                e.starts_with("sum by (job_id, rank) (vramscope_process_allocator_allocated_bytes")
            })
            .expect("the allocated-per-rank query"),
    ));
    assert_eq!(per_rank.len(), 1, "{per_rank:?}");
    assert_eq!(per_rank[0].0["rank"], json!("1"));
    assert_eq!(per_rank[0].1, (20 * GIB) as f64);
    writer.finish(vramscope::channel::Exit::Clean).unwrap();
}

/// Every PromQL expression of the dashboard's panels.
fn dashboard_exprs() -> Vec<String> {
    let doc: Value = serde_json::from_str(DASHBOARD).unwrap();
    let mut exprs = Vec::new();
    for panel in doc["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            exprs.push(target["expr"].as_str().unwrap().to_string());
        }
    }
    exprs
}

fn dashboard_expr_of_annotation(name: &str) -> String {
    let doc: Value = serde_json::from_str(DASHBOARD).unwrap();
    doc["annotations"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == json!(name))
        .and_then(|a| a["expr"].as_str())
        .unwrap_or_else(|| panic!("no {name} annotation"))
        .to_string()
}

/// The dashboard's variables as Grafana fills them with "All".
fn grafana_to_promql(expr: &str) -> String {
    expr.replace("$__rate_interval", "1m")
        .replace("$instance", ".*")
        .replace("$gpu", ".*")
        .replace("$job_id", ".*")
}

#[test]
fn the_dashboard_is_importable_and_shows_what_was_asked() {
    let doc: Value = serde_json::from_str(DASHBOARD).expect("the dashboard is JSON");
    assert_eq!(doc["uid"], json!("vramscope-gpu-memory"));
    assert!(doc["schemaVersion"].as_u64().is_some_and(|v| v >= 30));
    assert!(
        doc["id"].is_null(),
        "an exported dashboard carries no database id"
    );
    let panels = doc["panels"].as_array().unwrap();
    let mut ids: Vec<u64> = panels.iter().map(|p| p["id"].as_u64().unwrap()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), panels.len(), "panel ids must be unique");
    for panel in panels.iter().filter(|p| p["type"] != json!("row")) {
        assert_eq!(
            panel["datasource"]["uid"],
            json!("${datasource}"),
            "{panel}"
        );
        let grid = &panel["gridPos"];
        for key in ["h", "w", "x", "y"] {
            assert!(grid[key].is_u64(), "{}: gridPos.{key}", panel["title"]);
        }
    }
    let exprs = dashboard_exprs().join("\n");
    // Memory per GPU, per process and per rank (allocated, reserved, NVML used, peak),
    // utilisation.
    for needle in [
        "vramscope_gpu_memory_used_bytes",
        "vramscope_process_memory_used_bytes",
        "vramscope_process_allocator_allocated_bytes",
        "vramscope_process_allocator_reserved_bytes",
        "vramscope_process_allocator_peak_bytes",
        "sum by (job_id, rank) (vramscope_process_allocator_allocated_bytes",
        "sum by (job_id, rank) (vramscope_process_allocator_reserved_bytes",
        "sum by (job_id, rank) (vramscope_process_memory_used_bytes",
        "max by (job_id, rank) (vramscope_process_allocator_peak_bytes",
        "DCGM_FI_DEV_GPU_UTIL",
    ] {
        assert!(exprs.contains(needle), "no panel queries {needle}");
    }
    // OOMs as annotations.
    assert!(dashboard_expr_of_annotation("OOM").contains("vramscope_process_allocator_ooms_total"));
    let variables: Vec<&str> = doc["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(variables, ["datasource", "instance", "gpu", "job_id"]);
}

#[test]
fn prometheus_keeps_the_oom_that_killed_a_rank_with_its_labels_through_the_grace() {
    if !tool_available("prometheus", "--version", "apt-get install prometheus") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let channels = work.path().join("channels");
    let mut writer = rank_writer(&channels);
    serve_support::oom::train(&mut writer);
    let pid = std::process::id();
    let scenario = Scenario::new(&two_gpus(pid, None));
    let served = Served::start(
        &scenario,
        &["--interval", "250ms", "--grace", "120s"],
        &[("VRAMSCOPE_DIR", &channels)],
    );
    let prometheus = Prometheus::start(served.addr);
    let ranked = format!("pid=\"{pid}\",gpu=\"0\",rank=\"1\",local_rank=\"1\",job_id=\"job-42\"");
    prometheus.wait_until(Duration::from_secs(60), "stored the step", || {
        !prometheus
            .query(&format!("vramscope_process_step{{{ranked}}}"))
            .is_empty()
    });
    serve_support::oom::die_of_an_oom(writer);
    let died = Instant::now();
    // NVML lists it a few scrapes more, then no longer.
    std::thread::sleep(Duration::from_secs(3));
    scenario.rewrite(&two_gpus(1, None));
    prometheus.wait_until(Duration::from_secs(30), "saw it exit", || {
        prometheus
            .query(&format!("vramscope_process_running{{{ranked}}}"))
            .first()
            .is_some_and(|(_, v)| *v == 0.0)
    });
    // Scrapes after the exit still carry the OOM, the peak and the step under the rank.
    std::thread::sleep(Duration::from_secs(3));
    for (metric, want) in [
        ("vramscope_process_allocator_ooms_total", 1.0),
        ("vramscope_process_allocator_peak_bytes", (12 * GIB) as f64),
        ("vramscope_process_step", 40.0),
        ("vramscope_process_running", 0.0),
    ] {
        assert_eq!(
            prometheus.one(&format!("{metric}{{{ranked}}}")),
            want,
            "{metric}"
        );
    }
    // Since the death the series never lost its labels: no sample of this pid without a
    // rank (before its channel was first read, one may have had none).
    let since = died.elapsed().as_secs().max(1);
    let unranked = prometheus.query(&format!(
        "count_over_time(vramscope_process_running{{pid=\"{pid}\",rank=\"\"}}[{since}s])"
    ));
    assert!(unranked.is_empty(), "{unranked:?}");
    // The dashboard's OOM annotation marks it.
    let marked = prometheus.query(&grafana_to_promql(&dashboard_expr_of_annotation("OOM")));
    assert_eq!(marked.len(), 1, "{marked:?}");
    assert_eq!(marked[0].0["rank"], json!("1"));
}
