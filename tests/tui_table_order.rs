//! The process table holds still in a real terminal (tmux, NO_COLOR) against the fake NVML
//! library: rows whose VRAM only jitters keep their order refresh after refresh, a process
//! that really grows still moves up, and the selected row keeps its process and its screen
//! line while the rows around it move.

mod common;

use common::tmux::{self, Tmux};
use common::{GIB, Scenario, h100};
use serde_json::{Value, json};
use std::time::Duration;

const SECOND: Duration = Duration::from_secs(1);

/// Pids far above any this machine runs: rows NVML lists, whatever the host knows.
const FIRST_PID: u64 = 3_000_000;

/// The process that grows from the bottom of the table to its top at `RISES_AT`.
const RISER: u64 = 3_000_100;
const RISES_AT: u64 = 15;

/// Forty processes in twenty pairs of about equal size, each pair swapping which of the two is
/// larger every half second (by 100 MiB, about 2%), and one that grows from 1 GiB to 30 GiB
/// at `RISES_AT` seconds.
fn jittering() -> Scenario {
    let mut points = Vec::new();
    for half in 0..60u64 {
        let mut compute: Vec<Value> = (0..40u64)
            .map(|i| {
                let pair = i / 2;
                let base = (2 + pair) * GIB;
                let up = (i % 2 == 0) == (half % 2 == 0);
                let used = if up { base + 100 * (1 << 20) } else { base };
                json!({ "pid": FIRST_PID + i, "used_memory": used })
            })
            .collect();
        let riser = if half / 2 >= RISES_AT { 30 * GIB } else { GIB };
        compute.push(json!({ "pid": RISER, "used_memory": riser }));
        points.push(json!({ "t": half as f64 / 2.0, "compute": compute }));
    }
    let mut gpu = h100(0);
    gpu["processes"] = Value::Array(points);
    Scenario::new(&json!({ "devices": [gpu] }))
}

/// The table's rows as (screen line, pid, selected), from a capture with escapes: the
/// selected row is drawn reversed (NO_COLOR).
fn rows(t: &Tmux) -> Vec<(usize, String, bool)> {
    let screen = t.screen_with_escapes();
    screen
        .lines()
        .enumerate()
        .filter_map(|(at, line)| {
            let selected = line.starts_with("\u{1b}[0;7m") || line.starts_with("\u{1b}[7m");
            let plain = strip_escapes(line);
            let pid = plain.split_whitespace().next()?.trim_end_matches('*');
            pid.starts_with("3000")
                .then(|| (at, pid.to_string(), selected))
        })
        .collect()
}

fn strip_escapes(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: up to its final letter.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn order(rows: &[(usize, String, bool)]) -> Vec<String> {
    rows.iter().map(|(_, pid, _)| pid.clone()).collect()
}

#[test]
fn rows_of_about_equal_vram_keep_their_order_and_the_selection_its_line() {
    if !tmux::available() {
        return;
    }
    let scenario = jittering();
    let line = format!(
        "env NO_COLOR=1 {}",
        scenario.monitor_line("--interval 250ms")
    );
    let t = Tmux::start(scenario.dir(), 100, 45, &line);
    let (ok, screen) = t.wait_for(10 * SECOND, |s| s.contains("of 41"));
    assert!(ok, "the table:\n{screen}");
    // Two pages down: the table scrolled, the selected row its last line.
    t.keys(&["PageDown", "PageDown"]);
    let (ok, screen) = t.wait_for(3 * SECOND, |s| s.contains("rows 2-21 of 41"));
    assert!(ok, "scrolled by a row:\n{screen}");
    let before = rows(&t);
    let riser = RISER.to_string();
    assert!(
        !order(&before).contains(&riser),
        "the riser is further down: {before:?}"
    );
    assert!(
        before.last().is_some_and(|r| r.2),
        "the last line selected: {before:?}"
    );
    // Refresh after refresh (four a second, the pairs swapping twice a second), the rows
    // stay as they were.
    for _ in 0..8 {
        std::thread::sleep(Duration::from_millis(300));
        let now = rows(&t);
        if now != before {
            break;
        }
    }
    let screen = t.screen();
    if !screen.contains("rows 3-22 of 41") {
        assert_eq!(rows(&t), before, "rows reshuffled:\n{screen}");
    }
    // The riser's growth is no jitter: it goes to the top, every other row one place down,
    // and the window follows the selection, which keeps its process and its screen line.
    let (ok, screen) = t.wait_for(20 * SECOND, |s| s.contains("rows 3-22 of 41"));
    assert!(
        ok,
        "the window moved down by the row that went above it:\n{screen}"
    );
    assert_eq!(
        rows(&t),
        before,
        "the same rows on the same lines:\n{screen}"
    );
    t.keys(&["Home"]);
    let (ok, screen) = t.wait_for(3 * SECOND, |_| order(&rows(&t)).first() == Some(&riser));
    assert!(ok, "the riser is the first row:\n{screen}");
}

/// A monitor just opened shows its table from the top: a selection nobody made does not pin
/// the first frame's top process. Here one small process runs alone for two seconds, then
/// thirty larger ones join above it in VRAM order.
#[test]
fn a_selection_nobody_made_stays_on_the_top_row_as_processes_join() {
    if !tmux::available() {
        return;
    }
    let small = json!([{ "pid": FIRST_PID, "used_memory": GIB }]);
    let mut all: Vec<Value> = (1..=30u64)
        .map(|i| json!({ "pid": FIRST_PID + i, "used_memory": (2 + i) * GIB }))
        .collect();
    all.push(json!({ "pid": FIRST_PID, "used_memory": GIB }));
    let mut gpu = h100(0);
    gpu["processes"] = json!([
        { "t": 0, "compute": small },
        { "t": 2, "compute": all },
    ]);
    let scenario = Scenario::new(&json!({ "devices": [gpu] }));
    let line = format!(
        "env NO_COLOR=1 {}",
        scenario.monitor_line("--interval 250ms")
    );
    let t = Tmux::start(scenario.dir(), 100, 30, &line);
    let (ok, screen) = t.wait_for(10 * SECOND, |s| s.contains("of 1"));
    assert!(ok, "the lone process first:\n{screen}");
    let (ok, screen) = t.wait_for(10 * SECOND, |s| s.contains("of 31"));
    assert!(ok, "the others joined:\n{screen}");
    // Past a few refreshes, the window still starts at the top, its first row selected.
    std::thread::sleep(SECOND);
    let screen = t.screen();
    assert!(
        screen.contains("rows 1-"),
        "the table from its top:\n{screen}"
    );
    let shown = rows(&t);
    assert_eq!(
        shown.first().map(|r| (r.1.clone(), r.2)),
        Some(((FIRST_PID + 30).to_string(), true)),
        "the largest process first, and selected: {shown:?}\n{screen}"
    );
    // A key puts the selection on a process: from then on it follows that process.
    t.keys(&["Down"]);
    let (ok, screen) = t.wait_for(3 * SECOND, |_| rows(&t).get(1).is_some_and(|r| r.2));
    assert!(ok, "the second row selected:\n{screen}");
}
