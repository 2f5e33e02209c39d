//! `vramscope diff A B` on generated pairs of runs, each B with one regression injected
//! (an extra buffer at a known line, a larger optimizer state, a longer sequence, a larger
//! batch, a changed `max_split_size_mb`, a module no longer checkpointed, a leak, a smaller
//! world size, a leak at a known line, a buffer in one phase): the top-ranked cause is the
//! injected one in every pair, its bytes within 1 % of what was injected. The recordings are
//! written event by event through the real `Recorder` (as `report_summary.rs` writes its
//! own), B's with a few MiB of noise on its phases (so one change shows a little differently
//! in each figure, as in a real run), the snapshots by Python's `pickle`
//! (`diff_support/snapshot.py`), and the real binary compares them.

mod common;
mod recording_fixture;

use common::{builders, python3_available, stderr, stdout};
use recording_fixture::{GIB, PID, T0, device_sample, start_recording};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use vramscope::model::{
    Absent, AllocatorDevice, AllocatorEvent, AllocatorPoint, ChannelPoll, EventKind, SourceEvent,
    WriterIdentity,
};

const MIB: u64 = 1 << 20;
const STEPS: u64 = 20;

/// One block live at the peak: file, line, function, bytes.
type Block = (&'static str, u32, &'static str, u64);

