//! Every figure readable, in a real terminal (tmux) against the fake NVML library: alarms
//! outlast figures on a narrow GPU line, commands show program and script with a marked cut.

mod common;

use common::tmux::{self, Tmux};
use common::{Scenario, h100};
use serde_json::json;
use std::time::Duration;

const SECOND: Duration = Duration::from_secs(1);

fn monitor(scenario: &Scenario, extra: &str) -> String {
    scenario.monitor_line(&format!("--interval 200ms {extra}"))
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
    // tmux crops the old frame to 64 columns at once, so "every line fits" is no sign of a
    // redraw; the GPU's title rule ending in its bus id at column 64 is (at 120 columns the
    // bus id stood past column 100, cropped away).
    let (ok, screen) = t.wait_for(5 * SECOND, |s| {
        s.contains("64°C")
            && s.lines().any(|l| {
                let l = l.trim_end();
                l.ends_with("00000000:18:00.0") && l.chars().count() <= 64
            })
    });
    assert!(ok, "redrawn at 64 columns:\n{screen}");
    assert!(!screen.contains("fan n/a"), "fan n/a dropped:\n{screen}");
    assert!(
        screen.contains("ECC 0 corr 2 uncorr"),
        "the ECC alarm kept at 64 columns:\n{screen}"
    );
}

/// A job as a launcher starts one: an interpreter by its full path, a script by its full path
/// deep in a project, many arguments. Killed when dropped.
struct LongJob {
    child: std::process::Child,
    command: String,
}

impl LongJob {
    fn start(dir: &std::path::Path) -> LongJob {
        let project = dir.join("projects/language-models/experiments");
        std::fs::create_dir_all(&project).expect("project dir");
        let script = project.join("train.sh");
        std::fs::write(&script, "sleep 60\n").expect("script");
        let args = [
            "--config",
            "configs/llama-70b.yaml",
            "--epochs",
            "90",
            "--output",
            "/scratch/runs/final",
        ];
        let child = std::process::Command::new("/bin/sh")
            .arg(&script)
            .args(args)
            .spawn()
            .expect("start the job");
        let command = format!("/bin/sh {} {}", script.display(), args.join(" "));
        LongJob { child, command }
    }

    fn scenario(&self) -> Scenario {
        let mut gpu = h100(0);
        gpu["processes"] = json!([{ "t": 0, "compute": [
            { "pid": self.child.id(), "used_memory": 6u64 << 30 }
        ] }]);
        Scenario::new(&json!({ "devices": [gpu] }))
    }
}

impl Drop for LongJob {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_table_shows_program_and_script_and_marks_the_cut() {
    if !tmux::available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let job = LongJob::start(dir.path());
    let scenario = job.scenario();
    let t = Tmux::start(scenario.dir(), 80, 24, &monitor(&scenario, ""));
    let pid = job.child.id().to_string();
    let (ok, screen) = t.wait_for(10 * SECOND, |s| s.contains(" sh train.sh --conf"));
    assert!(ok, "program and script by name:\n{screen}");
    let row = screen
        .lines()
        .find(|l| l.trim_start().starts_with(&pid))
        .expect("the job's row");
    assert!(row.ends_with('…'), "the cut is marked:\n{row}");
    assert!(!row.contains("/bin/sh"), "no interpreter path:\n{row}");
}

#[test]
fn once_cuts_commands_with_a_mark_in_a_terminal_and_never_when_piped() {
    if !tmux::available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let job = LongJob::start(dir.path());
    let scenario = job.scenario();
    assert!(job.command.chars().count() > 60, "{}", job.command);

    let piped = common::stdout(&scenario.run(&["--once"]));
    assert!(
        piped.contains(&job.command),
        "the whole command when piped:\n{piped}"
    );

    let t = Tmux::start(scenario.dir(), 160, 24, &monitor(&scenario, "--once"));
    let (ok, screen) = t.wait_for(10 * SECOND, |s| s.contains("COMMAND") && s.contains('…'));
    assert!(ok, "a marked cut in a terminal:\n{screen}");
    let row = screen
        .lines()
        .find(|l| l.contains("/bin/sh"))
        .expect("the job's row");
    let command = &row[row.find("/bin/sh").unwrap_or(0)..];
    assert_eq!(command.chars().count(), 60, "{command}");
    assert!(job.command.starts_with(command.trim_end_matches('…')));
}

#[test]
fn a_process_that_left_the_gpu_alive_reads_left_gpu_then_exited_once_gone() {
    if !tmux::available() {
        return;
    }
    let mut child = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("sleep");
    let pid = child.id();
    let mut gpu = h100(0);
    gpu["processes"] = json!([
        { "t": 0, "compute": [{ "pid": pid, "used_memory": 6u64 << 30 }] },
        { "t": 1.5, "compute": [] }
    ]);
    let scenario = Scenario::new(&json!({ "devices": [gpu] }));
    let t = Tmux::start(scenario.dir(), 100, 24, &monitor(&scenario, ""));
    let row = |s: &str| {
        s.lines()
            .find(|l| l.trim_start().starts_with(&pid.to_string()))
            .map(str::to_string)
            .unwrap_or_default()
    };
    let (ok, screen) = t.wait_for(10 * SECOND, |s| row(s).contains("left GPU"));
    assert!(ok, "alive, off the list: left GPU:\n{screen}");
    assert!(!row(&screen).contains("exited"), "{screen}");
    child.kill().expect("kill");
    child.wait().expect("wait");
    let (ok, screen) = t.wait_for(10 * SECOND, |s| row(s).contains("exited"));
    assert!(ok, "gone: exited:\n{screen}");
}
