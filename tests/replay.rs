//! Replay: a recording fed to the same monitor with a time cursor. The library side moves the
//! cursor and checks what the monitor then holds; the terminal side drives the real binary.

mod common;
mod recording_fixture;

use common::tmux::{self, Tmux};
use common::{GIB, Scenario};
use recording_fixture::{T0, write_recording};
use serde_json::json;
use std::time::Duration;
use vramscope::history::Peak;
use vramscope::replay::{Command, Limits, Replay};
use vramscope::state::{Monitor, StaleAfter};

fn used(monitor: &Monitor, at_ms: u64) -> Option<u64> {
    monitor.snapshot(at_ms, StaleAfter::interval(1000)).devices[0].memory_used()
}

#[test]
fn the_cursor_shows_the_recording_as_it_was_at_each_moment() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl.zst");
    write_recording(&path);
    let mut replay = Replay::open(&path).unwrap();
    let mut monitor = replay.fresh_monitor();
    assert_eq!(replay.now_ms(), T0);
    assert_eq!(used(&monitor, replay.now_ms()), Some(40 * GIB));

    // The allocator's true peak, not NVML's 75 GiB a moment later: where the poll that
    // brought it was recorded.
    let said = replay.command(Command::LargestPeak, &mut monitor);
    assert_eq!(
        said.as_deref(),
        Some("allocator's true peak: pid 4242 on GPU 0 at 29.0 GiB, step 7, backward/lm_head")
    );
    assert_eq!(replay.now_ms(), T0 + 29_999);
    assert_eq!(used(&monitor, replay.now_ms()), Some(40 * GIB));
    assert!(!replay.playing(), "a jump pauses");

    let said = replay.command(Command::NextOom, &mut monitor);
    assert_eq!(
        said.as_deref(),
        Some(
            "pid 4242 on GPU 0: OOM: asked 8.00 GiB, 512 MiB free, allocated 20.0 GiB, step 11, forward (caught)"
        )
    );
    // Where the poll that brought it was recorded: the moment it is on screen.
    assert_eq!(replay.now_ms(), T0 + 45_999);
    let snapshot = monitor.snapshot(replay.now_ms(), StaleAfter::interval(1000));
    assert_eq!(snapshot.allocators[0].ooms.len(), 1);
    assert_eq!(
        replay.command(Command::NextOom, &mut monitor).as_deref(),
        Some("no OOM after this moment")
    );

    // Going back rebuilds the monitor: the spike is in the past again, not yet the OOM.
    replay.command(Command::Back, &mut monitor);
    assert_eq!(replay.now_ms(), T0 + 35_999);
    let snapshot = monitor.snapshot(replay.now_ms(), StaleAfter::interval(1000));
    assert_eq!(snapshot.devices[0].memory_used(), Some(40 * GIB));
    assert!(snapshot.allocators[0].ooms.is_empty());
    assert_eq!(
        snapshot.processes[0]
            .allocator
            .as_ref()
            .unwrap()
            .peak
            .as_ref()
            .map(|p| p.value),
        Some(29 * GIB)
    );
    replay.command(Command::SampleBack, &mut monitor);
    assert_eq!(replay.now_ms(), T0 + 34_999);

    replay.command(Command::End, &mut monitor);
    let end = replay.now_ms();
    assert!(end >= T0 + 59_000, "{end}");
    replay.command(Command::Start, &mut monitor);
    assert_eq!(replay.now_ms(), T0);
    assert_eq!(used(&monitor, T0), Some(40 * GIB));
}

#[test]
fn playing_moves_the_cursor_with_the_clock_times_the_speed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    write_recording(&path);
    let mut replay = Replay::open(&path).unwrap();
    let mut monitor = replay.fresh_monitor();
    for _ in 0..8 {
        replay.command(Command::Faster, &mut monitor);
    }
    assert_eq!(
        replay.command(Command::Faster, &mut monitor).as_deref(),
        Some("speed ×256")
    );
    assert!(replay.playing());
    replay.tick(&mut monitor);
    std::thread::sleep(Duration::from_millis(100));
    replay.tick(&mut monitor);
    let moved = replay.now_ms() - T0;
    // 100 ms of wall time at ×256 is about 25 s of recording.
    assert!((20_000..=40_000).contains(&moved), "{moved}");
    assert_eq!(
        monitor
            .snapshot(replay.now_ms(), StaleAfter::interval(1000))
            .devices[0]
            .info
            .index,
        0
    );
    // Playing past the end stops there.
    std::thread::sleep(Duration::from_millis(300));
    replay.tick(&mut monitor);
    assert!(!replay.playing());
    assert!(replay.now_ms() >= T0 + 59_000);
}

