//! What `report`, `plot` and `export` cover of a recording: made by the real `vramscope
//! record` against the fake NVML while three writer processes (this test binary, run again)
//! publish through real channels. Two of them had published before the recording began: A
//! an OOM and a 30 GiB peak 47 s earlier, C (ended before the recording) an OOM and a 50 GiB
//! peak 15 minutes earlier (less on a machine up for less than that: the monotonic clock
//! starts at boot), which the recorder's first poll reads from their rings. During
//! the recording A (job `job-a`, GPU 0) has an OOM asking 4 GiB, then B (job `job-b`, GPU 1)
//! one asking 2 GiB.

mod common;

use common::wait::{wait_for_path, wait_until};
use common::{GIB, Scenario, h100, stderr, stdout};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;
use vramscope::channel::{
    DeviceFigures, DeviceIdentity, EventFields, EventKind as RawKind, Exit, SampleFields, Writer,
    WriterConfig, WriterKind, parse_uuid,
};
use vramscope::model::time::utc_label;
use vramscope::recording::Recording;

/// Set in a child run of this binary: `ROLE:CHANNELS:CONTROL`.
const CHILD: &str = "VRAMSCOPE_SCOPE_TEST_CHILD";
const MIN: u64 = 60_000_000_000;
const SEC: u64 = 1_000_000_000;

fn uuid(index: u32) -> String {
    format!("GPU-00000000-0000-0000-0000-00000000000{index}")
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only into `ts`, which outlives the call.
    assert_eq!(
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) },
        0
    );
    ts.tv_sec as u64 * SEC + ts.tv_nsec as u64
}

/// How far back C's history lies: 15 minutes, or less on a machine booted more recently, since
/// a monotonic time before boot does not exist (it once underflowed here on a fresh machine).
fn c_history_back_ns() -> u64 {
    (15 * MIN).min(monotonic_ns().saturating_sub(5 * SEC))
}

fn wall_ms() -> u64 {
    vramscope::model::now_ms()
}

/// An OOM event asking `requested` bytes, at `t_ns` (monotonic) or now.
fn oom(writer: &mut Writer, t_ns: Option<u64>, requested: u64, allocated: u64) {
    writer.event(&EventFields {
        t_ns,
        slot: Some(0),
        step: Some(7),
        args: [requested, GIB, 80 * GIB, allocated, allocated + GIB, 0],
        text: "backward",
        ..EventFields::new(RawKind::Oom)
    });
}

fn sample(writer: &mut Writer, t_ns: Option<u64>, allocated: u64, peak: u64) {
    writer.sample(&SampleFields {
        t_ns,
        slot: 0,
        allocated: Some(allocated),
        reserved: Some(allocated + GIB),
        peak: Some(peak),
        step: Some(7),
        ..SampleFields::default()
    });
}

