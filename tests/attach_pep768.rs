//! `vramscope attach` / `detach` on CPython 3.14 and later, through PEP 768's
//! `sys.remote_exec`: a busy loop attached to and detached from repeatedly is never stopped
//! nor traced, keeps its output and exit status, and is not asked about; a target with remote
//! debugging off gets one clear line; the channel carries the ATTACHED flag.
//!
//! The interpreter is VRAMSCOPE_PYTHON314 (.ci/python314 installs it, with the real JAX that
//! the channel test uses); without it each test says so in one line and passes, except in CI.

mod attach_support;
mod common;

use attach_support::{
    LOOP, LOOP_OUT, PUBLISHED_WITHIN, READY_WITHIN, channel_files, inspect, leftovers, spawn,
    spawn_with, temp, text, vramscope,
};
use common::wait::{wait_for_path, wait_until};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

fn python314() -> Option<String> {
    match std::env::var("VRAMSCOPE_PYTHON314") {
        Ok(p) if !p.is_empty() && Path::new(&p).exists() => Some(p),
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "VRAMSCOPE_PYTHON314 unset in CI: .ci/run installs CPython 3.14 (.ci/python314)"
            );
            eprintln!(
                "SKIPPED: needs VRAMSCOPE_PYTHON314 (a CPython 3.14: bash .ci/python314 PYTHON-WITH-PIP prints one)"
            );
            None
        }
    }
}

/// Samples /proc/PID/status every few hundred microseconds until dropped: any stop (`T`,
/// `t`) or tracer it ever saw.
struct Watch {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<(Vec<String>, u64)>>,
}

