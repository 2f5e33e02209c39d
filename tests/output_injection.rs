//! Foreign text cannot forge structure in the formats meant for other programs: a command
//! line that a spreadsheet would run as a formula reaches `--csv` defused (a leading `'`),
//! and a GPU name or command holding `|`, backticks or link syntax cannot add a column or a
//! code span to `report --markdown`.

mod common;

use common::*;
use serde_json::json;
use std::path::Path;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

/// A command line that runs in a spreadsheet, as `exec -a` sets it.
const FORMULA: &str = "=HYPERLINK(\"http://evil/\",\"x\")";
/// A GPU name with a table separator, a code span and a link.
const GPU_NAME: &str = "H100 | forged | `x` [a](http://e)";

struct Renamed(Child);

impl Renamed {
    fn start() -> Self {
        let child = Command::new("bash")
            .arg("-c")
            .arg(format!("exec -a '{FORMULA}' sleep 100"))
            .spawn()
            .expect("bash");
        let pid = child.id();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| c.starts_with(FORMULA.as_bytes()))
        {
            assert!(Instant::now() < deadline, "exec -a never took effect");
            std::thread::sleep(Duration::from_millis(20));
        }
        Renamed(child)
    }
}

impl Drop for Renamed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn scenario(pid: u32) -> Scenario {
    let mut gpu = h100(0);
    gpu["name"] = json!(GPU_NAME);
    gpu["processes"] = json!([{ "t": 0, "compute": [{ "pid": pid, "used_memory": 5 * GIB }] }]);
    Scenario::new(&json!({ "devices": [gpu] }))
}

fn run(scenario: &Scenario, args: &[&str]) -> Output {
    let out = scenario
        .command()
        .env("VRAMSCOPE_DIR", scenario.dir().join("channels"))
        .args(args)
        .output()
        .expect("vramscope");
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    out
}

/// One CSV record's cells, read as RFC 4180 says (quotes doubled inside quoted cells).
fn cells(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                out.last_mut().unwrap().push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(String::new()),
            (c, _) => out.last_mut().unwrap().push(c),
        }
    }
    out
}

#[test]
fn csv_defuses_a_command_a_spreadsheet_would_run() {
    let renamed = Renamed::start();
    let scenario = scenario(renamed.0.id());
    let deadline = Instant::now() + Duration::from_secs(20);
    let row = loop {
        let csv = stdout(&run(&scenario, &["--csv"]));
        if let Some(row) = csv.lines().find(|l| l.contains("HYPERLINK")) {
            break cells(row);
        }
        assert!(Instant::now() < deadline, "no process row:\n{csv}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        row.iter()
            .any(|cell| cell.starts_with(&format!("'{FORMULA}"))),
        "{row:?}"
    );
    for cell in &row {
        assert!(
            !cell.starts_with(['=', '+', '@', '\t', '\r']),
            "a cell a spreadsheet would run: {cell:?} in {row:?}"
        );
    }
}

fn record(scenario: &Scenario, path: &Path) {
    run(
        scenario,
        &[
            "record",
            "--interval",
            "0.2",
            "--duration",
            "2s",
            "-o",
            path.to_str().expect("utf-8 path"),
        ],
    );
}

/// The cells of a Markdown table row, split where GitHub and CommonMark split them: at
/// every `|` not escaped by a backslash.
fn markdown_cells(row: &str) -> usize {
    let mut count = 0;
    let mut escaped = false;
    for c in row.trim().trim_matches('|').chars() {
        match (c, escaped) {
            ('\\', false) => escaped = true,
            ('|', false) => count += 1,
            _ => escaped = false,
        }
    }
    count + 1
}

#[test]
fn markdown_report_escapes_table_and_inline_syntax_in_foreign_text() {
    let renamed = Renamed::start();
    let scenario = scenario(renamed.0.id());
    let path = scenario.dir().join("run.jsonl");
    record(&scenario, &path);
    let report = stdout(&run(
        &scenario,
        &["report", "--markdown", path.to_str().expect("utf-8 path")],
    ));
    let header = report
        .lines()
        .find(|l| l.starts_with("| GPU |"))
        .unwrap_or_else(|| panic!("no GPU table:\n{report}"));
    let row = report
        .lines()
        .find(|l| l.starts_with("| 0 |"))
        .unwrap_or_else(|| panic!("no GPU 0 row:\n{report}"));
    assert_eq!(markdown_cells(row), markdown_cells(header), "{row}");
    assert!(
        row.contains("H100 \\| forged \\| \\`x\\` \\[a\\]\\(http://e\\)"),
        "{row}"
    );
    let process = report
        .lines()
        .find(|l| l.contains("HYPERLINK"))
        .unwrap_or_else(|| panic!("no process line:\n{report}"));
    assert!(
        process.contains("=HYPERLINK\\(\"http://evil/\",\"x\"\\)"),
        "{process}"
    );
    // Plain text is for a terminal: shown as it is, with nothing escaped.
    let plain = stdout(&run(
        &scenario,
        &["report", path.to_str().expect("utf-8 path")],
    ));
    assert!(plain.contains(GPU_NAME), "{plain}");
    // `export` writes numbers and its own words only: the hostile command is in no cell.
    let csv = stdout(&run(
        &scenario,
        &["export", path.to_str().expect("utf-8 path")],
    ));
    assert!(csv.lines().count() > 1, "{csv}");
    for line in csv.lines() {
        assert!(
            !line.contains("HYPERLINK")
                && cells(line).iter().all(|c| !c.starts_with(['=', '+', '@'])),
            "{line}"
        );
    }
}
