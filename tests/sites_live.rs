//! What held the memory, live and offline: a channel written by the Rust writer announces
//! memory snapshots (made by `sites_support/make_snapshot.py` in the documented format, with
//! known sites); `--json` carries them with their reduced sites, the report has a section for
//! them, the request raises the channel's control field, and hostile names and files are
//! refused in one line. The detail pane's test lives in `tui_sites.rs`.

mod common;

use common::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use vramscope::channel::layout::{control, event, flags};
use vramscope::channel::{
    DeviceFigures, DeviceIdentity, EventFields, EventKind, Writer, WriterConfig, WriterKind,
    parse_uuid, request_snapshot,
};

const UUID0: &str = "GPU-00000000-0000-0000-0000-000000000000";

/// Writes a snapshot of `mode` (`peak`, `short`, `oom`) to `path`; its size.
fn make_snapshot(path: &Path, mode: &str) -> u64 {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sites_support/make_snapshot.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(path)
        .arg(mode)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out).trim().parse().unwrap()
}

/// A Rust writer in `dir` with `SITES` (or not), one device on GPU 0, 2 GiB allocated.
fn writer(dir: &Path, sites: bool) -> Writer {
    let mut writer = Writer::create(WriterConfig {
        dir: Some(dir.to_path_buf()),
        flags: if sites { flags::SITES } else { 0 },
        ..WriterConfig::from_process(WriterKind::PyTorch)
    })
    .unwrap();
    let slot = writer
        .add_device(DeviceIdentity {
            ordinal: 0,
            uuid: parse_uuid(UUID0),
            pci_bus_id: None,
            total: Some(80 * GIB),
        })
        .unwrap();
    writer.publish_device(
        slot,
        &DeviceFigures {
            allocated: Some(2 * GIB),
            allocated_peak: Some(6 * GIB),
            reserved: Some(8 * GIB),
            ..DeviceFigures::default()
        },
    );
    writer.status(Some(40), "forward");
    writer
}

/// Announces `name` as the spec's `SNAPSHOT_WRITTEN` does.
fn announce(writer: &mut Writer, name: &str, size: u64, reason: u64, peak: u64) {
    writer.event(&EventFields {
        slot: Some(0),
        step: Some(40),
        args: [size, peak, reason, 2 * GIB, 1000, 0],
        text: name,
        ..EventFields::new(EventKind::SnapshotWritten)
    });
}

fn snapshot_name(writer: &Writer, seq: u32, reason: &str) -> String {
    let channel = writer
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    format!("{channel}.snap-{seq}-{reason}.pickle")
}

/// The `--json` document's only allocator.
fn allocator(doc: &Value) -> &Value {
    let all = doc["allocators"].as_array().unwrap();
    assert_eq!(all.len(), 1, "{doc}");
    &all[0]
}

#[test]
fn json_carries_each_snapshot_and_the_top_sites_at_the_peak_exactly() {
    if !python3_available() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let channels = work.path().join("channels");
    let mut w = writer(&channels, true);
    let name = snapshot_name(&w, 1, "peak");
    let size = make_snapshot(&channels.join(&name), "peak");
    announce(&mut w, &name, size, event::SNAPSHOT_PEAK, 6 * GIB);
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let doc = scenario.json_reading(&channels);
    let a = allocator(&doc);
    assert_eq!(a["sites"], json!(true));
    let snaps = a["snapshots"].as_array().unwrap();
    assert_eq!(snaps.len(), 1, "{a}");
    let s = &snaps[0];
    assert_eq!(s["name"], json!(name));
    assert_eq!(s["path"], json!(channels.join(&name).to_string_lossy()));
    assert_eq!(
        (s["size"].clone(), s["peak"].clone(), s["reason"].clone()),
        (json!(size), json!(6 * GIB), json!("peak"))
    );
    assert_eq!(s["max_entries"], json!(1000));
    let sites = &s["sites"];
    assert_eq!(sites["state"], json!("reduced"), "{sites}");
    assert_eq!(sites["total_bytes"], json!(6 * GIB), "{sites}");
    assert_eq!(sites["exactness"]["exactness"], json!("exact"), "{sites}");
    let top = &sites["sites"][0];
    assert_eq!(
        (
            top["file"].clone(),
            top["line"].clone(),
            top["function"].clone()
        ),
        (
            json!("/home/user/proj/model.py"),
            json!(123),
            json!("attention")
        ),
        "{sites}"
    );
    assert_eq!(top["bytes"], json!(4 * GIB));
    assert_eq!(sites["largest"][0]["bytes"], json!(4 * GIB), "{sites}");
    assert_eq!(sites["largest"][0]["line"], json!(123), "{sites}");
    let headline = sites["headline"].as_str().unwrap();
    assert!(
        headline.starts_with("held at the peak (exact): 67% proj/model.py:123 attention 4.00 GiB"),
        "{headline}"
    );
}

