//! `vramscope sites` and `vramscope::memory_snapshot` against snapshots from a simulated
//! allocator (tests/sites_support/simulate.py, standard-library Python) whose answers it
//! computed forward, against PyTorch's own memory_viz on the same files (with the real
//! torch), and against hostile pickles.

mod common;

use common::real_packages_python;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use vramscope::memory_snapshot::{
    self, Change, ErrorKind, Exactness, Held, Limits, MemorySnapshot, Moment, SitesError,
};

const SIMULATE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/sites_support/simulate.py"
);
const BIN: &str = env!("CARGO_BIN_EXE_vramscope");

/// The fixtures, made once per test binary.
fn fixtures() -> &'static (tempfile::TempDir, Value) {
    static DIR: OnceLock<(tempfile::TempDir, Value)> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("python3")
            .arg(SIMULATE)
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(status.success(), "simulate.py failed");
        let answers = std::fs::read_to_string(dir.path().join("answers.json")).unwrap();
        (dir, serde_json::from_str(&answers).unwrap())
    })
}

fn path(name: &str) -> PathBuf {
    fixtures().0.path().join(format!("{name}.pickle"))
}

fn answer(name: &str) -> &'static Value {
    &fixtures().1[name]
}

fn read(name: &str) -> MemorySnapshot {
    memory_snapshot::read_file(&path(name), &Limits::default()).unwrap()
}

fn at(name: &str, moment: Moment) -> Held {
    memory_snapshot::held(&read(name), moment, None, 50).unwrap()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap()
}

/// The simulator's site key, `file:line:function`.
fn key(site: &memory_snapshot::Site) -> String {
    format!("{}:{}:{}", site.file, site.line, site.function)
}

#[test]
fn the_top_sites_at_a_peak_between_two_dumps_are_exact() {
    let held = at("after_peak", Moment::Peak);
    let want = answer("after_peak");
    assert_eq!(held.total_bytes, u(&want["peak_requested"]));
    assert_eq!(held.exactness, Exactness::Exact);
    assert_eq!(held.recorded_peak, Some(u(&want["peak_requested"])));
    assert!(held.recorded_is_requested);
    let expected = want["peak_sites"].as_object().unwrap();
    assert_eq!(held.sites.len(), expected.len(), "{:?}", held.sites);
    for site in &held.sites {
        let w = &expected[&key(site)];
        assert_eq!(
            (site.bytes, site.blocks),
            (u(&w[0]), u(&w[1])),
            "{}",
            key(site)
        );
    }
    // The oversized temporary in the attention is the top site the program wrote.
    let top = held.sites.iter().find(|s| !s.file.is_empty()).unwrap();
    assert_eq!(
        (top.file.as_str(), top.line, top.function.as_str()),
        ("/home/u/model.py", 123, "attention")
    );
    assert!((top.share - 25_165_947.0 / held.total_bytes as f64).abs() < 1e-9);
    assert_eq!(held.largest[0].bytes, 24 * (1 << 20) + 123);
    assert_eq!(held.largest[0].site.line, 123);

    // The dump before the peak knows nothing of it, and is exact about its own.
    let before = at("before_peak", Moment::Peak);
    assert_eq!(
        before.total_bytes,
        u(&answer("before_peak")["peak_requested"])
    );
    assert_eq!(before.exactness, Exactness::Exact);
    assert!(before.sites.iter().all(|s| s.line != 123));
}

#[test]
fn an_allocated_bytes_peak_is_compared_with_the_blocks_sizes() {
    let held = at("allocated_only", Moment::Peak);
    assert_eq!(held.exactness, Exactness::Exact);
    assert_eq!(
        held.recorded_peak,
        Some(u(&answer("after_peak")["peak_allocated"]))
    );
    assert!(!held.recorded_is_requested);
}