/// What a child does: publish its history, say it is ready, publish its part of the
/// recording once told to go, and stay alive until told to stop.
fn child(role: &str, channels: &Path, control: &Path) {
    let (job, gpu) = match role {
        "a" | "c" => (format!("job-{role}"), 0),
        _ => ("job-b".to_string(), 1),
    };
    let mut writer = Writer::create(WriterConfig {
        framework: "scope-test 1.0".into(),
        job_id: job,
        dir: Some(channels.to_path_buf()),
        ..WriterConfig::from_process(WriterKind::Rust)
    })
    .expect("a channel");
    writer
        .add_device(DeviceIdentity {
            ordinal: 0,
            uuid: parse_uuid(&uuid(gpu)),
            pci_bus_id: None,
            total: Some(80 * GIB),
        })
        .expect("a slot");
    let now = monotonic_ns();
    let history = match role {
        "a" => Some((now.saturating_sub(47 * SEC), 30 * GIB, 8 * GIB)),
        "c" => Some((now - c_history_back_ns(), 50 * GIB, 16 * GIB)),
        _ => None,
    };
    if let Some((at, peak, asked)) = history {
        for i in 0..10 {
            let allocated = if i == 5 { peak } else { 10 * GIB };
            sample(&mut writer, Some(at + i * 20_000_000), allocated, allocated);
        }
        oom(&mut writer, Some(at + 250_000_000), asked, 10 * GIB);
    }
    writer.publish_device(
        0,
        &DeviceFigures {
            allocated: Some(10 * GIB),
            reserved: Some(11 * GIB),
            ..DeviceFigures::default()
        },
    );
    writer.status(Some(7), "forward");
    if role == "c" {
        writer
            .finish(Exit::Error("CUDA out of memory".into()))
            .expect("finish");
        std::fs::write(control.join("c.ready"), "").unwrap();
        return;
    }
    std::fs::write(control.join(format!("{role}.ready")), "").unwrap();
    wait_for_path(&control.join("go"), Duration::from_secs(60));
    // About a second of samples every 25 ms: A's OOM early, B's late.
    let (oom_at, allocated, asked) = match role {
        "a" => (12, 10 * GIB, 4 * GIB),
        _ => (32, 5 * GIB, 2 * GIB),
    };
    for i in 0..40 {
        let peak = if role == "a" && i == 10 {
            12 * GIB
        } else {
            allocated
        };
        sample(&mut writer, None, allocated, peak);
        writer.heartbeat();
        if i == oom_at {
            let at = wall_ms();
            oom(&mut writer, None, asked, allocated);
            std::fs::write(control.join(format!("{role}.oom")), at.to_string()).unwrap();
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    std::fs::write(control.join(format!("{role}.done")), "").unwrap();
    wait_for_path(&control.join("stop"), Duration::from_secs(120));
}

#[test]
fn scope_writer_child() {
    // In the parent's run this test does nothing; a child run plays one writer.
    if let Ok(spec) = std::env::var(CHILD) {
        let mut parts = spec.splitn(3, ':');
        let (role, channels, control) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
        );
        child(role, Path::new(channels), Path::new(control));
    }
}

fn spawn_child(role: &str, channels: &Path, control: &Path) -> std::process::Child {
    Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "scope_writer_child", "--test-threads=1"])
        .env(
            CHILD,
            format!("{role}:{}:{}", channels.display(), control.display()),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn a writer")
}

struct Made {
    _dir: tempfile::TempDir,
    _scenario: Scenario,
    file: PathBuf,
    started_ms: u64,
    pid_a: u32,
    pid_b: u32,
    oom_a_ms: u64,
    oom_b_ms: u64,
}