/// A generated run: `base` held throughout (weights, optimizer state), each phase in turn
/// holding its bytes above it, `leak` more kept per step, the allocator's cache above the
/// allocated figure, and the blocks its snapshot of the peak holds (none: no snapshot).
#[derive(Clone)]
struct Spec {
    command: String,
    alloc_conf: &'static str,
    world_size: i32,
    base: u64,
    phases: Vec<(&'static str, u64)>,
    leak: u64,
    cache: u64,
    snapshot: Vec<Block>,
    oom_at_step: Option<u64>,
    /// Up to 3 MiB of noise on each phase's peak, as a real run has from step to step: the
    /// same change then shows a little differently in each figure.
    noisy: bool,
}

/// The noise on phase `i` of `step`, when the run is noisy.
fn noise(spec: &Spec, step: u64, i: u64) -> u64 {
    if spec.noisy {
        (step * 7 + i * 3) % 4 * MIB
    } else {
        0
    }
}

fn baseline() -> Spec {
    Spec {
        command: "python train.py --batch-size 16 --seq-len 1024".into(),
        alloc_conf: "expandable_segments:False,max_split_size_mb:512",
        world_size: 8,
        base: 6 * GIB,
        phases: vec![
            ("forward/block.0", 2 * GIB),
            ("forward/block.1", 3 * GIB),
            ("forward/attn", 5 * GIB),
            ("backward", 7 * GIB),
            ("optimizer", GIB),
        ],
        leak: 0,
        cache: 2 * GIB,
        snapshot: Vec::new(),
        oom_at_step: None,
        noisy: false,
    }
}

/// The snapshot of a run's peak: weights, optimizer state, the activations in backward.
fn peak_blocks() -> Vec<Block> {
    vec![
        ("/home/u/proj/model.py", 10, "__init__", 4 * GIB),
        ("/home/u/proj/optim.py", 120, "_init_group", 2 * GIB),
        ("/home/u/proj/model.py", 42, "forward", 7 * GIB),
    ]
}

fn identity(spec: &Spec) -> Arc<WriterIdentity> {
    Arc::new(WriterIdentity {
        world_size: Some(spec.world_size),
        job_id: "job-1".into(),
        command: spec.command.clone(),
        allocator_config: spec.alloc_conf.into(),
        exact_peaks: true,
        sample_period_us: 10_000,
        sites: !spec.snapshot.is_empty(),
        ..builders::writer_identity(PID, 1)
    })
}

fn device(allocated: u64, reserved: u64) -> AllocatorDevice {
    AllocatorDevice {
        uuid: Some(recording_fixture::UUID.into()),
        allocated: Ok(allocated),
        allocated_peak: Err(Absent::NotAvailable),
        reserved: Ok(reserved),
        reserved_peak: Err(Absent::NotAvailable),
        active: Err(Absent::NotSupported),
        device_free: Ok(20 * GIB),
        ..builders::allocator_device(0)
    }
}

fn event(at_ms: u64, kind: EventKind, step: u64, label: &str) -> AllocatorEvent {
    AllocatorEvent {
        step: Some(step),
        label: label.into(),
        ..builders::allocator_event(at_ms, kind)
    }
}

fn point(at_ms: u64, allocated: u64, cache: u64, step: u64) -> AllocatorPoint {
    AllocatorPoint {
        step: Some(step),
        ..builders::allocator_point(at_ms, allocated, allocated + cache)
    }
}

/// Writes the snapshot of `blocks` into `dir`; its path and size.
fn snapshot(dir: &Path, name: &str, blocks: &[Block]) -> (PathBuf, u64) {
    let path = dir.join(format!("{PID}-1.vsc.snap-1-{name}.pickle"));
    let spec: Vec<Value> = blocks
        .iter()
        .map(|(f, l, n, b)| serde_json::json!([f, l, n, b]))
        .collect();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/diff_support/snapshot.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(&path)
        .arg(Value::Array(spec).to_string())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let size = stdout(&out).trim().parse().unwrap();
    (path, size)
}

/// Records `spec` as `dir/NAME.jsonl`: one poll per step of its phases' samples and
/// events, NVML's figure for the process beside them.
fn record(dir: &Path, name: &str, spec: &Spec) -> PathBuf {
    let path = dir.join(format!("{name}.jsonl"));
    let mut rec = start_recording(&path, Some("node-7"));
    let identity = identity(spec);
    let snap = (!spec.snapshot.is_empty()).then(|| snapshot(dir, name, &spec.snapshot));
    for step in 0..STEPS {
        let start = T0 + 1_000 + step * 1_000;
        let held = spec.base + spec.leak * step;
        let mut points = Vec::new();
        let mut events = Vec::new();
        let mut step_peak = held;
        for (i, (phase, extra)) in spec.phases.iter().enumerate() {
            let t = start + 100 * i as u64;
            let top = held + extra + noise(spec, step, i as u64);
            step_peak = step_peak.max(top);
            events.push(event(t, EventKind::PhaseBegin, step, phase));
            points.push(point(t + 10, top, spec.cache, step));
            events.push(event(
                t + 20,
                EventKind::PhaseEnd { peak: Ok(top) },
                step,
                phase,
            ));
            points.push(point(t + 30, held, spec.cache, step));
        }
        if spec.oom_at_step == Some(step) {
            events.push(event(
                start + 850,
                EventKind::Oom {
                    requested: Ok(4 * GIB),
                    device_free: Ok(GIB),
                    device_total: Ok(80 * GIB),
                    allocated: Ok(held),
                    reserved: Ok(held + spec.cache),
                    retries: Ok(1),
                },
                step,
                "",
            ));
        }
        events.push(event(
            start + 900,
            EventKind::StepEnd {
                peak_allocated: Ok(step_peak),
                peak_reserved: Ok(step_peak + spec.cache),
                duration_ns: Ok(900_000_000),
            },
            step,
            "",
        ));
        if let Some((snap_path, size)) = snap.as_ref().filter(|_| step == STEPS - 1) {
            events.push(event(
                start + 950,
                EventKind::SnapshotWritten {
                    path: Ok(snap_path.to_string_lossy().into_owned()),
                    size: Ok(*size),
                    peak: Ok(spec.snapshot.iter().map(|b| b.3).sum()),
                    reason: Ok(1),
                    allocated: Ok(held),
                    max_entries: Ok(100_000),
                    deleted: Ok(0),
                },
                step,
                &snap_path.file_name().unwrap().to_string_lossy(),
            ));
        }
        let at = start + 1_000;
        rec.record(
            at,
            &device_sample(
                0,
                at,
                step_peak + spec.cache + GIB,
                Some(step_peak + spec.cache),
            ),
        )
        .unwrap();
        let poll = ChannelPoll {
            identity: Arc::clone(&identity),
            devices: vec![device(held, held + spec.cache)],
            step: Some(step),
            points,
            events,
            ..builders::channel_poll(PID, 1)
        };
        rec.record(
            at,
            &SourceEvent::Channels(Box::new(builders::channel_batch(at, vec![poll]))),
        )
        .unwrap();
    }
    rec.finish().unwrap();
    path
}

fn diff(args: &[&Path], json: bool) -> std::process::Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_vramscope"));
    command.arg("diff").args(args);
    if json {
        command.arg("--json");
    }
    command.output().unwrap()
}