#[test]
fn a_missing_or_damaged_recording_is_one_line() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vramscope"))
        .args(["replay", "/nonexistent/run.jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("vramscope: /nonexistent/run.jsonl"),
        "{err}"
    );
}

const SECOND: Duration = Duration::from_secs(1);

#[test]
fn the_terminal_replays_with_the_recordings_time_and_jumps_to_the_peak() {
    if !tmux::available() {
        return;
    }
    let scenario = Scenario::new(&json!({ "devices": [] }));
    let path = scenario.dir().join("run.jsonl.zst");
    write_recording(&path);
    let command = format!(
        // The header shows local time: UTC here whatever the machine's zone.
        "env TZ=UTC {} replay {}",
        env!("CARGO_BIN_EXE_vramscope"),
        path.display()
    );
    let t = Tmux::start(scenario.dir(), 140, 40, &command);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("replay run.jsonl.zst"));
    assert!(ok, "the banner:\n{screen}");
    assert!(screen.contains("python train.py"), "{screen}");
    t.keys(&["p"]);
    let (ok, screen) = t.wait_for(3 * SECOND, |s| {
        s.contains("allocator's true peak: pid 4242 on GPU 0 at 29.0 GiB")
            && s.contains("22:13:49 UTC")
    });
    assert!(ok, "jumped to the peak, at the recording's time:\n{screen}");
    assert!(screen.contains("40.0 GiB / 80.0 GiB"), "{screen}");
    t.keys(&["?"]);
    let (ok, screen) = t.wait_for(2 * SECOND, |s| s.contains("jump to the largest peak"));
    assert!(ok, "the cursor's keys in the help:\n{screen}");
    t.keys(&["Escape", "q"]);
    let (ok, _) = t.wait_for(3 * SECOND, |_| t.pane("pane_dead") == "1");
    assert!(ok, "quit");
}

/// `replay` and `demo` are the interactive monitor only: the one-shot options, or no
/// terminal, get one line saying so and what to use instead, never advice to use the very
/// option given.
#[test]
fn replay_and_demo_refuse_one_shot_options_with_advice_that_fits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    write_recording(&path);
    let file = path.to_str().unwrap();
    let runs: [&[&str]; 8] = [
        &["replay", "--once", file],
        &["replay", "--json", file],
        &["replay", "--csv", file],
        &["demo", "--once"],
        &["demo", "--json"],
        &["demo", "--csv"],
        &["replay", file],
        &["demo"],
    ];
    for args in runs {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_vramscope"))
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {said}");
        assert_eq!(said.lines().count(), 1, "{args:?}: {said}");
        assert!(out.stdout.is_empty(), "{args:?}");
        if let Some(option) = args.iter().find(|a| a.starts_with("--")) {
            let refused = format!("{option} does not apply to `vramscope {}`", args[0]);
            assert!(said.contains(&refused), "{args:?}: {said}");
            // The advice is another subcommand (`report FILE --json` is one), never the
            // same option again.
            assert!(!said.contains(&format!("use {option}")), "{args:?}: {said}");
        } else {
            assert!(said.contains("needs a terminal"), "{said}");
        }
        if args[0] == "replay" {
            assert!(said.contains("vramscope report FILE"), "{args:?}: {said}");
        }
    }
}

/// The status line tells an uncaught OOM in words, not by the recording's kind name.
#[test]
fn an_uncaught_oom_is_told_in_words() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    write_recording(&path);
    // The fixture's caught OOM made uncaught, as PyTorch's exception hook records it.
    let text = std::fs::read_to_string(&path).unwrap();
    let mut rewritten = String::new();
    for line in text.lines() {
        let mut record: serde_json::Value = serde_json::from_str(line).unwrap();
        rewrite_ooms(&mut record);
        rewritten += &format!("{record}\n");
    }
    assert!(rewritten.contains("\"oom_error\""), "no OOM rewritten");
    std::fs::write(&path, rewritten).unwrap();
    let mut replay = Replay::open(&path).unwrap();
    let mut monitor = replay.fresh_monitor();
    let said = replay.command(Command::NextOom, &mut monitor);
    // The error carries only the request: free and allocated are the last sample's.
    assert_eq!(
        said.as_deref(),
        Some(
            "pid 4242 on GPU 0: OOM: asked 8.00 GiB, 1.00 GiB free, allocated 20.0 GiB, step 11, forward (fatal)"
        )
    );
    assert!(!said.unwrap().contains("oom_error"));
}

