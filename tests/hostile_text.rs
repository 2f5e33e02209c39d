//! Text that other people write reaches no output raw. A process renamed by bash's
//! `exec -a` with a clipboard write (OSC 52), a screen clear and a right-to-left override, a
//! GPU whose name sets the window title, a channel whose job, command and phase carry escapes
//! and bidi isolates, and a recording whose host name does: through the TUI (in tmux, live
//! and replaying), `--once`, `--csv`, `--json`, `report` (text, Markdown, JSON), `export`,
//! `plot` (SVG) and `/metrics` (text and OpenMetrics), each shows the text with the
//! dangerous characters withheld (U+FFFD) and nothing else of it lost.

mod common;
mod serve_support;

use common::tmux::{self, Tmux};
use common::*;
use serde_json::{Value, json};
use serve_support::{PROMETHEUS_ACCEPT, Served, get};
use std::path::PathBuf;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};
use vramscope::channel::{DeviceFigures, DeviceIdentity, Writer, WriterConfig, WriterKind};

/// A clipboard write, a screen clear and a right-to-left override, as `exec -a` sets them.
const ARGV0: &str = "\u{1b}]52;c;aGk=\u{7}\u{1b}[2J\u{202e}evil";
/// What any output shows of it: each escape, BEL and the override withheld.
const ARGV0_SHOWN: &str = "\u{FFFD}]52;c;aGk=\u{FFFD}\u{FFFD}[2J\u{FFFD}evil";
/// A GPU name that sets the window title and opens an isolate.
const GPU_NAME: &str = "NVIDIA\u{1b}]0;pwned\u{7} H100\u{2066}";
const GPU_NAME_SHOWN: &str = "NVIDIA\u{FFFD}]0;pwned\u{FFFD} H100\u{FFFD}";
/// Channel strings: a job id with a C1 CSI, a phase with a line break and an override.
const JOB: &str = "job\u{9b}31m-7\u{200f}";
const JOB_SHOWN: &str = "job\u{FFFD}31m-7\u{FFFD}";
const PHASE: &str = "fwd\nFAKE,LINE\u{202d}";
const PHASE_SHOWN: &str = "fwd FAKE,LINE\u{FFFD}";
/// The recording's host name, as a hand-edited recording may hold it.
const HOST: &str = "node\u{1b}[31m\u{2067}7";
const HOST_SHOWN: &str = "node\u{FFFD}[31m\u{FFFD}7";

/// The one rule every output must keep: no control character but the line ends of its own
/// format, and no bidirectional formatting character.
fn assert_clean(what: &str, text: &str) {
    for (at, c) in text.char_indices() {
        let bidi = matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        assert!(
            !(bidi || (c.is_control() && c != '\n')),
            "{what}: U+{:04X} at byte {at} in:\n{}",
            c as u32,
            text.escape_debug()
        );
    }
}

/// `text` is clean and shows every one of `shown`.
fn assert_shows(what: &str, text: &str, shown: &[&str]) {
    assert_clean(what, text);
    for s in shown {
        assert!(
            text.contains(s),
            "{what} lacks {}:\n{}",
            s.escape_debug(),
            text.escape_debug()
        );
    }
}

/// A `sleep` renamed with `exec -a`, NVML listing it and this test process on one GPU
/// with a hostile name, and a channel of this process with hostile strings.
struct Hostile {
    scenario: Scenario,
    channels: PathBuf,
    renamed: Child,
    writer: Option<Writer>,
}

impl Hostile {
    fn new() -> Self {
        let renamed = Command::new("bash")
            .arg("-c")
            .arg(format!("exec -a $'{}' sleep 100", bash_quoted(ARGV0)))
            .spawn()
            .expect("bash");
        let pid = renamed.id();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| c.starts_with(ARGV0.as_bytes()))
        {
            assert!(Instant::now() < deadline, "exec -a never took effect");
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut gpu = h100(0);
        gpu["name"] = json!(GPU_NAME);
        gpu["processes"] = json!([{ "t": 0, "compute": [
            { "pid": pid, "used_memory": 5 * GIB },
            { "pid": std::process::id(), "used_memory": 7 * GIB }
        ] }]);
        let scenario = Scenario::new(&json!({ "devices": [gpu] }));
        let channels = scenario.dir().join("channels");
        let mut writer = Writer::create(WriterConfig {
            job_id: JOB.into(),
            cmdline: format!("python {ARGV0}"),
            dir: Some(channels.clone()),
            ..WriterConfig::from_process(WriterKind::Rust)
        })
        .expect("channel");
        writer
            .add_device(DeviceIdentity {
                ordinal: 0,
                uuid: vramscope::channel::parse_uuid("GPU-00000000-0000-0000-0000-000000000000"),
                pci_bus_id: None,
                total: Some(80 * GIB),
            })
            .expect("slot");
        writer.publish_device(
            0,
            &DeviceFigures {
                allocated: Some(3 * GIB),
                reserved: Some(4 * GIB),
                ..DeviceFigures::default()
            },
        );
        writer.status(Some(5), PHASE);
        Hostile {
            scenario,
            channels,
            renamed,
            writer: Some(writer),
        }
    }