/// One pair: what was injected, the kind and words the top cause must have, and its bytes.
struct Pair {
    name: &'static str,
    a: Spec,
    b: Spec,
    kind: &'static str,
    what: &'static str,
    bytes: i64,
}

fn with_phase(spec: &Spec, phase: &str, extra: u64) -> Spec {
    let mut spec = spec.clone();
    for (name, bytes) in &mut spec.phases {
        if *name == phase {
            *bytes = extra;
        }
    }
    spec
}

fn pairs() -> Vec<Pair> {
    let base = baseline();
    let with_snapshot = Spec {
        snapshot: peak_blocks(),
        ..base.clone()
    };
    let gib = |g: f64| (g * GIB as f64) as i64;
    let mut pairs = Vec::new();

    // An extra 768 MiB buffer at model.py:77, alive through backward (the peak).
    let mut b = with_phase(&with_snapshot, "backward", 7 * GIB + 768 * MIB);
    b.snapshot
        .push(("/home/u/proj/model.py", 77, "forward", 768 * MIB));
    pairs.push(Pair {
        name: "extra buffer at a known line",
        a: with_snapshot.clone(),
        b,
        kind: "site",
        what: "model.py:77 forward",
        bytes: (768 * MIB) as i64,
    });

    // Adam's two moments instead of SGD's one: the optimizer's state doubles, held always.
    let mut b = with_snapshot.clone();
    b.base += 2 * GIB;
    b.snapshot[1].3 = 4 * GIB;
    pairs.push(Pair {
        name: "larger optimizer state",
        a: with_snapshot.clone(),
        b,
        kind: "site",
        what: "optim.py:120 _init_group",
        bytes: gib(2.0),
    });

    // Twice the sequence: activations and attention grow (backward most, +7 GiB).
    let mut b = base.clone();
    b.command = "python train.py --batch-size 16 --seq-len 2048".into();
    for (_, bytes) in &mut b.phases {
        *bytes *= 2;
    }
    pairs.push(Pair {
        name: "longer sequence",
        a: base.clone(),
        b,
        kind: "setting",
        what: "sequence length (--seq-len) 1024 -> 2048",
        bytes: gib(7.0),
    });

    // A batch half again as large, which also runs into an OOM (caught) at step 12.
    let mut b = base.clone();
    b.command = "python train.py --batch-size 24 --seq-len 1024".into();
    for (_, bytes) in &mut b.phases {
        *bytes += *bytes / 2;
    }
    b.oom_at_step = Some(12);
    pairs.push(Pair {
        name: "larger batch",
        a: base.clone(),
        b,
        kind: "setting",
        what: "batch size (--batch-size) 16 -> 24",
        bytes: gib(3.5),
    });

    // max_split_size_mb lowered: the same allocations, 1.5 GiB more cached at the peak.
    let mut b = base.clone();
    b.alloc_conf = "expandable_segments:False,max_split_size_mb:128";
    b.cache += 3 * GIB / 2;
    pairs.push(Pair {
        name: "changed max_split_size_mb",
        a: base.clone(),
        b,
        kind: "allocator_config",
        what: "max_split_size_mb 512 -> 128",
        bytes: gib(1.5),
    });

    // block.1 no longer checkpointed: its 1 GiB of activations stays until backward, where
    // the snapshot of the peak finds it at the block's line.
    let a = with_snapshot.clone();
    let mut b = with_phase(&with_snapshot, "forward/attn", 6 * GIB);
    b = with_phase(&b, "backward", 8 * GIB);
    b.snapshot
        .push(("/home/u/proj/model.py", 55, "checkpointed_forward", GIB));
    pairs.push(Pair {
        name: "module no longer checkpointed",
        a,
        b,
        kind: "site",
        what: "model.py:55 checkpointed_forward",
        bytes: gib(1.0),
    });

    // A leak: 48 MiB more kept every step, no snapshot: the steps' growth says it.
    let mut b = base.clone();
    b.leak = 48 * MIB;
    pairs.push(Pair {
        name: "leak",
        a: base.clone(),
        b,
        kind: "step_growth",
        what: "step peaks grow +48.0 MiB per step more in B, steps 0 to 19",
        bytes: (48 * MIB * (STEPS - 1)) as i64,
    });

    // Half the ranks: each holds twice the shard of parameters and state (+6 GiB).
    let mut b = base.clone();
    b.world_size = 4;
    b.base *= 2;
    pairs.push(Pair {
        name: "smaller world size",
        a: base.clone(),
        b,
        kind: "setting",
        what: "world size 8 -> 4",
        bytes: gib(6.0),
    });

    // A leak at a known line: 32 MiB of batches kept per step at data.py:88.
    let mut b = with_snapshot.clone();
    b.leak = 32 * MIB;
    b.snapshot.push((
        "/home/u/proj/data.py",
        88,
        "cache_batch",
        32 * MIB * (STEPS - 1),
    ));
    pairs.push(Pair {
        name: "leak at a known line",
        a: with_snapshot.clone(),
        b,
        kind: "site",
        what: "data.py:88 cache_batch",
        bytes: (32 * MIB * (STEPS - 1)) as i64,
    });

    // The optimizer's step makes a flat copy of the gradients: 1.25 GiB more in that
    // phase only, below the run's peak.
    let b = with_phase(&base, "optimizer", GIB + 5 * GIB / 4);
    pairs.push(Pair {
        name: "buffer in one phase",
        a: base.clone(),
        b,
        kind: "phase",
        what: "phase optimizer",
        bytes: gib(1.25),
    });
    pairs
}