impl Watch {
    fn start(pid: u32) -> Watch {
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let thread = std::thread::spawn(move || {
            let mut seen = Vec::new();
            let mut samples = 0u64;
            while !flag.load(Ordering::Relaxed) {
                if let Some((state, tracer)) = attach_support::state(pid) {
                    samples += 1;
                    if matches!(state, 'T' | 't') || tracer != 0 {
                        seen.push(format!("state {state}, tracer {tracer}"));
                    }
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            (seen, samples)
        });
        Watch {
            done,
            thread: Some(thread),
        }
    }

    fn stop(mut self) -> (Vec<String>, u64) {
        self.done.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
    }
}

/// What vramscope said on stderr besides the "pending" note it gives after half a second (a
/// loaded machine can take that long to start the interpreter that calls remote_exec).
fn unexpected(stderr: &[u8]) -> String {
    text(stderr)
        .lines()
        .filter(|l| !l.starts_with("vramscope: attach pending: waiting for process"))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn a_busy_314_loop_attached_and_detached_repeatedly_is_never_stopped() {
    let Some(py) = python314() else { return };
    let dir = temp("pep768-busy");
    let stop = dir.join("stop");
    let child = spawn(&py, &["-c", LOOP, stop.to_str().unwrap()], &dir);
    let pid = child.id();
    wait_for_path(&dir.join("stop.ready"), READY_WITHIN);
    let p = pid.to_string();
    let watch = Watch::start(pid);
    let mut attach_ms = Vec::new();
    let mut detach_ms = Vec::new();
    for i in 0..10 {
        // No --yes and no terminal: nothing is asked, since nothing stops the process.
        let t = Instant::now();
        let out = vramscope(&["attach", &p]);
        attach_ms.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(
            (out.status.code(), unexpected(&out.stderr).as_str()),
            (Some(0), ""),
            "attach {i}"
        );
        assert_eq!(
            text(&out.stdout),
            format!(
                "process {pid}: armed: the writer starts when the program imports torch and initialises CUDA\n"
            ),
            "attach {i}"
        );
        let t = Instant::now();
        let out = vramscope(&["detach", &p]);
        detach_ms.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(
            (out.status.code(), unexpected(&out.stderr).as_str()),
            (Some(0), ""),
            "detach {i}"
        );
        assert_eq!(
            text(&out.stdout),
            format!("process {pid}: detached: the writer stopped and removed its channel\n"),
            "detach {i}"
        );
    }
    let (stops, samples) = watch.stop();
    assert!(
        stops.is_empty(),
        "the process was stopped or traced: {stops:?}"
    );
    assert!(
        samples > 100,
        "only {samples} samples of the process's state"
    );
    attach_ms.sort_by(f64::total_cmp);
    detach_ms.sort_by(f64::total_cmp);
    eprintln!(
        "3.14 attach: median {:.0} ms (min {:.0}, max {:.0}); detach: median {:.0} ms (min {:.0}, max {:.0}); {samples} state samples, never stopped",
        attach_ms[5], attach_ms[0], attach_ms[9], detach_ms[5], detach_ms[0], detach_ms[9]
    );
    assert!(leftovers(pid).is_empty(), "{:?}", leftovers(pid));
    let (out, err, code) = child.finish(&stop);
    assert_eq!((out.as_str(), err.as_str(), code), (LOOP_OUT, "", 0));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// One line on stderr, status 2, nothing on stdout.
fn refused(pid: u32, want: &[&str]) {
    let out = vramscope(&["attach", &pid.to_string()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    for w in want {
        assert!(err.contains(w), "{w:?} not in {err:?}");
    }
    assert!(out.stdout.is_empty());
}

/// One disabled target: its tag, its interpreter flags, its environment, what the line says.
type Case<'a> = (&'a str, Vec<&'a str>, Vec<(&'a str, &'a str)>, Vec<&'a str>);

#[test]
fn remote_debugging_disabled_gets_one_clear_line() {
    let Some(py) = python314() else { return };
    let dir = temp("pep768-off");
    let script = |tag: &str| dir.join(tag);
    // The environment variable, and -X alone or among other flags: read from /proc before
    // anything, as the interpreter reads them.
    let cases: [Case; 3] = [
        (
            "env",
            vec![],
            vec![("PYTHON_DISABLE_REMOTE_DEBUG", "1")],
            vec![
                "PYTHON_DISABLE_REMOTE_DEBUG in its environment",
                "restart it without",
            ],
        ),
        (
            "x",
            vec!["-X", "disable-remote-debug"],
            vec![],
            vec!["(-X disable-remote-debug)", "restart it without"],
        ),
        (
            "together",
            vec!["-uXdisable-remote-debug"],
            vec![],
            vec!["(-X disable-remote-debug)", "restart it without"],
        ),
    ];
    for (tag, flags, env, want) in cases {
        let stop = script(tag);
        let mut args = flags.clone();
        args.extend(["-c", LOOP, stop.to_str().unwrap()]);
        let child = spawn_with(&py, &args, &dir, &env);
        wait_for_path(&dir.join(format!("{tag}.ready")), READY_WITHIN);
        refused(child.id(), &want);
        attach_support::assert_running(child.id());
        assert!(leftovers(child.id()).is_empty(), "{tag}");
        let (out, err, code) = child.finish(&stop);
        assert_eq!(
            (out.as_str(), err.as_str(), code),
            (LOOP_OUT, "", 0),
            "{tag}"
        );
    }
    // With -E the interpreter ignores the variable: attached, as the interpreter allows.
    let stop = script("ignored");
    let child = spawn_with(
        &py,
        &["-E", "-c", LOOP, stop.to_str().unwrap()],
        &dir,
        &[("PYTHON_DISABLE_REMOTE_DEBUG", "1")],
    );
    wait_for_path(&dir.join("ignored.ready"), READY_WITHIN);
    let out = vramscope(&["attach", &child.id().to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains(": armed:"),
        "{}",
        text(&out.stdout)
    );
    let out = vramscope(&["detach", &child.id().to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let (out, err, code) = child.finish(&stop);
    assert_eq!((out.as_str(), err.as_str(), code), (LOOP_OUT, "", 0));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_interpreter_of_another_version_is_refused_with_the_fix() {
    let Some(py) = python314() else { return };
    let dir = temp("pep768-other");
    let stop = dir.join("stop");
    let child = spawn(&py, &["-c", LOOP, stop.to_str().unwrap()], &dir);
    wait_for_path(&dir.join("stop.ready"), READY_WITHIN);
    let pid = child.id().to_string();
    // /bin/sh is no Python at all: named, with the two ways out.
    let out = vramscope(&["attach", "--python", "/bin/sh", &pid]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(
            "runs Python 3.14, and no Python 3.14 runs here to call sys.remote_exec (/bin/sh"
        ),
        "{err}"
    );
    assert!(
        err.contains("--python PATH") && err.contains("--ptrace"),
        "{err}"
    );
    // The one given explicitly is used.
    let out = vramscope(&["attach", "--python", &py, &pid]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = vramscope(&["detach", "--python", &py, &pid]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // --ptrace forces the older way, which stops the main thread: asked first.
    let out = vramscope(&["attach", "--ptrace", &pid]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("add --yes"),
        "{}",
        text(&out.stderr)
    );
    let out = vramscope(&["attach", "--ptrace", "--yes", &pid]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains(": armed:"),
        "{}",
        text(&out.stdout)
    );
    let out = vramscope(&["detach", &pid]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let (out, err, code) = child.finish(&stop);
    assert_eq!((out.as_str(), err.as_str(), code), (LOOP_OUT, "", 0));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A JAX program on the real JAX (CPU), its device's memory statistics simulated as the
/// driver would report them (what the adapters' own real-JAX tests do).
const JAX: &str = "
import os, sys
import jax
device_type = type(jax.local_devices()[0])
device_type.memory_stats = lambda device: {'bytes_in_use': 3 << 30, 'peak_bytes_in_use': 5 << 30, 'bytes_limit': 16 << 30}
stop = sys.argv[1]
total = 0
open(stop + '.ready', 'w').close()
while True:
    total = sum(range(1000))
    if os.path.exists(stop):
        break
print(total, sorted(k for k in globals() if not k.startswith('__')))
";

#[test]
fn the_channel_appears_with_the_attached_flag() {
    let Some(py) = python314() else { return };
    let has_jax = std::process::Command::new(&py)
        .args(["-c", "import jax"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_jax {
        assert!(
            std::env::var_os("CI").is_none(),
            "no JAX for {py} in CI: .ci/python314 installs it"
        );
        eprintln!("SKIPPED: {py} has no JAX (.ci/python314 installs it)");
        return;
    }
    let dir = temp("pep768-jax");
    let stop = dir.join("stop");
    let child = spawn_with(
        &py,
        &["-c", JAX, stop.to_str().unwrap()],
        &dir,
        &[("JAX_PLATFORMS", "cpu")],
    );
    let pid = child.id();
    wait_for_path(&dir.join("stop.ready"), READY_WITHIN);
    let channels = dir.join("channels");
    assert!(channel_files(&channels).is_empty());
    let out = vramscope(&["attach", &pid.to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!("process {pid}: live: publishing\n")
    );
    wait_until("figures to be published", PUBLISHED_WITHIN, || {
        inspect(&channels)["devices"][0]["allocated"].as_u64() == Some(3 << 30)
    });
    let json = inspect(&channels);
    assert_eq!(
        json["identity"]["flags"].as_u64().unwrap() & 8,
        8,
        "ATTACHED"
    );
    assert_eq!(json["identity"]["kind"], "jax");
    assert_eq!(json["devices"][0]["allocated_peak"], 5u64 << 30);
    let out = vramscope(&["detach", &pid.to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        channel_files(&channels).is_empty(),
        "detach removes the channel"
    );
    let (out, err, code) = child.finish(&stop);
    assert_eq!(
        (out.as_str(), err.as_str(), code),
        (
            "499500 ['device_type', 'jax', 'os', 'stop', 'sys', 'total']\n",
            "",
            0
        )
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