/// The recording, made once for every test here.
fn made() -> &'static Made {
    static MADE: OnceLock<Made> = OnceLock::new();
    MADE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let channels = dir.path().join("channels");
        let control = dir.path().join("control");
        std::fs::create_dir(&control).unwrap();
        std::fs::create_dir(&channels).unwrap();
        std::fs::set_permissions(&channels, std::fs::Permissions::from_mode(0o700)).unwrap();
        let a = spawn_child("a", &channels, &control);
        let b = spawn_child("b", &channels, &control);
        wait_for_path(&control.join("a.ready"), Duration::from_secs(60));
        wait_for_path(&control.join("b.ready"), Duration::from_secs(60));
        // Started last, C usually has the highest pid: its channel, read after A's (in
        // name order), holds the older history, so reading order is not time order.
        let mut c = spawn_child("c", &channels, &control);
        wait_for_path(&control.join("c.ready"), Duration::from_secs(60));
        assert!(c.wait().unwrap().success());
        let (pid_a, pid_b) = (a.id(), b.id());
        let mut gpu0 = h100(0);
        gpu0["processes"] =
            json!([{ "t": 0, "compute": [{ "pid": pid_a, "used_memory": 14 * GIB }] }]);
        let mut gpu1 = h100(1);
        gpu1["processes"] =
            json!([{ "t": 0, "compute": [{ "pid": pid_b, "used_memory": 6 * GIB }] }]);
        let scenario = Scenario::new(&json!({ "devices": [gpu0, gpu1] }));
        let file = dir.path().join("run.jsonl");
        let recorder = scenario
            .command()
            .env("VRAMSCOPE_DIR", &channels)
            .args(["--interval", "100ms", "record", "-o"])
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start vramscope record");
        // The first poll (the rings' history) before the writers go on.
        wait_until(
            "the recorder to read the channels",
            Duration::from_secs(30),
            || std::fs::read_to_string(&file).is_ok_and(|t| t.contains("\"channels\"")),
        );
        std::fs::write(control.join("go"), "").unwrap();
        wait_for_path(&control.join("a.done"), Duration::from_secs(60));
        wait_for_path(&control.join("b.done"), Duration::from_secs(60));
        // Two flushes' worth, so the last polls are in the file.
        std::thread::sleep(Duration::from_millis(1500));
        // SAFETY: sending SIGINT to our own child.
        assert_eq!(unsafe { libc::kill(recorder.id() as i32, libc::SIGINT) }, 0);
        let out = recorder.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        std::fs::write(control.join("stop"), "").unwrap();
        for mut writer in [a, b] {
            writer.wait().unwrap();
        }
        let read = |name: &str| -> u64 {
            std::fs::read_to_string(control.join(name))
                .unwrap()
                .parse()
                .unwrap()
        };
        Made {
            started_ms: Recording::open(&file).unwrap().header().started_ms,
            _dir: dir,
            _scenario: scenario,
            file,
            pid_a,
            pid_b,
            oom_a_ms: read("a.oom"),
            oom_b_ms: read("b.oom"),
        }
    })
}

fn vramscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vramscope"))
        .env_remove("VRAMSCOPE_FONT")
        .args(args)
        .output()
        .unwrap()
}