#[test]
fn a_peak_outside_the_ring_is_not_exact_and_says_by_how_much() {
    if !python3_available() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let channels = work.path().join("channels");
    let mut w = writer(&channels, true);
    let name = snapshot_name(&w, 1, "peak");
    let size = make_snapshot(&channels.join(&name), "short");
    // The allocator's lifetime peak was 7 GiB; the ring holds a 6 GiB one.
    announce(&mut w, &name, size, event::SNAPSHOT_PEAK, 7 * GIB);
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let doc = scenario.json_reading(&channels);
    let sites = &allocator(&doc)["snapshots"][0]["sites"];
    let exactness = &sites["exactness"];
    assert_eq!(exactness["exactness"], json!("short"), "{sites}");
    assert_eq!(exactness["shortfall"], json!(GIB), "{sites}");
    assert!(
        sites["headline"]
            .as_str()
            .unwrap()
            .contains("(not exact: 1.00 GiB short)"),
        "{sites}"
    );
}

#[test]
fn hostile_names_and_a_symlinked_snapshot_are_refused_in_one_line() {
    if !python3_available() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let channels = work.path().join("channels");
    let mut w = writer(&channels, true);
    announce(&mut w, "../../etc/x", 10, event::SNAPSHOT_PEAK, 6 * GIB);
    announce(
        &mut w,
        "evil\u{1b}]52;c;x\u{7}.pickle",
        10,
        event::SNAPSHOT_PEAK,
        6 * GIB,
    );
    announce(&mut w, "nul\0.pickle", 10, event::SNAPSHOT_PEAK, 6 * GIB);
    // A valid snapshot outside the directory, and a symlink to it in place of the file.
    let elsewhere = work.path().join("elsewhere.pickle");
    let size = make_snapshot(&elsewhere, "peak");
    let name = snapshot_name(&w, 3, "peak");
    std::os::unix::fs::symlink(&elsewhere, channels.join(&name)).unwrap();
    announce(&mut w, &name, size, event::SNAPSHOT_PEAK, 6 * GIB);
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let doc = scenario.json_reading(&channels);
    let snaps = allocator(&doc)["snapshots"].as_array().unwrap().clone();
    assert_eq!(snaps.len(), 4, "{snaps:?}");
    let why = |s: &Value| s["sites"]["why"].as_str().unwrap().to_string();
    assert!(
        snaps.iter().all(|s| s["sites"]["state"] == json!("failed")),
        "{snaps:?}"
    );
    assert!(
        why(&snaps[0]).contains("not a plain file name"),
        "{}",
        why(&snaps[0])
    );
    assert!(snaps[0]["path"].is_null());
    assert!(
        why(&snaps[1]).contains("control characters"),
        "{}",
        why(&snaps[1])
    );
    // Nothing of the escape reaches the output.
    assert!(!doc.to_string().contains('\u{1b}'));
    assert!(
        why(&snaps[2]).contains("control characters"),
        "{}",
        why(&snaps[2])
    );
    assert!(why(&snaps[3]).contains("symlink"), "{}", why(&snaps[3]));
    for s in &snaps {
        assert!(!why(s).contains('\n'));
    }
}