#[test]
fn the_top_cause_of_each_pair_is_the_injected_regression_within_one_percent() {
    if !python3_available() {
        return;
    }
    let pairs = pairs();
    assert!(pairs.len() >= 10);
    for pair in pairs {
        let dir = tempfile::tempdir().unwrap();
        let a = record(dir.path(), "a", &pair.a);
        let b = record(
            dir.path(),
            "b",
            &Spec {
                noisy: true,
                ..pair.b.clone()
            },
        );
        let out = diff(&[&a, &b], true);
        assert!(out.status.success(), "{}: {}", pair.name, stderr(&out));
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["schema"], "vramscope.diff");
        let top = &doc["causes"][0];
        assert_eq!(top["kind"], pair.kind, "{}: {:#}", pair.name, doc["causes"]);
        let what = top["what"].as_str().unwrap();
        assert!(
            what.contains(pair.what),
            "{}: top cause {what:?}, expected {:?}: {:#}",
            pair.name,
            pair.what,
            doc["causes"]
        );
        let bytes = top["bytes"].as_i64().unwrap();
        let off = (bytes - pair.bytes).unsigned_abs() as f64 / pair.bytes as f64;
        assert!(
            off <= 0.01,
            "{}: {bytes} bytes, injected {}",
            pair.name,
            pair.bytes
        );
        // Absent is not zero: each section says why it cannot compare.
        assert_eq!(
            doc["categories"]["unavailable"],
            "the recordings carry no categories"
        );
        assert_eq!(doc["steps"]["compared"], STEPS, "{}", pair.name);
        assert_eq!(doc["steps"]["rows"].as_array().unwrap().len() as u64, STEPS);
        if pair.a.snapshot.is_empty() {
            let why = doc["sites"]["unavailable"].as_str().unwrap();
            assert!(why.contains("A has no snapshot of its peak"), "{why}");
        } else {
            assert!(!doc["sites"]["rows"].as_array().unwrap().is_empty());
        }
        if pair.name == "larger batch" {
            assert_eq!(doc["ooms"]["a"].as_array().unwrap().len(), 0);
            let ooms = doc["ooms"]["b"].as_array().unwrap();
            assert_eq!(ooms.len(), 1, "{doc:#}");
            assert_eq!(ooms[0]["requested"], 4 * GIB);
            assert_eq!(ooms[0]["step"], 12);
        }
        // Every pair's text says the same first cause.
        let text = stdout(&diff(&[&a, &b], false));
        let first = text
            .lines()
            .skip_while(|l| !l.starts_with("What changed"))
            .nth(1)
            .unwrap_or_else(|| panic!("{text}"));
        assert!(first.contains(pair.what), "{}: {text}", pair.name);
    }
}