/// The hunt replayed: `o` lands on the frame of the poll that brought the one fatal OOM, its
/// figures in the status line; `p` goes to the allocator's true peak, with its step and phase.
#[test]
fn the_hunt_replays_its_oom_with_its_figures_and_its_true_peak() {
    let (_dir, mut replay) = hunt_replay();
    let mut monitor = replay.fresh_monitor();
    let said = replay.command(Command::NextOom, &mut monitor);
    assert_eq!(
        said.as_deref(),
        Some(
            "pid 4242 on GPU 0: OOM: asked 6.00 GiB, 3.00 GiB free, allocated 10.2 GiB, step 80, forward (fatal)"
        )
    );
    // The poll after the OOM, recorded at T0+16.170 s: the monitor holds it there.
    assert_eq!(replay.now_ms(), T0 + 16_170);
    let snapshot = monitor.snapshot(replay.now_ms(), StaleAfter::interval(1000));
    assert_eq!(snapshot.allocators[0].ooms.len(), 1);
    assert_eq!(
        replay.command(Command::NextOom, &mut monitor).as_deref(),
        Some("no OOM after this moment")
    );
    let said = replay.command(Command::LargestPeak, &mut monitor);
    assert_eq!(
        said.as_deref(),
        Some("allocator's true peak: pid 4242 on GPU 0 at 12.0 GiB, step 40, backward")
    );
    // The poll that brought the spike's new-peak event, recorded at T0+8.170 s.
    assert_eq!(replay.now_ms(), T0 + 8_170);
}

/// The hunt's replay, with the directory of its file (the replay reads the file again as
/// the cursor moves: keep it as long as the replay).
fn hunt_replay() -> (tempfile::TempDir, Replay) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hunt.jsonl");
    recording_fixture::hunt::write_hunt(&path);
    let replay = Replay::open(&path).unwrap();
    (dir, replay)
}

/// At the OOM's frame the process's row, which NVML still lists, shows its allocator
/// section with the OOM (the detail pane's).
#[test]
fn the_hunts_oom_is_in_the_rows_allocator_section() {
    let (_dir, mut replay) = hunt_replay();
    let mut monitor = replay.fresh_monitor();
    replay.command(Command::NextOom, &mut monitor);
    let snapshot = monitor.snapshot(replay.now_ms(), StaleAfter::interval(1000));
    let row = snapshot
        .processes
        .iter()
        .find(|p| p.nvml.pid == 4242)
        .expect("the process's row at the OOM");
    let allocator = row.allocator.as_ref().expect("its allocator section");
    assert_eq!(allocator.ooms.len(), 1, "{:?}", allocator.ooms);
    assert_eq!(
        allocator.ooms[0].requested,
        Ok(recording_fixture::hunt::REQUESTED)
    );
}

/// The demo's own OOM: `o` shows it in the status line with its figures, and the detail
/// pane's allocator section of its process holds it.
#[test]
fn the_demos_oom_is_in_its_detail_pane() {
    let mut replay = vramscope::replay::demo::replay().unwrap();
    let mut monitor = replay.fresh_monitor();
    let said = replay.command(Command::NextOom, &mut monitor).unwrap();
    assert!(said.contains("OOM: asked 24.0 GiB"), "{said}");
    let snapshot = monitor.snapshot(replay.now_ms(), StaleAfter::interval(1000));
    let with_oom: Vec<_> = snapshot
        .processes
        .iter()
        .filter_map(|p| p.allocator.as_ref())
        .flat_map(|a| a.ooms.iter())
        .collect();
    assert_eq!(with_oom.len(), 1, "{said}: {:#?}", snapshot.processes);
    assert_eq!(with_oom[0].requested, Ok(24 * GIB));
}