#[test]
fn a_sparse_gigabyte_announced_as_a_snapshot_is_refused_by_its_first_bytes_unread() {
    let work = tempfile::tempdir().unwrap();
    let channels = work.path().join("channels");
    let mut w = writer(&channels, true);
    let name = snapshot_name(&w, 1, "peak");
    // Within the snapshot's size bound, all zeros: no pickle. Before, the monitor read it
    // whole (1.06 GB) to find byte 0 is no opcode.
    let size = vramscope::safe_fs::bounds::SNAPSHOT.max_bytes;
    std::fs::File::create(channels.join(&name))
        .unwrap()
        .set_len(size)
        .unwrap();
    announce(&mut w, &name, size, event::SNAPSHOT_PEAK, 6 * GIB);
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let mut cmd = scenario.command();
    cmd.env("VRAMSCOPE_DIR", &channels).arg("--json");
    let run = common::measured::run_measured(cmd, Duration::from_secs(60));
    eprintln!(
        "--json: {:.2} s, peak RSS {} MiB",
        run.took.as_secs_f64(),
        run.peak_rss_mib
    );
    assert_eq!(run.status, Some(0), "{}", run.stderr);
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    let sites = &allocator(&doc)["snapshots"][0]["sites"];
    assert_eq!(sites["state"], json!("failed"), "{sites}");
    assert_eq!(
        sites["why"],
        json!(
            "not a memory snapshot: it does not start as a pickle (byte 0 is 0x00, not PROTO 0x80)"
        ),
        "{sites}"
    );
    assert!(run.peak_rss_mib < 200, "{} MiB", run.peak_rss_mib);
}

#[test]
fn a_request_raises_the_channels_count_only_where_the_writer_records_history() {
    let work = tempfile::tempdir().unwrap();
    let with = work.path().join("with");
    let without = work.path().join("without");
    let w = writer(&with, true);
    let plain = writer(&without, false);
    let euid = vramscope::channel::euid();
    let count = |path: &Path| {
        let bytes = std::fs::read(path).unwrap();
        let at = control::SNAPSHOT_REQUESTS;
        u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
    };
    assert_eq!(count(w.path()), 0);
    assert_eq!(request_snapshot(w.path(), euid), Ok(1));
    assert_eq!(request_snapshot(w.path(), euid), Ok(2));
    assert_eq!(count(w.path()), 2);
    // Nothing else of the file changed: the header and the rest of the control block.
    let why = request_snapshot(plain.path(), euid).unwrap_err();
    assert!(why.contains("start it with vramscope run --sites"), "{why}");
    assert_eq!(count(plain.path()), 0);
    // A symlink to a channel is refused, not followed.
    let link = with.join("link.vsc");
    std::os::unix::fs::symlink(w.path(), &link).unwrap();
    let why = request_snapshot(&link, euid).unwrap_err();
    assert!(why.contains("symlink"), "{why}");
    assert_eq!(count(w.path()), 2);
    // Not a channel at all.
    let junk = with.join("junk.vsc");
    std::fs::write(&junk, vec![0u8; 4096]).unwrap();
    std::fs::set_permissions(&junk, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let why = request_snapshot(&junk, euid).unwrap_err();
    assert!(why.contains("magic"), "{why}");
    assert_eq!(std::fs::read(&junk).unwrap(), vec![0u8; 4096]);
}

/// Records `channels` for about two seconds with GPU 0 listing this process.
/// One H100 on which NVML lists this test's own process, 9 GiB: the pid its channel names.
fn this_process_on_an_h100() -> Scenario {
    let mut gpu = h100(0);
    gpu["processes"] =
        json!([{ "t": 0, "compute": [{ "pid": std::process::id(), "used_memory": 9 * GIB }] }]);
    Scenario::new(&json!({ "devices": [gpu] }))
}

fn record(scenario: &Scenario, channels: &Path) -> PathBuf {
    let path = scenario.dir().join("run.jsonl");
    let mut child = scenario
        .command()
        .env("VRAMSCOPE_DIR", channels)
        .args(["record", "--interval", "0.2", "-o"])
        .arg(&path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2000));
    // SAFETY: sending SIGINT to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert!(child.wait().unwrap().success());
    path
}

