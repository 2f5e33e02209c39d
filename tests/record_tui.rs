//! `--record FILE` while the monitor runs in a real terminal (tmux): the file holds what the
//! screen was drawn from, is finished on quitting and on SIGTERM, and an existing file is
//! refused before the terminal is touched.

mod common;
mod record_support;

use common::tmux::{self, Tmux};
use common::{GIB, Scenario, fake_nvml, h100};
use record_support::read_all;
use serde_json::json;
use std::path::Path;
use std::time::Duration;
use vramscope::model::SourceEvent;
use vramscope::model::now_ms;
use vramscope::state::{Monitor, StaleAfter};

const SECOND: Duration = Duration::from_secs(1);

fn scenario() -> Scenario {
    let mut gpu = h100(0);
    gpu["processes"] =
        json!([{ "t": 0, "compute": [{ "pid": std::process::id(), "used_memory": 6 * GIB }] }]);
    Scenario::new(&json!({ "devices": [gpu] }))
}

/// The monitor recording to `file`, then a line with its exit status, in a shell that stays.
fn shell(scenario: &Scenario, file: &Path) -> String {
    format!(
        "sh -c 'env FAKE_NVML_SCENARIO={} {} --nvml-lib {} --interval 200ms --record {}; echo EXIT=$?; exec sleep 30'",
        scenario.path.display(),
        env!("CARGO_BIN_EXE_vramscope"),
        fake_nvml().display(),
        file.display()
    )
}

#[test]
fn the_monitor_records_what_it_shows_until_quit() {
    if !tmux::available() {
        return;
    }
    let scenario = scenario();
    let file = scenario.dir().join("screen.jsonl.zst");
    let t = Tmux::start(scenario.dir(), 120, 40, &shell(&scenario, &file));
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("NVIDIA H100"));
    assert!(ok, "{screen}");
    std::thread::sleep(SECOND);
    // `-`: a longer period (200 ms -> 250 ms), recorded as it is set.
    t.keys(&["-"]);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("refresh every 250 ms"));
    assert!(ok, "{screen}");
    std::thread::sleep(SECOND / 2);
    t.keys(&["q"]);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("EXIT="));
    assert!(ok, "{screen}");
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(
        screen.contains("recorded ") && screen.contains(&file.display().to_string()),
        "a summary after the terminal is restored:\n{screen}"
    );
    let events = read_all(&file);
    assert!(
        events
            .iter()
            .any(|(_, e)| matches!(e, SourceEvent::Started { .. }))
    );
    let samples = events
        .iter()
        .filter(|(_, e)| matches!(e, SourceEvent::Device(_)))
        .count();
    // The header keeps the period recording began at; the key press is an event of its own.
    let changes: Vec<&SourceEvent> = events
        .iter()
        .map(|(_, e)| e)
        .filter(|e| matches!(e, SourceEvent::Interval { .. }))
        .collect();
    assert!(
        matches!(changes[..], [SourceEvent::Interval { ms: 250 }]),
        "{changes:?}"
    );
    assert_eq!(
        vramscope::recording::Recording::open(&file)
            .unwrap()
            .header()
            .interval_ms,
        200
    );
    assert!(
        samples >= 4,
        "{samples} device samples in over a second at 200 ms"
    );
    let mut monitor = Monitor::new(now_ms());
    for (_, e) in events {
        monitor.ingest(e);
    }
    let snap = monitor.snapshot(now_ms(), StaleAfter::NEVER);
    let d0 = snap.devices[0].sample.as_ref().unwrap();
    assert_eq!(d0.memory.as_ref().unwrap().used, 10 * GIB);
    assert!(
        snap.processes
            .iter()
            .any(|p| p.nvml.pid == std::process::id())
    );
}

#[test]
fn a_shorter_period_is_sampled_at_once_not_at_the_tick_the_old_one_planned() {
    if !tmux::available() {
        return;
    }
    let scenario = scenario();
    let file = scenario.dir().join("faster.jsonl");
    // Without the fast memory sampling, nothing wakes the pool between two 30 s ticks.
    let shell = format!(
        "sh -c 'env FAKE_NVML_SCENARIO={} {} --nvml-lib {} --interval 30s --peak-interval off --record {}; echo EXIT=$?; exec sleep 30'",
        scenario.path.display(),
        env!("CARGO_BIN_EXE_vramscope"),
        fake_nvml().display(),
        file.display()
    );
    let t = Tmux::start(scenario.dir(), 120, 40, &shell);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("NVIDIA H100"));
    assert!(ok, "{screen}");
    // 30 s -> 10 s -> 5 s -> 2 s -> 1 s.
    t.keys(&["+", "+", "+", "+"]);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("refresh every 1000 ms"));
    assert!(ok, "{screen}");
    std::thread::sleep(3 * SECOND);
    t.keys(&["q"]);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("EXIT="));
    assert!(ok && screen.contains("EXIT=0"), "{screen}");
    let events = read_all(&file);
    let changed_at = events
        .iter()
        .filter(|(_, e)| matches!(e, SourceEvent::Interval { ms: 1_000 }))
        .map(|(t, _)| *t)
        .next()
        .expect("the change to 1 s recorded");
    let after: Vec<u64> = events
        .iter()
        .filter_map(|(t, e)| match e {
            SourceEvent::Device(sample) if *t > changed_at => Some(sample.at_ms),
            _ => None,
        })
        .collect();
    // About three in the three seconds at 1 s; none before the fix, whose worker slept
    // on until the 30 s tick.
    assert!(
        after.len() >= 2,
        "GPU samples in the 3 s after the change to 1 s: {after:?}"
    );
}

