//! What a snapshot cannot vouch for, `vramscope sites` does not make up: a reserved figure
//! the history's segment entries do not cover is `n/a` with its reason (never below what was
//! held), a cache with no free block has no "largest free block 0 B", the file that cannot
//! answer among two is named, and `--json` carries the writer's own figures, each null with a
//! reason where the snapshot lacks it. Snapshots are written by standard-library Python in
//! the documented format (what `torch.cuda.memory._snapshot()` returns).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use vramscope::memory_snapshot::{self, Limits, Moment};

const BIN: &str = env!("CARGO_BIN_EXE_vramscope");
const MIB: u64 = 1 << 20;

/// Shared by every snapshot below: frames, a segment, an entry.
const PRELUDE: &str = r#"
import pickle, sys
MIB = 1 << 20
B = 0x7F0000000000
def fr(line, name): return [{"filename": "/home/u/proj/model.py", "line": line, "name": name}]
def entry(action, addr, size, t, frames=(), **more):
    return dict(action=action, addr=addr, size=size, stream=0, time_us=t, frames=list(frames), **more)
def block(address, size, requested, state, frames=()):
    return dict(address=address, size=size, requested_size=requested, state=state, frames=list(frames))
def segment(address, total, blocks):
    return {"device": 0, "address": address, "total_size": total, "allocated_size": 0,
            "active_size": 0, "requested_size": 0, "stream": 0, "segment_type": "large",
            "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": blocks}
"#;

/// A history without segment entries: a 10 MiB block lived (and an OOM failed) in a segment
/// the trace never mentions, freed with it before the dump, whose one segment holds 2 MiB.
const NO_SEGMENT_ENTRIES: &str = r#"
X = B + (1 << 30)
snap = {
    "segments": [segment(B, 2 * MIB, [block(B, MIB, MIB, "active_allocated", fr(5, "weights")),
                                      block(B + MIB, MIB, 0, "inactive")])],
    "device_traces": [[
        entry("alloc", B, MIB, 1000, fr(5, "weights")),
        entry("alloc", X, 10 * MIB, 2000, fr(9, "big")),
        entry("oom", 0, 20 * MIB, 2500, fr(12, "bigger"), device_free=MIB),
        entry("free_requested", X, 10 * MIB, 3000),
        entry("free_completed", X, 10 * MIB, 3100),
    ]],
    "vramscope": {"version": 1, "pid": 4242, "device": 0, "reason": "peak",
                  "peak_allocated": 11 * MIB, "peak_requested": 11 * MIB, "max_entries": 1000},
}
"#;

/// An OOM in a cache with no free block: its one segment is one allocated 2 MiB block.
const FULL_CACHE: &str = r#"
snap = {
    "segments": [segment(B, 2 * MIB, [block(B, 2 * MIB, 2 * MIB, "active_allocated", fr(9, "fill"))])],
    "device_traces": [[
        entry("segment_alloc", B, 2 * MIB, 1000, fr(9, "fill")),
        entry("alloc", B, 2 * MIB, 2000, fr(9, "fill")),
        entry("oom", 0, 4 * MIB, 3000, fr(12, "more"), device_free=MIB),
    ]],
    "vramscope": {"version": 1, "pid": 4242, "device": 0, "reason": "oom",
                  "peak_allocated": 2 * MIB, "peak_requested": 2 * MIB, "max_entries": 1000,
                  "oom": {"requested": 4 * MIB, "device_free": MIB, "device_total": 3 * MIB}},
}
"#;

