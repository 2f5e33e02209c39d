//! The layout where users are, in a real terminal (tmux, TERM=screen, NO_COLOR) against the
//! fake NVML library: an 8-GPU node gets a grid of small panels with history and alarms at
//! 200x50 and the one-line list at 80x24, one GPU's charts grow with round time ticks, charts
//! have no blank column at the default interval nor in a replay zoomed in, and `--pcie`
//! shows the link's throughput on every frame.

mod common;
mod recording_fixture;

use common::tmux::{self, Tmux};
use common::{GIB, Scenario, h100};
use serde_json::{Value, json};
use std::time::Duration;

const SECOND: Duration = Duration::from_secs(1);

/// The monitor under TERM=screen and NO_COLOR, as on a plain terminal.
fn plain_terminal(line: &str) -> String {
    format!("env TERM=screen NO_COLOR=1 {line}")
}

/// Eight H100s whose memory changes every second (a spike on GPU 6 at 2 s); GPU 3 counts an
/// uncorrected ECC error, GPU 5 throttles for heat.
fn eight_gpus() -> Scenario {
    let devices: Vec<Value> = (0..8u64)
        .map(|i| {
            let mut gpu = h100(u32::try_from(i).unwrap_or(0));
            gpu["uuid"] = json!(format!("GPU-00000000-0000-0000-0000-00000000000{i}"));
            let base = (10 + i * 8) * GIB;
            let mut timeline = vec![gpu["timeline"][0].clone()];
            timeline[0]["memory_used"] = json!(base);
            for t in 1..4u64 {
                let used = if i == 6 && t == 2 {
                    79 * GIB
                } else {
                    base + t * GIB
                };
                timeline.push(json!({ "t": t, "memory_used": used, "gpu_util": 20 * t }));
            }
            if i == 3 {
                timeline[0]["ecc_uncorrected"] = json!(1);
            }
            if i == 5 {
                timeline[0]["throttle_reasons"] = json!(0x40);
            }
            gpu["timeline"] = Value::Array(timeline);
            gpu
        })
        .collect();
    Scenario::new(&json!({ "devices": devices }))
}

#[test]
fn eight_gpus_get_a_grid_at_200x50_and_the_one_line_list_at_80x24() {
    if !tmux::available() {
        return;
    }
    let scenario = eight_gpus();
    let line = plain_terminal(&scenario.monitor_line("--interval 200ms"));
    let t = Tmux::start(scenario.dir(), 200, 50, &line);
    let (ok, screen) = t.wait_for(10 * SECOND, |s| {
        s.contains(" GPU 7 ") && s.contains("ECC 0 corr 1 uncorr") && s.contains("▲79.0G")
    });
    assert!(ok, "a grid of eight panels:\n{screen}");
    assert!(screen.contains("8 GPUs: NVIDIA H100 80GB HBM3"), "{screen}");
    assert_eq!(
        screen.matches("H100").count(),
        1,
        "the model said once:\n{screen}"
    );
    assert!(screen.contains("thr hw-thermal"), "{screen}");
    // Each panel has its two charts.
    assert_eq!(screen.matches("mem  ").count(), 8, "{screen}");
    assert_eq!(screen.matches("util ").count(), 8, "{screen}");
    // One time axis under the grid, a `now` under each of its three columns' charts, each
    // ending where the charts' cells end (six cells for the value after them).
    let lines: Vec<&str> = screen.lines().collect();
    let axis_at = lines
        .iter()
        .position(|l| l.matches("now").count() == 3)
        .unwrap_or_else(|| panic!("a time axis row:\n{screen}"));
    let axis = lines[axis_at];
    assert!(
        lines[..axis_at].iter().any(|l| l.contains(" GPU 6 "))
            && lines[axis_at - 1].contains("GiB"),
        "the axis comes right under the last tiles' figures:\n{screen}"
    );
    let tick = if axis.contains('╵') { '╵' } else { '|' };
    assert!(
        axis.matches(tick).count() >= 3,
        "ticks on the axis: {axis:?}"
    );
    let util_rows: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.contains("util "))
        .collect();
    let chart_end = |row: &str, nth: usize| -> usize {
        // The column after a chart's last cell: where its value (` 60%`) starts.
        let starts: Vec<usize> = row.match_indices("util ").map(|(i, _)| i).collect();
        let chars = |byte: usize| row[..byte].chars().count();
        let start = chars(starts[nth]);
        let end_of_cell = starts
            .get(nth + 1)
            .map_or(row.chars().count(), |&next| chars(next) - 2);
        assert!(end_of_cell > start);
        end_of_cell - 6
    };
    let nows: Vec<usize> = axis
        .match_indices("now")
        .map(|(i, _)| axis[..i].chars().count() + 3)
        .collect();
    for (nth, now_end) in nows.iter().enumerate() {
        let first_row = util_rows.iter().find(|r| r.matches("util ").count() == 3);
        let first_row = first_row.unwrap_or_else(|| panic!("a full row of tiles:\n{screen}"));
        assert_eq!(
            *now_end,
            chart_end(first_row, nth),
            "`now` of column {nth} ends where its charts end:\n{axis}\n{first_row}"
        );
    }
    // The table keeps most of the screen.
    let table_at = screen
        .lines()
        .position(|l| l.contains("COMMAND"))
        .expect("table header");
    assert!(table_at < 20, "table header at row {table_at}:\n{screen}");

    t.resize(80, 24);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| {
        (0..8).all(|i| {
            s.lines()
                .any(|l| l.starts_with(&format!("{i} ")) && l.contains("GiB"))
        })
    });
    assert!(ok, "one line per GPU at 80x24:\n{screen}");
    assert!(!screen.contains("util ▁"), "no charts:\n{screen}");
    let row = |i: usize| {
        screen
            .lines()
            .find(|l| l.starts_with(&format!("{i} ")))
            .unwrap_or_default()
    };
    assert!(row(3).contains("ECC 0 corr 1 uncorr"), "{screen}");
    assert!(row(5).contains("thr hw-thermal"), "{screen}");
    assert!(screen.lines().all(|l| l.chars().count() <= 80), "{screen}");
}

