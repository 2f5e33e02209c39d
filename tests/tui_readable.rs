//! Every figure readable, in a real terminal (tmux) against the fake NVML library: alarms
//! outlast figures on a narrow GPU line, commands show program and script with a marked cut.

mod common;

use common::tmux::{self, Tmux};
use common::{Scenario, fake_nvml, h100};
use serde_json::json;
use std::time::Duration;

const SECOND: Duration = Duration::from_secs(1);

fn monitor(scenario: &Scenario, extra: &str) -> String {
    format!(
        "env FAKE_NVML_SCENARIO={} {} --nvml-lib {} --interval 200ms {extra}",
        scenario.path.display(),
        env!("CARGO_BIN_EXE_vramscope"),
        fake_nvml().display()
    )
}

#[test]
fn a_narrow_pane_keeps_the_ecc_alarm_and_drops_fan_n_a() {
    if !tmux::available() {
        return;
    }
    let mut gpu = h100(0);
    gpu["num_fans"] = serde_json::Value::Null;
    gpu["timeline"][0]["ecc_uncorrected"] = json!(2);
    let scenario = Scenario::new(&json!({ "devices": [gpu] }));
    let t = Tmux::start(scenario.dir(), 120, 30, &monitor(&scenario, ""));
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("ECC 0 corr 2 uncorr"));
    assert!(ok, "the alarm on a wide pane:\n{screen}");
    assert!(screen.contains("fan n/a"), "{screen}");
    t.resize(64, 30);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| {
        s.contains("64°C") && s.lines().all(|l| l.trim_end().chars().count() <= 64)
    });
    assert!(ok, "redrawn at 64 columns:\n{screen}");
    assert!(!screen.contains("fan n/a"), "fan n/a dropped:\n{screen}");
    assert!(
        screen.contains("ECC 0 corr 2 uncorr"),
        "the ECC alarm kept at 64 columns:\n{screen}"
    );
}