fn report(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_vramscope"))
        .arg("report")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn the_report_has_a_section_with_the_sites_at_the_peak_and_at_the_oom() {
    if !python3_available() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let channels = work.path().join("channels");
    let mut w = writer(&channels, true);
    let peak = snapshot_name(&w, 1, "peak");
    let size = make_snapshot(&channels.join(&peak), "peak");
    announce(&mut w, &peak, size, event::SNAPSHOT_PEAK, 6 * GIB);
    w.oom(0, Some(5 * GIB), Some(GIB / 2));
    let oom = snapshot_name(&w, 2, "oom");
    let size = make_snapshot(&channels.join(&oom), "oom");
    announce(&mut w, &oom, size, event::SNAPSHOT_OOM, 6 * GIB);
    let scenario = this_process_on_an_h100();
    let recording = record(&scenario, &channels);
    // The OOM's file is gone by the time of the report (the writer keeps the newest few).
    std::fs::remove_file(channels.join(&oom)).unwrap();
    // The snapshots were announced before the recording began: `--history` keeps them.
    let out = report(&[recording.to_str().unwrap(), "--history"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let section = text
        .split("What held the memory (allocation sites)")
        .nth(1)
        .unwrap_or_else(|| panic!("no section:\n{text}"));
    assert!(
        section.contains("held at the peak (exact): 6.00 GiB in 3 blocks"),
        "{text}"
    );
    let first = section
        .lines()
        .position(|l| l.contains("held at the peak"))
        .unwrap();
    assert!(
        section.lines().nth(first + 1).unwrap().trim()
            == "67% proj/model.py:123 attention 4.00 GiB in 1 block",
        "{text}"
    );
    assert!(
        section.contains("largest blocks: 4.00 GiB at proj/model.py:123 attention, 1.00 GiB at"),
        "{text}"
    );
    assert!(section.contains("OOM of pid"), "{text}");
    assert!(section.contains("the file no longer exists"), "{text}");

    let out = report(&[recording.to_str().unwrap(), "--history", "--json"]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = doc["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == json!(std::process::id()))
        .unwrap_or_else(|| panic!("{doc}"));
    let held = &p["allocator"]["held_at_peak"];
    assert_eq!(held["name"], json!(peak));
    assert_eq!(held["sites"]["sites"][0]["line"], json!(123), "{held}");
    let oom_held = &doc["ooms"][0]["held"];
    assert_eq!(oom_held["name"], json!(oom), "{doc}");
    assert_eq!(oom_held["sites"]["state"], json!("failed"));
}

#[test]
fn at_an_oom_json_and_the_report_say_where_the_failed_request_was_made() {
    if !python3_available() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let channels = work.path().join("channels");
    let mut w = writer(&channels, true);
    w.oom(0, Some(5 * GIB), Some(GIB / 2));
    let oom = snapshot_name(&w, 1, "oom");
    let size = make_snapshot(&channels.join(&oom), "oom");
    announce(&mut w, &oom, size, event::SNAPSHOT_OOM, 6 * GIB);
    let scenario = this_process_on_an_h100();

    // The monitor's `--json`: the request's site (model.py:200, under torch's own frame).
    let doc = scenario.json_reading(&channels);
    let fit = &allocator(&doc)["snapshots"][0]["sites"]["oom"];
    assert_eq!(
        fit["request_site"],
        json!({"file": "/home/user/proj/model.py", "line": 200, "function": "mlp"}),
        "{doc}"
    );
    assert!(fit["unavailable"].get("request_site").is_none(), "{fit}");

    let recording = record(&scenario, &channels);
    let out = report(&[recording.to_str().unwrap(), "--history"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(
            "why it did not fit: the request, 5.00 GiB at proj/model.py:200 mlp, 512 MiB free on the device"
        ),
        "{text}"
    );
    let out = report(&[recording.to_str().unwrap(), "--history", "--markdown"]);
    let text = stdout(&out);
    assert!(
        text.contains("why it did not fit: the request, 5.00 GiB at proj/model.py:200 mlp"),
        "{text}"
    );
    let out = report(&[recording.to_str().unwrap(), "--history", "--json"]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let held = &doc["ooms"][0]["held"]["sites"];
    assert_eq!(held["state"], json!("reduced"), "{doc}");
    assert_eq!(held["oom"]["request_site"]["line"], json!(200), "{held}");
}

/// A program on the real torch (its CUDA driver calls simulated, `python/tests/
/// _simulated_cuda.py`) with sites on: keeps 1 GiB, makes a 4 GiB temporary in
/// `temporary()`, writes its channel's path to `argv[1]`, then runs until `argv[2]` exists.
const TORCH_SCRIPT: &str = r#"
import os, sys, time
sys.path[:0] = [os.path.join(sys.argv[3], "python"), os.path.join(sys.argv[3], "python", "tests")]
import torch
from _simulated_cuda import GIB, SimulatedCuda
import vramscope

cuda = SimulatedCuda(torch).install()
assert vramscope.start(framework="torch", sites=True, hz=10)

def temporary():
    address = cuda.alloc(4 * GIB)  # the site
    cuda.free(address=address)

kept = cuda.alloc(GIB)
temporary()
open(sys.argv[1] + ".tmp", "w").write(vramscope.channel_path())
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while not os.path.exists(sys.argv[2]):
    time.sleep(0.05)
vramscope.stop()
"#;

#[test]
fn the_python_writer_answers_a_request_with_a_snapshot_json_reduces_exactly() {
    let Some(python) = real_packages_python() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let channels = work.path().join("channels");
    let (ready, stop) = (work.path().join("ready"), work.path().join("stop"));
    let script = work.path().join("train.py");
    std::fs::write(&script, TORCH_SCRIPT).unwrap();
    let line = TORCH_SCRIPT
        .lines()
        .position(|l| l.contains("# the site"))
        .unwrap()
        + 1;
    let mut child = Command::new(&python)
        .arg(&script)
        .arg(&ready)
        .arg(&stop)
        .arg(env!("CARGO_MANIFEST_DIR"))
        .env("VRAMSCOPE_DIR", &channels)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let channel = loop {
        if let Ok(path) = std::fs::read_to_string(&ready) {
            break PathBuf::from(path);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the program never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    // What the `m` key does.
    assert_eq!(
        request_snapshot(&channel, vramscope::channel::euid()),
        Ok(1)
    );
    let requested = loop {
        let found = std::fs::read_dir(&channels)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .find(|n| n.ends_with("-request.pickle"));
        if let Some(name) = found {
            break name;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no snapshot answered the request"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let doc = scenario.json_reading(&channels);
    std::fs::write(&stop, "").unwrap();
    assert!(child.wait().unwrap().success());
    let a = allocator(&doc);
    assert_eq!(a["sites"], json!(true), "{a}");
    let snaps = a["snapshots"].as_array().unwrap();
    let s = snaps
        .iter()
        .find(|s| s["reason"] == json!("request"))
        .unwrap_or_else(|| panic!("{a}"));
    assert_eq!(s["name"], json!(requested));
    let sites = &s["sites"];
    assert_eq!(sites["state"], json!("reduced"), "{sites}");
    assert_eq!(sites["exactness"]["exactness"], json!("exact"), "{sites}");
    assert_eq!(sites["total_bytes"], json!(5 * GIB), "{sites}");
    let top = &sites["sites"][0];
    assert_eq!(
        (
            top["line"].clone(),
            top["function"].clone(),
            top["bytes"].clone()
        ),
        (json!(line), json!("temporary"), json!(4 * GIB)),
        "{sites}"
    );
}

/// Announces `name` as `announce` does, the writer having deleted `deleted` older files.
fn announce_deleted(writer: &mut Writer, name: &str, size: u64, deleted: u64) {
    writer.event(&EventFields {
        slot: Some(0),
        step: Some(40),
        args: [size, 6 * GIB, event::SNAPSHOT_PEAK, 2 * GIB, 1000, deleted],
        text: name,
        ..EventFields::new(EventKind::SnapshotWritten)
    });
}

#[test]
fn the_snapshots_the_writer_deleted_are_named_in_json_and_the_report() {
    if !python3_available() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let channels = work.path().join("channels");
    let mut w = writer(&channels, true);
    // Five dumps, the newest three kept: the first two were deleted as the writer went.
    let names: Vec<String> = (1..=5).map(|seq| snapshot_name(&w, seq, "peak")).collect();
    for (i, name) in names.iter().enumerate() {
        let size = make_snapshot(&channels.join(name), "peak");
        let deleted = (i as u64 + 1).saturating_sub(3);
        if deleted > 0 {
            std::fs::remove_file(channels.join(&names[deleted as usize - 1])).unwrap();
        }
        announce_deleted(&mut w, name, size, deleted);
    }
    let scenario = this_process_on_an_h100();
    let doc = scenario.json_reading(&channels);
    let dropped = &allocator(&doc)["snapshots_dropped"];
    assert_eq!(
        dropped,
        &json!({ "total": 2, "names": [names[0], names[1]], "unnamed": 0 }),
        "{doc}"
    );

    let recording = record(&scenario, &channels);
    let out = report(&[recording.to_str().unwrap(), "--history"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let want = format!(
        "the writer deleted 2 older snapshots (it keeps its newest few): {}, {}",
        names[0], names[1]
    );
    assert!(text.contains(&want), "{text}");
    let out = report(&[recording.to_str().unwrap(), "--history", "--json"]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = doc["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == json!(std::process::id()))
        .unwrap_or_else(|| panic!("{doc}"));
    assert_eq!(
        p["allocator"]["snapshots_dropped"]["names"],
        json!([names[0], names[1]]),
        "{doc}"
    );
}