/// Writes `snap`, built by `code` after the prelude, to `dir/name`.
fn write_snapshot(dir: &Path, name: &str, code: &str) -> PathBuf {
    let script =
        format!("{PRELUDE}{code}\nsys.stdout.buffer.write(pickle.dumps(snap, protocol=4))");
    let out = Command::new("python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = dir.join(name);
    std::fs::write(&path, out.stdout).unwrap();
    path
}

fn vramscope(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn reserved_the_history_cannot_cover_is_unknown_never_below_what_was_held() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_snapshot(dir.path(), "gaps.pickle", NO_SEGMENT_ENTRIES);
    let snap = memory_snapshot::read_file(&file, &Limits::default()).unwrap();

    let peak = memory_snapshot::held(&snap, Moment::Peak, None, 10).unwrap();
    assert_eq!(peak.total_bytes, 11 * MIB);
    let why = peak.reserved.clone().unwrap_err();
    assert!(why.contains("lacks segment entries"), "{why}");
    // The dump's own figures are the segments': known, and at least what the blocks hold.
    let end = memory_snapshot::held(&snap, Moment::End, None, 10).unwrap();
    assert_eq!(end.reserved, Ok(2 * MIB));

    let (code, out, err) = vramscope(&["sites", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("held: 11.0 MiB in 2 blocks; reserved n/a (the history lacks segment entries"),
        "{out}"
    );
    assert!(!out.contains("reserved 2.00 MiB"), "{out}");

    let (code, json, err) = vramscope(&["sites", "--json", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&json).unwrap();
    assert!(v["reserved_bytes"].is_null(), "{json}");
    assert!(
        v["unavailable"]["reserved_bytes"]
            .as_str()
            .unwrap()
            .contains("lacks segment entries"),
        "{json}"
    );

    // At the OOM the cache's free memory is unknown with it: no verdict built on a made-up 0.
    let (code, out, err) = vramscope(&["sites", "--at", "oom", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("reserved n/a (the history lacks"), "{out}");
    assert!(
        out.contains("; cached free and largest free block n/a with it"),
        "{out}"
    );
    assert!(
        out.contains("the cache's free memory at the failure is unknown"),
        "{out}"
    );
    assert!(!out.contains("truly full"), "{out}");
    let (_, json, _) = vramscope(&["sites", "--json", "--at", "oom", file.to_str().unwrap()]);
    let v: Value = serde_json::from_str(&json).unwrap();
    assert!(
        v["oom"]["reserved"].is_null() && v["oom"]["cached_free"].is_null(),
        "{json}"
    );
    assert!(v["oom"]["largest_free_block"].is_null(), "{json}");
    assert!(v["oom"]["unavailable"]["cached_free"].is_string(), "{json}");
    assert!(
        v["oom"]["unavailable"]["largest_free_block"].is_string(),
        "{json}"
    );
}

#[test]
fn a_cache_with_no_free_block_has_no_zero_byte_largest_block() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_snapshot(dir.path(), "full.pickle", FULL_CACHE);
    let snap = memory_snapshot::read_file(&file, &Limits::default()).unwrap();
    let held = memory_snapshot::held(&snap, Moment::Oom, None, 10).unwrap();
    let oom = held.oom.clone().unwrap();
    assert_eq!(oom.reserved, Ok(2 * MIB));
    assert_eq!(oom.cached_free, Ok(0));
    let why = oom.largest_free_block.clone().unwrap_err();
    assert!(why.starts_with("no free block"), "{why}");
    assert!(
        oom.verdict.starts_with("truly full: 4.00 MiB asked for"),
        "{}",
        oom.verdict
    );

    // The words every output shares (the report's section, the detail pane).
    let fit = vramscope::sources::sites::convert(&held).oom.unwrap();
    let words = vramscope::model::held_sites::oom_words(&fit);
    assert!(
        words.contains("(largest free block n/a (no free block"),
        "{words}"
    );
    assert!(!words.contains("block 0 B"), "{words}");
    assert!(
        words.starts_with("the request, 4.00 MiB at proj/model.py:12 more, 1.00 MiB free"),
        "{words}"
    );

    let (code, out, err) = vramscope(&["sites", "--at", "oom", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("largest free block n/a (no free block"),
        "{out}"
    );
    let (_, json, _) = vramscope(&["sites", "--json", "--at", "oom", file.to_str().unwrap()]);
    let v: Value = serde_json::from_str(&json).unwrap();
    assert!(v["oom"]["largest_free_block"].is_null(), "{json}");
    assert!(
        v["oom"]["unavailable"]["largest_free_block"]
            .as_str()
            .unwrap()
            .starts_with("no free block"),
        "{json}"
    );
}

#[test]
fn of_two_files_the_one_that_cannot_answer_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let with_oom = write_snapshot(dir.path(), "with-oom.pickle", FULL_CACHE);
    let without = write_snapshot(
        dir.path(),
        "without-oom.pickle",
        NO_SEGMENT_ENTRIES
            .replace("entry(\"oom\"", "entry(\"annotate\"")
            .as_str(),
    );
    let (a, b) = (with_oom.to_str().unwrap(), without.to_str().unwrap());
    for (first, second) in [(a, b), (b, a)] {
        let (code, out, err) = vramscope(&["sites", "--at", "oom", first, second]);
        assert_eq!((code, err.lines().count()), (1, 1), "{out}{err}");
        assert!(
            err.starts_with(&format!("vramscope: {b}: the snapshot holds no OOM")),
            "{err}"
        );
    }
    // A file that is no snapshot, second of two, is named too.
    let junk = dir.path().join("junk.pickle");
    std::fs::write(&junk, b"not a pickle").unwrap();
    let (code, _, err) = vramscope(&["sites", a, junk.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with(&format!("vramscope: {}: ", junk.display())),
        "{err}"
    );
}

/// A writer's dump as the Python writer makes it now: its key names the channel, the rank
/// and the job.
const WRITERS_DUMP: &str = r#"
snap = {
    "segments": [segment(B, 2 * MIB, [block(B, MIB, MIB, "active_allocated", fr(5, "weights"))])],
    "device_traces": [[entry("segment_alloc", B, 2 * MIB, 500), entry("alloc", B, MIB, 1000, fr(5, "weights"))]],
    "vramscope": {"version": 1, "pid": 4242, "device": 0, "reason": "peak",
                  "peak_allocated": MIB, "peak_requested": MIB, "peak_time_us": 1000,
                  "allocated": MIB, "reserved": 2 * MIB, "step": 40, "phase": "forward",
                  "max_entries": 1000, "history_owner": "vramscope", "oom": None,
                  "channel": "4242-99.vsc", "rank": 3, "local_rank": 1, "world_size": 8,
                  "job_id": None},
}
"#;

fn sites_json(file: &Path) -> Value {
    let (code, json, err) = vramscope(&["sites", "--json", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&json).unwrap()
}

#[test]
fn json_carries_the_writers_key_and_says_why_where_a_field_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_snapshot(dir.path(), "4242-99.vsc.snap-3-peak.pickle", WRITERS_DUMP);
    let v = sites_json(&file);
    let w = &v["writer"];
    assert_eq!(
        (&w["pid"], &w["rank"], &w["local_rank"], &w["world_size"]),
        (
            &Value::from(4242),
            &Value::from(3),
            &Value::from(1),
            &Value::from(8)
        ),
        "{v}"
    );
    assert_eq!(
        (&w["step"], &w["phase"]),
        (&Value::from(40), &Value::from("forward"))
    );
    assert_eq!(w["peak_allocated"], Value::from(MIB));
    assert_eq!(w["reason"], "peak");
    assert_eq!(w["channel"]["file"], "4242-99.vsc");
    assert_eq!(
        (&w["channel"]["pid"], &w["channel"]["starttime"]),
        (&Value::from(4242), &Value::from(99))
    );
    assert_eq!(w["channel"]["from"], "key");
    // The writer said there is no job id: null, and why.
    assert!(w["job_id"].is_null());
    assert_eq!(w["unavailable"]["job_id"], "the writer found no job id");
    assert_eq!(v["file_name"], "4242-99.vsc.snap-3-peak.pickle");
    assert_eq!(v["file_size"], std::fs::metadata(&file).unwrap().len());
    let (_, text, _) = vramscope(&["sites", file.to_str().unwrap()]);
    assert!(
        text.contains("dumped at peak, pid 4242, rank 3, step 40, phase forward"),
        "{text}"
    );

    // An older writer's key lacks the identity: null with the reason, the channel from the
    // file's name, which the spec fixes.
    let older = WRITERS_DUMP.replace("\"channel\": \"4242-99.vsc\", \"rank\": 3, \"local_rank\": 1, \"world_size\": 8,\n                  \"job_id\": None", "");
    let file = write_snapshot(dir.path(), "4242-99.vsc.snap-4-peak.pickle", &older);
    let v = sites_json(&file);
    let w = &v["writer"];
    assert!(w["rank"].is_null(), "{v}");
    assert_eq!(
        w["unavailable"]["rank"],
        "not in the snapshot's `vramscope` key"
    );
    assert_eq!(w["channel"]["file"], "4242-99.vsc");
    assert_eq!(w["channel"]["from"], "file name");
    assert_eq!(w["pid"], 4242);

    // A program's own dump: no key, every field null with one reason.
    let program = WRITERS_DUMP.replace("\"vramscope\":", "\"not_ours\":");
    let file = write_snapshot(dir.path(), "mine.pickle", &program);
    let v = sites_json(&file);
    let w = &v["writer"];
    for field in ["pid", "rank", "step", "phase", "peak_allocated", "channel"] {
        assert!(w[field].is_null(), "{field}: {v}");
        assert!(
            w["unavailable"][field]
                .as_str()
                .unwrap()
                .contains("no `vramscope` key"),
            "{field}: {v}"
        );
    }
    assert_eq!(v["file_name"], "mine.pickle");

    // Two files compared: each side carries its writer.
    let a = dir.path().join("4242-99.vsc.snap-3-peak.pickle");
    let (code, json, err) = vramscope(&[
        "sites",
        "--json",
        "--at",
        "end",
        a.to_str().unwrap(),
        file.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let d: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(d["before"]["writer"]["rank"], 3, "{d}");
    assert!(d["after"]["writer"]["pid"].is_null(), "{d}");
}
