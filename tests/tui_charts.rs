//! Charts in a real terminal (tmux), against the fake NVML library: a chart zoomed in to
//! several columns per sample still reads as a line, with no blank columns between samples.

mod common;

use common::tmux::{self, Tmux};
use common::{Scenario, h100};
use serde_json::json;
use std::time::Duration;

const SECOND: Duration = Duration::from_secs(1);

/// The bottom row of the `util` chart (its only row when the chart is one row tall): the row
/// ending in the current value.
fn util_bottom_row(screen: &str) -> Option<&str> {
    screen
        .lines()
        .skip_while(|l| !l.starts_with("util "))
        .find(|l| l.trim_end().ends_with('%'))
}

/// Blank cells between the first and the last drawn cell of the `util` chart's bottom row.
fn blanks_inside_util_chart(screen: &str) -> Option<usize> {
    let line = util_bottom_row(screen)?;
    // The label (or its blank cells), the chart, then a space and the current value.
    let chart: String = line.chars().skip("util ".len()).collect();
    let chart = chart.trim_end();
    let chart = &chart[..chart.rfind(' ')?];
    let cells: Vec<char> = chart.trim().chars().collect();
    Some(cells.iter().filter(|c| **c == ' ').count())
}

#[test]
fn zoomed_in_chart_has_no_blank_columns_between_samples() {
    if !tmux::available() {
        return;
    }
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let command = scenario.monitor_line("--interval 100ms");
    let t = Tmux::start(scenario.dir(), 120, 40, &command);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("util "));
    assert!(ok, "a GPU panel with a util chart:\n{screen}");
    // Zoomed in to a one-second window: about ten columns per 100 ms sample.
    for _ in 0..8 {
        t.keys(&["z"]);
    }
    std::thread::sleep(2 * SECOND);
    // Any frame after the window filled: the line must be unbroken in every one of them.
    let (ok, screen) = t.wait_for(5 * SECOND, |s| {
        util_bottom_row(s).is_some_and(|l| l.chars().filter(|c| *c != ' ').count() > 100)
    });
    assert!(ok, "the zoomed chart fills its width:\n{screen}");
    for _ in 0..5 {
        let screen = t.screen();
        assert_eq!(
            blanks_inside_util_chart(&screen),
            Some(0),
            "no blank column inside the chart:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(150));
    }
}

/// Blank cells between the first and the last drawn cell of the plot under the `RSS` line of
/// the detail pane (`│  60s ▂▂▂ │`).
fn blanks_inside_rss_chart(screen: &str) -> Option<usize> {
    let lines: Vec<&str> = screen.lines().collect();
    let at = lines.iter().position(|l| l.contains("│ RSS "))?;
    let plot = lines.get(at + 1)?.split('│').nth(1)?;
    // The window label (`60s`), then the chart.
    let chart = plot.trim_start();
    let chart = chart[chart.find(' ')?..].trim();
    Some(chart.chars().filter(|c| *c == ' ').count())
}

#[test]
fn detail_pane_rss_chart_has_no_blank_columns_between_host_samples() {
    if !tmux::available() {
        return;
    }
    let mut child = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("sleep");
    let mut gpu = h100(0);
    gpu["processes"] = json!([{ "t": 0, "compute": [
        { "pid": child.id(), "used_memory": 6u64 << 30 }
    ] }]);
    let scenario = Scenario::new(&json!({ "devices": [gpu] }));
    // Host figures come every 2 s whatever the interval: zoomed in to a one-second window,
    // most columns of the RSS chart hold no sample of their own.
    let command = scenario.monitor_line("--interval 100ms");
    let t = Tmux::start(scenario.dir(), 120, 40, &command);
    let pid = child.id().to_string();
    let (ok, screen) = t.wait_for(10 * SECOND, |s| s.contains(&pid));
    assert!(ok, "the process listed:\n{screen}");
    for _ in 0..8 {
        t.keys(&["z"]);
    }
    t.keys(&["Enter"]);
    // Several host samples into the window.
    let (ok, screen) = t.wait_for(10 * SECOND, |s| {
        s.lines()
            .skip_while(|l| !l.contains("│ RSS "))
            .nth(1)
            .is_some_and(|l| l.chars().filter(|c| "▁▂▃▄▅▆▇█".contains(*c)).count() > 80)
    });
    assert!(ok, "the RSS chart fills its width:\n{screen}");
    assert_eq!(
        blanks_inside_rss_chart(&screen),
        Some(0),
        "no blank column inside the RSS chart:\n{screen}"
    );
    let _ = child.kill();
    let _ = child.wait();
}
