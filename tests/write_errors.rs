//! Every command that writes to standard output ends the same way when it cannot: a pipe
//! whose reader has gone (`| head`) is a quiet exit with status 0, and any other write error
//! (here `/dev/full`) is one line on standard error and status 1; never a panic (status 101)
//! and never a 0 with nothing written; nor is no standard output at all (`>&-`). `--help`,
//! `--version` and `clean` print too.

mod common;
mod recording_fixture;

use common::*;
use std::fs::OpenOptions;
use std::process::{Command, Output, Stdio};
use vramscope::channel::{Writer, WriterConfig, WriterKind};

/// A running GPU with nothing unusual.
fn scenario() -> Scenario {
    Scenario::new(&serde_json::json!({ "devices": [h100(0)] }))
}

/// Runs `cmd` with standard output on `/dev/full`.
fn to_full_disk(mut cmd: Command) -> Output {
    let full = OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    cmd.stdout(full).stderr(Stdio::piped());
    cmd.output().expect("run vramscope")
}

/// Runs `cmd` with standard output on a pipe whose reading end is already closed.
fn to_closed_pipe(mut cmd: Command) -> Output {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    cmd.stdout(writer).stderr(Stdio::piped());
    cmd.output().expect("run vramscope")
}

/// Runs `cmd` with no standard output at all (`>&-`).
fn to_closed_stdout(mut cmd: Command) -> Output {
    use std::os::unix::process::CommandExt;
    cmd.stderr(Stdio::piped());
    // SAFETY: only close(2), which is async-signal-safe, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::close(1);
            Ok(())
        });
    }
    cmd.output().expect("run vramscope")
}

fn assert_full_disk_is_one_line_and_a_failure(what: &str, out: &Output) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "{what}: {err}");
    assert_eq!(err.lines().count(), 1, "{what}: one line: {err}");
    assert!(
        err.starts_with("vramscope: ") && err.contains("No space left on device"),
        "{what}: {err}"
    );
}

fn assert_closed_pipe_is_quiet(what: &str, out: &Output) {
    assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr(out));
    assert_eq!(stderr(out), "", "{what}: nothing said");
}

/// Each command, built afresh for each kind of failure.
fn commands(scenario: &Scenario, recording: &str, channel: &str) -> Vec<(String, Command)> {
    let live: [&[&str]; 5] = [
        &["--once"],
        &["--json"],
        &["--csv"],
        &["--json", "--loop", "0.2"],
        &["--csv", "--loop", "0.2"],
    ];
    let files: [&[&str]; 9] = [
        &["--help"],
        &["clean"],
        &["report", "--help"],
        &["--version"],
        &["report", recording],
        &["report", "--markdown", recording],
        &["report", "--json", recording],
        &["export", recording],
        &["inspect", channel],
    ];
    live.iter()
        .chain(files.iter())
        .map(|args| {
            let mut cmd = scenario.command();
            cmd.args(*args);
            (args.join(" "), cmd)
        })
        .collect()
}

#[test]
fn every_printing_command_fails_in_one_line_on_a_full_disk_or_without_stdout_and_quietly_on_a_closed_pipe()
 {
    let scenario = scenario();
    let recording = scenario.dir().join("run.jsonl");
    recording_fixture::write_recording(&recording);
    let writer = Writer::create(WriterConfig {
        dir: Some(scenario.dir().join("channels")),
        ..WriterConfig::from_process(WriterKind::Rust)
    })
    .expect("channel");
    let recording = recording.to_str().expect("utf-8 path").to_string();
    let channel = writer.path().to_str().expect("utf-8 path").to_string();
    for (what, cmd) in commands(&scenario, &recording, &channel) {
        assert_full_disk_is_one_line_and_a_failure(&what, &to_full_disk(cmd));
    }
    for (what, cmd) in commands(&scenario, &recording, &channel) {
        assert_closed_pipe_is_quiet(&what, &to_closed_pipe(cmd));
    }
    // Issue 28 §1.7: `>&-` printed nothing and exited 0.
    for (what, cmd) in commands(&scenario, &recording, &channel) {
        let out = to_closed_stdout(cmd);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{what}: {err}");
        assert_eq!(err.lines().count(), 1, "{what}: one line: {err}");
        assert!(
            err.starts_with("vramscope: ") && err.trim_end().ends_with(": it is closed"),
            "{what}: {err}"
        );
    }
    drop(writer);
}
