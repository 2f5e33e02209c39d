//! `vramscope cluster --targets`: scraping exporters directly. The same three `vramscope
//! serve` nodes as the Prometheus test give the same job view; dcgm-exporter's page (saved
//! in tests/cluster_fixtures, once with the old `Hostname` label and once with the new
//! `hostname`, with Kubernetes pod labels) gives the node view; targets that hang, refuse or
//! send garbage are named with their reason while the others are shown, and one that goes
//! away keeps its last figures on the screen, marked with since when.

mod cluster_support;
mod common;
mod serve_support;

use cluster_support::page::{Answer, PageServer};
use cluster_support::*;
use common::tmux::{self, Tmux};
use common::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;

fn fixture(name: &str) -> String {
    std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/cluster_fixtures")
            .join(name),
    )
    .unwrap()
}

fn node<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == name)
        .unwrap_or_else(|| panic!("no node {name} in {doc:#}"))
}

#[test]
fn scraping_the_exporters_directly_shows_every_rank_where_it_runs() {
    if !python3_available() {
        return;
    }
    let fleet = Fleet::start();
    fleet.wait_until_served();
    let targets = fleet.targets();
    let (doc, status) = cluster_json(&["--targets", &targets]);
    assert_eq!(status, Some(0), "{doc:#}");
    check_every_rank(&doc, &fleet);
    assert_eq!(doc["problems"], json!([]), "{doc:#}");
    // One request per target.
    assert_eq!(doc["requests_per_refresh"], 3);
    assert_eq!(doc["source"], "3 targets scraped directly");
    // What the exporter serves for that: dcgm-exporter's host label in both spellings, and
    // `hostname` on vramscope's own families, all from `--hostname`.
    let all = serve_support::samples(&fleet.nodes[1].served.scrape());
    let fb = serve_support::find(&all, "DCGM_FI_DEV_FB_USED", &[("gpu", "0")]);
    assert_eq!(
        (fb[0].label("Hostname"), fb[0].label("hostname")),
        (Some("node-b"), Some("node-b"))
    );
    let step = serve_support::find(&all, "vramscope_process_step", &[("rank", "2")]);
    assert_eq!(step[0].label("hostname"), Some("node-b"), "{step:?}");
    let used = serve_support::find(&all, "vramscope_gpu_memory_used_bytes", &[("gpu", "1")]);
    assert_eq!(used[0].label("hostname"), Some("node-b"), "{used:?}");
}

#[test]
fn dcgm_exporter_pages_are_read_under_both_host_label_spellings_with_pod_labels() {
    let old = PageServer::start(Answer::Page(fixture("dcgm-exporter-Hostname.txt")));
    let new = PageServer::start(Answer::Page(fixture("dcgm-exporter-hostname.txt")));
    let targets = format!("{},http://{}/metrics", old.addr, new.addr);
    let (doc, status) = cluster_json(&["--targets", &targets]);
    assert_eq!(status, Some(0), "{doc:#}");
    assert_eq!(doc["jobs"], json!([]));
    for (name, addr) in [("dgx-a100-07", old.addr), ("dgx-a100-08", new.addr)] {
        let n = node(&doc, name);
        assert_eq!(n["instances"], json!([addr.to_string()]), "{n}");
        let gpus = n["gpus"].as_array().unwrap();
        assert_eq!(gpus.len(), 2, "{n}");
        let g0 = &gpus[0];
        assert_eq!(g0["gpu"], 0);
        assert_eq!(g0["uuid"], "GPU-4c7e8b3a-1f0d-6a2e-9b5c-0d3f7a1e2b64");
        assert_eq!(g0["model"], "NVIDIA A100-SXM4-80GB");
        // MiB, as dcgm-exporter gives them; the total as used + free (it has no total).
        assert_eq!(g0["memory_used_bytes"], 65037 * MIB);
        assert_eq!(g0["memory_total_bytes"], (65037 + 15521) * MIB);
        assert_eq!(g0["utilization_percent"], 96.0);
        assert_eq!(
            (&g0["pod"], &g0["namespace"], &g0["container"]),
            (&json!("llama-train-0"), &json!("ml"), &json!("trainer"))
        );
        let g1 = &gpus[1];
        // An idle GPU's 0 is the exporter's figure; its empty pod labels are no pod.
        assert_eq!(g1["memory_used_bytes"], 0);
        assert_eq!(g1["utilization_percent"], 0.0);
        assert_eq!(g1["pod"], Value::Null);
        assert_eq!(n["memory_used_bytes"], 65037 * MIB);
        assert_eq!(n["freshness"]["current"], true);
        // The single-node figures dcgm-exporter serves, and why the others are n/a: it
        // collects no power limit here, and serves no per-process figures.
        let d = &g0["detail"];
        assert_eq!(d["state"], "read", "{g0}");
        assert_eq!(
            (
                &d["temperature_c"],
                &d["power_mw"],
                &d["sm_clock_mhz"],
                &d["mem_clock_mhz"]
            ),
            (
                &json!(41.0),
                &json!(287613.0),
                &json!(1410.0),
                &json!(1593.0)
            ),
            "{d}"
        );
        assert_eq!(d["power_limit_mw"], Value::Null, "{d}");
        assert!(
            d["absent"]["power_limit_mw"]
                .as_str()
                .is_some_and(|w| w.contains("does not collect DCGM_FI_DEV_POWER_MGMT_LIMIT")),
            "{d}"
        );
        assert_eq!(d["process_count"], Value::Null, "{d}");
        assert!(
            d["absent"]["process_count"]
                .as_str()
                .is_some_and(|w| w.contains("dcgm-exporter serves no such figure")),
            "{d}"
        );
        assert_eq!(d["processes"], json!([]), "{d}");
    }
    // The plain table says the same.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vramscope"))
        .env(NO_CONFIG.0, NO_CONFIG.1)
        .args(["cluster", "--targets", &targets, "--once"])
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(text.contains("pod ml/llama-train-0 (trainer)"), "{text}");
    assert!(
        text.contains("    temp 41 C  power 287.6 W  SM clock 1410 MHz  mem clock 1593 MHz\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "    power limit n/a: its dcgm-exporter does not collect DCGM_FI_DEV_POWER_MGMT_LIMIT"
        ),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.starts_with("dgx-a100-07  2 ")),
        "{text}"
    );
}

