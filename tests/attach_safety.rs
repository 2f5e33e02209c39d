//! `vramscope attach` / `detach` against real CPython processes: a busy loop attached to and
//! detached from 50 times keeps its result, output and exit status; a process inside a long
//! C call is pending, then attached when the call returns; vramscope killed mid-attach
//! leaves the process running; each process that cannot be attached to gets one clear line
//! and is left as it was.

mod attach_support;
mod common;

use attach_support::{
    Guard, LOOP, LOOP_OUT, PUBLISHED_WITHIN, READY_WITHIN, assert_running, channel_files, inspect,
    leftovers, spawn, state, temp, text, vramscope,
};
use common::real_packages_python;
use common::wait::{wait_for_path, wait_until};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn python() -> Option<String> {
    for p in ["/usr/bin/python3", "python3"] {
        if Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return Some(p.to_string());
        }
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "python3 missing in CI: .ci/run installs it"
    );
    eprintln!("SKIPPED: python3 is not installed");
    None
}

#[test]
fn a_busy_loop_attached_and_detached_50_times_is_unchanged() {
    let Some(py) = python() else { return };
    let dir = temp("busy");
    let stop = dir.join("stop");
    let child = spawn(&py, &["-c", LOOP, stop.to_str().unwrap()], &dir);
    let pid = child.id();
    wait_for_path(&dir.join("stop.ready"), READY_WITHIN);
    let p = pid.to_string();
    let started = Instant::now();
    for i in 0..50 {
        let out = vramscope(&["attach", "--yes", &p]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "attach {i}: {}",
            text(&out.stderr)
        );
        assert_eq!(
            text(&out.stdout),
            format!(
                "process {pid}: armed: the writer starts when the program imports torch and initialises CUDA\n"
            ),
            "attach {i}"
        );
        assert_running(pid);
        let out = vramscope(&["detach", "--yes", &p]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "detach {i}: {}",
            text(&out.stderr)
        );
        assert_eq!(
            text(&out.stdout),
            format!("process {pid}: detached: the writer stopped and removed its channel\n"),
            "detach {i}"
        );
        assert_running(pid);
    }
    eprintln!("50 attach/detach pairs in {:?}", started.elapsed());
    assert!(leftovers(pid).is_empty(), "{:?}", leftovers(pid));
    let (out, err, code) = child.finish(&stop);
    assert_eq!((out.as_str(), err.as_str(), code), (LOOP_OUT, "", 0));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_long_c_call_is_pending_then_attached_when_it_returns() {
    let Some(py) = python() else { return };
    let dir = temp("sleep");
    let stop = dir.join("stop");
    let script = format!("import time\ntime.sleep(3)\ndel time\n{LOOP}");
    let child = spawn(&py, &["-c", &script, stop.to_str().unwrap()], &dir);
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(300));
    // A short time-out says it is still pending, and how the process stands.
    let out = vramscope(&["attach", "--yes", "--timeout", "1", &pid.to_string()]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("attach pending: waiting for process"), "{err}");
    assert!(err.contains("attach pending after 1s"), "{err}");
    assert!(err.contains("long C call"), "{err}");
    assert_running(pid);
    // The queued agent runs when the sleep returns, and cleans up after itself.
    wait_for_path(&dir.join("stop.ready"), READY_WITHIN);
    let t = Instant::now();
    while !leftovers(pid).is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{:?}",
            leftovers(pid)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // A second attach now finds the writer already armed by the first.
    let out = vramscope(&["attach", "--yes", &pid.to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains(": armed:"),
        "{}",
        text(&out.stdout)
    );
    let (out, err, code) = child.finish(&stop);
    assert_eq!((out.as_str(), err.as_str(), code), (LOOP_OUT, "", 0));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn pending_then_live_with_a_long_enough_wait() {
    let Some(py) = python() else { return };
    let dir = temp("wait");
    let stop = dir.join("stop");
    let script = format!("import time\ntime.sleep(2)\ndel time\n{LOOP}");
    let child = spawn(&py, &["-c", &script, stop.to_str().unwrap()], &dir);
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    let out = vramscope(&["attach", "--yes", "--timeout", "20", &pid.to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        t.elapsed() >= Duration::from_millis(1000),
        "{:?}",
        t.elapsed()
    );
    assert!(
        text(&out.stderr).contains("attach pending"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains(": armed:"),
        "{}",
        text(&out.stdout)
    );
    let (out, err, code) = child.finish(&stop);
    assert_eq!((out.as_str(), err.as_str(), code), (LOOP_OUT, "", 0));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn vramscope_killed_mid_attach_leaves_the_process_running() {
    let Some(py) = python() else { return };
    let dir = temp("kill");
    let stop = dir.join("stop");
    let script = format!("import time\ntime.sleep(2)\ndel time\n{LOOP}");
    let child = spawn(&py, &["-c", &script, stop.to_str().unwrap()], &dir);
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(200));
    for delay_ms in [0u64, 1, 3, 10, 50, 300] {
        let attach = Guard::new(
            Command::new(env!("CARGO_BIN_EXE_vramscope"))
                .args(["attach", "--yes", "--timeout", "30", &pid.to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        std::thread::sleep(Duration::from_millis(delay_ms));
        attach.kill();
        std::thread::sleep(Duration::from_millis(20));
        assert_running(pid);
    }
    let last_kill = Instant::now();
    wait_for_path(&dir.join("stop.ready"), READY_WITHIN);
    // What the killed attaches left is gone once the next attach and detach ran: the queued
    // agents removed their own directories, the next attach swept the rest (one killed
    // before it had its waiter only when 5 s old: it could be another attach's, in the making).
    std::thread::sleep(Duration::from_secs(6).saturating_sub(last_kill.elapsed()));
    for verb in ["attach", "detach"] {
        let out = vramscope(&[verb, "--yes", &pid.to_string()]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    }
    let t = Instant::now();
    while !leftovers(pid).is_empty() {
        let left: Vec<(String, Vec<String>)> = leftovers(pid)
            .into_iter()
            .map(|d| {
                let files = std::fs::read_dir(Path::new("/tmp").join(&d))
                    .map(|r| {
                        r.flatten()
                            .map(|e| e.file_name().to_string_lossy().into_owned())
                            .collect()
                    })
                    .unwrap_or_default();
                (d, files)
            })
            .collect();
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "killed attaches left directories: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let (out, err, code) = child.finish(&stop);
    assert_eq!((out.as_str(), err.as_str(), code), (LOOP_OUT, "", 0));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// One line on stderr, status 2, and the process as it was.
fn refused(pid: u32, want: &str) {
    let out = vramscope(&["attach", "--yes", &pid.to_string()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(want), "{want:?} not in {err:?}");
    assert!(out.stdout.is_empty());
}

#[test]
fn what_cannot_be_attached_to_gets_one_clear_line() {
    let Some(py) = python() else { return };
    // Not Python.
    let sleep = Guard::new(Command::new("sleep").arg("30").spawn().unwrap());
    refused(sleep.id(), "is not a Python process (it runs sleep");
    assert_running(sleep.id());
    sleep.kill();
    // A zombie: exited, not yet reaped by us.
    let mut zombie = Guard::new(Command::new(&py).args(["-c", "pass"]).spawn().unwrap());
    let t = Instant::now();
    while state(zombie.id()).map(|s| s.0) != Some('Z') {
        assert!(t.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(10));
    }
    refused(zombie.id(), "has exited (a zombie");
    zombie.child().wait().unwrap();
    // Gone.
    refused(zombie.id(), "no process");
    // Stopped by job control.
    let dir = temp("refused");
    let stop = dir.join("stop");
    let child = spawn(&py, &["-c", LOOP, stop.to_str().unwrap()], &dir);
    wait_for_path(&dir.join("stop.ready"), READY_WITHIN);
    unsafe { libc::kill(child.id() as i32, libc::SIGSTOP) };
    while state(child.id()).map(|s| s.0) != Some('T') {
        std::thread::sleep(Duration::from_millis(5));
    }
    refused(child.id(), &format!("kill -CONT {}", child.id()));
    unsafe { libc::kill(child.id() as i32, libc::SIGCONT) };
    // Confirmation is needed without --yes, and without a terminal it is not asked.
    let out = vramscope(&["attach", &child.id().to_string()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("add --yes"),
        "{}",
        text(&out.stderr)
    );
    let (out, err, code) = child.finish(&stop);
    assert_eq!((out.as_str(), err.as_str(), code), (LOOP_OUT, "", 0));
    // Remote debugging disabled.
    let child = Guard::new(
        Command::new(&py)
            .args(["-c", "import time; time.sleep(30)"])
            .env("PYTHON_DISABLE_REMOTE_DEBUG", "1")
            .spawn()
            .unwrap(),
    );
    refused(child.id(), "PYTHON_DISABLE_REMOTE_DEBUG");
    child.kill();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// What killed attaches leave in the target's /tmp is removed by the next attach: a
/// directory never queued, one already answered, one for a process that is gone; a queued
/// one for a live process is left for its agent, and another user's is never touched.
#[test]
fn a_killed_attachs_directory_is_swept_by_the_next_attach() {
    let Some(py) = python() else { return };
    // As root the target gets a /tmp of its own (a private mount namespace with a folder
    // bound on /tmp): the made-up directories below look abandoned, and any other attach
    // running beside this test (the other tests here, another suite) sweeps the /tmp it
    // writes in. The test's own files then live outside /tmp, where the target sees them.
    let private = is_root()
        && Command::new("unshare")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
    let dir = if private {
        let d = Path::new("/var/tmp").join(format!(
            "vramscope-attach-test-sweep-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("tmp")).unwrap();
        d
    } else {
        temp("sweep")
    };
    let tmp = if private {
        dir.join("tmp")
    } else {
        Path::new("/tmp").to_path_buf()
    };
    let stop = dir.join("stop");
    let child = if private {
        let bind = "mount --bind \"$0\" /tmp && exec \"$@\"";
        attach_support::Guard::new(
            Command::new("unshare")
                .args(["-m", "--propagation", "private", "sh", "-c", bind])
                .arg(&tmp)
                .args([py.as_str(), "-c", LOOP, stop.to_str().unwrap()])
                .env("VRAMSCOPE_DIR", dir.join("channels"))
                .env("PYTHONDONTWRITEBYTECODE", "1")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        )
    } else {
        spawn(&py, &["-c", LOOP, stop.to_str().unwrap()], &dir)
    };
    let pid = child.id();
    wait_for_path(&dir.join("stop.ready"), READY_WITHIN);
    // A pid that is surely gone: a child of ours, reaped.
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    gone.wait().unwrap();
    let make = |name: &str, files: &[&str]| {
        let d = tmp.join(name);
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir(&d).unwrap();
        for f in files {
            std::fs::write(d.join(f), "").unwrap();
        }
        d
    };
    let never_queued = make(
        &format!("vramscope-attach-{pid}-1"),
        &["waiter", "agent.py"],
    );
    let answered = make(
        &format!("vramscope-attach-{pid}-2"),
        &["waiter", "queued", "status"],
    );
    let orphan = make(
        &format!("vramscope-attach-{gone_pid}-3"),
        &["waiter", "queued"],
    );
    let pending = make(&format!("vramscope-attach-{pid}-4"), &["waiter", "queued"]);
    // Killed before it had its waiter: swept when 5 s old, kept while it may still be
    // another attach's in the making.
    let no_waiter_old = make(&format!("vramscope-attach-{pid}-6"), &[]);
    std::fs::File::open(&no_waiter_old)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - Duration::from_secs(10))
        .unwrap();
    let no_waiter_young = make(&format!("vramscope-attach-{pid}-7"), &[]);
    // Another user's (as root: a directory owned by nobody; as a user, root's /tmp itself
    // would not be ours to sweep anyway).
    let foreign = make(&format!("vramscope-attach-{pid}-5"), &["waiter"]);
    if is_root() {
        std::os::unix::fs::lchown(&foreign, Some(65534), Some(65534)).unwrap();
    }
    let out = vramscope(&["attach", "--yes", &pid.to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    for (d, kept) in [
        (&never_queued, false),
        (&answered, false),
        (&orphan, false),
        (&pending, true),
        (&no_waiter_old, false),
        (&no_waiter_young, true),
        (&foreign, is_root()),
    ] {
        assert_eq!(d.exists(), kept, "{}", d.display());
    }
    let out = vramscope(&["detach", "--yes", &pid.to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    std::fs::remove_dir_all(&pending).unwrap();
    std::fs::remove_dir_all(&no_waiter_young).unwrap();
    std::fs::remove_dir_all(&foreign).unwrap();
    let (out, err, code) = child.finish(&stop);
    assert_eq!((out.as_str(), err.as_str(), code), (LOOP_OUT, "", 0));
    std::fs::remove_dir_all(&dir).unwrap();
}

fn is_root() -> bool {
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn another_users_process_as_a_user_and_as_root() {
    let Some(py) = python() else { return };
    if !is_root() || Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("SKIPPED: needs root and setpriv");
        return;
    }
    let dir = temp("user");
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let stop = dir.join("stop");
    // As a user (nobody) attaching to root's process: refused before anything, with the fix.
    let child = spawn(&py, &["-c", LOOP, stop.to_str().unwrap()], &dir);
    wait_for_path(&dir.join("stop.ready"), READY_WITHIN);
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(env!("CARGO_BIN_EXE_vramscope"))
        .args(["attach", "--yes", &child.id().to_string()])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("belongs to uid 0, not to you (uid 65534)"),
        "{err}"
    );
    assert!(err.contains("sudo vramscope attach"), "{err}");
    assert_running(child.id());
    let (out, err, code) = child.finish(&stop);
    assert_eq!((out.as_str(), err.as_str(), code), (LOOP_OUT, "", 0));
    // As root attaching to nobody's process: it works, and the agent's files are nobody's.
    let stop = dir.join("stop2");
    let child = Guard::new(
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&py)
            .args(["-c", LOOP, stop.to_str().unwrap()])
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    wait_for_path(&dir.join("stop2.ready"), READY_WITHIN);
    let pid = child.id();
    let out = vramscope(&["attach", "--yes", &pid.to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains(": armed:"),
        "{}",
        text(&out.stdout)
    );
    let out = vramscope(&["detach", "--yes", &pid.to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_running(pid);
    let (out, err, code) = child.finish(&stop);
    assert_eq!((out.as_str(), err.as_str(), code), (LOOP_OUT, "", 0));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_process_in_another_pid_namespace() {
    let Some(py) = python() else { return };
    if !is_root()
        || !Command::new("unshare")
            .args(["-p", "-f", "true"])
            .status()
            .is_ok_and(|s| s.success())
    {
        eprintln!("SKIPPED: needs root and unshare -p");
        return;
    }
    let dir = temp("ns");
    let stop = dir.join("stop");
    // Killing unshare (the guard, on a failure) kills the Python too: --kill-child.
    let child = Guard::new(
        Command::new("unshare")
            .args(["-p", "-f", "--kill-child"])
            .arg(&py)
            .args(["-c", LOOP, stop.to_str().unwrap()])
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    wait_for_path(&dir.join("stop.ready"), READY_WITHIN);
    // The Python is unshare's child, in the new namespace (pid 1 there).
    let children =
        std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", child.id())).unwrap();
    let pid: u32 = children.split_whitespace().next().unwrap().parse().unwrap();
    let out = vramscope(&["attach", "--yes", &pid.to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains(": armed:"),
        "{}",
        text(&out.stdout)
    );
    let out = vramscope(&["detach", "--yes", &pid.to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_running(pid);
    let (out, err, code) = child.finish(&stop);
    assert_eq!((out.as_str(), err.as_str(), code), (LOOP_OUT, "", 0));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_process_that_exits_mid_attach() {
    let Some(py) = python() else { return };
    let dir = temp("exits");
    let mut child = Command::new(&py)
        .args(["-c", "import time; time.sleep(0.5); print('bye')"])
        .env("VRAMSCOPE_DIR", dir.join("channels"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(100));
    let waiter = std::thread::spawn(move || {
        let status = child.wait().unwrap();
        let mut out = String::new();
        let mut err = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        (out, err, status.code())
    });
    let out = vramscope(&["attach", "--yes", "--timeout", "5", &pid.to_string()]);
    let (said, err) = (text(&out.stdout), text(&out.stderr));
    // Either the agent ran as the interpreter finished its pending calls at exit, or the
    // process was gone first: one line each way (after the "pending" note).
    let result = match out.status.code() {
        Some(0) => said.lines().last().unwrap_or_default().to_string(),
        _ => err.lines().last().unwrap_or_default().to_string(),
    };
    assert!(
        (out.status.code() == Some(0) && result.contains(": armed:") && said.lines().count() == 1)
            || (out.status.code() == Some(1) && result.contains("exited before the agent ran")),
        "{said}{err}"
    );
    let (stdout, stderr, code) = waiter.join().unwrap();
    assert_eq!(
        (stdout.as_str(), stderr.as_str(), code),
        ("bye\n", "", Some(0))
    );
    assert!(leftovers(pid).is_empty(), "{:?}", leftovers(pid));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A training loop on the real torch, with only the CUDA driver simulated
/// (python/tests/_simulated_cuda.py): it reached a 5 GiB peak before anyone attached.
const TRAIN: &str = "
import os, sys
sys.path.insert(0, sys.argv[2])
import torch
from _simulated_cuda import SimulatedCuda, GIB
cuda = SimulatedCuda(torch).install(initialised=sys.argv[3] == 'up')
if sys.argv[3] == 'up':
    cuda.alloc(5 * GIB)
    cuda.free(4 * GIB)
model = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
stop = sys.argv[1]
open(stop + '.ready', 'w').close()
while not os.path.exists(stop):
    if os.path.exists(stop + '.init') and not torch.cuda.is_initialized():
        cuda.initialise()
        cuda.alloc(2 * GIB)
        open(stop + '.inited', 'w').close()
    opt.zero_grad()
    model(torch.ones(2, 4)).sum().backward()
    opt.step()
print(torch.cuda.max_memory_allocated(), len(cuda.observers))
";

#[test]
fn attached_to_torch_with_cuda_up_it_publishes_the_lifetime_peak_and_steps() {
    let Some(py) = real_packages_python() else {
        return;
    };
    let dir = temp("torch-up");
    let stop = dir.join("stop");
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/tests");
    let child = spawn(
        &py,
        &[
            "-c",
            TRAIN,
            stop.to_str().unwrap(),
            tests.to_str().unwrap(),
            "up",
        ],
        &dir,
    );
    let pid = child.id();
    wait_for_path(&dir.join("stop.ready"), READY_WITHIN);
    let channels = dir.join("channels");
    assert!(channel_files(&channels).is_empty());
    let out = vramscope(&["attach", "--yes", &pid.to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!("process {pid}: live: publishing\n")
    );
    // Steps come from the optimizer hook from the attach on.
    wait_until("a step to be published", PUBLISHED_WITHIN, || {
        inspect(&channels)["status"]["step"]
            .as_u64()
            .is_some_and(|s| s > 0)
    });
    let json = inspect(&channels);
    assert_eq!(
        json["identity"]["flags"].as_u64().unwrap() & 8,
        8,
        "ATTACHED"
    );
    assert_eq!(json["identity"]["kind"], "pytorch");
    let device = &json["devices"][0];
    assert_eq!(device["allocated"], 1u64 << 30);
    // The peak reached before the attach, from the allocator's own counter.
    assert_eq!(device["allocated_peak"], 5u64 << 30);
    // SGD without momentum keeps no step count: the steps are since the attach, and the
    // samples say so (STEP_SINCE_ATTACH), so that no reader shows them as the job's.
    let samples = json["samples"].as_array().unwrap();
    assert!(!samples.is_empty());
    let last = samples.last().unwrap();
    let flag = u64::from(vramscope::channel::layout::sample::FLAG_STEP_SINCE_ATTACH);
    assert_eq!(last["flags"].as_u64().unwrap() & flag, flag, "{last}");
    let out = vramscope(&["detach", "--yes", &pid.to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        channel_files(&channels).is_empty(),
        "detach removes the channel"
    );
    let (out, err, code) = child.finish(&stop);
    // max_memory_allocated agrees with the published peak; the OOM observer was attached.
    assert_eq!(
        (out.as_str(), err.as_str(), code),
        ("5368709120 1\n", "", 0)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn attached_to_torch_before_cuda_it_starts_when_cuda_comes_up() {
    let Some(py) = real_packages_python() else {
        return;
    };
    let dir = temp("torch-later");
    let stop = dir.join("stop");
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/tests");
    let child = spawn(
        &py,
        &[
            "-c",
            TRAIN,
            stop.to_str().unwrap(),
            tests.to_str().unwrap(),
            "later",
        ],
        &dir,
    );
    let pid = child.id();
    wait_for_path(&dir.join("stop.ready"), READY_WITHIN);
    let out = vramscope(&["attach", "--yes", &pid.to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!("process {pid}: armed: the writer starts when torch initialises CUDA\n")
    );
    let channels = dir.join("channels");
    assert!(channel_files(&channels).is_empty());
    std::fs::write(dir.join("stop.init"), "").unwrap();
    wait_for_path(&dir.join("stop.inited"), READY_WITHIN);
    wait_until("a channel after CUDA came up", PUBLISHED_WITHIN, || {
        channel_files(&channels).len() == 1
    });
    let json = inspect(&channels);
    assert_eq!(
        json["identity"]["flags"].as_u64().unwrap() & 8,
        8,
        "ATTACHED"
    );
    let out = vramscope(&["detach", "--yes", &pid.to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(channel_files(&channels).is_empty());
    let (out, err, code) = child.finish(&stop);
    assert_eq!(
        (out.as_str(), err.as_str(), code),
        ("2147483648 1\n", "", 0)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every CPython pyenv has here (CI images carry several): 3.8 and later attach and detach,
/// older ones are refused by version.
#[test]
fn each_installed_cpython_version() {
    let Some(home) = std::env::var_os("HOME") else {
        return;
    };
    let Ok(versions) = std::fs::read_dir(Path::new(&home).join(".pyenv/versions")) else {
        eprintln!("SKIPPED: no pyenv interpreters here");
        return;
    };
    let dir = temp("versions");
    for entry in versions.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let py = entry.path().join("bin/python");
        let mut parts = name.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        let (Some(major), Some(minor)) = (parts.next(), parts.next()) else {
            continue;
        };
        if !py.exists() || !name.chars().all(|c| c.is_ascii_digit() || c == '.') {
            continue;
        }
        let stop = dir.join(format!("stop-{name}"));
        let child = spawn(
            py.to_str().unwrap(),
            &["-c", LOOP, stop.to_str().unwrap()],
            &dir,
        );
        wait_for_path(&dir.join(format!("stop-{name}.ready")), READY_WITHIN);
        let pid = child.id().to_string();
        let out = vramscope(&["attach", "--yes", &pid]);
        if (major, minor) >= (3, 8) {
            assert_eq!(out.status.code(), Some(0), "{name}: {}", text(&out.stderr));
            assert!(text(&out.stdout).contains(": armed:"), "{name}");
            let out = vramscope(&["detach", "--yes", &pid]);
            assert_eq!(out.status.code(), Some(0), "{name}: {}", text(&out.stderr));
        } else {
            assert_eq!(out.status.code(), Some(2), "{name}");
            assert!(
                text(&out.stderr).contains(&format!(
                    "runs Python {major}.{minor}: the writer needs Python 3.8"
                )),
                "{name}: {}",
                text(&out.stderr)
            );
        }
        let (out, err, code) = child.finish(&stop);
        let want = if major == 2 {
            "(499500, ['os', 'rounds', 'stop', 'sys', 'total'])\n"
        } else {
            LOOP_OUT
        };
        assert_eq!((out.as_str(), err.as_str(), code), (want, "", 0), "{name}");
        eprintln!("{name}: ok");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// §1.8 of issue 28: attaches to different processes side by side each sweep the same /tmp.
/// A directory being filled must never look like one a killed attach left (its waiter
/// existed a moment before it was locked: "cannot place the agent ... No such file or
/// directory" under load). Directories are now filled under a staging name and renamed
/// once their waiter is locked.
#[test]
fn side_by_side_attaches_never_sweep_each_others_agent() {
    let Some(py) = python() else { return };
    let dir = temp("side-by-side");
    let targets: Vec<(Guard, std::path::PathBuf)> = (0..3)
        .map(|i| {
            let stop = dir.join(format!("stop{i}"));
            let child = spawn(&py, &["-c", LOOP, stop.to_str().unwrap()], &dir);
            wait_for_path(&dir.join(format!("stop{i}.ready")), READY_WITHIN);
            (child, stop)
        })
        .collect();
    let failures: Vec<String> = std::thread::scope(|scope| {
        let runs: Vec<_> = targets
            .iter()
            .map(|(child, _)| {
                let pid = child.id().to_string();
                scope.spawn(move || {
                    let mut failed = Vec::new();
                    for _ in 0..25 {
                        for verb in ["attach", "detach"] {
                            let out = vramscope(&[verb, "--yes", &pid]);
                            if out.status.code() != Some(0) {
                                failed.push(format!("{verb} {pid}: {}", text(&out.stderr)));
                            }
                        }
                    }
                    failed
                })
            })
            .collect();
        runs.into_iter().flat_map(|r| r.join().unwrap()).collect()
    });
    assert!(failures.is_empty(), "{failures:#?}");
    for (child, stop) in targets {
        let pid = child.id();
        let (out, err, code) = child.finish(&stop);
        assert_eq!((out.as_str(), err.as_str(), code), (LOOP_OUT, "", 0));
        assert!(leftovers(pid).is_empty(), "{:?}", leftovers(pid));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
