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

/// The detail pane's lines from its VRAM line to its RSS line: the VRAM chart.
fn vram_chart(screen: &str) -> Vec<String> {
    screen
        .lines()
        .skip_while(|l| !l.contains("│ VRAM "))
        .skip(1)
        .take_while(|l| !l.contains("│ RSS "))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_detail_pane_scales_a_process_chart_to_its_own_series() {
    if !tmux::available() {
        return;
    }
    // This test's own process, between 4.0 and 4.5 GiB on an 80 GiB GPU.
    let me = std::process::id();
    let points: Vec<_> = (0..120u64)
        .map(|k| {
            let used = (4u64 << 30) + (k % 6) * ((1u64 << 30) / 10);
            json!({ "t": k as f64 * 0.25, "compute": [{ "pid": me, "used_memory": used }] })
        })
        .collect();
    let mut gpu = h100(0);
    gpu["processes"] = serde_json::Value::Array(points);
    let scenario = Scenario::new(&json!({ "devices": [gpu] }));
    let command = scenario.monitor_line("--interval 250ms");
    let t = Tmux::start(scenario.dir(), 100, 30, &command);
    let (ok, screen) = t.wait_for(10 * SECOND, |s| s.contains(&me.to_string()));
    assert!(ok, "the process row:\n{screen}");
    // A few refreshes of history, then the pane.
    std::thread::sleep(3 * SECOND);
    t.keys(&["Enter"]);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| {
        vram_chart(s).iter().any(|l| l.contains("of 80.0G GPU"))
    });
    assert!(ok, "the VRAM chart names the GPU's total:\n{screen}");
    let chart = vram_chart(&screen);
    let text = chart.join("\n");
    // Its top row is labelled with the window's highest reading, its bottom with the lowest.
    assert!(
        chart[0].contains(" 4.5G ") || chart[0].contains(" 4.4G "),
        "{text}"
    );
    assert!(chart[1].contains(" 4.0G "), "{text}");
    // Readings spread over the plot's height, not a line along its floor.
    assert!(
        text.contains('█'),
        "full cells where the process is high:\n{text}"
    );
    assert!(text.contains("now"), "a time axis:\n{text}");
    assert!(
        text.contains("4.0G-4.5G of 80.0G GPU") || text.contains("4.0G-4.4G of 80.0G GPU"),
        "{text}"
    );
}

#[test]
fn zoom_says_the_span_the_charts_now_cover() {
    if !tmux::available() {
        return;
    }
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let t = Tmux::start(
        scenario.dir(),
        120,
        40,
        &scenario.monitor_line("--interval 1s"),
    );
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("util "));
    assert!(ok, "a GPU panel:\n{screen}");
    let said = |s: &str| -> Option<String> {
        let status = s.lines().last()?;
        let rest = status.split("charts span ").nth(1)?;
        Some(rest.split_whitespace().next()?.to_string())
    };
    // Each key's line names another span than the one before: the line read is its own.
    let mut before = String::new();
    for key in ["Z", "Z", "z"] {
        t.keys(&[key]);
        let (ok, screen) = t.wait_for(5 * SECOND, |s| said(s).is_some_and(|x| x != before));
        assert!(ok, "{key} says the span:\n{screen}");
        let status = screen.lines().last().unwrap_or_default();
        let span = said(&screen).unwrap_or_default();
        before = span.clone();
        assert!(
            span.chars().next().is_some_and(|c| c.is_ascii_digit()),
            "a length of time, not only a factor: {status}"
        );
        // The memory chart's head label names the same window.
        let head = format!("{span:>4}");
        let (ok, screen) = t.wait_for(3 * SECOND, |s| {
            s.lines()
                .any(|l| l.starts_with(&format!("{head} ")) || l.trim_end() == head)
        });
        assert!(ok, "the chart covers {span}:\n{screen}");
    }
}
