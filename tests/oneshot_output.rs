//! `--once`, `--json` and `--csv` run as the real binary against the fake NVML library and
//! must print exactly what the scenario says, with absent figures as n/a, never 0.

mod common;

use common::{GIB, MIB, Scenario, h100, stderr, stdout};
use serde_json::{Value, json};

/// Two GPUs; the test process itself runs on GPU 0 (so host facts are real), an invisible pid
/// on GPU 1 with memory NVML cannot report.
fn two_gpus() -> (Scenario, u32) {
    let me = std::process::id();
    let mut gpu0 = h100(0);
    gpu0["processes"] = json!([{ "t": 0,
        "compute": [{ "pid": me, "used_memory": 6 * GIB }],
        "graphics": [{ "pid": me, "used_memory": 6 * GIB }] }]);
    gpu0["process_utilization"] = json!([{ "t": 0, "pid": me, "sm": 57, "mem": 12 }]);
    let mut gpu1 = h100(1);
    gpu1["name"] = json!("NVIDIA A10");
    gpu1["timeline"] = json!([{ "t": 0, "memory_used": 3 * GIB, "gpu_util": 5, "temperature": 41,
        "power": 60_000, "sm_clock": 210, "mem_clock": 405, "pstate": 8 }]);
    gpu1["num_fans"] = Value::Null;
    gpu1["processes"] = json!([{ "t": 0, "compute": [{ "pid": 4_194_001, "used_memory": null }] }]);
    let scenario = Scenario::new(&json!({ "devices": [gpu0, gpu1] }));
    (scenario, me)
}

