//! `vramscope cluster --prometheus`: a real Prometheus scraping three `vramscope serve`
//! processes on loopback (each its own fake NVML scenario and host name) with the four
//! ranks of one job among them. `--json`, `--once` and the screen in a real terminal show
//! every rank on its node and GPU with the figures its exporter serves; an OOM on one rank
//! appears within a scrape interval of its exporter serving it; Prometheus going away
//! leaves the screen up, saying since when its figures are old.

mod cluster_support;
mod common;
mod serve_support;

use cluster_support::*;
use common::tmux::{self, Tmux};
use common::*;
use serve_support::prometheus::Prometheus;
use std::time::{Duration, Instant};

/// The test Prometheus scrapes every second.
const SCRAPE_INTERVAL: Duration = Duration::from_secs(1);

#[test]
fn the_job_view_from_prometheus_shows_every_rank_and_an_oom_within_a_scrape() {
    if !python3_available()
        || !tmux::available()
        || !tool_available("prometheus", "--version", "apt-get install prometheus")
    {
        return;
    }
    let mut fleet = Fleet::start();
    fleet.wait_until_served();
    let addrs: Vec<_> = fleet.nodes.iter().map(|n| n.served.addr).collect();
    let prometheus = Prometheus::start_all(&addrs);
    let url = prometheus.url().to_string();
    let args = ["--prometheus", url.as_str()];

    // Every rank, once Prometheus has scraped every exporter.
    let doc = json_until(&args, Duration::from_secs(60), |doc| {
        (0..4).all(|r| rank_row(doc, JOB, r).is_some_and(|row| row["step"].is_u64()))
            && doc["nodes"].as_array().is_some_and(|n| n.len() == 3)
    });
    let scraped_since = Instant::now();
    check_every_rank(&doc, &fleet);
    assert_eq!(doc["schema"], "vramscope.cluster");
    assert_eq!(doc["problems"], serde_json::json!([]), "{doc:#}");
    // A fixed number of queries, whatever the fleet: the present and the down targets,
    // once at the start the recent past, and (a script's one refresh) every GPU's
    // single-node figures.
    assert_eq!(doc["requests_per_refresh"], 4, "{doc:#}");
    check_detail(&doc, &fleet);

    // The same in the plain table.
    let once = std::process::Command::new(env!("CARGO_BIN_EXE_vramscope"))
        .env(NO_CONFIG.0, NO_CONFIG.1)
        .args(["cluster", "--prometheus", &url, "--once"])
        .output()
        .unwrap();
    assert!(once.status.success());
    let text = stdout(&once);
    assert!(
        text.contains("job job-7: 4 ranks, median step 10"),
        "{text}"
    );
    assert!(text.contains("straggler -4"), "{text}");

    // The screen, in a real terminal, once Prometheus holds more than one step (5 s) of the
    // range query that fills the charts' past.
    std::thread::sleep(Duration::from_secs(7).saturating_sub(scraped_since.elapsed()));
    let dir = tempfile::tempdir().unwrap();
    let screen = Tmux::start(
        dir.path(),
        160,
        40,
        &format!(
            "{} cluster --prometheus {url} --interval 500ms",
            env!("CARGO_BIN_EXE_vramscope")
        ),
    );
    let (ok, shown) = screen.wait_for(Duration::from_secs(20), |s| {
        s.contains("job job-7: 4 ranks") && s.lines().filter(|l| l.contains("node-")).count() >= 4
    });
    assert!(ok, "the job view never showed the ranks:\n{shown}");
    for (rank, node, gpu, alloc, _) in LAYOUT {
        let line = shown
            .lines()
            .find(|l| l.split_whitespace().next() == Some(&rank.to_string()))
            .unwrap_or_else(|| panic!("no line for rank {rank}:\n{shown}"));
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(words[1], NODES[node], "{line}");
        assert_eq!(words[2], gpu.to_string(), "{line}");
        let shown_alloc = vramscope::model::units::bytes(alloc * GIB);
        assert_eq!(format!("{} {}", words[3], words[4]), shown_alloc, "{line}");
    }
    assert!(shown.contains("straggler -4"), "{shown}");
    // The charts of the job (the first, nothing selected), their past from Prometheus's
    // range query, their values the sums of what the exporters serve: allocated 9 + 10 +
    // 11 + 12 GiB, reserved one more each, the worst rank's reserved 13 GiB, and the mean
    // utilisation of the job's four GPUs (50, 51, 60 and 71 %).
    let bytes = |gib: u64| vramscope::model::units::bytes(gib * GIB);
    let (ok, shown) = screen.wait_for(Duration::from_secs(20), |s| {
        s.contains(&format!("{} total", bytes(42))) && s.contains("58% mean")
    });
    assert!(ok, "the charts never showed the job's figures:\n{shown}");
    assert!(
        shown.contains("job job-7, last 5m (past from Prometheus since"),
        "{shown}"
    );
    let chart = |label: &str| {
        shown
            .lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no {label} chart:\n{shown}"))
            .to_string()
    };
    assert!(chart("alloc ").ends_with(&format!("{} total", bytes(42))));
    assert!(chart("resv ").ends_with(&format!("{} total", bytes(46))));
    assert!(chart("worst ").ends_with(&format!("{} largest rank's reserved", bytes(13))));
    assert!(chart("util ").ends_with("58% mean"));

    // The node view: open node-a, and its GPUs' single-node figures come from the next
    // refresh's query of that node's target only.
    screen.keys(&["v", "Down", "Enter"]);
    let (ok, shown) = screen.wait_for(Duration::from_secs(10), |s| {
        s.contains("temp 41 C") && s.contains("pid ")
    });
    assert!(ok, "the open node never showed its figures:\n{shown}");
    assert!(shown.contains("temp 40 C  power 412 W  power limit 700 W  SM clock 1755 MHz  mem clock 2619 MHz  processes 1"), "{shown}");
    // Only node-a is open: no other node's temperatures.
    assert!(!shown.contains("temp 50 C"), "{shown}");
    let rank0 = &fleet.ranks[0];
    assert!(
        shown.contains(&format!("pid {}  rank 0  job job-7", rank0.pid())),
        "{shown}"
    );
    assert!(shown.contains("node node-a, last 5m"), "{shown}");
    screen.keys(&["v"]);

    // An OOM on rank 3: its exporter serves it, and the cluster view has it within one
    // scrape interval (plus the time to ask).
    let rank3 = fleet.ranks.iter_mut().find(|r| r.rank == 3).unwrap();
    rank3.send("oom");
    let rank3 = &fleet.ranks[3];
    let deadline = Instant::now() + Duration::from_secs(20);
    let served_at = loop {
        if fleet.served(rank3, "vramscope_process_allocator_ooms_total") == Some(1.0) {
            break Instant::now();
        }
        assert!(
            Instant::now() < deadline,
            "the exporter never served the OOM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let doc = json_until(&args, Duration::from_secs(10), |doc| {
        rank_row(doc, JOB, 3).is_some_and(|r| r["ooms"] == 1)
    });
    let took = served_at.elapsed();
    eprintln!("OOM served -> in cluster --json: {} ms", took.as_millis());
    assert!(
        took <= SCRAPE_INTERVAL + Duration::from_millis(800),
        "the OOM took {took:?} to appear"
    );
    let job = doc["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job"] == JOB)
        .unwrap();
    let oom = &job["ooms"][0];
    assert_eq!(
        (
            oom["rank"].as_u64(),
            oom["node"].as_str(),
            oom["gpu"].as_u64()
        ),
        (Some(3), Some("node-c"), Some(1)),
        "{job}"
    );
    assert!(oom["at_ms"].is_u64(), "{oom}");
    let (ok, shown) = screen.wait_for(Duration::from_secs(10), |s| {
        s.contains("OOM in job job-7: rank 3 on node-c GPU 1 at")
    });
    assert!(ok, "the screen never showed the OOM:\n{shown}");

    // Prometheus goes away: the screen stays, its figures marked old, with since when.
    drop(prometheus);
    let (ok, shown) = screen.wait_for(Duration::from_secs(15), |s| {
        s.contains("! Prometheus") && s.contains("connection refused") && s.contains("STALE")
    });
    assert!(ok, "the screen never said Prometheus was gone:\n{shown}");
    // The charts say since when nothing was read, not the last figures as if current.
    let (ok, shown) = screen.wait_for(Duration::from_secs(10), |s| {
        s.contains("n/a: none read since")
    });
    assert!(ok, "the charts kept old figures as current:\n{shown}");
    assert!(!shown.contains(&format!("{} total", bytes(42))), "{shown}");
    assert!(shown.contains("OOM in job job-7: rank 3"), "{shown}");
    screen.keys(&["q"]);
}

