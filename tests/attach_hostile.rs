//! `vramscope attach` as root against what a hostile user, or a process that changes, does
//! to it (issue 28, §1.1 and §1.4):
//! - the agent's directory in a /tmp the target's user controls (their own, through a mount
//!   namespace; or the sticky /tmp) is renamed by that user and a symlink put in its place,
//!   in a loop: root never writes, creates or changes the owner of anything elsewhere;
//! - a target that execs another program, or exits, while the `[y/N]` prompt waits, or
//!   since the TUI's dialog showed it, gets one line, nothing written and nothing injected.
//!
//! The root-safety tests run as root against a user made for the test; otherwise SKIPPED.

mod attach_support;
mod common;

use attach_support::{Guard, LOOP, READY_WITHIN, assert_running, leftovers, temp, text, vramscope};
use common::users::TestUser;
use common::wait::{self, wait_for_path};
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const PYTHON: &str = "/usr/bin/python3";

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Run as the test user: renames each fresh directory named `PREFIX...` in `TMP` away and
/// puts a symlink to `TARGET` in its place, until `STOP` exists (60 s at most); prints how
/// many it swapped.
const SWAPPER: &str = "
import os, sys, time
tmp, target, prefix, moved, stop = sys.argv[1:6]
swaps = 0
deadline = time.time() + 60
while not os.path.exists(stop) and time.time() < deadline:
    for name in os.listdir(tmp):
        path = os.path.join(tmp, name)
        if not name.startswith(prefix) or os.path.islink(path):
            continue
        try:
            os.rename(path, os.path.join(moved, 'moved-%d' % swaps))
            os.symlink(target, path)
            swaps += 1
        except OSError:
            pass
print(swaps)
";

/// A root-owned directory holding a 0600 `secret`, watched until dropped: anything else that
/// appears in it, or any change of the secret's owner, mode or text, is recorded.
struct Watched {
    dir: PathBuf,
    done: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<String>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watched {
    fn new(dir: PathBuf) -> Watched {
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let secret = dir.join("secret");
        std::fs::write(&secret, "root's secret").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (flag, log, watched) = (done.clone(), seen.clone(), dir.clone());
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                for problem in Watched::problems(&watched) {
                    let mut log = log.lock().unwrap();
                    if !log.contains(&problem) {
                        log.push(problem);
                    }
                }
                std::thread::sleep(Duration::from_micros(500));
            }
        });
        Watched {
            dir,
            done,
            seen,
            thread: Some(thread),
        }
    }

    fn problems(dir: &Path) -> Vec<String> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            if entry.file_name() != "secret" {
                out.push(format!("{:?} appeared", entry.file_name()));
            }
        }
        let meta = std::fs::symlink_metadata(dir.join("secret")).unwrap();
        if (meta.uid(), meta.gid(), meta.mode() & 0o7777) != (0, 0, 0o600) {
            out.push(format!(
                "secret is now {}:{} mode {:o}",
                meta.uid(),
                meta.gid(),
                meta.mode() & 0o7777
            ));
        }
        if std::fs::read_to_string(dir.join("secret")).unwrap() != "root's secret" {
            out.push("secret was rewritten".to_string());
        }
        out
    }

    /// Everything seen, including now.
    fn stop(mut self) -> Vec<String> {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        let mut seen = self.seen.lock().unwrap().clone();
        for p in Watched::problems(&self.dir) {
            if !seen.contains(&p) {
                seen.push(p);
            }
        }
        seen
    }
}

/// Every entry under `dir` (not following symlinks) that is not owned by `uid`.
fn not_owned_by(dir: &Path, uid: u32) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.uid() != uid {
            out.push(format!("{} is uid {}'s", path.display(), meta.uid()));
        }
        if meta.is_dir() {
            out.extend(not_owned_by(&path, uid));
        }
    }
    out
}

/// Attaches as root `tries` times while the swapper runs; every answer is one of the
/// ordinary ones (attached, failed with one line, pending), never a panic.
fn attach_while_swapped(pid: u32, tries: usize) -> Vec<String> {
    let mut said = Vec::new();
    for _ in 0..tries {
        let out = vramscope(&["attach", "--yes", "--timeout", "1", &pid.to_string()]);
        let err = text(&out.stderr);
        assert!(
            matches!(out.status.code(), Some(0 | 1 | 3)),
            "{:?}: {err}",
            out.status
        );
        assert!(!err.contains("panicked"), "{err}");
        said.push(format!(
            "{:?} {}{}",
            out.status.code(),
            text(&out.stdout).trim(),
            err.trim()
        ));
    }
    said
}