#[test]
fn a_key_that_leaves_the_period_as_it_was_records_no_change() {
    if !tmux::available() {
        return;
    }
    let scenario = scenario();
    let file = scenario.dir().join("shortest.jsonl");
    // 100 ms is the shortest period the keys offer: `+` leaves it so.
    let shell = format!(
        "sh -c 'env FAKE_NVML_SCENARIO={} {} --nvml-lib {} --interval 100ms --record {}; echo EXIT=$?; exec sleep 30'",
        scenario.path.display(),
        env!("CARGO_BIN_EXE_vramscope"),
        fake_nvml().display(),
        file.display()
    );
    let t = Tmux::start(scenario.dir(), 120, 40, &shell);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("NVIDIA H100"));
    assert!(ok, "{screen}");
    t.keys(&["+", "+"]);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("refresh every 100 ms"));
    assert!(ok, "{screen}");
    // Then a real change, so the test sees that changes are recorded at all.
    t.keys(&["-"]);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("refresh every 250 ms"));
    assert!(ok, "{screen}");
    t.keys(&["q"]);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("EXIT="));
    assert!(ok && screen.contains("EXIT=0"), "{screen}");
    let changes: Vec<SourceEvent> = read_all(&file)
        .into_iter()
        .map(|(_, e)| e)
        .filter(|e| matches!(e, SourceEvent::Interval { .. }))
        .collect();
    assert!(
        matches!(changes[..], [SourceEvent::Interval { ms: 250 }]),
        "{changes:?}"
    );
}

#[test]
fn sigterm_finishes_the_recording() {
    if !tmux::available() {
        return;
    }
    let scenario = scenario();
    let file = scenario.dir().join("term.jsonl.zst");
    let t = Tmux::start(scenario.dir(), 120, 40, &shell(&scenario, &file));
    assert!(t.wait_for(5 * SECOND, |s| s.contains("NVIDIA H100")).0);
    let pid = t.child();
    // SAFETY: a signal to the monitor this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("EXIT="));
    assert!(ok && screen.contains("EXIT=143"), "{screen}");
    assert!(!read_all(&file).is_empty());
    let bytes = std::fs::read(&file).unwrap();
    assert!(
        zstd::decode_all(&bytes[..]).is_ok(),
        "a finished zstd frame"
    );
}

#[test]
fn an_existing_file_is_refused_before_the_screen_is_touched() {
    if !tmux::available() {
        return;
    }
    let scenario = scenario();
    let file = scenario.dir().join("taken.jsonl");
    std::fs::write(&file, "precious").unwrap();
    let t = Tmux::start(scenario.dir(), 120, 40, &shell(&scenario, &file));
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("EXIT="));
    assert!(ok && screen.contains("EXIT=2"), "{screen}");
    assert!(screen.contains("the file exists"), "{screen}");
    assert_eq!(t.pane("alternate_on"), "0");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "precious");
}

#[test]
fn the_header_says_what_is_recorded_and_how_large_the_file_is() {
    if !tmux::available() {
        return;
    }
    let scenario = scenario();
    let file = scenario.dir().join("screen.jsonl");
    let t = Tmux::start(scenario.dir(), 160, 40, &shell(&scenario, &file));
    // A plain file grows with every flush (at least every 500 ms): the size on screen is the
    // file's, and it grows as the recording goes on.
    let size_shown = |s: &str| -> Option<String> {
        let header = s.lines().next()?;
        let after = header.split(" REC ").nth(1)?;
        let mut words = after.split_whitespace();
        let name = words.next()?;
        assert!(file.display().to_string().ends_with(name), "{header}");
        Some(format!("{} {}", words.next()?, words.next()?))
    };
    let (ok, screen) = t.wait_for(5 * SECOND, |s| {
        s.contains("NVIDIA H100") && size_shown(s).is_some()
    });
    assert!(ok, "the header names the recording:\n{screen}");
    let first = size_shown(&screen).unwrap();
    let (ok, screen) = t.wait_for(10 * SECOND, |s| {
        size_shown(s).is_some_and(|size| size != first)
    });
    assert!(ok, "its size grows from {first}:\n{screen}");
    let shown = size_shown(&screen).unwrap();
    let on_disk = std::fs::metadata(&file).unwrap().len();
    let figure: f64 = shown.split(' ').next().unwrap().parse().unwrap();
    let unit = match shown.split(' ').nth(1).unwrap() {
        "B" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        other => panic!("unit {other}"),
    };
    // The screen is at most a refresh or two behind the file.
    assert!(
        figure * unit <= on_disk as f64 * 1.01,
        "{shown} shown, {on_disk} B on disk"
    );
    t.keys(&["q"]);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("EXIT=0"));
    assert!(ok, "{screen}");
}