fn json_of(scenario: &Scenario) -> Value {
    let out = scenario.run(&["--json"]);
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

#[test]
fn json_reports_the_scenario_figures() {
    let (scenario, me) = two_gpus();
    let doc = json_of(&scenario);
    assert_eq!(doc["schema"], "vramscope.snapshot");
    assert_eq!(doc["version"], 1);
    assert_eq!(doc["driver"]["driver_version"], "550.54.15");
    assert_eq!(doc["driver"]["cuda_version"], "12.4");
    let d0 = &doc["devices"][0];
    assert_eq!(d0["name"], "NVIDIA H100 80GB HBM3");
    assert_eq!(d0["uuid"], "GPU-00000000-0000-0000-0000-000000000000");
    assert_eq!(d0["pci_bus_id"], "00000000:18:00.0");
    assert_eq!(d0["memory_total"], 80 * GIB);
    assert_eq!(d0["memory_used"], 10 * GIB);
    assert_eq!(d0["memory_reserved"], 512 * MIB);
    assert_eq!(d0["memory_free"], 80 * GIB - 10 * GIB - 512 * MIB);
    assert_eq!(d0["gpu_util"], 87);
    assert_eq!(d0["mem_util"], 41);
    assert_eq!(d0["temperature_c"], 64);
    assert_eq!(d0["power_mw"], 412_000);
    assert_eq!(d0["power_limit_mw"], 700_000);
    assert_eq!(d0["sm_clock_mhz"], 1755);
    assert_eq!(d0["mem_clock_mhz"], 2619);
    assert_eq!(d0["fan_percent"], 35);
    assert_eq!(d0["encoder_util"], 3);
    assert_eq!(d0["decoder_util"], 4);
    assert_eq!(d0["throttle_reasons"], 4);
    assert_eq!(d0["pstate"], 0);
    assert_eq!(d0["process_count"], 1, "compute and graphics merged by pid");
    // PCIe is off by default: absent with the reason, not 0.
    assert_eq!(d0["pcie_tx_kbs"], Value::Null);
    assert!(
        d0["unavailable"]["pcie_tx_kbs"]
            .as_str()
            .unwrap()
            .contains("--pcie")
    );

    let d1 = &doc["devices"][1];
    assert_eq!(d1["name"], "NVIDIA A10");
    assert_eq!(d1["memory_used"], 3 * GIB);
    assert_eq!(d1["fan_percent"], Value::Null);
    assert_eq!(d1["unavailable"]["fan_percent"], "not supported");
    assert_eq!(
        d1["mem_util"],
        Value::Null,
        "not in the scenario: not supported"
    );

    let procs = doc["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 2);
    let mine = &procs[0];
    assert_eq!(mine["pid"], me);
    assert_eq!(mine["local_pid"], me);
    assert_eq!(mine["gpu_index"], 0);
    assert_eq!(mine["type"], "C+G");
    assert_eq!(mine["used_memory"], 6 * GIB);
    assert_eq!(mine["sm_util"], 57);
    assert_eq!(mine["mem_util"], 12);
    assert!(mine["host_rss"].as_u64().unwrap() > 0);
    assert!(mine["command"].as_str().unwrap().contains("oneshot_output"));

    let hidden = &procs[1];
    assert_eq!(hidden["pid"], 4_194_001);
    assert_eq!(hidden["used_memory"], Value::Null);
    assert_eq!(hidden["unavailable"]["used_memory"], "not available");
    assert_eq!(hidden["local_pid"], Value::Null);
    // The pid does not exist here: exited (host pid namespace) or hidden (a container's own).
    let why = hidden["unavailable"]["host_rss"].as_str().unwrap();
    assert!(
        why.contains("exited") || why.contains("not visible"),
        "{why}"
    );
}

#[test]
fn csv_has_one_row_per_device_and_process_with_empty_cells_for_absent_figures() {
    let (scenario, me) = two_gpus();
    let out = scenario.run(&["--csv"]);
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let text = stdout(&out);
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 4, "2 devices + 2 processes:\n{text}");
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    assert_eq!(rows[0][col("record")], "device");
    assert_eq!(rows[0][col("memory_used")], (10 * GIB).to_string());
    assert_eq!(rows[1][col("name")], "NVIDIA A10");
    assert_eq!(rows[1][col("fan_percent")], "", "absent is empty, not 0");
    assert_eq!(rows[2][col("record")], "process");
    assert_eq!(rows[2][col("pid")], me.to_string());
    assert_eq!(rows[2][col("used_memory")], (6 * GIB).to_string());
    assert_eq!(rows[3][col("used_memory")], "");
    assert!(rows.iter().all(|r| r.len() == header.len()));
}

#[test]
fn once_prints_a_table_with_na_for_absent_figures() {
    let (scenario, me) = two_gpus();
    let out = scenario.run(&["--once"]);
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("driver 550.54.15  CUDA 12.4"), "{text}");
    assert!(text.contains("NVIDIA H100 80GB HBM3"));
    assert!(text.contains("10.0 GiB / 80.0 GiB"), "{text}");
    assert!(text.contains("412W/700W"), "{text}");
    assert!(text.contains(&format!("{me}")));
    // The invisible process: pid starred, memory n/a, and the footnote says why.
    let hidden = text
        .lines()
        .find(|l| l.contains("4194001*"))
        .expect("hidden pid row");
    assert!(hidden.contains("n/a"), "{hidden}");
    assert!(text.contains("* pid not found here"), "{text}");
}

#[test]
fn once_with_pcie_shows_the_link_s_throughput_in_table_json_and_csv() {
    let (scenario, _) = two_gpus();
    let plain = stdout(&scenario.run(&["--once"]));
    assert!(!plain.contains("PCIE"), "no column unless asked:\n{plain}");
    let out = scenario.run(&["--once", "--pcie"]);
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let text = stdout(&out);
    let header = text
        .lines()
        .find(|l| l.contains("MEMORY USED"))
        .expect("GPU header");
    assert!(header.ends_with("PCIE TX/RX"), "{header}");
    // 1000 and 2000 KB/s in the scenario; GPU 1 reports none.
    let row = |i: usize| {
        text.lines()
            .find(|l| l.trim_start().starts_with(&format!("{i}  NVIDIA")))
            .unwrap_or_default()
            .to_string()
    };
    assert!(row(0).ends_with(" 1000K/2.0M/s"), "{text}");
    assert!(row(1).ends_with(" n/a"), "{text}");
    let doc: Value =
        serde_json::from_slice(&scenario.run(&["--json", "--pcie"]).stdout).expect("JSON");
    assert_eq!(doc["devices"][0]["pcie_tx_kbs"], 1000);
    assert_eq!(doc["devices"][0]["pcie_rx_kbs"], 2000);
    let csv = stdout(&scenario.run(&["--csv", "--pcie"]));
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let first: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).expect(name);
    assert_eq!(first[col("pcie_tx_kbs")], "1000", "{csv}");
    assert_eq!(first[col("pcie_rx_kbs")], "2000", "{csv}");
}

