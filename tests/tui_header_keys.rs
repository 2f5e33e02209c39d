//! The header, help and keys in a real terminal (tmux) against the fake NVML library: local
//! time and the host name, a help that scrolls, one meaning for `+`, the table's position.

mod common;

use common::tmux::{self, Tmux};
use common::{Scenario, fake_nvml, h100};
use serde_json::json;
use std::time::Duration;

const SECOND: Duration = Duration::from_secs(1);

fn monitor(scenario: &Scenario, env: &str, extra: &str) -> String {
    format!(
        "env FAKE_NVML_SCENARIO={} {env} {} --nvml-lib {} --interval 1s {extra}",
        scenario.path.display(),
        env!("CARGO_BIN_EXE_vramscope"),
        fake_nvml().display()
    )
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("host name")
        .trim()
        .to_string()
}

#[test]
fn the_header_shows_local_time_by_tz_and_the_host_name() {
    if !tmux::available() {
        return;
    }
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    // A POSIX zone five hours east of UTC, named so that no machine's default matches it.
    let t = Tmux::start(scenario.dir(), 120, 30, &monitor(&scenario, "TZ=VST-5", ""));
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("64°C"));
    assert!(ok, "the monitor ran:\n{screen}");
    let header = screen.lines().next().unwrap_or_default();
    assert!(header.contains(" VST"), "the zone from TZ: {header}");
    assert!(!header.contains("UTC"), "not UTC: {header}");
    assert!(header.contains(&host_name()), "the host name: {header}");
}