/// Blank cells between the first and the last drawn cell of `line`'s chart (the cells after
/// the label, before the current value).
fn blanks_inside(line: &str) -> usize {
    let drawn: Vec<char> = line
        .chars()
        .skip(5)
        .take_while(|c| !c.is_ascii_alphanumeric())
        .collect();
    let first = drawn.iter().position(|c| *c != ' ');
    let last = drawn.iter().rposition(|c| *c != ' ');
    match (first, last) {
        (Some(a), Some(b)) => drawn[a..=b].iter().filter(|c| **c == ' ').count(),
        _ => usize::MAX,
    }
}

/// The bottom rows of the memory and utilisation charts of a one-GPU screen with tall
/// charts: the row above the peak label and the row above the time axis.
fn bottom_rows(screen: &str) -> Option<(String, String)> {
    let lines: Vec<&str> = screen.lines().collect();
    let label = lines
        .iter()
        .position(|l| l.contains("(max of") || l.contains("flat at"))?;
    let axis = lines.iter().position(|l| l.contains('╵'))?;
    Some((
        lines.get(label - 1)?.to_string(),
        lines.get(axis - 1)?.to_string(),
    ))
}

#[test]
fn one_gpu_at_200x50_grows_its_charts_with_round_time_ticks() {
    if !tmux::available() {
        return;
    }
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let line = plain_terminal(&scenario.monitor_line(""));
    let t = Tmux::start(scenario.dir(), 200, 50, &line);
    let (ok, screen) = t.wait_for(10 * SECOND, |s| s.contains("now") && s.contains('╵'));
    assert!(ok, "a time axis:\n{screen}");
    let lines: Vec<&str> = screen.lines().collect();
    let bar = lines
        .iter()
        .position(|l| l.starts_with("mem  "))
        .expect("memory bar");
    let label = lines
        .iter()
        .position(|l| l.contains("over the last") || l.contains("(max of"))
        .expect("peak label");
    assert_eq!(label - bar - 1, 8, "an 8-row memory chart:\n{screen}");
    let axis = lines.iter().find(|l| l.contains('╵')).expect("axis");
    let ticks: Vec<&str> = axis
        .split('╵')
        .skip(1)
        .map(|t| t.split_whitespace().next().unwrap_or(""))
        .collect();
    assert!(ticks.len() >= 4, "{axis}");
    for tick in ticks {
        assert!(
            ["5m", "4m", "3m", "2m", "1m"].contains(&tick),
            "round ticks only: {tick} in {axis}"
        );
    }
    // The window is round too: its length heads the chart.
    assert_eq!(
        lines[bar + 1].split_whitespace().next(),
        Some("5m"),
        "{screen}"
    );
}