fn report_json(extra: &[&str]) -> Value {
    let m = made();
    let mut args = vec!["report", m.file.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    let out = vramscope(&args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Each OOM's requested bytes, in the report's order.
fn asked(doc: &Value) -> Vec<u64> {
    doc["ooms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["requested"].as_u64().unwrap())
        .collect()
}

fn oom_times(doc: &Value) -> Vec<u64> {
    doc["ooms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["at_ms"].as_u64().unwrap())
        .collect()
}

fn allocated_peak(doc: &Value, pid: u32) -> u64 {
    let process = doc["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == json!(pid))
        .unwrap_or_else(|| panic!("no pid {pid} in {doc:#}"));
    process["allocator"]["peak_allocated"]["bytes"]
        .as_u64()
        .unwrap()
}

#[test]
fn the_report_covers_what_happened_while_it_recorded_and_says_what_it_left_out() {
    let m = made();
    let doc = report_json(&[]);
    // Only the two OOMs of the recording, in the order they happened.
    assert_eq!(asked(&doc), [4 * GIB, 2 * GIB], "{doc:#}");
    assert!(oom_times(&doc).iter().all(|t| *t >= m.started_ms));
    // A's peak is the one it reached while recorded, not the 30 GiB of 47 s before.
    assert_eq!(allocated_peak(&doc, m.pid_a), 12 * GIB);
    let history = &doc["scope"]["ring_history"];
    assert_eq!(history["included"], json!(false));
    assert_eq!(history["ooms"], json!(2), "{doc:#}");
    assert_eq!(history["samples"], json!(20));
    let earliest = history["earliest_ms"].as_u64().unwrap();
    let before = m.started_ms - earliest;
    let back_ms = c_history_back_ns() / 1_000_000;
    assert!(
        (back_ms.saturating_sub(60_000)..back_ms + 60_000).contains(&before),
        "{before} ms before the recording, C's history lies {back_ms} ms back"
    );

    let out = vramscope(&["report", m.file.to_str().unwrap()]);
    let text = stdout(&out);
    let note = text
        .lines()
        .find(|l| l.starts_with("left out the channels' ring history"))
        .unwrap_or_else(|| panic!("no note of the history left out in {text}"));
    assert!(
        note.contains("20 allocator samples and 3 writer events (2 OOMs), from up to 15m")
            && note.ends_with("--history includes it"),
        "{note}"
    );
    assert!(!text.contains("asked for 8.00 GiB"), "{text}");
    assert!(!text.contains("asked for 16.0 GiB"), "{text}");
}

#[test]
fn history_includes_the_rings_earlier_figures_in_time_order() {
    let m = made();
    let doc = report_json(&["--history"]);
    assert_eq!(
        asked(&doc),
        [16 * GIB, 8 * GIB, 4 * GIB, 2 * GIB],
        "{doc:#}"
    );
    let times = oom_times(&doc);
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    let spikes: Vec<u64> = doc["spikes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["at_ms"].as_u64().unwrap())
        .collect();
    assert!(spikes.windows(2).all(|w| w[0] <= w[1]), "{spikes:?}");
    assert_eq!(allocated_peak(&doc, m.pid_a), 30 * GIB);
    assert_eq!(doc["scope"]["ring_history"]["included"], json!(true));
    let text = stdout(&vramscope(&[
        "report",
        m.file.to_str().unwrap(),
        "--history",
    ]));
    assert!(
        text.contains("includes the channels' ring history from before the recording began: 20 allocator samples and 3 writer events (2 OOMs)"),
        "{text}"
    );
}

#[test]
fn since_and_until_select_a_window_relative_or_absolute() {
    let m = made();
    let middle = (m.oom_a_ms + m.oom_b_ms) / 2;
    assert!(
        m.oom_a_ms + 100 < m.oom_b_ms,
        "{} {}",
        m.oom_a_ms,
        m.oom_b_ms
    );
    // Relative to the start, in seconds.
    let after = format!("{:.3}", (middle - m.started_ms) as f64 / 1000.0);
    let doc = report_json(&["--since", &after]);
    assert_eq!(asked(&doc), [2 * GIB], "{doc:#}");
    assert_eq!(doc["scope"]["since_ms"], json!(middle));
    // No ring history falls in that window: none is said to be left out.
    assert_eq!(doc["scope"]["ring_history"]["samples"], json!(0));
    assert_eq!(doc["scope"]["ring_history"]["ooms"], json!(0));
    // Absolute, as the report itself prints times.
    let label = utc_label(middle);
    let doc = report_json(&["--until", &label]);
    assert_eq!(asked(&doc), [4 * GIB], "{doc:#}");
    assert!(doc["last_ms"].as_u64().unwrap() <= middle, "{doc:#}");
    let rfc3339 = label.replacen(' ', "T", 1).replace(" UTC", "Z");
    let doc = report_json(&["--until", &rfc3339, "--since", "0s"]);
    assert_eq!(asked(&doc), [4 * GIB], "{doc:#}");
    // Bad input: one line, status 2.
    for (option, value) in [("--since", "soon"), ("--until", "25:61")] {
        let out = vramscope(&["report", m.file.to_str().unwrap(), option, value]);
        assert_eq!(out.status.code(), Some(2));
        let err = stderr(&out);
        assert!(err.contains("is not a time (try 30s"), "{err}");
    }
    let out = vramscope(&[
        "report",
        m.file.to_str().unwrap(),
        "--since",
        "10s",
        "--until",
        "5s",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--until") && err.contains("is before --since"),
        "{err}"
    );
}

#[test]
fn pid_and_job_select_processes_and_the_gpus_they_used() {
    let m = made();
    let gpus = |doc: &Value| -> Vec<u64> {
        doc["gpus"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["index"].as_u64().unwrap())
            .collect()
    };
    let pids = |doc: &Value| -> Vec<u64> {
        doc["processes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["pid"].as_u64().unwrap())
            .collect()
    };
    let all = report_json(&[]);
    assert_eq!(gpus(&all), [0, 1]);
    let doc = report_json(&["--job", "job-b"]);
    assert_eq!(asked(&doc), [2 * GIB], "{doc:#}");
    assert_eq!(gpus(&doc), [1]);
    assert_eq!(pids(&doc), [u64::from(m.pid_b)]);
    let doc = report_json(&["--pid", &m.pid_a.to_string()]);
    assert_eq!(asked(&doc), [4 * GIB], "{doc:#}");
    assert_eq!(gpus(&doc), [0]);
    assert_eq!(pids(&doc), [u64::from(m.pid_a)]);
    let doc = report_json(&["--pid", &m.pid_a.to_string(), "--pid", &m.pid_b.to_string()]);
    assert_eq!(asked(&doc), [4 * GIB, 2 * GIB], "{doc:#}");
    // The ended writer's history is its job's, under --history only.
    let doc = report_json(&["--job", "job-c", "--history"]);
    assert_eq!(asked(&doc), [16 * GIB], "{doc:#}");
    let out = vramscope(&["report", m.file.to_str().unwrap(), "--pid", "1"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("no process in it matches --pid 1"), "{err}");
    // A job id is anyone's text: it comes back cleaned.
    let out = vramscope(&[
        "report",
        m.file.to_str().unwrap(),
        "--job",
        "x\u{1b}[31m\u{202e}",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("matches --job x") && !err.contains('\u{1b}') && !err.contains('\u{202e}'),
        "{err:?}"
    );
}

/// The SVG's texts.
fn plot_texts(extra: &[&str]) -> (Vec<String>, String) {
    let m = made();
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("t.svg");
    let mut args = vec![
        "plot",
        m.file.to_str().unwrap(),
        "-o",
        svg.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = vramscope(&args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    let text = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    let texts = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or_default().trim().to_string())
        .collect();
    (texts, stderr(&out))
}

/// The plot's span, from its `… UTC (15m 02s) · 2 charts` subtitle.
fn span(texts: &[String]) -> String {
    let subtitle = texts
        .iter()
        .find(|t| t.contains(" UTC ("))
        .unwrap_or_else(|| panic!("no span in {texts:#?}"));
    subtitle[subtitle.find(" UTC (").unwrap() + 6..]
        .split(')')
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn the_plot_covers_the_recording_by_default_and_history_or_a_job_when_asked() {
    let (texts, err) = plot_texts(&[]);
    let seconds: u64 = span(&texts)
        .trim_end_matches('s')
        .parse()
        .unwrap_or_else(|_| panic!("a span of seconds, not {}", span(&texts)));
    assert!(seconds < 60, "{seconds}");
    assert!(
        texts.iter().any(|t| t.starts_with("OOM: asked 4.00 GiB")),
        "{texts:#?}"
    );
    assert!(
        !texts.iter().any(|t| t.starts_with("OOM: asked 16.0 GiB")),
        "{texts:#?}"
    );
    assert!(
        !texts.iter().any(|t| t.starts_with("peak 30.0 GiB")),
        "{texts:#?}"
    );
    assert!(
        err.contains("vramscope: left out the channels' ring history")
            && err.contains("--history includes it"),
        "{err}"
    );

    let (texts, _) = plot_texts(&["--history"]);
    assert!(span(&texts).starts_with("15m"), "{}", span(&texts));
    assert!(
        texts.iter().any(|t| t.starts_with("peak 30.0 GiB")),
        "{texts:#?}"
    );
    assert!(
        texts.iter().any(|t| t.starts_with("OOM: asked 16.0 GiB")),
        "{texts:#?}"
    );

    let (texts, _) = plot_texts(&["--job", "job-b"]);
    assert!(texts.iter().any(|t| t.starts_with("GPU 1 ·")), "{texts:#?}");
    assert!(
        !texts.iter().any(|t| t.starts_with("GPU 0 ·")),
        "{texts:#?}"
    );
    assert!(
        texts.iter().any(|t| t.starts_with("OOM: asked 2.00 GiB")),
        "{texts:#?}"
    );
    assert!(
        !texts.iter().any(|t| t.starts_with("OOM: asked 4.00 GiB")),
        "{texts:#?}"
    );
}

/// The rows of `export`, with its standard error.
fn export(extra: &[&str]) -> (Vec<Vec<String>>, String) {
    let m = made();
    let mut args = vec!["export", m.file.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = vramscope(&args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    let rows = stdout(&out)
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    (rows, stderr(&out))
}

fn exported_ooms(rows: &[Vec<String>]) -> Vec<u64> {
    let mut ooms: Vec<(u64, u64)> = rows
        .iter()
        .filter(|r| r[4] == "oom_requested")
        .map(|r| (r[0].parse().unwrap(), r[5].parse().unwrap()))
        .collect();
    ooms.sort();
    ooms.into_iter().map(|(_, bytes)| bytes).collect()
}

#[test]
fn export_writes_the_same_scope() {
    let m = made();
    let (rows, err) = export(&[]);
    assert_eq!(exported_ooms(&rows), [4 * GIB, 2 * GIB]);
    let earliest: u64 = rows
        .iter()
        .map(|r| r[0].parse::<u64>().unwrap())
        .min()
        .unwrap();
    assert!(earliest >= m.started_ms, "{earliest} < {}", m.started_ms);
    assert!(err.contains("left out the channels' ring history"), "{err}");

    let (rows, _) = export(&["--history"]);
    assert_eq!(exported_ooms(&rows), [16 * GIB, 8 * GIB, 4 * GIB, 2 * GIB]);

    let middle = utc_label((m.oom_a_ms + m.oom_b_ms) / 2);
    let (rows, _) = export(&["--since", &middle]);
    assert_eq!(exported_ooms(&rows), [2 * GIB]);
    let (rows, _) = export(&["--pid", &m.pid_a.to_string()]);
    assert_eq!(exported_ooms(&rows), [4 * GIB]);
    // Only A's rows and GPU 0's.
    let b = m.pid_b.to_string();
    assert!(
        rows.iter().all(|r| r[3] != b && r[2] != "1"),
        "B or GPU 1 in --pid A"
    );
    assert!(rows.iter().any(|r| r[1] == "gpu" && r[2] == "0"));
}

/// Replay's `p` and `o` jump to moments of the recording: not to a writer's peak or OOMs from
/// its ring history, which the first poll brought at 0 % of the file (29 §1.5).
#[test]
fn replay_marks_are_of_what_happened_while_it_recorded() {
    use vramscope::replay::{Command as Key, Replay};
    let m = made();
    let mut replay = Replay::open(&m.file).expect("open the recording");
    let mut monitor = replay.fresh_monitor();
    let said = replay
        .command(Key::LargestPeak, &mut monitor)
        .unwrap_or_default();
    assert!(
        said.contains("12.0 GiB") && !said.contains("30.0 GiB") && !said.contains("50.0 GiB"),
        "the peak A reached while recorded: {said}"
    );
    assert!(replay.now_ms() >= m.started_ms, "{said}");
    // Each OOM mark in turn: the two of the recording, none of C's or A's earlier ones.
    let mut said_ooms = Vec::new();
    for _ in 0..4 {
        let said = replay
            .command(Key::NextOom, &mut monitor)
            .unwrap_or_default();
        if said_ooms.contains(&said) {
            break;
        }
        said_ooms.push(said);
    }
    let asked: Vec<&String> = said_ooms.iter().filter(|s| s.contains("GiB")).collect();
    assert!(
        asked
            .iter()
            .all(|s| !s.contains("16.0 GiB") && !s.contains("8.00 GiB")),
        "{said_ooms:?}"
    );
}
