//! Shared by the attach tests: the busy loop they attach to, its process held by a guard that
//! kills it when the test ends, passed or failed (a panic mid-test once left busy loops
//! running for an hour), and the checks that it is running, untraced, and unchanged.

#![allow(
    dead_code,
    reason = "shared by several test crates, each of which uses a different part"
)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// A child process killed and reaped when dropped, unless `finish` reaped it first.
pub struct Guard(Option<Child>);

impl Guard {
    pub fn new(child: Child) -> Guard {
        Guard(Some(child))
    }

    pub fn id(&self) -> u32 {
        self.0.as_ref().map(Child::id).unwrap_or(0)
    }

    pub fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("the child was already reaped")
    }

    /// Creates `stop`, waits for the loop to end, and returns its stdout, stderr and status.
    pub fn finish(mut self, stop: &Path) -> (String, String, i32) {
        std::fs::write(stop, "").unwrap();
        let mut child = self.0.take().expect("the child was already reaped");
        let status = child.wait().unwrap();
        let mut out = String::new();
        let mut err = String::new();
        if let Some(mut s) = child.stdout.take() {
            s.read_to_string(&mut out).unwrap();
        }
        if let Some(mut s) = child.stderr.take() {
            s.read_to_string(&mut err).unwrap();
        }
        (out, err, status.code().unwrap_or(-1))
    }

    /// Kills it now and reaps it.
    pub fn kill(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A busy loop that stops when `stop` exists and prints its result and its globals. It sums
/// before it looks for `stop`, so a test that writes `stop` before the first round (a loaded
/// machine, a target that was just attached) still reads the real total, not the initial 0.
pub const LOOP: &str = "
import os, sys
stop = sys.argv[1]
rounds = 0
total = 0
open(stop + '.ready', 'w').close()
while True:
    total = sum(range(1000))
    rounds += 1
    if os.path.exists(stop):
        break
print(total, sorted(k for k in globals() if not k.startswith('__')))
";

pub const LOOP_OUT: &str = "499500 ['os', 'rounds', 'stop', 'sys', 'total']\n";

pub fn temp(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "vramscope-attach-test-{tag}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn spawn(py: &str, args: &[&str], dir: &Path) -> Guard {
    spawn_with(py, args, dir, &[])
}

pub fn spawn_with(py: &str, args: &[&str], dir: &Path, env: &[(&str, &str)]) -> Guard {
    Guard::new(
        Command::new(py)
            .args(args)
            .env("VRAMSCOPE_DIR", dir.join("channels"))
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

/// How long a target may take to say it is ready (its `.ready` file): a Python that imports
/// torch, on a loaded machine.
pub const READY_WITHIN: Duration = Duration::from_secs(180);

/// How long an attached writer may take to publish what a test waits for.
pub const PUBLISHED_WITHIN: Duration = Duration::from_secs(60);

pub fn vramscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vramscope"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// `(state, tracer)` from /proc/PID/status.
pub fn state(pid: u32) -> Option<(char, i32)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
    };
    let state = field("State:")?.chars().next()?;
    let tracer = field("TracerPid:")?.parse().ok()?;
    Some((state, tracer))
}

pub fn assert_running(pid: u32) {
    let (st, tracer) = state(pid).expect("the process is gone");
    assert!(
        !matches!(st, 'T' | 't'),
        "process {pid} left stopped ({st})"
    );
    assert_eq!(tracer, 0, "process {pid} left traced");
}

/// The agent directories left in /tmp for `pid`.
pub fn leftovers(pid: u32) -> Vec<String> {
    std::fs::read_dir("/tmp")
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("vramscope-attach-{pid}-")))
        .collect()
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The channel files in `dir`.
pub fn channel_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// `vramscope inspect` of the one channel in `dir`.
pub fn inspect(dir: &Path) -> serde_json::Value {
    let files = channel_files(dir);
    assert_eq!(files.len(), 1, "{files:?}");
    let out = vramscope(&["inspect", files[0].to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}