fn start_swapper(
    user: &TestUser,
    tmp: &Path,
    target: &Path,
    pid: u32,
    moved: &Path,
    stop: &Path,
) -> Guard {
    Guard::new(
        user.command(PYTHON)
            .args(["-c", SWAPPER])
            .arg(tmp)
            .arg(target)
            .arg(format!("vramscope-attach-{pid}-"))
            .arg(moved)
            .arg(stop)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

/// The number the swapper printed: how many directories it swapped for a symlink.
fn swaps(swapper: Guard, stop: &Path) -> u64 {
    let (out, err, code) = swapper.finish(stop);
    assert_eq!(code, 0, "{err}");
    out.trim().parse().unwrap()
}

/// §1.1: the target's /tmp is its user's own directory (a mount namespace with a bind mount,
/// as a rootless container has): the user swaps each fresh agent directory for a symlink to a
/// root-owned directory. Root never writes there, and never gives anything there away.
#[test]
fn a_users_own_tmp_swapped_for_a_symlink_never_leads_root_elsewhere() {
    if !(have("unshare") && have("setpriv") && Path::new(PYTHON).exists()) {
        eprintln!("SKIPPED: needs unshare, setpriv and {PYTHON}");
        return;
    }
    let Some(user) = TestUser::create() else {
        eprintln!("SKIPPED: needs root (a test user is made)");
        return;
    };
    let base = temp("own-tmp");
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
    let usertmp = base.join("usertmp");
    std::fs::create_dir(&usertmp).unwrap();
    user.give(&usertmp);
    let moved = base.join("moved");
    std::fs::create_dir(&moved).unwrap();
    user.give(&moved);
    // In its own mount namespace, the user's directory is its /tmp; it runs as the user.
    let script = "mount --bind \"$1\" /tmp && exec setpriv --reuid=\"$2\" --regid=\"$3\" --clear-groups -- \"$4\" -c \"$5\" /tmp/stop";
    let target = Guard::new(
        Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c", script, "sh"])
            .arg(&usertmp)
            .args([user.uid.to_string(), user.gid.to_string()])
            .args([PYTHON, LOOP])
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    wait_for_path(&usertmp.join("stop.ready"), READY_WITHIN);
    let pid = target.id();
    let theirs = std::fs::metadata(format!("/proc/{pid}/root/tmp")).unwrap();
    let made = std::fs::metadata(&usertmp).unwrap();
    assert_eq!((theirs.dev(), theirs.ino()), (made.dev(), made.ino()));
    // Undisturbed, the attach works there, and what it made is the user's.
    let out = vramscope(&["attach", "--yes", &pid.to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains(": armed:"));
    let watched = Watched::new(base.join("rootonly"));
    let stop = base.join("swapper.stop");
    let swapper = start_swapper(&user, &usertmp, &watched.dir, pid, &moved, &stop);
    let said = attach_while_swapped(pid, 12);
    let swapped = swaps(swapper, &stop);
    let seen = watched.stop();
    assert!(
        seen.is_empty(),
        "root was led elsewhere: {seen:?}\n{said:#?}"
    );
    assert!(swapped > 0, "the swapper never swapped: {said:#?}");
    let foreign = not_owned_by(&usertmp, user.uid);
    assert!(foreign.is_empty(), "{foreign:?}");
    let foreign = not_owned_by(&moved, user.uid);
    assert!(foreign.is_empty(), "{foreign:?}");
    assert_running(pid);
    eprintln!("{swapped} swaps; answers: {said:#?}");
    drop(target);
    drop(user);
    std::fs::remove_dir_all(&base).unwrap();
}

/// §1.1 in the ordinary sticky /tmp: the user swaps each fresh agent directory (theirs) for a
/// symlink to a directory they chose. No root-owned file appears there, or anywhere in what
/// the attach made.
#[test]
fn in_the_sticky_tmp_no_root_owned_file_appears_where_the_user_points() {
    if !(have("setpriv") && Path::new(PYTHON).exists()) {
        eprintln!("SKIPPED: needs setpriv and {PYTHON}");
        return;
    }
    let Some(user) = TestUser::create() else {
        eprintln!("SKIPPED: needs root (a test user is made)");
        return;
    };
    let base = temp("sticky");
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = base.join("run");
    let chosen = base.join("chosen");
    let moved = base.join("moved");
    for d in [&run, &chosen, &moved] {
        std::fs::create_dir(d).unwrap();
        user.give(d);
    }
    let stop = run.join("stop");
    let target = Guard::new(
        user.command(PYTHON)
            .args(["-c", LOOP])
            .arg(&stop)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    wait_for_path(&run.join("stop.ready"), READY_WITHIN);
    let pid = target.id();
    let swap_stop = base.join("swapper.stop");
    let swapper = start_swapper(&user, Path::new("/tmp"), &chosen, pid, &moved, &swap_stop);
    let said = attach_while_swapped(pid, 12);
    let swapped = swaps(swapper, &swap_stop);
    assert!(swapped > 0, "the swapper never swapped: {said:#?}");
    let foreign = not_owned_by(&chosen, user.uid);
    assert!(foreign.is_empty(), "{foreign:?}\n{said:#?}");
    let foreign = not_owned_by(&moved, user.uid);
    assert!(foreign.is_empty(), "{foreign:?}");
    assert_running(pid);
    eprintln!("{swapped} swaps; answers: {said:#?}");
    // The swapper's symlinks in /tmp.
    for name in leftovers(pid) {
        let _ = std::fs::remove_file(Path::new("/tmp").join(name));
    }
    drop(target);
    drop(user);
    std::fs::remove_dir_all(&base).unwrap();
}

/// A python that writes `GO.ready`, then busy-waits for `GO` and then execs `argv[2:]` (or
/// exits when there is none).
const CHANGES: &str = "
import os, sys
go = sys.argv[1]
open(go + '.ready', 'w').close()
while not os.path.exists(go):
    pass
if len(sys.argv) > 2:
    os.execv(sys.argv[2], sys.argv[2:])
";

/// `vramscope attach --ptrace PID` with its stdin on a terminal (a pty), its stderr read as it
/// comes: the prompt is asked.
struct Prompted {
    child: std::process::Child,
    master: std::fs::File,
    stderr: Arc<Mutex<String>>,
}

impl Prompted {
    fn start(pid: u32) -> Prompted {
        let (mut master, mut slave) = (0, 0);
        // SAFETY: openpty writes two descriptors; no name, termios or size is asked for.
        let rc = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: both were just opened and are owned here alone.
        let (master, slave) = unsafe {
            (
                std::fs::File::from_raw_fd(master),
                std::fs::File::from_raw_fd(slave),
            )
        };
        let mut child = Command::new(env!("CARGO_BIN_EXE_vramscope"))
            .args(["attach", "--ptrace", &pid.to_string()])
            .stdin(Stdio::from(slave))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stderr.take().unwrap();
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let p = Prompted {
            child,
            master,
            stderr,
        };
        p.wait_until("the prompt never came", |err| err.ends_with("[y/N] "));
        p
    }

    fn wait_until(&self, what: &str, ok: impl Fn(&str) -> bool) {
        let seen = wait::poll(Duration::from_secs(60), wait::POLL, || {
            ok(&self.stderr.lock().unwrap()).then_some(())
        });
        assert!(seen.is_ok(), "{what}: {}", self.stderr.lock().unwrap());
    }

    /// Answers `y` and returns the exit status and what came after the prompt.
    fn confirm(mut self) -> (Option<i32>, String, String) {
        self.master.write_all(b"y\n").unwrap();
        let status = wait::wait_for("attach to end", Duration::from_secs(60), || {
            self.child.try_wait().unwrap()
        });
        self.wait_until("stderr never closed", |_| true);
        let mut out = String::new();
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        // The reader thread has seen everything once the child is gone and a moment passed
        // for its last read: poll for the line that must follow the prompt.
        let after = || {
            let err = self.stderr.lock().unwrap().clone();
            err.rsplit("[y/N] ").next().unwrap_or("").to_string()
        };
        let after = wait::poll(Duration::from_secs(10), wait::POLL, || {
            Some(after()).filter(|a| a.ends_with('\n'))
        })
        .unwrap_or_else(|_| after());
        (status.code(), out, after)
    }
}

fn exe_of(pid: u32) -> String {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Waits for `pid` to run a program whose path ends in `ends`; the failure names the one it
/// runs.
fn wait_exe(pid: u32, ends: &str) {
    let execd = wait::poll(Duration::from_secs(60), wait::POLL, || {
        exe_of(pid).ends_with(ends).then_some(())
    });
    assert!(execd.is_ok(), "never exec'd {ends}: {}", exe_of(pid));
}

fn spawn_changing(dir: &Path, then: &[&str]) -> Guard {
    Guard::new(
        Command::new(PYTHON)
            .args(["-c", CHANGES])
            .arg(dir.join("go"))
            .args(then)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

/// §1.4: the target execs `sleep` while the prompt waits: one line, nothing placed in its
/// /tmp, nothing injected (it runs on, untraced, as `sleep`).
#[test]
fn a_target_that_execs_during_the_confirmation_gets_nothing() {
    if !Path::new(PYTHON).exists() {
        eprintln!("SKIPPED: needs {PYTHON}");
        return;
    }
    let dir = temp("exec-prompt");
    let target = spawn_changing(&dir, &["/bin/sleep", "30"]);
    let pid = target.id();
    wait_for_path(&dir.join("go.ready"), READY_WITHIN);
    let prompted = Prompted::start(pid);
    std::fs::write(dir.join("go"), "").unwrap();
    wait_exe(pid, "/sleep");
    let (code, out, after) = prompted.confirm();
    assert_eq!(
        (code, out.as_str(), after.as_str()),
        (
            Some(2),
            "",
            format!(
                "vramscope: process {pid} runs another program than the one checked (it called exec): nothing done\n"
            )
            .as_str()
        )
    );
    assert_running(pid);
    assert!(leftovers(pid).is_empty(), "{:?}", leftovers(pid));
    assert!(exe_of(pid).ends_with("/sleep"));
    drop(target);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// §1.4: the target exits (and is reaped) while the prompt waits: one line, nothing placed.
#[test]
fn a_target_that_exits_during_the_confirmation_gets_nothing() {
    if !Path::new(PYTHON).exists() {
        eprintln!("SKIPPED: needs {PYTHON}");
        return;
    }
    let dir = temp("exit-prompt");
    let mut target = spawn_changing(&dir, &[]);
    let pid = target.id();
    wait_for_path(&dir.join("go.ready"), READY_WITHIN);
    let prompted = Prompted::start(pid);
    std::fs::write(dir.join("go"), "").unwrap();
    assert!(target.child().wait().unwrap().success());
    let (code, out, after) = prompted.confirm();
    assert_eq!(
        (code, out.as_str(), after.as_str()),
        (
            Some(2),
            "",
            format!("vramscope: process {pid} exited before the attach: nothing done\n").as_str()
        )
    );
    assert!(leftovers(pid).is_empty(), "{:?}", leftovers(pid));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The identity `vramscope attach --shown-as` takes, read here the way a dialog would.
fn identity_of(pid: u32) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let start = stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .nth(19)
        .unwrap()
        .to_string();
    let exe = std::fs::metadata(format!("/proc/{pid}/exe")).unwrap();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let auxv = std::fs::read(format!("/proc/{pid}/auxv")).unwrap();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in auxv {
        hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{start}:{}:{}:{uid}:{hash:x}", exe.dev(), exe.ino())
}

/// §1.4 for the TUI's `a`: its dialog showed a Python that then exec'd another Python; the
/// attach it starts (`--yes --shown-as`) refuses with one line and places nothing.
#[test]
fn a_target_that_execd_since_the_tui_showed_it_gets_nothing() {
    let other = [
        "/usr/local/bin/python3",
        "/root/.pyenv/versions/3.11.7/bin/python3.11",
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|p| {
        p.exists()
            && std::fs::canonicalize(p).ok() != std::fs::canonicalize(PYTHON).ok()
            && have(p.to_str().unwrap())
    });
    let Some(other) = other.filter(|_| Path::new(PYTHON).exists()) else {
        eprintln!("SKIPPED: needs {PYTHON} and a second Python build");
        return;
    };
    let dir = temp("exec-tui");
    let target = spawn_changing(
        &dir,
        &[other.to_str().unwrap(), "-c", "import time; time.sleep(30)"],
    );
    let pid = target.id();
    wait_for_path(&dir.join("go.ready"), READY_WITHIN);
    let shown = identity_of(pid);
    // Unchanged, the identity shown is accepted (so the refusal below is the exec's).
    let same = vramscope(&["attach", "--yes", "--shown-as", &shown, &pid.to_string()]);
    assert_eq!(same.status.code(), Some(0), "{}", text(&same.stderr));
    std::fs::write(dir.join("go"), "").unwrap();
    // The whole path: /usr/bin/python3.11 and a pyenv python3.11 share their file name, and a
    // wait on the name alone returned before the exec (the attach then met it half done).
    let other_exe = std::fs::canonicalize(&other).unwrap();
    wait_exe(pid, other_exe.to_str().unwrap());
    let out = vramscope(&["attach", "--yes", "--shown-as", &shown, &pid.to_string()]);
    assert_eq!(
        (out.status.code(), text(&out.stdout), text(&out.stderr)),
        (
            Some(2),
            String::new(),
            format!(
                "vramscope: process {pid} runs another program than the one checked (it called exec): nothing done\n"
            )
        )
    );
    assert_running(pid);
    assert!(leftovers(pid).is_empty(), "{:?}", leftovers(pid));
    drop(target);
    std::fs::remove_dir_all(&dir).unwrap();
}