/// Every GPU's single-node figures in `--json`, as each node's fake NVML gives them, and
/// its processes with their ranks.
fn check_detail(doc: &serde_json::Value, fleet: &Fleet) {
    for (i, name) in NODES.iter().enumerate() {
        let node = doc["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["node"] == *name)
            .unwrap();
        for g in node["gpus"].as_array().unwrap() {
            let index = g["gpu"].as_u64().unwrap() as u32;
            let d = &g["detail"];
            assert_eq!(d["state"], "read", "{g}");
            assert_eq!(d["temperature_c"], temperature(i, index) as f64, "{g}");
            assert_eq!(d["power_mw"], 412000.0, "{g}");
            assert_eq!(d["power_limit_mw"], 700000.0, "{g}");
            assert_eq!(d["sm_clock_mhz"], 1755.0, "{g}");
            assert_eq!(d["mem_clock_mhz"], 2619.0, "{g}");
            assert_eq!(d["absent"], serde_json::json!({}), "{g}");
            let on: Vec<&Rank> = fleet
                .ranks
                .iter()
                .filter(|r| r.node == i && r.gpu == index)
                .collect();
            assert_eq!(d["processes"].as_array().unwrap().len(), on.len(), "{g}");
            for r in on {
                let p = d["processes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|p| p["pid"] == r.pid())
                    .unwrap_or_else(|| panic!("no pid {} in {g}", r.pid()));
                assert_eq!(p["rank"], r.rank, "{p}");
                assert_eq!(p["job"], JOB, "{p}");
                assert_eq!(p["memory_used_bytes"], 14 * GIB, "{p}");
            }
        }
    }
}

#[test]
fn a_fleet_running_only_dcgm_exporter_is_read_from_prometheus() {
    if !tool_available("prometheus", "--version", "apt-get install prometheus") {
        return;
    }
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/cluster_fixtures/dcgm-exporter-Hostname.txt"),
    )
    .unwrap();
    let exporter =
        cluster_support::page::PageServer::start(cluster_support::page::Answer::Page(page));
    let prometheus = Prometheus::start_all(&[exporter.addr]);
    let url = prometheus.url().to_string();
    let doc = json_until(&["--prometheus", &url], Duration::from_secs(60), |doc| {
        doc["nodes"].as_array().is_some_and(|n| n.len() == 1)
    });
    let node = &doc["nodes"][0];
    assert_eq!(node["node"], "dgx-a100-07", "{doc:#}");
    assert_eq!(
        node["instances"],
        serde_json::json!([exporter.addr.to_string()])
    );
    let g0 = &node["gpus"][0];
    assert_eq!(g0["memory_used_bytes"], 65037 * MIB, "{g0}");
    assert_eq!(g0["memory_total_bytes"], (65037 + 15521) * MIB, "{g0}");
    assert_eq!(g0["utilization_percent"], 96.0, "{g0}");
    assert_eq!(g0["pod"], "llama-train-0", "{g0}");
    // dcgm-exporter's single-node figures through Prometheus's detail query.
    let d = &g0["detail"];
    assert_eq!(d["state"], "read", "{d}");
    assert_eq!(
        (&d["temperature_c"], &d["power_mw"], &d["sm_clock_mhz"]),
        (
            &serde_json::json!(41.0),
            &serde_json::json!(287613.0),
            &serde_json::json!(1410.0)
        ),
        "{d}"
    );
    assert!(
        d["absent"]["power_limit_mw"]
            .as_str()
            .is_some_and(|w| w.contains("DCGM_FI_DEV_POWER_MGMT_LIMIT")),
        "{d}"
    );
    assert_eq!(doc["jobs"], serde_json::json!([]));
    // The exporter stops: Prometheus marks its scrape failed, and the view keeps its last
    // figures, saying since when they are missing.
    drop(exporter);
    let doc = json_until(&["--prometheus", &url], Duration::from_secs(20), |doc| {
        doc["problems"].as_array().is_some_and(|p| !p.is_empty())
    });
    let problem = doc["problems"][0].as_str().unwrap();
    assert!(problem.contains("missing since"), "{problem}");
}
