//! Charts in a real terminal (tmux), against the fake NVML library: a chart zoomed in to
//! several columns per sample still reads as a line, with no blank columns between samples.

mod common;

use common::tmux::{self, Tmux};
use common::{Scenario, fake_nvml, h100};
use serde_json::json;
use std::time::Duration;

const SECOND: Duration = Duration::from_secs(1);

/// Blank cells between the first and the last drawn cell of the `util` sparkline.
fn blanks_inside_util_chart(screen: &str) -> Option<usize> {
    let line = screen.lines().find(|l| l.starts_with("util "))?;
    // The chart, then a space and the current value.
    let chart = line["util ".len()..].trim_end();
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
    let command = format!(
        "env FAKE_NVML_SCENARIO={} {} --nvml-lib {} --interval 100ms",
        scenario.path.display(),
        env!("CARGO_BIN_EXE_vramscope"),
        fake_nvml().display()
    );
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
        s.lines()
            .find(|l| l.starts_with("util "))
            .is_some_and(|l| l.chars().filter(|c| *c != ' ').count() > 100)
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