    fn command(&self) -> Command {
        let mut cmd = self.scenario.command();
        cmd.env("VRAMSCOPE_DIR", &self.channels);
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        let out = self.command().args(args).output().expect("vramscope");
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        out
    }

    /// Runs until the renamed process, the GPU and the channel all show.
    fn run_until_complete(&self, args: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let text = stdout(&self.run(args));
            if text.contains("evil") && text.contains("pwned") && text.contains("FAKE") {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "{args:?} never complete:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// A recording of all of it whose header's host name is then made hostile too.
    fn recording(&self) -> PathBuf {
        let path = self.scenario.dir().join("hostile.jsonl");
        self.run(
            &["record", "--interval", "0.2", "--duration", "2s", "-o"]
                .into_iter()
                .chain([path.to_str().expect("utf-8 path")])
                .collect::<Vec<_>>(),
        );
        let text = std::fs::read_to_string(&path).expect("recording");
        let (first, rest) = text.split_once('\n').expect("header line");
        let mut header: Value = serde_json::from_str(first).expect("header");
        header["host"] = json!(HOST);
        std::fs::write(&path, format!("{header}\n{rest}")).expect("rewrite");
        assert!(
            rest.contains("\\u001b]52"),
            "the recording holds the raw name"
        );
        path
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        let _ = self.renamed.kill();
        let _ = self.renamed.wait();
        if let Some(w) = self.writer.take() {
            let _ = w.finish(vramscope::channel::Exit::Clean);
        }
    }
}

/// `text` inside bash's `$'...'`.
fn bash_quoted(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\'' | '\\' => format!("\\{c}"),
            c if c.is_ascii_graphic() || c == ' ' => c.to_string(),
            c if (c as u32) < 0x80 => format!("\\x{:02x}", c as u32),
            c => format!("\\u{:04x}", c as u32),
        })
        .collect()
}

#[test]
fn one_shot_outputs_show_foreign_text_withheld() {
    let h = Hostile::new();
    let all = [ARGV0_SHOWN, GPU_NAME_SHOWN, PHASE_SHOWN];
    let table = h.run_until_complete(&["--once"]);
    assert_shows("--once", &table, &all);
    let csv = h.run_until_complete(&["--csv"]);
    assert_shows("--csv", &csv, &all);
    // The phase's line break is a space: no forged CSV row.
    assert!(!csv.lines().any(|l| l.starts_with("FAKE")), "{csv}");
    let json = h.run_until_complete(&["--json"]);
    assert_shows("--json", &json, &[]);
    let parsed: Value = serde_json::from_str(&json).expect("--json parses");
    let strings = strings_in(&parsed);
    for shown in all.iter().chain([&JOB_SHOWN]) {
        assert!(
            strings.iter().any(|s| s.contains(shown)),
            "{shown:?} in {strings:?}"
        );
    }
}

/// An NVML problem is said on stderr before the monitor has ingested anything: the driver's
/// words (here the loader's, which quote the library path) are cleaned there too.
#[test]
fn an_nvml_problem_said_before_any_sample_shows_foreign_text_withheld() {
    let work = tempfile::tempdir().expect("tempdir");
    let library = work.path().join(format!("{ARGV0}.so"));
    let recording = work.path().join("run.jsonl");
    let recording = recording.to_str().expect("utf-8 path");
    let runs: [&[&str]; 4] = [
        &["--once"],
        &["--json"],
        &["--csv"],
        &["record", "--duration", "1s", "-o", recording],
    ];
    for args in runs {
        let out = Command::new(env!("CARGO_BIN_EXE_vramscope"))
            .args(args)
            .arg("--nvml-lib")
            .arg(&library)
            .env("VRAMSCOPE_DIR", work.path().join("channels"))
            .output()
            .expect("run vramscope");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.contains("library not found"), "{args:?}: {said}");
        assert_shows(&format!("{args:?} stderr"), &said, &[ARGV0_SHOWN]);
    }
}

