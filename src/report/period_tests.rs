//! A recording whose refresh period changed (the monitor's `+`/`-`): the report names every
//! period, not only the header's. Written through the real `Recorder`, read through the
//! real `Recording`.

use super::{analyse, render};
use crate::model::SourceEvent;
use crate::recording::{Header, Recorder, Recording};
use serde_json::{Value, json};
use std::path::Path;

const T0: u64 = 1_700_000_000_000;

/// A recording begun at a 1 s period, with `changes` recorded as `(ms after T0, period)`.
fn write(path: &Path, changes: &[(u64, u64)]) {
    let header = Header {
        version: 1,
        vramscope_version: "0.1.0".into(),
        started_ms: T0,
        interval_ms: 1_000,
        host: None,
    };
    let mut rec = Recorder::create(path, header).unwrap();
    for &(after, ms) in changes {
        rec.record(T0 + after, &SourceEvent::Interval { ms })
            .unwrap();
    }
    rec.finish().unwrap();
}

/// The report's first lines and its JSON's `interval_changes`.
fn report(changes: &[(u64, u64)]) -> (String, Value) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    write(&path, changes);
    let report = analyse(Recording::open(&path).unwrap());
    let text = render::text(&report, "run.jsonl", false, &[]);
    let doc: Value = serde_json::from_str(&render::json(&report, Value::Null)).unwrap();
    (text, doc["interval_changes"].clone())
}

#[test]
fn the_report_names_each_period_a_recording_was_made_at() {
    // 5 s from 5 s on, 2 s from 9 s on; the second 2 s is no change.
    let (text, changes) = report(&[(5_000, 5_000), (9_000, 2_000), (9_500, 2_000)]);
    assert!(
        text.contains("every 1000 ms, then 5000 and 2000 ms\n"),
        "{text}"
    );
    assert_eq!(
        changes,
        json!([
            {"at_ms": T0 + 5_000, "interval_ms": 5_000},
            {"at_ms": T0 + 9_000, "interval_ms": 2_000},
        ])
    );

    let (text, changes) = report(&[(3_000, 30_000)]);
    assert!(text.contains("every 1000 ms, then 30000 ms\n"), "{text}");
    assert_eq!(changes.as_array().map(Vec::len), Some(1));

    // Many changes are counted, not listed.
    let many: Vec<(u64, u64)> = (1..=6)
        .map(|i| (i * 1_000, [250, 500][i as usize % 2]))
        .collect();
    let (text, changes) = report(&many);
    assert!(
        text.contains("every 1000 ms, changed 6 times, lastly to 250 ms\n"),
        "{text}"
    );
    assert_eq!(changes.as_array().map(Vec::len), Some(6));
}

#[test]
fn a_recording_at_one_period_says_that_one_alone() {
    let (text, changes) = report(&[]);
    assert!(text.contains(", every 1000 ms\n"), "{text}");
    assert!(!text.contains("then"), "{text}");
    assert_eq!(changes, json!([]));
}
