//! The process table's chosen columns in a real terminal (tmux) against the fake NVML:
//! `--columns` sets them, `x` shows every one, `b` groups the rows by GPU, and the host line
//! carries the CPU share and the load average.

mod common;

use common::tmux::{self, Tmux};
use common::{GIB, Scenario, h100};
use serde_json::json;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(8);

#[test]
fn chosen_columns_the_x_and_b_keys_and_the_host_load() {
    if !tmux::available() {
        return;
    }
    // This test's own process is the GPU process, so the host pass reads a real start time.
    let me = std::process::id();
    let mut gpu = h100(0);
    gpu["processes"] = json!([{ "t": 0, "compute": [{ "pid": me, "used_memory": 6 * GIB }] }]);
    let scenario = Scenario::new(&json!({ "devices": [gpu] }));
    let t = Tmux::start(
        scenario.dir(),
        140,
        40,
        &scenario.monitor_line("--columns user,type,elapsed"),
    );
    let header = |s: &str| {
        s.lines()
            .find(|l| l.trim_start().starts_with("PID"))
            .map(|l| l.split("rows").next().unwrap_or_default().to_string())
            .unwrap_or_default()
    };
    let row = |s: &str| {
        s.lines()
            .find(|l| l.trim_start().starts_with(&me.to_string()))
            .map(str::to_string)
            .unwrap_or_default()
    };
    // The elapsed time of a process that has run for minutes or seconds: `mm:ss`.
    let (ok, screen) = t.wait_for(WAIT, |s| {
        header(s).contains("TYPE") && header(s).contains("ELAPSED") && row(s).contains(":")
    });
    assert!(ok, "the chosen columns:\n{screen}");
    assert!(
        !header(&screen).contains("RSS") && row(&screen).contains(" C "),
        "{screen}"
    );
    let (ok, screen) = t.wait_for(WAIT, |s| s.contains("  load "));
    assert!(ok, "the host line's load average:\n{screen}");

    t.keys(&["x"]);
    let (ok, screen) = t.wait_for(WAIT, |s| {
        let h = header(s);
        h.contains("%MEM") && h.contains("RSS") && h.contains("CPU%")
    });
    assert!(ok, "x shows every column:\n{screen}");

    t.keys(&["b"]);
    let (ok, screen) = t.wait_for(WAIT, |s| {
        s.contains("── GPU 0 NVIDIA H100 80GB HBM3  1 process, 6.00 GiB")
    });
    assert!(ok, "b groups the rows under their GPU:\n{screen}");
}