#[test]
fn targets_that_hang_refuse_or_send_garbage_are_named_and_the_rest_shown() {
    let good = PageServer::start(Answer::Page(fixture("dcgm-exporter-hostname.txt")));
    let hang = PageServer::start(Answer::Hang);
    let garbage = PageServer::start(Answer::Garbage);
    let refused = format!("127.0.0.1:{}", serve_support::free_port());
    let targets = format!("{},{},{},{refused}", hang.addr, good.addr, garbage.addr);
    let began = Instant::now();
    let (doc, status) = cluster_json(&["--targets", &targets, "--timeout", "1s"]);
    let took = began.elapsed();
    assert_eq!(status, Some(0), "{doc:#}");
    // The hanging target costs its deadline, not more.
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!(
        node(&doc, "dgx-a100-08")["gpus"].as_array().unwrap().len(),
        2
    );
    let problems: Vec<&str> = doc["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(problems.len(), 3, "{problems:?}");
    let about = |addr: &str| {
        problems
            .iter()
            .find(|p| p.starts_with(addr))
            .copied()
            .unwrap_or_else(|| panic!("nothing on {addr}: {problems:?}"))
    };
    assert!(
        about(&hang.addr.to_string()).contains("no answer within 1 s (missing since"),
        "{problems:?}"
    );
    assert!(
        about(&refused).contains("connection refused"),
        "{problems:?}"
    );
    assert!(
        about(&garbage.addr.to_string()).contains("not a metrics page"),
        "{problems:?}"
    );
    for p in &problems {
        assert!(vramscope::text::is_clean(p), "{p:?}");
    }
    // Nothing answers: said, and a failing status for scripts.
    let (doc, status) = cluster_json(&["--targets", &refused]);
    assert_eq!(status, Some(1), "{doc:#}");
    assert_eq!(doc["nodes"], json!([]));
}

#[test]
fn a_target_that_goes_away_keeps_its_last_figures_marked_with_since_when() {
    if !tmux::available() {
        return;
    }
    let stays = PageServer::start(Answer::Page(fixture("dcgm-exporter-hostname.txt")));
    let goes = PageServer::start(Answer::Page(fixture("dcgm-exporter-Hostname.txt")));
    let dir = tempfile::tempdir().unwrap();
    let screen = Tmux::start(
        dir.path(),
        140,
        30,
        &format!(
            "{} cluster --targets {},{} --interval 300ms --timeout 500ms",
            env!("CARGO_BIN_EXE_vramscope"),
            stays.addr,
            goes.addr
        ),
    );
    // No ranks: the node view.
    let (ok, shown) = screen.wait_for(Duration::from_secs(15), |s| {
        s.contains("view: nodes") && s.contains("dgx-a100-07") && s.contains("dgx-a100-08")
    });
    assert!(ok, "{shown}");
    // The screen opens on the first node: Enter opens it, its GPUs with their pods.
    screen.keys(&["Enter"]);
    let (ok, shown) = screen.wait_for(Duration::from_secs(5), |s| {
        s.contains("pod ml/llama-train-0 (trainer)") && s.contains("temp 41 C")
    });
    assert!(ok, "{shown}");
    // The selected node's charts, from this view's refreshes only (no Prometheus): its
    // GPUs' memory used (65,037 + 0 MiB) and mean utilisation ((96 + 0) / 2).
    let (ok, shown) = screen.wait_for(Duration::from_secs(5), |s| {
        s.contains("63.5 GiB used") && s.contains("48% mean")
    });
    assert!(ok, "{shown}");
    assert!(
        shown.contains(
            "node dgx-a100-07, last 5m (no Prometheus: history from this view's refreshes only, since"
        ),
        "{shown}"
    );
    drop(goes);
    let (ok, shown) = screen.wait_for(Duration::from_secs(10), |s| {
        s.contains("! dgx-a100-07") && s.contains("connection refused (missing since")
    });
    assert!(ok, "{shown}");
    let stale = shown
        .lines()
        .find(|l| l.starts_with("dgx-a100-07"))
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(
        stale.contains("63.5/157 GiB") && stale.contains("STALE"),
        "{stale}"
    );
    let fresh = shown
        .lines()
        .find(|l| l.starts_with("dgx-a100-08"))
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(!fresh.contains("STALE"), "{fresh}");
    // Its charts say since when nothing was read, not the last figure as if current.
    let (ok, shown) = screen.wait_for(Duration::from_secs(5), |s| {
        s.contains("n/a: none read since")
    });
    assert!(ok, "{shown}");
    assert!(!shown.contains("63.5 GiB used"), "{shown}");
    // The screen follows keys while a target is gone: the help, then quit.
    screen.keys(&["?"]);
    let (ok, shown) = screen.wait_for(Duration::from_secs(5), |s| {
        s.contains("vramscope cluster: help")
    });
    assert!(ok, "{shown}");
    screen.keys(&["Escape", "q"]);
}
