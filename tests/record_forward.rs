//! Recordings from a newer 1.x: a record, a writer event, a liveness state, a GPU process
//! kind or a reason a channel went of a kind this vramscope does not know is skipped and
//! counted, and everything else reads as before,
//! through `report` (every format), `export`, `plot` and `replay`.

mod common;
mod recording_fixture;

use common::stderr;
use recording_fixture::write_recording;
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Output};

const NOTICE: &str = "run.jsonl: skipped 1 record, 1 writer event, 1 channel poll, 1 GPU process, 1 gone channel of kinds this vramscope does not know (recorded by a newer vramscope?)";

/// The fixture's recording as a newer vramscope might have written it: with a record of a
/// new kind, a writer event of a new kind beside a known one, a second poll of a channel
/// whose writer is in a new state, a GPU process of a new kind beside a known one, and the
/// channel gone, after its last poll, for a new reason.
fn from_a_newer_version(plain: &str) -> String {
    let mut lines: Vec<String> = plain.lines().map(str::to_string).collect();
    let value = |l: &String| serde_json::from_str::<Value>(l).unwrap();
    let last_poll = lines
        .iter()
        .rposition(|l| value(l)["channels"]["polls"][0].is_object())
        .expect("a poll");
    let last = value(&lines[last_poll]);
    let gone = json!({ "t": last["t"], "channels": {
        "at_ms": last["channels"]["at_ms"],
        "polls": [],
        "gone": [{ "path": last["channels"]["polls"][0]["path"], "why": "migrated" }],
        "rejected": [],
    } });
    lines.insert(last_poll + 1, gone.to_string());
    let with_processes = lines
        .iter()
        .position(|l| value(l)["device"]["processes"][0].is_object())
        .expect("a device sample with processes");
    let mut sample = value(&lines[with_processes]);
    let processes = sample["device"]["processes"].as_array_mut().unwrap();
    let mut newer = processes[0].clone();
    newer["pid"] = json!(31337);
    newer["kind"] = json!("mig_compute");
    processes.push(newer);
    lines[with_processes] = sample.to_string();
    let with_events = lines
        .iter()
        .position(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["channels"]["polls"][0]["events"]
                .as_array()
                .is_some_and(|e| !e.is_empty())
        })
        .expect("a poll with events");
    let mut record: Value = serde_json::from_str(&lines[with_events]).unwrap();
    let t = record["t"].clone();
    let poll = &mut record["channels"]["polls"][0];
    let mut newer = poll["events"][0].clone();
    newer["event"] = json!({ "kind": "gradient_checkpoint", "bytes": 1024 });
    poll["events"].as_array_mut().unwrap().push(newer);
    let mut paused = poll.clone();
    paused["liveness"] = json!({ "state": "paused", "since_ms": 5 });
    paused["events"] = json!([]);
    lines[with_events] = record.to_string();
    let paused = json!({ "t": t, "channels": { "at_ms": t, "polls": [paused], "gone": [], "rejected": [] } });
    lines.insert(with_events + 1, paused.to_string());
    lines.insert(
        2,
        json!({ "t": t, "annotation": { "text": "lr drop" } }).to_string(),
    );
    lines.join("\n") + "\n"
}

/// `vramscope ARGS` in `dir`.
fn vramscope(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vramscope"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn kinds_from_a_newer_version_are_skipped_counted_and_said_once() {
    let original = tempfile::tempdir().unwrap();
    let newer = tempfile::tempdir().unwrap();
    write_recording(&original.path().join("run.jsonl"));
    let plain = std::fs::read_to_string(original.path().join("run.jsonl")).unwrap();
    std::fs::write(newer.path().join("run.jsonl"), from_a_newer_version(&plain)).unwrap();

    let runs: [&[&str]; 5] = [
        &["report", "run.jsonl"],
        &["report", "run.jsonl", "--markdown"],
        &["report", "run.jsonl", "--json"],
        &["export", "run.jsonl"],
        &["plot", "run.jsonl", "-o", "run.svg"],
    ];
    for args in runs {
        let want = vramscope(original.path(), args);
        assert!(want.status.success(), "{args:?}: {}", stderr(&want));
        assert_eq!(stderr(&want), "", "{args:?}");
        let got = vramscope(newer.path(), args);
        assert!(got.status.success(), "{args:?}: {}", stderr(&got));
        // Everything it knows reads as before; what it skipped is said once.
        assert_eq!(
            String::from_utf8_lossy(&got.stdout),
            String::from_utf8_lossy(&want.stdout),
            "{args:?}"
        );
        assert_eq!(stderr(&got), format!("vramscope: {NOTICE}\n"), "{args:?}");
    }
    assert_eq!(
        std::fs::read(newer.path().join("run.svg")).unwrap(),
        std::fs::read(original.path().join("run.svg")).unwrap()
    );

    let view = |dir: &Path| {
        vramscope::replay::Replay::open(&dir.join("run.jsonl"))
            .unwrap()
            .view()
    };
    let (want, got) = (view(original.path()), view(newer.path()));
    assert_eq!(want.cut_short, None);
    let file = newer.path().join("run.jsonl");
    assert_eq!(
        got.cut_short,
        Some(NOTICE.replace("run.jsonl", &file.display().to_string()))
    );
    assert_eq!((got.first_ms, got.last_ms), (want.first_ms, want.last_ms));
}