#[test]
fn two_snapshots_are_compared_as_sites_compares_them() {
    if !python3_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = snapshot(dir.path(), "a", &peak_blocks());
    let mut grown = peak_blocks();
    grown.push(("/home/u/proj/model.py", 77, "forward", 768 * MIB));
    let (b, _) = snapshot(dir.path(), "b", &grown);
    for json in [false, true] {
        let out = diff(&[&a, &b], json);
        assert!(out.status.success(), "{}", stderr(&out));
        let mut sites = Command::new(env!("CARGO_BIN_EXE_vramscope"));
        sites.arg("sites").arg(&a).arg(&b);
        if json {
            sites.arg("--json");
        }
        let sites = sites.output().unwrap();
        assert_eq!(stdout(&out), stdout(&sites));
        assert!(stdout(&out).contains("model.py"), "{}", stdout(&out));
    }
    let out = Command::new(env!("CARGO_BIN_EXE_vramscope"))
        .arg("diff")
        .arg(&a)
        .arg(&b)
        .arg("--history")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
}

#[test]
fn bad_input_is_one_line_and_foreign_text_reaches_the_terminal_clean() {
    let dir = tempfile::tempdir().unwrap();
    let mut hostile = baseline();
    hostile.command = "python train.py --batch-size 16 \u{202e}\u{1b}[31m --seq-len 1024".into();
    hostile.phases[0].0 = "forward/\u{202e}evil\u{7}";
    let a = record(dir.path(), "a", &baseline());
    let b = record(dir.path(), "b", &hostile);
    for json in [false, true] {
        let out = diff(&[&a, &b], json);
        assert!(out.status.success(), "{}", stderr(&out));
        let text = stdout(&out);
        assert!(
            !text.contains('\u{202e}') && !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{text}"
        );
        assert!(text.contains("evil"), "{text}");
    }
    let garbage = dir.path().join("garbage.jsonl");
    std::fs::write(&garbage, "not a recording\n").unwrap();
    let (snap, missing) = (
        dir.path().join("x.pickle"),
        dir.path().join("missing.jsonl"),
    );
    std::fs::write(&snap, [0x80u8, 4, b'N', b'.']).unwrap();
    for (args, words) in [
        ([a.as_path(), missing.as_path()], "missing.jsonl"),
        ([garbage.as_path(), a.as_path()], "garbage.jsonl"),
        ([a.as_path(), snap.as_path()], "is a memory snapshot and"),
    ] {
        let out = diff(&args, false);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(words), "{err}");
        assert!(stdout(&out).is_empty());
    }
}
