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

/// The table's header line, and its columns: the part up to COMMAND's label.
fn header_line(screen: &str) -> String {
    screen
        .lines()
        .find(|l| l.trim_start().starts_with("PID"))
        .unwrap_or_default()
        .to_string()
}

fn header_columns(screen: &str) -> String {
    let line = header_line(screen);
    line.split("COMMAND").next().unwrap_or_default().to_string()
}

#[test]
fn at_80_columns_the_header_names_what_the_width_hides_and_x_pages_to_it() {
    if !tmux::available() {
        return;
    }
    let me = std::process::id();
    let mut gpu = h100(0);
    gpu["processes"] = json!([{ "t": 0, "compute": [{ "pid": me, "used_memory": 6 * GIB }] }]);
    let scenario = Scenario::new(&json!({ "devices": [gpu] }));
    let t = Tmux::start(scenario.dir(), 80, 24, &scenario.monitor_line(""));
    let (ok, screen) = t.wait_for(WAIT, |s| header_line(s).contains("x: +CPU%"));
    assert!(
        ok,
        "the header says CPU% is hidden and x shows it:\n{screen}"
    );
    assert!(
        !header_columns(&screen).contains("CPU%"),
        "no CPU% column at 80 columns:\n{screen}"
    );
    // x: every column, a page at a time; CPU% on one of them, with its figure.
    let mut pages = 0;
    let screen = loop {
        let before = header_line(&t.screen());
        t.keys(&["x"]);
        pages += 1;
        // This page's header: another than the one before the key.
        let (ok, screen) = t.wait_for(WAIT, |s| header_line(s) != before);
        assert!(ok, "x changed the columns:\n{screen}");
        if header_columns(&screen).contains("CPU%") {
            break screen;
        }
        assert!(pages < 4, "x never showed CPU%:\n{screen}");
    };
    let row = screen
        .lines()
        .find(|l| l.trim_start().starts_with(&me.to_string()))
        .unwrap_or_default();
    assert!(row.contains('.'), "its CPU% figure: {row}\n{screen}");
    assert!(header_columns(&screen).contains("ELAPSED"), "{screen}");
    // The last page says x goes back; it does.
    assert!(header_line(&screen).contains("x: "), "{screen}");
    t.keys(&["x"]);
    let (ok, screen) = t.wait_for(WAIT, |s| {
        header_line(s).contains("x: +CPU%") && header_columns(s).contains("USER")
    });
    assert!(ok, "x after the last page: the chosen columns:\n{screen}");
}

#[test]
fn a_sort_mark_sits_in_its_own_column_not_glued_to_the_one_before() {
    if !tmux::available() {
        return;
    }
    let me = std::process::id();
    let mut gpu = h100(0);
    gpu["processes"] = json!([{ "t": 0, "compute": [{ "pid": me, "used_memory": 6 * GIB }] }]);
    for (width, ascii, mark) in [(120, "", "▲"), (80, "--ascii", "^")] {
        // A folder (and so a tmux server) of its own for each.
        let scenario = Scenario::new(&json!({ "devices": [gpu] }));
        let t = Tmux::start(
            scenario.dir(),
            width,
            24,
            &scenario.monitor_line(&format!("--sort gpu {ascii}")),
        );
        let (ok, screen) = t.wait_for(WAIT, |s| header_line(s).contains(mark));
        assert!(ok, "sorted by GPU:\n{screen}");
        let header = header_columns(&screen);
        assert!(
            header.contains(&format!("USER GPU{mark}")),
            "a gap between USER and GPU{mark}: {header:?}"
        );
    }
}