#[test]
fn a_peak_outside_the_ring_is_not_exact_and_says_by_how_much() {
    let held = at("outside_ring", Moment::Peak);
    let want = answer("outside_ring");
    let (peak, window) = (u(&want["peak_requested"]), u(&want["window_max"]));
    assert!(window < peak);
    assert_eq!(held.total_bytes, window);
    let Exactness::Short {
        recorded_peak,
        reconstructed,
        shortfall,
        suggested_max_entries,
    } = held.exactness.clone()
    else {
        panic!("{:?}", held.exactness);
    };
    assert_eq!(
        (recorded_peak, reconstructed, shortfall),
        (peak, window, peak - window)
    );
    // The ring needed to hold every entry since the peak; the suggestion does, with margin.
    let needed = u(&want["entries_since_peak"]);
    let suggested = suggested_max_entries.unwrap();
    assert!(
        suggested >= needed && suggested <= 2 * needed,
        "{suggested} for {needed}"
    );
    let words = vramscope::sites::render::exactness_words(&held);
    assert!(
        words.starts_with("not exact: the peak 71.0 MiB fell outside the history"),
        "{words}"
    );
    assert!(
        words.contains(&format!("max_entries ~ {suggested}")),
        "{words}"
    );
}

#[test]
fn a_snapshot_without_the_vramscope_key_works_and_is_not_called_exact() {
    let snap = read("no_key");
    assert!(snap.vramscope.is_none());
    let held = memory_snapshot::held(&snap, Moment::Peak, None, 10).unwrap();
    assert_eq!(held.total_bytes, u(&answer("after_peak")["peak_requested"]));
    let Exactness::Unknown { why } = &held.exactness else {
        panic!("{:?}", held.exactness);
    };
    assert!(why.contains("no recorded peak"), "{why}");
    // The caller's figure (the channel's allocated peak) decides it either way.
    let allocated = u(&answer("after_peak")["peak_allocated"]);
    let held = memory_snapshot::held(&snap, Moment::Peak, Some(allocated), 10).unwrap();
    assert_eq!(held.exactness, Exactness::Exact);
    let held =
        memory_snapshot::held(&snap, Moment::Peak, Some(allocated + (64 << 20)), 10).unwrap();
    assert!(matches!(held.exactness, Exactness::Short { shortfall, .. } if shortfall >= 64 << 20));
    // The dump's own live set needs no key.
    let end = memory_snapshot::held(&snap, Moment::End, None, 10).unwrap();
    assert_eq!(end.total_bytes, u(&answer("after_peak")["end_requested"]));
    assert_eq!(end.exactness, Exactness::Exact);
}

#[test]
fn an_oom_with_fragmentation_is_explained() {
    let held = at("oom_fragmented", Moment::Oom);
    let want = answer("oom_fragmented");
    let oom = held.oom.clone().unwrap();
    assert_eq!(oom.requested, Some(u(&want["requested"])));
    assert_eq!(oom.device_free, Some(u(&want["device_free"])));
    assert_eq!(oom.reserved, Ok(u(&want["reserved"])));
    assert_eq!(oom.allocated, u(&want["allocated"]));
    assert_eq!(oom.cached_free, Ok(u(&want["cached_free"])));
    assert_eq!(oom.largest_free_block, Ok(u(&want["largest_free_block"])));
    assert!(oom.cached_free.clone().unwrap() >= 4 << 20);
    assert!(oom.largest_free_block.clone().unwrap() < 4 << 20);
    assert!(
        oom.verdict
            .starts_with("fragmentation: 10.0 MiB of the cache is free"),
        "{}",
        oom.verdict
    );
    assert_eq!(held.total_bytes, u(&want["live_requested"]));
    // Where the request was made: the `oom` entry's first frame outside torch and the
    // standard library (its innermost frames are torch's), the request's size with it.
    let site = oom.request_site.clone().unwrap();
    assert_eq!(key(&site), want["request_site"].as_str().unwrap());
    assert_eq!((site.bytes, site.blocks), (u(&want["requested"]), 0));
    // A snapshot with no OOM cannot answer for one.
    let e = memory_snapshot::held(&read("after_peak"), Moment::Oom, None, 10).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotInSnapshot);
}

#[test]
fn an_oom_recovered_from_is_judged_on_the_layout_at_the_failure_not_at_the_dump() {
    let held = at("oom_recovered", Moment::Oom);
    let want = answer("oom_recovered");
    let oom = held.oom.clone().unwrap();
    assert_eq!(oom.requested, Some(u(&want["requested"])));
    // The dump shows one free segment as large as the cache; the failure met 1 MiB pieces.
    assert_eq!(oom.largest_free_block, Ok(u(&want["largest_free_block"])));
    assert_ne!(oom.largest_free_block, Ok(u(&want["largest_free_at_dump"])));
    assert!(
        oom.verdict.starts_with("fragmentation: 10.0 MiB"),
        "{}",
        oom.verdict
    );
    assert_eq!(held.total_bytes, u(&want["live_requested"]));
    // The request's site is the failed entry's, whatever was freed after it.
    let site = oom.request_site.clone().unwrap();
    assert_eq!(key(&site), want["request_site"].as_str().unwrap());
}