/// Every `{"kind":"oom",...}` inside `value` becomes `{"kind":"oom_error","requested":...}`.
fn rewrite_ooms(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            if map.get("kind").and_then(|k| k.as_str()) == Some("oom") {
                let requested = map["requested"].clone();
                *value = json!({ "kind": "oom_error", "requested": requested });
                return;
            }
            map.values_mut().for_each(rewrite_ooms);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(rewrite_ooms),
        _ => {}
    }
}

#[test]
fn the_demo_plays_a_simulated_run_and_says_so() {
    if !tmux::available() {
        return;
    }
    let scenario = Scenario::new(&json!({ "devices": [] }));
    let command = format!("{} demo", env!("CARGO_BIN_EXE_vramscope"));
    let t = Tmux::start(scenario.dir(), 140, 40, &command);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| {
        s.contains("DEMO: simulated data") && s.contains("ALLOC")
    });
    assert!(ok, "the demo, labelled, with allocator figures:\n{screen}");
    t.keys(&["o"]);
    let (ok, screen) = t.wait_for(3 * SECOND, |s| {
        s.contains("OOM: asked 24.0 GiB, 11.0 GiB free, allocated 22.4 GiB, step 52")
            && s.contains("(fatal)")
    });
    assert!(ok, "jumped to the OOM:\n{screen}");
    t.keys(&["q"]);
    let (ok, _) = t.wait_for(3 * SECOND, |_| t.pane("pane_dead") == "1");
    assert!(ok, "quit");
}

#[test]
fn without_nvml_the_monitor_offers_the_demo_and_plays_it() {
    if !tmux::available() {
        return;
    }
    let scenario = Scenario::new(&json!({ "devices": [] }));
    let t = Tmux::start(scenario.dir(), 140, 40, &common::without_nvml_line());
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("Press d to see"));
    assert!(ok, "the offer:\n{screen}");
    t.keys(&["d"]);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("DEMO: simulated data"));
    assert!(ok, "the demo replaced the empty screen:\n{screen}");
}

#[test]
fn a_recording_made_against_the_fake_nvml_replays_its_spike() {
    // GPU 0 sits at 10 GiB and jumps to 70 GiB from 1.0 s to 1.6 s of scenario time.
    let mut gpu = common::h100(0);
    gpu["timeline"] = json!([
        { "t": 0, "memory_used": 10 * GIB, "gpu_util": 50 },
        { "t": 1.0, "memory_used": 70 * GIB },
        { "t": 1.6, "memory_used": 10 * GIB },
    ]);
    let scenario = Scenario::new(&json!({ "devices": [gpu] }));
    let path = scenario.dir().join("run.jsonl.zst");
    let mut child = scenario
        .command()
        .env("VRAMSCOPE_DIR", scenario.dir().join("no-channels"))
        .args(["record", "--interval", "0.2", "--duration", "2.5s", "-o"])
        .arg(&path)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert!(child.wait().unwrap().success());
    let mut replay = Replay::open(&path).unwrap();
    let mut monitor = replay.fresh_monitor();
    assert_eq!(used(&monitor, replay.now_ms()), Some(10 * GIB));
    let said = replay.command(Command::LargestPeak, &mut monitor);
    assert_eq!(
        said.as_deref(),
        Some("largest peak (NVML, no allocator figures): GPU 0 at 70.0 GiB")
    );
    assert_eq!(used(&monitor, replay.now_ms()), Some(70 * GIB));
    replay.command(Command::End, &mut monitor);
    assert_eq!(used(&monitor, replay.now_ms()), Some(10 * GIB));
    // The peak is still the peak, seen from the end.
    let snapshot = monitor.snapshot(replay.now_ms(), StaleAfter::interval(200));
    let key = snapshot.devices[0].info.key();
    let peak = monitor
        .device_series(&key)
        .unwrap()
        .memory_used
        .peak()
        .unwrap();
    assert_eq!(peak.value, (70 * GIB) as f64);
}

/// Three hours at 1 Hz: GPU 0's used memory changes every second, with its one highest
/// value at 2 h 10 min.
fn write_long_recording(path: &std::path::Path) -> u64 {
    let mut rec = recording_fixture::start_recording(path, None);
    let seconds = 3 * 3600;
    for s in 0..seconds {
        let at = T0 + s * 1000;
        let used = if s == 7800 {
            79 * GIB
        } else {
            (10 + (s * 7919) % 60) * GIB
        };
        rec.record(
            at,
            &recording_fixture::device_sample(0, at, used, Some(used / 2)),
        )
        .unwrap();
    }
    rec.finish().unwrap();
    seconds
}