#[test]
fn charts_at_the_default_interval_have_no_blank_column() {
    if !tmux::available() {
        return;
    }
    let mut gpu = h100(0);
    gpu["timeline"] = json!([
        gpu["timeline"][0].clone(),
        { "t": 2, "memory_used": 30 * GIB, "gpu_util": 40 },
        { "t": 4, "memory_used": 20 * GIB, "gpu_util": 95 }
    ]);
    let scenario = Scenario::new(&json!({ "devices": [gpu] }));
    let line = plain_terminal(&scenario.monitor_line(""));
    let t = Tmux::start(scenario.dir(), 100, 30, &line);
    // Several seconds of samples at 1 s, drawn over a window of about a second per column.
    let (ok, screen) = t.wait_for(15 * SECOND, |s| {
        bottom_rows(s).is_some_and(|(m, _)| m.chars().filter(|c| *c == '█').count() >= 6)
    });
    assert!(ok, "six seconds of history:\n{screen}");
    for _ in 0..5 {
        let screen = t.screen();
        let (memory, util) = bottom_rows(&screen).expect("tall charts");
        assert_eq!(blanks_inside(&memory), 0, "memory:\n{screen}");
        assert_eq!(blanks_inside(&util), 0, "utilisation:\n{screen}");
        std::thread::sleep(Duration::from_millis(700));
    }
}

#[test]
fn a_replay_zoomed_in_has_no_blank_column_between_samples() {
    if !tmux::available() {
        return;
    }
    let scenario = Scenario::new(&json!({ "devices": [] }));
    let path = scenario.dir().join("run.jsonl.zst");
    recording_fixture::write_recording(&path);
    let command = format!(
        "env TZ=UTC TERM=screen NO_COLOR=1 {} replay {}",
        env!("CARGO_BIN_EXE_vramscope"),
        path.display()
    );
    let t = Tmux::start(scenario.dir(), 140, 40, &command);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("replay run.jsonl.zst"));
    assert!(ok, "the banner:\n{screen}");
    // To the allocator's true peak half a minute in, then zoomed in to several columns per
    // sample.
    t.keys(&["p"]);
    let (ok, screen) = t.wait_for(3 * SECOND, |s| s.contains("true peak"));
    assert!(ok, "{screen}");
    t.keys(&["z", "z", "z"]);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| {
        s.contains("(1/8 of their usual time)") && s.lines().any(|l| l.trim_end() == " 30s")
    });
    assert!(ok, "zoomed in:\n{screen}");
    let (memory, util) = bottom_rows(&screen).expect("tall charts");
    assert_eq!(blanks_inside(&memory), 0, "memory:\n{screen}");
    assert_eq!(blanks_inside(&util), 0, "utilisation:\n{screen}");
    let drawn = memory.chars().filter(|c| *c == '█').count();
    assert!(drawn > 100, "the window filled ({drawn} cells):\n{screen}");
}

#[test]
fn pcie_throughput_shows_on_every_frame_when_asked() {
    if !tmux::available() {
        return;
    }
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    // Read every 2 s, drawn every 200 ms: frames between two reads show the last one.
    let line = plain_terminal(&scenario.monitor_line("--interval 200ms --pcie 2"));
    let t = Tmux::start(scenario.dir(), 120, 30, &line);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("PCIe tx"));
    assert!(ok, "PCIe on the GPU panel:\n{screen}");
    assert!(
        screen.contains("PCIe tx 1000 KiB/s rx 1.95 MiB/s"),
        "{screen}"
    );
    for _ in 0..12 {
        std::thread::sleep(Duration::from_millis(250));
        let screen = t.screen();
        assert!(
            screen.contains("PCIe tx 1000 KiB/s rx 1.95 MiB/s"),
            "between two reads:\n{screen}"
        );
    }
}

#[test]
fn identical_gpus_in_the_demo_get_bars_of_one_length_at_80_columns() {
    if !tmux::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let line = format!("{} demo", env!("CARGO_BIN_EXE_vramscope"));
    let t = Tmux::start(dir.path(), 80, 24, &line);
    // GPU 0 runs the instrumented trainer (its line says how much its allocators hold),
    // GPU 1 the same model idle.
    let mem_lines = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| l.starts_with("mem "))
            .map(str::to_string)
            .collect()
    };
    let (ok, screen) = t.wait_for(10 * SECOND, |s| {
        let lines = mem_lines(s);
        lines.len() == 2 && lines.iter().any(|l| l.contains("in allocators"))
    });
    assert!(
        ok,
        "two GPU panels, one with its allocators' share:\n{screen}"
    );
    let bar_end = |l: &String| l.chars().position(|c| c == '▏');
    let ends: Vec<Option<usize>> = mem_lines(&screen).iter().map(bar_end).collect();
    assert!(ends[0].is_some(), "{screen}");
    assert_eq!(ends[0], ends[1], "one bar length for both:\n{screen}");
}
