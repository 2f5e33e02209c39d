//! `--units mib` (and the `units` setting): GPU memory in whole MiB, written as nvidia-smi
//! writes it, in `--once` (`10240MiB / 81920MiB`, its table's form), `--csv` (`10240 MiB`,
//! its `--format=csv` form) and on the screen; `--json` keeps bytes. Through the real binary
//! against the fake NVML.

mod common;

use common::tmux::{self, Tmux};
use common::{GIB, MIB, Scenario, h100, stderr, stdout};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

/// One H100 (80 GiB, 10 GiB used) whose one process, this test itself, holds 6 GiB + 1 byte:
/// nvidia-smi rounds down, so it is 6144 MiB.
fn scenario() -> Scenario {
    let mut gpu = h100(0);
    gpu["processes"] = json!([{ "t": 0,
        "compute": [{ "pid": std::process::id(), "used_memory": 6 * GIB + 1 }] }]);
    Scenario::new(&json!({ "devices": [gpu] }))
}

fn run_ok(scenario: &Scenario, args: &[&str]) -> String {
    let out = scenario.run(args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    stdout(&out)
}

#[test]
fn once_writes_mib_as_the_nvidia_smi_table_does() {
    let scenario = scenario();
    let auto = run_ok(&scenario, &["--once"]);
    assert!(auto.contains("10.0 GiB / 80.0 GiB"), "{auto}");
    let mib = run_ok(&scenario, &["--once", "--units", "mib"]);
    assert!(mib.contains("10240MiB / 81920MiB"), "{mib}");
    let me = std::process::id().to_string();
    let row = mib
        .lines()
        .find(|l| l.trim_start().starts_with(&me))
        .unwrap_or_else(|| panic!("no row for {me}:\n{mib}"));
    assert!(row.contains(" 6144MiB "), "{row}");
    assert!(!mib.contains("GiB"), "no figure left in GiB:\n{mib}");
}

#[test]
fn csv_writes_mib_as_nvidia_smi_csv_does_and_json_keeps_bytes() {
    let scenario = scenario();
    let text = run_ok(&scenario, &["--csv", "--units", "mib"]);
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    let column = |name: &str| header.iter().position(|h| *h == name).expect(name);
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let device = rows.iter().find(|r| r[0] == "device").expect("device row");
    assert_eq!(device[column("memory_total")], "81920 MiB");
    assert_eq!(device[column("memory_used")], "10240 MiB");
    assert_eq!(device[column("memory_reserved")], "512 MiB");
    assert_eq!(device[column("memory_free")], "71168 MiB");
    // Only memory changes: the other figures stay as they were.
    assert_eq!(device[column("power_mw")], "412000");
    let process = rows
        .iter()
        .find(|r| r[0] == "process")
        .expect("process row");
    assert_eq!(process[column("used_memory")], "6144 MiB");

    let bytes = run_ok(&scenario, &["--csv"]);
    assert!(bytes.contains(&(10 * GIB).to_string()), "{bytes}");

    let doc: Value =
        serde_json::from_str(&run_ok(&scenario, &["--json", "--units", "mib"])).expect("json");
    assert_eq!(doc["devices"][0]["memory_used"], 10 * GIB);
    assert_eq!(doc["devices"][0]["memory_reserved"], 512 * MIB);
}

#[test]
fn the_setting_comes_from_the_file_and_the_variable() {
    let scenario = scenario();
    let file = scenario.dir().join("config.toml");
    std::fs::write(&file, "units = \"mib\"\n").expect("write config");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let from_file = scenario
        .command()
        .env("VRAMSCOPE_CONFIG", &file)
        .arg("--once")
        .output()
        .expect("run");
    assert!(from_file.status.success(), "{}", stderr(&from_file));
    assert!(
        stdout(&from_file).contains("10240MiB / 81920MiB"),
        "{}",
        stdout(&from_file)
    );
    let from_env = scenario
        .command()
        .env("VRAMSCOPE_UNITS", "mib")
        .arg("--once")
        .output()
        .expect("run");
    assert!(stdout(&from_env).contains("10240MiB / 81920MiB"));

    let bad = scenario.run(&["--once", "--units", "gigs"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("'gigs'"), "{}", stderr(&bad));
}

#[test]
fn the_screen_writes_mib_in_the_gpu_panel_and_the_table() {
    if !tmux::available() {
        return;
    }
    let scenario = scenario();
    let t = Tmux::start(
        scenario.dir(),
        120,
        40,
        &scenario.monitor_line("--units mib"),
    );
    let me = std::process::id().to_string();
    let (ok, screen) = t.wait_for(Duration::from_secs(8), |s| {
        s.contains("10240MiB / 81920MiB")
            && s.lines()
                .any(|l| l.trim_start().starts_with(&me) && l.contains("6144MiB"))
    });
    assert!(ok, "MiB on the screen:\n{screen}");
}