#[test]
fn reports_exports_and_plots_of_a_hostile_recording_show_it_withheld() {
    let h = Hostile::new();
    let recording = h.recording();
    let file = recording.to_str().expect("utf-8 path");
    let shown = [ARGV0_SHOWN, HOST_SHOWN];
    let text = stdout(&h.run(&["report", file]));
    assert_shows("report", &text, &shown);
    let markdown = stdout(&h.run(&["report", "--markdown", file]));
    // Markdown shows foreign text as literal Markdown: its brackets escaped.
    let escaped = shown.map(|s| s.replace('[', "\\[").replace(']', "\\]"));
    assert_shows(
        "report --markdown",
        &markdown,
        &escaped.each_ref().map(String::as_str),
    );
    let json = stdout(&h.run(&["report", "--json", file]));
    assert_shows("report --json", &json, &[]);
    let strings = strings_in(&serde_json::from_str(&json).expect("report --json parses"));
    for s in shown {
        assert!(
            strings.iter().any(|t| t.contains(s)),
            "{s:?} in {strings:?}"
        );
    }
    let csv = stdout(&h.run(&["export", file]));
    assert_clean("export", &csv);
    let svg = h.scenario.dir().join("hostile.svg");
    h.run(&["plot", file, "-o", svg.to_str().expect("utf-8 path")]);
    let svg = std::fs::read_to_string(&svg).expect("svg");
    assert_shows("plot", &svg, &[HOST_SHOWN.trim_end_matches('7')]);

    // A damaged line whose error quotes the file's text: the damage named is clean too.
    let mut damaged = std::fs::read_to_string(&recording).expect("recording");
    damaged.push_str("{\"t\":1,\"nvml_unavailable\":{\"kind\":\"\\u001b]0;x\\u0007\"}}\n");
    std::fs::write(&recording, damaged).expect("damage");
    for args in [
        &["report", file][..],
        &["export", file],
        &["report", "--json", file],
    ] {
        let out = h.command().args(args).output().expect("vramscope");
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        let said = format!("{}{}", stdout(&out), stderr(&out));
        assert_shows(
            &format!("{args:?} on damage"),
            &said,
            &["\u{FFFD}]0;x\u{FFFD}"],
        );
    }
}

#[test]
fn metrics_label_values_show_foreign_text_withheld() {
    let h = Hostile::new();
    let served = Served::spawn({
        let mut cmd = h.command();
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--interval", "250ms"]);
        cmd
    });
    let text = served.scrape_until(Duration::from_secs(20), |t| {
        t.contains("evil") && t.contains("31m-7")
    });
    assert_shows("/metrics", &text, &[ARGV0_SHOWN, GPU_NAME_SHOWN, JOB_SHOWN]);
    let om = get(&served.url("/metrics"), Some(PROMETHEUS_ACCEPT));
    assert!(
        om.content_type.contains("openmetrics"),
        "{}",
        om.content_type
    );
    assert_shows(
        "/metrics (OpenMetrics)",
        &om.body,
        &[ARGV0_SHOWN, GPU_NAME_SHOWN, JOB_SHOWN],
    );
}

#[test]
fn the_tui_shows_foreign_text_withheld_and_keeps_its_title_and_clipboard() {
    if !tmux::available() {
        return;
    }
    let h = Hostile::new();
    let cmd = format!(
        "env FAKE_NVML_SCENARIO={} VRAMSCOPE_DIR={} {} --nvml-lib {}",
        h.scenario.path.display(),
        h.channels.display(),
        env!("CARGO_BIN_EXE_vramscope"),
        fake_nvml().display()
    );
    let t = Tmux::start(h.scenario.dir(), 160, 40, &cmd);
    t.tmux(&["set-option", "-g", "set-clipboard", "on"]);
    let (ok, screen) = t.wait_for(Duration::from_secs(10), |s| {
        s.contains("]52;c;aGk=") && s.contains("]0;pwned")
    });
    assert!(ok, "the escapes shown as text, not obeyed:\n{screen}");
    assert!(
        !screen.contains("\u{202e}") && !screen.contains("\u{2066}"),
        "{screen}"
    );
    assert_ne!(t.pane("pane_title"), "pwned", "the GPU name set the title");
    let buffers = t.tmux(&["list-buffers"]);
    assert!(buffers.is_empty(), "OSC 52 wrote the clipboard: {buffers}");
    t.keys(&["q"]);
}

#[test]
fn a_replay_of_a_hostile_recording_shows_it_withheld() {
    if !tmux::available() {
        return;
    }
    let h = Hostile::new();
    let recording = h.recording();
    let cmd = format!(
        "{} replay {}",
        env!("CARGO_BIN_EXE_vramscope"),
        recording.display()
    );
    let t = Tmux::start(h.scenario.dir(), 160, 40, &cmd);
    let (ok, screen) = t.wait_for(Duration::from_secs(10), |s| {
        s.contains("]52;c;aGk=") && s.contains("]0;pwned")
    });
    assert!(ok, "the recorded escapes shown as text:\n{screen}");
    assert!(
        !screen.contains('\u{202e}') && !screen.contains('\u{2066}'),
        "{screen}"
    );
    assert_ne!(t.pane("pane_title"), "pwned", "the GPU name set the title");
    t.keys(&["q"]);
}

/// Every string in a JSON document.
fn strings_in(value: &Value) -> Vec<String> {
    match value {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items.iter().flat_map(strings_in).collect(),
        Value::Object(map) => map
            .iter()
            .flat_map(|(k, v)| std::iter::once(k.clone()).chain(strings_in(v)))
            .collect(),
        _ => Vec::new(),
    }
}