/// The recording fed to a monitor from its start up to the first event after `at_ms`,
/// without replay: what a replay at `at_ms` must show.
fn played_forward(path: &std::path::Path, at_ms: u64) -> Monitor {
    let mut monitor = Monitor::new(T0);
    for item in vramscope::recording::Recording::open(path)
        .unwrap()
        .events()
    {
        let (t, event) = item.unwrap();
        if t > at_ms {
            break;
        }
        monitor.ingest(event);
    }
    monitor
}

fn long_state(monitor: &Monitor, at_ms: u64) -> (vramscope::model::Snapshot, Option<Peak>) {
    let snapshot = monitor.snapshot(at_ms, StaleAfter::interval(1000));
    let key = snapshot.devices[0].info.key();
    let peak = monitor.device_series(&key).unwrap().memory_used.peak();
    (snapshot, peak)
}

#[test]
fn moving_from_checkpoints_shows_what_playing_forward_showed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.jsonl.zst");
    let seconds = write_long_recording(&path);
    // The default limits, and limits so tight that checkpoints are thinned out as the
    // file is first read: each must show what the recording fed from its start shows.
    let tight = Limits {
        max_checkpoints: 32,
        min_spacing: 100,
        bytes: 2 << 20,
    };
    for limits in [Limits::default(), tight] {
        // To the end, then back to moments before, between and on checkpoints, and forward.
        let mut replay = Replay::open_with(&path, limits).unwrap();
        let mut monitor = replay.fresh_monitor();
        replay.command(Command::End, &mut monitor);
        assert_eq!(replay.now_ms(), T0 + (seconds - 1) * 1000);
        let (kept, bytes) = replay.checkpoints();
        assert!(
            (2..=32).contains(&kept) && bytes <= limits.bytes,
            "{limits:?}: {kept} checkpoints, {bytes} B"
        );
        // 32 checkpoints of this recording hold more than the tight limit: some went.
        assert!(limits != tight || kept < 32, "{kept} checkpoints");
        for s in [
            10_000, 7800, 7799, 4096, 2048, 2047, 5, 0, 9000, 9001, 10_799, 3,
        ] {
            let at = T0 + s * 1000;
            replay.seek(&mut monitor, at);
            assert_eq!(
                long_state(&monitor, at),
                long_state(&played_forward(&path, at), at),
                "{limits:?}: at {s} s"
            );
        }
        let said = replay.command(Command::LargestPeak, &mut monitor);
        assert_eq!(
            said.as_deref(),
            Some("largest peak (NVML, no allocator figures): GPU 0 at 79.0 GiB")
        );
        assert_eq!(used(&monitor, replay.now_ms()), Some(79 * GIB));
    }
}

#[test]
fn every_move_starts_from_a_checkpoint_laid_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.jsonl.zst");
    let seconds = write_long_recording(&path);
    let limits = Limits::default();
    let mut replay = Replay::open_with(&path, limits).unwrap();
    let mut monitor = replay.fresh_monitor();
    // The end is kept whole when the file is first read: going there parses nothing.
    let before = replay.events_parsed();
    replay.command(Command::End, &mut monitor);
    assert_eq!(replay.events_parsed() - before, 0);
    let end = replay.now_ms();
    assert_eq!(end, T0 + (seconds - 1) * 1000);
    assert_eq!(used(&monitor, end), used(&played_forward(&path, end), end));
    // From the start, forward to moments far in, and back: never more than the spacing
    // of the checkpoints (the events between two of them) parsed per move.
    replay.command(Command::Start, &mut monitor);
    for s in [9000, 9500, 2500, 10_700, 7800] {
        let at = T0 + s * 1000;
        let before = replay.events_parsed();
        replay.seek(&mut monitor, at);
        let parsed = replay.events_parsed() - before;
        assert!(
            parsed <= limits.min_spacing,
            "{parsed} events parsed to reach {s} s"
        );
        assert_eq!(
            long_state(&monitor, at),
            long_state(&played_forward(&path, at), at),
            "at {s} s"
        );
    }
}