#[test]
fn loop_prints_one_json_line_per_period_following_the_timeline() {
    let mut gpu = h100(0);
    gpu["timeline"] = json!([
        { "t": 0, "memory_used": GIB, "gpu_util": 10 },
        { "t": 0.35, "memory_used": 5 * GIB },
    ]);
    let scenario = Scenario::new(&json!({ "devices": [gpu] }));
    let mut child = scenario
        .command()
        .args(["--json", "--loop", "0.1"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(900));
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    let docs: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is one JSON document"))
        .collect();
    assert!(docs.len() >= 5, "got {} lines", docs.len());
    let used: Vec<u64> = docs
        .iter()
        .map(|d| d["devices"][0]["memory_used"].as_u64().unwrap())
        .collect();
    assert_eq!(used[0], GIB);
    assert_eq!(*used.last().unwrap(), 5 * GIB, "{used:?}");
    let times: Vec<u64> = docs
        .iter()
        .map(|d| d["taken_at_ms"].as_u64().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn without_a_usable_nvml_each_cause_gets_one_line_and_a_nonzero_exit() {
    let missing = std::process::Command::new(env!("CARGO_BIN_EXE_vramscope"))
        .args(["--nvml-lib", "/nonexistent/libnvidia-ml.so.1", "--once"])
        .output()
        .unwrap();
    let cases: Vec<(std::process::Output, &str)> = vec![
        (missing, "management library not found"),
        (
            Scenario::new(&json!({ "init_error": "DriverNotLoaded", "devices": [] }))
                .run(&["--json"]),
            "kernel driver is not loaded",
        ),
        (
            Scenario::new(&json!({ "init_error": "LibRmVersionMismatch", "devices": [] }))
                .run(&["--csv"]),
            "version mismatch",
        ),
        (
            Scenario::new(&json!({ "init_error": "NoPermission", "devices": [] })).run(&["--once"]),
            "no permission",
        ),
        (
            Scenario::new(&json!({ "devices": [] })).run(&["--once"]),
            "no NVIDIA GPU",
        ),
    ];
    for (out, cause) in cases {
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(3), "{err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(
            err.contains(cause) && err.contains("hint:"),
            "{cause}: {err}"
        );
        assert!(!err.contains("panicked"));
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn the_monitor_refuses_a_pipe_with_a_clear_line() {
    let (scenario, _) = two_gpus();
    let out = scenario.run(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("needs a terminal"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn utilisation_samples_of_one_instant_count_for_every_pid() {
    // A real driver stamps every process sampled at one instant with the same time.
    let mut gpu = h100(0);
    gpu["processes"] = json!([{ "t": 0, "compute": [
        { "pid": 1, "used_memory": GIB }, { "pid": std::process::id(), "used_memory": GIB }] }]);
    gpu["process_utilization"] = json!([
        { "t": 0.0, "pid": 1, "sm": 11, "mem": 1 },
        { "t": 0.0, "pid": std::process::id(), "sm": 22, "mem": 2 },
    ]);
    let doc = json_of(&Scenario::new(&json!({ "devices": [gpu] })));
    let sm: Vec<u64> = doc["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["sm_util"].as_u64().expect("every pid has its SM share"))
        .collect();
    assert_eq!(sm, vec![11, 22]);
}

/// The enforced power limit and the ECC counts change by an administrator's hand or by rare
/// hardware events: they are read every 10 s, not with every sample.
#[test]
fn slow_figures_are_not_read_every_tick() {
    use std::io::{BufRead, BufReader};
    let (scenario, _) = two_gpus();
    let counts = scenario.dir().join("counts.json");
    let mut child = scenario
        .command()
        .env("FAKE_NVML_COUNTS", &counts)
        .args(["--json", "--loop", "0.1"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut last = Value::Null;
    for _ in 0..16 {
        last = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // Still in every sample, from the last slow read.
    assert_eq!(last["devices"][0]["power_limit_mw"], 700_000);
    assert_eq!(last["devices"][0]["ecc_corrected"], 0);
    // The fake writes its counts at most once a second: they cover the first second or so.
    let counts: Value = serde_json::from_slice(&std::fs::read(&counts).unwrap()).unwrap();
    let memory = counts["nvmlDeviceGetMemoryInfo_v2"].as_u64().unwrap();
    let ecc = counts["nvmlDeviceGetTotalEccErrors"].as_u64().unwrap();
    let limit = counts["nvmlDeviceGetEnforcedPowerLimit"].as_u64().unwrap();
    assert!(memory >= 12, "{counts}");
    assert!(
        (2..=4).contains(&ecc) && (1..=2).contains(&limit),
        "two GPUs, read once each: {counts}"
    );
}

/// NVML is shut down at the end of every one-shot run, once per init: a library that does
/// its bookkeeping in `nvmlShutdown` sees the session end.
#[test]
fn one_shot_runs_shut_nvml_down_before_exiting() {
    let (scenario, _) = two_gpus();
    for arg in ["--once", "--json", "--csv"] {
        let counts = scenario.dir().join(format!("counts{arg}.json"));
        let out = scenario
            .command()
            .env("FAKE_NVML_COUNTS", &counts)
            .arg(arg)
            .output()
            .unwrap();
        assert!(out.status.success(), "{arg}: {}", stderr(&out));
        let counts = common::read_counts(&counts);
        let inits = counts.get("nvmlInit_v2").copied().unwrap_or(0.0);
        assert!(inits >= 1.0, "{arg}: {counts:?}");
        assert_eq!(
            counts.get("nvmlShutdown").copied(),
            Some(inits),
            "{arg}: {counts:?}"
        );
    }
}

/// docs/oneshot.md reads the CSV with `pd.read_csv(path)` and picks rows by `record`: that needs
/// every column name once. Python's own `csv.DictReader` keeps only the last of two equal
/// names, so it shows what a repeated `mem_util` loses (pandas is not installed for the
/// tests; it renames a repeat to `mem_util.1`, which the docs would have to explain).
#[test]
fn csv_header_names_each_column_once_for_the_readme_recipe() {
    if !common::python3_available() {
        return;
    }
    let (scenario, me) = two_gpus();
    let out = scenario.run(&["--csv"]);
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    let script = r#"
import csv, json, sys
reader = csv.reader(sys.stdin)
header = next(reader)
rows = [dict(zip(header, r)) for r in reader]
print(json.dumps({
    "repeated": sorted({h for h in header if header.count(h) > 1}),
    "device_mem_util": [r["mem_util"] for r in rows if r["record"] == "device"],
    "process_mem_util": [r.get("process_mem_util") for r in rows if r["record"] == "process"],
    "pids": [r["pid"] for r in rows if r["record"] == "process"],
}))
"#;
    let mut python = std::process::Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    python.stdin.take().unwrap().write_all(&out.stdout).unwrap();
    let result = python.wait_with_output().unwrap();
    assert!(result.status.success());
    let got: Value = serde_json::from_slice(&result.stdout).unwrap();
    assert_eq!(got["repeated"], json!([]), "{}", stdout(&out));
    // GPU 1 has no memory utilisation in the scenario: an empty cell.
    assert_eq!(got["device_mem_util"], json!(["41", ""]));
    assert_eq!(got["process_mem_util"], json!(["12", ""]));
    assert_eq!(got["pids"], json!([me.to_string(), "4194001"]));
}

/// CPU % is a difference of two readings: one `--once` has only one, so its table has no
/// CPU% column (rather than n/a in every row); `--loop` measures it from the snapshot before,
/// and a busy process shows its share there.
#[test]
fn once_leaves_out_cpu_percent_and_loop_measures_it() {
    use std::io::Read;
    let mut busy = std::process::Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .unwrap();
    let mut gpu = h100(0);
    gpu["processes"] = json!([{ "t": 0, "compute": [{ "pid": busy.id(), "used_memory": GIB }] }]);
    gpu["process_utilization"] = json!([{ "t": 0, "pid": busy.id(), "sm": 5, "mem": 1 }]);
    let scenario = Scenario::new(&json!({ "devices": [gpu] }));
    let once = scenario.run(&["--once"]);
    let mut looping = scenario
        .command()
        .args(["--once", "--loop", "0.3"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1_500));
    looping.kill().unwrap();
    let mut text = String::new();
    looping
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    looping.wait().unwrap();
    busy.kill().unwrap();
    busy.wait().unwrap();

    assert!(once.status.success(), "{}", stderr(&once));
    let single = stdout(&once);
    let header = single.lines().find(|l| l.contains("PID")).expect("header");
    assert!(!header.contains("CPU%"), "{single}");
    assert!(!single.contains(" n/a "), "no n/a column:\n{single}");

    // The last complete table of the loop.
    let tables: Vec<&str> = text.split("\n\n").collect();
    let table = tables
        .iter()
        .rev()
        .find(|t| t.contains(&busy.id().to_string()) && t.contains("CPU%"))
        .unwrap_or_else(|| panic!("a table with the busy row:\n{text}"));
    let header = table.lines().find(|l| l.contains("CPU%")).unwrap();
    let row = table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(&busy.id().to_string()))
        .unwrap();
    // The CPU% column ends where its header does.
    let end = header.find("CPU%").unwrap() + "CPU%".len();
    let cell = row[..end].split_whitespace().last().unwrap();
    let share: f64 = cell
        .parse()
        .unwrap_or_else(|_| panic!("CPU% {cell:?} in\n{text}"));
    assert!(share > 0.0, "a busy loop used no CPU?\n{text}");
}

/// A lost GPU in a single snapshot: the output in full, a line on stderr naming it, and exit
/// status 4 for cron and alerting; the healthy GPU is still printed.
#[test]
fn a_lost_gpu_gives_exit_status_4_after_the_full_output() {
    let scenario = Scenario::new(&json!({
        "devices": [h100(0), h100(1)],
        "faults": [{ "function": "*", "error": "GpuIsLost", "device": 1 }]
    }));
    for arg in ["--once", "--json", "--csv"] {
        let out = scenario.run(&[arg]);
        assert_eq!(out.status.code(), Some(4), "{arg}: {}", stderr(&out));
        assert_eq!(
            stderr(&out).trim_end(),
            "vramscope: GPU 1 lost (exit status 4)",
            "{arg}"
        );
        let text = stdout(&out);
        assert!(text.contains("NVIDIA H100"), "{arg}: {text}");
        match arg {
            "--once" => assert!(text.contains("[LOST]"), "{text}"),
            "--json" => {
                let doc: Value = serde_json::from_str(&text).unwrap();
                assert_eq!(doc["devices"][0]["lost"], false);
                assert_eq!(doc["devices"][1]["lost"], true);
            }
            _ => assert!(text.lines().nth(2).unwrap().contains(",true,"), "{text}"),
        }
    }
    let healthy = Scenario::new(&json!({ "devices": [h100(0)] }));
    assert_eq!(healthy.run(&["--once"]).status.code(), Some(0));
}