#[test]
fn an_oom_dump_without_figures_says_the_request_is_unknown_not_zero() {
    let held = at("oom_no_figures", Moment::Oom);
    let oom = held.oom.clone().unwrap();
    assert_eq!(oom.requested, None);
    assert!(
        oom.verdict.starts_with("why it failed is unknown"),
        "{}",
        oom.verdict
    );
    let (code, out, err) = vramscope(&[
        "sites",
        "--at",
        "oom",
        path("oom_no_figures").to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("OOM: n/a (not recorded) requested"), "{out}");
    assert!(!out.contains("0 B"), "{out}");
    let (code, json, err) = vramscope(&[
        "sites",
        "--json",
        "--at",
        "oom",
        path("oom_no_figures").to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&json).unwrap();
    assert!(v["oom"]["requested"].is_null(), "{json}");
    assert!(v["oom"]["largest_free_block"].is_u64(), "{json}");
    // Nor is where it was made: no `oom` entry, no stack, no site.
    let why = oom.request_site.clone().unwrap_err();
    assert!(why.contains("no `oom` entry"), "{why}");
    assert!(
        out.contains("OOM: n/a (not recorded) requested, where n/a (the dump was made at an OOM but the history has no `oom` entry"),
        "{out}"
    );
    assert!(v["oom"]["request_site"].is_null(), "{json}");
    assert!(
        v["oom"]["unavailable"]["request_site"]
            .as_str()
            .unwrap()
            .contains("no `oom` entry"),
        "{json}"
    );
}

#[test]
fn an_oom_entry_without_a_stack_has_no_request_site_not_a_made_up_one() {
    let held = at("oom_no_stack", Moment::Oom);
    let oom = held.oom.clone().unwrap();
    assert_eq!(oom.requested, Some(u(&answer("oom_no_stack")["requested"])));
    let why = oom.request_site.clone().unwrap_err();
    assert_eq!(why, "the `oom` entry recorded no stack frames");
    let file = path("oom_no_stack");
    let file = file.to_str().unwrap();
    let (code, out, err) = vramscope(&["sites", "--at", "oom", file]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(
            "OOM: 4.00 MiB requested, where n/a (the `oom` entry recorded no stack frames)"
        ),
        "{out}"
    );
    // The live block's site (model.py:30) is not lent to the request.
    let oom_line = out.lines().find(|l| l.starts_with("OOM:")).unwrap();
    assert!(!oom_line.contains("model.py"), "{out}");
    let (code, json, err) = vramscope(&["sites", "--json", "--at", "oom", file]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&json).unwrap();
    assert!(v["oom"]["request_site"].is_null(), "{json}");
    assert_eq!(
        v["oom"]["unavailable"]["request_site"], "the `oom` entry recorded no stack frames",
        "{json}"
    );
    // The words the report and the detail pane share say it too.
    let fit = vramscope::sources::sites::convert(&held).oom.unwrap();
    assert_eq!(fit.request_site, None);
    let words = vramscope::model::held_sites::oom_words(&fit);
    assert!(
        words.starts_with(
            "the request, 4.00 MiB, where n/a (the `oom` entry recorded no stack frames), 1.00 MiB free on the device"
        ),
        "{words}"
    );
}

#[test]
fn a_snapshot_of_two_devices_names_both_and_answers_for_the_one_asked() {
    // after_peak's device 0 copied onto device 1, with device 1's segments moved by 1 TiB.
    let src = path("after_peak");
    let bytes = python_bytes(&format!(
        "s = pickle.load(open({src:?}, 'rb'))\n\
         segs = [dict(g, device=1, address=g['address'] + (1 << 40), blocks=[dict(b, address=b['address'] + (1 << 40)) for b in g['blocks']]) for g in s['segments']]\n\
         s['segments'] += segs\n\
         s['device_traces'] = [s['device_traces'][0], [dict(e, addr=e['addr'] + (1 << 40)) for e in s['device_traces'][0]]]\n\
         del s['vramscope']\n\
         sys.stdout.buffer.write(pickle.dumps(s, protocol=4))",
        src = src.to_str().unwrap()
    ));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("two.pickle");
    std::fs::write(&file, bytes).unwrap();
    let file = file.to_str().unwrap();
    let (code, out, err) = vramscope(&["sites", file]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("device 0, at the peak"), "{out}");
    assert!(
        out.contains("devices 0, 1 in the snapshot (--device N picks one)"),
        "{out}"
    );
    let (code, out, err) = vramscope(&["sites", "--device", "1", file]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("device 1, at the peak"), "{out}");
    // A one-device snapshot says nothing of other devices.
    let (_, out, _) = vramscope(&["sites", path("after_peak").to_str().unwrap()]);
    assert!(!out.contains("in the snapshot (--device"), "{out}");
}

#[test]
fn the_diff_of_two_dumps_finds_the_growing_site() {
    let (a, b) = (at("leak_2", Moment::End), at("leak_6", Moment::End));
    let d = memory_snapshot::diff(&a, &b, 10);
    let want = answer("leak");
    let top = &d.rows[0];
    assert_eq!(
        format!("{}:{}:{}", top.file, top.line, top.function),
        want["site"].as_str().unwrap()
    );
    assert_eq!(top.growth(), i128::from(u(&want["growth_bytes"])));
    assert_eq!(
        top.after_blocks - top.before_blocks,
        u(&want["growth_blocks"])
    );
    assert_eq!(top.change, Change::Grew);
    assert_eq!(d.rows.len(), 1, "nothing else changed: {:?}", d.rows);
    assert_eq!(d.after_total - d.before_total, u(&want["growth_bytes"]));
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
fn the_command_prints_the_answer_as_text_and_json() {
    let file = path("after_peak");
    let file = file.to_str().unwrap();
    let (code, out, err) = vramscope(&["sites", file]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("device 0, at the peak; dumped at request, pid 4242, step 7, phase backward"),
        "{out}"
    );
    assert!(
        out.contains("exact: equals the allocator's recorded peak 71.0 MiB (requested bytes)"),
        "{out}"
    );
    assert!(
        out.contains("33.8%    24.0 MiB       1  model.py:123 attention"),
        "{out}"
    );

    let (code, out, _) = vramscope(&["sites", file, "--json", "--top", "2"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["schema"], "vramscope.sites");
    assert_eq!(v["exactness"]["kind"], "exact");
    assert_eq!(v["sites"].as_array().unwrap().len(), 2);
    assert_eq!(v["sites"][1]["line"], 123);

    let oom = path("oom_fragmented");
    let (code, out, _) = vramscope(&["sites", oom.to_str().unwrap(), "--at", "oom"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("OOM: 4.00 MiB requested at model.py:99 big\n")
            && out.contains("fragmentation"),
        "{out}"
    );
    let (code, out, _) = vramscope(&["sites", oom.to_str().unwrap(), "--at", "oom", "--json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["oom"]["request_site"],
        serde_json::json!({"file": "/home/u/model.py", "line": 99, "function": "big"}),
        "{out}"
    );
    assert!(
        v["oom"]["unavailable"].get("request_site").is_none(),
        "{out}"
    );

    let (a, b) = (path("leak_2"), path("leak_6"));
    let (code, out, _) = vramscope(&[
        "sites",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--at",
        "end",
    ]);
    assert_eq!(code, 0);
    assert!(
        out.contains("+4.00 MiB    3.00 MiB    7.00 MiB        3->7  leak.py:7 cache (grew)"),
        "{out}"
    );

    let (code, out, _) = vramscope(&["sites", file, "--at", "peak", "--against", "end"]);
    assert_eq!(code, 0);
    assert!(out.contains("model.py:123 attention (gone)"), "{out}");
}

#[test]
fn the_command_fails_in_one_line_with_the_right_status() {
    let file = path("after_peak");
    let file = file.to_str().unwrap();
    let (code, _, err) = vramscope(&["sites", file, file, "--against", "end"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = vramscope(&["sites", file, "--at", "oom"]);
    assert_eq!((code, err.lines().count()), (1, 1), "{err}");
    assert!(err.contains("holds no OOM"), "{err}");
    let (code, _, err) = vramscope(&["sites", "/nonexistent/x.pickle"]);
    assert_eq!((code, err.lines().count()), (1, 1), "{err}");
    let (code, _, err) = vramscope(&["sites", file, "--device", "3"]);
    assert_eq!(code, 1);
    assert!(err.contains("nothing on device 3 (devices: 0)"), "{err}");
    let (code, _, _) = vramscope(&["sites"]);
    assert_eq!(code, 2);
    let (code, _, err) = vramscope(&["sites", file, "--csv"]);
    assert_eq!(code, 2, "{err}");
}

/// PyTorch's own torch/cuda/_memory_viz.py on a snapshot: the flame-graph lines of
/// `memory()` (each block's bytes), `segsum()` (which asserts its accounting adds up),
/// and `trace()`'s entry count per device.
const MEMORY_VIZ: &str = r#"
import json, pickle, sys
from torch.cuda import _memory_viz as viz
out = []
for path in sys.argv[1:]:
    snap = pickle.load(open(path, "rb"))
    lines = viz.memory(snap, format_flamegraph=lambda text: text).splitlines()
    def total(pred):
        return sum(int(l.rsplit(" ", 1)[1]) for l in lines if pred(l))
    active = total(lambda l: ";active_allocated;" in l and not l.rsplit(" ", 1)[0].endswith("<gaps>"))
    viz.segsum(snap)
    entries = [int(l.split()[0]) for l in viz.trace(snap).splitlines() if l.endswith(" entries")]
    out.append({"active_requested": active, "reserved": total(lambda l: True), "entries": entries})
print(json.dumps(out))
"#;

#[test]
fn totals_agree_with_pytorchs_memory_viz() {
    let Some(python) = real_packages_python() else {
        return;
    };
    let names = [
        "after_peak",
        "oom_fragmented",
        "leak_6",
        "outside_ring",
        "no_key",
    ];
    let out = Command::new(&python)
        .args(["-c", MEMORY_VIZ])
        .args(names.map(path))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let viz: Value = serde_json::from_slice(&out.stdout).unwrap();
    for (name, viz) in names.iter().zip(viz.as_array().unwrap()) {
        let end = at(name, Moment::End);
        assert_eq!(end.total_bytes, u(&viz["active_requested"]), "{name}");
        assert_eq!(end.reserved, Ok(u(&viz["reserved"])), "{name}");
        assert_eq!(
            viz["entries"][0].as_u64(),
            Some(end.trace_entries as u64),
            "{name}"
        );
    }
}

#[test]
fn a_costed_read_gives_the_same_snapshot_and_says_what_each_stage_took() {
    let bytes = std::fs::read(path("after_peak")).unwrap();
    let started = std::time::Instant::now();
    let mut cost = memory_snapshot::ReadCost::default();
    let costed = memory_snapshot::read_bytes_costed(&bytes, &Limits::default(), &mut cost).unwrap();
    let wall = started.elapsed();
    let plain = memory_snapshot::read_bytes(&bytes, &Limits::default()).unwrap();
    assert_eq!(format!("{costed:?}"), format!("{plain:?}"));
    // Building the values takes time on any clock; the two stages, one after the other on
    // this thread, lie within the call.
    assert!(cost.decode.wall > Duration::ZERO, "{cost:?}");
    assert!(cost.decode.cpu > Duration::ZERO, "{cost:?}");
    assert!(cost.walk.wall > Duration::ZERO, "{cost:?}");
    assert!(cost.decode.wall + cost.walk.wall <= wall, "{cost:?}");
}

// Hostile pickles.

fn python_bytes(code: &str) -> Vec<u8> {
    let out = Command::new("python3")
        .args(["-c", &format!("import pickle, sys, os\n{code}")])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn refused(bytes: &[u8], limits: &Limits) -> SitesError {
    memory_snapshot::read_bytes(bytes, limits).unwrap_err()
}

#[test]
fn files_that_are_not_snapshots_are_one_clear_line() {
    let limits = Limits::default();
    let whole = std::fs::read(path("after_peak")).unwrap();
    let e = refused(&whole[..whole.len() / 2], &limits);
    assert_eq!(e.kind(), ErrorKind::NotASnapshot);
    assert!(
        e.to_string()
            .starts_with("not a memory snapshot: the pickle is truncated at byte"),
        "{e}"
    );
    for (code, says) in [
        (
            "sys.stdout.buffer.write(pickle.dumps([1, 2, 3]))",
            "a dict with `segments`",
        ),
        (
            "sys.stdout.buffer.write(pickle.dumps({'device_traces': []}))",
            "without `segments`",
        ),
        (
            "sys.stdout.buffer.write(pickle.dumps({'segments': 'x'}))",
            "a list of segments",
        ),
        (
            "sys.stdout.buffer.write(pickle.dumps({'segments': [{'total_size': 'big'}]}))",
            "segments[0].total_size is a string, not an integer",
        ),
        (
            "sys.stdout.buffer.write(pickle.dumps({'segments': [], 'device_traces': [[{'action': 'alloc', 'size': -5}]]}))",
            "device_traces[0][0].size is negative (-5)",
        ),
    ] {
        let e = refused(&python_bytes(code), &limits);
        assert_eq!(e.kind(), ErrorKind::NotASnapshot, "{e}");
        assert!(e.to_string().contains(says), "{code}: {e}");
        assert_eq!(e.to_string().lines().count(), 1);
    }
    let e = refused(b"", &limits);
    assert!(e.to_string().contains("empty"), "{e}");
    let e = refused(b"\xffgarbage", &limits);
    assert!(e.to_string().contains("not a pickle opcode"), "{e}");
}

#[test]
fn a_pickle_that_would_run_code_is_refused_and_never_runs() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    for protocol in [0, 2, 4, 5] {
        let code = format!(
            "class Evil:\n    def __reduce__(self):\n        return (os.system, ('touch {}',))\n\
             sys.stdout.buffer.write(pickle.dumps({{'segments': [], 'x': Evil()}}, protocol={protocol}))",
            marker.display()
        );
        let bytes = python_bytes(&code);
        let e = refused(&bytes, &Limits::default());
        assert_eq!(e.kind(), ErrorKind::Refused, "protocol {protocol}: {e}");
        assert!(e.to_string().contains("names a Python global"), "{e}");
        let file = dir.path().join(format!("evil{protocol}.pickle"));
        std::fs::write(&file, &bytes).unwrap();
        let (code, out, err) = vramscope(&["sites", file.to_str().unwrap()]);
        assert_eq!(
            (code, out.as_str(), err.lines().count()),
            (1, "", 1),
            "{err}"
        );
        if protocol == 0 {
            // No PROTO opcode (protocols 0 and 1 have none, and no snapshot is written so):
            // the file is refused by its first bytes, before any of it is checked or read.
            assert!(err.contains("it does not start as a pickle"), "{err}");
        } else {
            assert!(err.contains("never runs code"), "{err}");
        }
    }
    // Protocol 0 names the global in the file: the line says which.
    let bytes = python_bytes(
        "class Evil:\n    def __reduce__(self):\n        return (os.system, ('true',))\n\
         sys.stdout.buffer.write(pickle.dumps(Evil(), protocol=0))",
    );
    assert!(
        refused(&bytes, &Limits::default())
            .to_string()
            .contains("(`posix.system`)")
    );
    assert!(!marker.exists(), "the pickle's code ran");
}

#[test]
fn foreign_text_in_frames_never_reaches_the_output_raw() {
    let bytes = python_bytes(
        "f = {'name': 'evil\\x1b]52;c;aGk=\\x07', 'filename': '/home/u/\\u202emodel.py', 'line': 3}\n\
         s = {'segments': [{'device': 0, 'address': 4096, 'total_size': 1024, 'stream': 0, 'blocks': [\
         {'address': 4096, 'size': 1024, 'requested_size': 1000, 'state': 'active_allocated', 'frames': [f]}]}],\
         'device_traces': [[]]}\n\
         sys.stdout.buffer.write(pickle.dumps(s))",
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("foreign.pickle");
    std::fs::write(&file, &bytes).unwrap();
    for extra in [&[][..], &["--json"][..]] {
        let mut args = vec!["sites", file.to_str().unwrap(), "--at", "end"];
        args.extend_from_slice(extra);
        let (code, out, err) = vramscope(&args);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("1000"), "{out}");
        assert!(
            !out.contains('\u{1b}') && !out.contains('\u{7}') && !out.contains('\u{202e}'),
            "{out:?}"
        );
    }
}

#[test]
fn foreign_text_in_an_oom_requests_frames_never_reaches_the_output_raw() {
    let bytes = python_bytes(
        "f = {'name': 'evil\\x1b]52;c;aGk=\\x07', 'filename': '/home/u/\\u202emodel.py', 'line': 3}\n\
         s = {'segments': [{'device': 0, 'address': 4096, 'total_size': 1024, 'stream': 0, 'blocks': [\
         {'address': 4096, 'size': 1024, 'requested_size': 1000, 'state': 'active_allocated', 'frames': []}]}],\
         'device_traces': [[{'action': 'oom', 'addr': 0, 'size': 5000, 'stream': 0, 'device_free': 0, 'frames': [f]}]]}\n\
         sys.stdout.buffer.write(pickle.dumps(s))",
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("foreign_oom.pickle");
    std::fs::write(&file, &bytes).unwrap();
    for extra in [&[][..], &["--json"][..]] {
        let mut args = vec!["sites", file.to_str().unwrap(), "--at", "oom"];
        args.extend_from_slice(extra);
        let (code, out, err) = vramscope(&args);
        assert_eq!(code, 0, "{err}");
        // The site is there, cleaned: its line and the function's readable part.
        assert!(out.contains("evil"), "{out}");
        assert!(
            !out.contains('\u{1b}') && !out.contains('\u{7}') && !out.contains('\u{202e}'),
            "{out:?}"
        );
    }
}

#[test]
fn ten_million_trace_entries_are_cut_or_refused_by_the_limits() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("huge.pickle");
    let code = format!(
        "e = {{'action': 'alloc', 'addr': 1, 'size': 512, 'stream': 0, 'time_us': 1}}\n\
         pickle.dump({{'segments': [], 'device_traces': [[e] * 10_000_000]}}, open('{}', 'wb'), protocol=4)",
        file.display()
    );
    python_bytes(&code);
    let limits = Limits {
        max_trace_entries: 1_000,
        ..Limits::default()
    };
    let snap = memory_snapshot::read_file(&file, &limits).unwrap();
    assert_eq!(snap.traces[0].entries.len(), 1_000);
    assert_eq!(snap.traces[0].cut, 9_999_000);
    assert_eq!(snap.cut.trace_entries, 9_999_000);
    let held = memory_snapshot::held(&snap, Moment::Peak, None, 5).unwrap();
    let text = vramscope::sites::render::text(&held, &file, "");
    assert!(
        text.contains("(9999000 older ones cut by the limits)"),
        "{text}"
    );

    // A bound on values refuses it before anything is built; so do the size and the clock.
    let e = memory_snapshot::read_file(
        &file,
        &Limits {
            max_values: 1_000_000,
            ..Limits::default()
        },
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Limit);
    assert!(e.to_string().contains("more than 1000000 values"), "{e}");
    let e = memory_snapshot::read_file(
        &file,
        &Limits {
            max_file_bytes: 1 << 20,
            ..Limits::default()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("over the 1048576-byte limit"), "{e}");
    let e = memory_snapshot::read_file(
        &file,
        &Limits {
            deadline: Duration::ZERO,
            ..Limits::default()
        },
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Limit);
    assert!(e.to_string().contains("deadline"), "{e}");

    // A deadline that passes while the pickle crate builds the ten million references
    // (the guard checks its clock every 2^20 opcodes, the crate's reader at every 8 KiB,
    // the caller waits no longer than what is left): the read returns near it, not at the
    // end of the parse.
    let asked = Instant::now();
    let e = memory_snapshot::read_file(
        &file,
        &Limits {
            deadline: Duration::from_millis(150),
            ..Limits::default()
        },
    )
    .unwrap_err();
    let took = asked.elapsed();
    assert_eq!(e.kind(), ErrorKind::Limit, "{e}");
    assert!(
        e.to_string()
            .contains("gave up reading after 150 ms (the deadline)"),
        "{e}"
    );
    // Reading the file (20 MB) comes before the clock starts; a loaded machine adds more.
    assert!(took < Duration::from_secs(3), "{took:?}");
}

#[test]
fn limits_on_blocks_and_frames_cut_and_say_so() {
    let limits = Limits {
        max_blocks: 3,
        max_frames_per_entry: 2,
        ..Limits::default()
    };
    let snap = memory_snapshot::read_file(&path("after_peak"), &limits).unwrap();
    let blocks: usize = snap.segments.iter().map(|s| s.blocks.len()).sum();
    assert_eq!(blocks, 3);
    assert!(snap.cut.blocks > 0 && snap.cut.frames > 0, "{:?}", snap.cut);
    // Two frames are the two torch frames: the site falls back to the innermost.
    let held = memory_snapshot::held(&snap, Moment::Peak, None, 5).unwrap();
    assert!(
        held.sites.iter().any(|s| s.file.ends_with("linear.py")),
        "{:?}",
        held.sites
    );
    assert!(Path::new(&path("after_peak")).exists());
}
