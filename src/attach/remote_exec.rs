//! CPython 3.14 and later: PEP 768's `sys.remote_exec(pid, script)`, the interpreter's own
//! safe external debugger interface. The target is never stopped: the calling interpreter
//! writes the script's path into the target's main thread state and sets its eval breaker
//! (through `process_vm_writev`, which needs the same rights as ptrace), and the target runs
//! the script at its next safe point, in a namespace of its own.
//!
//! Which interpreter calls it: `sys.remote_exec` works only between the same minor version
//! (and the same free-threaded or not build), and reads the target's `_Py_DebugOffsets`
//! itself, so vramscope runs a real interpreter of that version rather than reimplementing
//! the protocol from the offsets: the offsets' layout changes between minor versions, the
//! interpreter's own code follows them by construction. In order: `--python PATH` when
//! given; the target's own executable (`/proc/PID/exe`, when the target is in this mount
//! namespace: then it is runnable here as it is there, and is the exact build); else
//! `pythonX.Y` (`pythonX.Yt` for a free-threaded target) on PATH. Each runs isolated
//! (`-I -S`: no environment variable, user site or `site` of the user's touches it), and
//! checks its own version before calling. None is run that someone other than root or this
//! user could have replaced (`trusted`): root attaching to a user's process never runs that
//! user's own build of Python.
//!
//! Only in this mount namespace: `sys.remote_exec` opens the target's mapped files and checks
//! the script's path in its own file system, which a container's paths are not. A target in
//! another one is attached through ptrace (`super::ptrace`).

use super::process::Identity;
use super::target::Target;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The program each candidate runs: checks its version, then that the pid is still the
/// process vramscope checked (start time, executable, uid, image: `Identity::token`'s form), then
/// queues the script. Exit 3: not the version asked for (try the next candidate); 4: refused
/// for want of rights; 5: any other failure, its message on stdout; 6: not the same process.
const CALL: &str = "\
import os, sys
pid, script, want, ident = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
have = '%d.%d%s' % (sys.version_info[0], sys.version_info[1],
                    't' if not getattr(sys, '_is_gil_enabled', lambda: True)() else '')
if have != want or not hasattr(sys, 'remote_exec'):
    print(have)
    sys.exit(3)
def now():
    with open('/proc/%d/stat' % pid) as f:
        stat = f.read(65536)
    with open('/proc/%d/status' % pid) as f:
        uid = [l.split()[1] for l in f.read(65536).splitlines() if l.startswith('Uid:')][0]
    exe = os.stat('/proc/%d/exe' % pid)
    with open('/proc/%d/auxv' % pid, 'rb') as f:
        auxv = f.read(65536)
    h = 0xcbf29ce484222325
    for b in auxv:
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    start = stat[stat.rfind(')') + 1:].split()[19]
    return '%s:%d:%d:%s:%x' % (start, exe.st_dev, exe.st_ino, uid, h)
try:
    same = now() == ident
except BaseException:
    same = False
if not same:
    sys.exit(6)
try:
    sys.remote_exec(pid, script)
except PermissionError as e:
    print(e)
    sys.exit(4)
except BaseException as e:
    print('%s: %s' % (type(e).__name__, e))
    sys.exit(5)
";

/// Why the call did not queue the script.
#[derive(Debug, PartialEq, Eq)]
pub enum Failure {
    /// No candidate interpreter of the target's version runs here: what each was.
    NoInterpreter(String),
    /// The kernel refused access to the target's memory.
    Refused(String),
    /// The target has remote debugging off (`Remote debugging is not enabled...`).
    Disabled,
    Other(String),
    /// The process is no longer the one checked: the line saying how.
    Changed(String),
    /// The caller found the process changed right before it would have called.
    ChangedBeforeCall,
}

/// The version the calling interpreter must have, as `CALL` spells it: `3.14` or `3.14t`.
pub fn wanted_version(target: &Target) -> Option<String> {
    let (major, minor) = target.python_version()?;
    let file = target.python_file()?;
    let name = file.rsplit('/').next().unwrap_or(file);
    let prefix = name
        .strip_prefix("libpython")
        .or_else(|| name.strip_prefix("python"))
        .unwrap_or("");
    let free_threaded = prefix
        .strip_prefix(&format!("{major}.{minor}"))
        .is_some_and(|rest| rest.starts_with('t'));
    Some(format!(
        "{major}.{minor}{}",
        if free_threaded { "t" } else { "" }
    ))
}

/// Whether `pid` sees the same file system root as this process (same mount namespace).
pub fn same_mount_namespace(pid: i32) -> bool {
    let ns = |p: String| std::fs::read_link(p).ok();
    match (
        ns(format!("/proc/{pid}/ns/mnt")),
        ns("/proc/self/ns/mnt".to_string()),
    ) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// The interpreters to try, in order (see the module's doc).
pub fn candidates(target: &Target, explicit: Option<&Path>, want: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(p) = explicit {
        out.push(p.to_path_buf());
        // What the user named is the one to use: no other is tried behind their back.
        return out;
    }
    if !target.exe.is_empty() && Path::new(&target.exe).is_absolute() {
        out.push(PathBuf::from(&target.exe));
    }
    let name = format!("python{want}");
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(&name);
            if p.is_file() && !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// Queues `script` (the path the target sees) through the first candidate of version `want`,
/// which calls only while the pid is still the process `expected` describes.
pub fn queue(
    pid: i32,
    script: &str,
    want: &str,
    expected: &Identity,
    candidates: &[PathBuf],
) -> Result<(), Failure> {
    let mut tried = Vec::new();
    let euid = crate::channel::euid();
    for python in candidates {
        let shown = crate::channel::sanitize(python.to_string_lossy().as_bytes());
        if let Err(why) = trusted(python, euid) {
            tried.push(format!("{shown} {why}: not run as uid {euid}"));
            continue;
        }
        let out = Command::new(python)
            .args(["-I", "-S", "-c", CALL, &pid.to_string(), script, want])
            .arg(expected.token())
            // The caller's own remote debugging must be on (`-I` ignores the variable; a
            // removed one cannot be read by a different build either).
            .env_remove("PYTHON_DISABLE_REMOTE_DEBUG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output();
        let out = match out {
            Ok(out) => out,
            Err(e) => {
                tried.push(format!("{shown}: {e}"));
                continue;
            }
        };
        let said = crate::channel::sanitize(String::from_utf8_lossy(&out.stdout).trim().as_bytes());
        match out.status.code() {
            Some(0) => return Ok(()),
            Some(3) => tried.push(format!("{shown} is Python {said}")),
            Some(4) => return Err(Failure::Refused(said)),
            Some(5) if said.contains("Remote debugging is not enabled in the remote process") => {
                return Err(Failure::Disabled);
            }
            Some(5) => return Err(Failure::Other(said)),
            Some(6) => return Err(Failure::ChangedBeforeCall),
            _ => {
                let err = String::from_utf8_lossy(&out.stderr);
                let last = err.lines().last().unwrap_or("no output");
                tried.push(format!(
                    "{shown} did not run ({})",
                    crate::channel::sanitize(last.as_bytes())
                ));
            }
        }
    }
    if tried.is_empty() {
        tried.push(format!("no python{want} on PATH"));
    }
    Err(Failure::NoInterpreter(tried.join("; ")))
}

/// Whether running `path` as `euid` runs what `euid` or root put there: the file and every
/// folder above it owned by one of them and writable by nobody else. Root attaching to a
/// user's process must not run a binary that user could have replaced (their own build of
/// Python in their home): that would run their code as root.
fn trusted(path: &Path, euid: u32) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let mut at = Some(path);
    while let Some(p) = at {
        if p.as_os_str().is_empty() {
            break;
        }
        let m = std::fs::metadata(p).map_err(|e| format!("cannot be checked ({e})"))?;
        if m.uid() != 0 && m.uid() != euid {
            return Err(format!(
                "is under uid {}'s control ({})",
                m.uid(),
                p.display()
            ));
        }
        if m.mode() & 0o022 != 0 {
            return Err(format!(
                "is under others' control ({} is writable)",
                p.display()
            ));
        }
        at = p.parent();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(exe: &str) -> Target {
        Target {
            pid: 7,
            state: 'S',
            uid: 0,
            tracer: 0,
            command: String::new(),
            environ: Vec::new(),
            args: Vec::new(),
            mapped: vec![(0x1000, exe.to_string())],
            exe: exe.to_string(),
            other_pid_namespace: false,
        }
    }

    #[test]
    fn the_version_asked_for_follows_the_targets_file() {
        assert_eq!(
            wanted_version(&target("/usr/bin/python3.14")).as_deref(),
            Some("3.14")
        );
        assert_eq!(
            wanted_version(&target("/usr/bin/python3.14t")).as_deref(),
            Some("3.14t")
        );
        let mut lib = target("/usr/bin/python3");
        lib.mapped
            .push((0x2000, "/opt/py/lib/libpython3.15t.so.1.0".to_string()));
        assert_eq!(wanted_version(&lib).as_deref(), Some("3.15t"));
    }

    #[test]
    fn an_explicit_interpreter_is_the_only_candidate() {
        let t = target("/usr/bin/python3.14");
        let given = PathBuf::from("/opt/python3.14/bin/python3.14");
        assert_eq!(candidates(&t, Some(&given), "3.14"), vec![given]);
        let found = candidates(&t, None, "3.14");
        assert_eq!(found.first(), Some(&PathBuf::from("/usr/bin/python3.14")));
    }

    #[test]
    fn only_an_interpreter_nobody_else_controls_is_run() {
        use std::os::unix::fs::PermissionsExt;
        let me = crate::channel::euid();
        assert_eq!(trusted(Path::new("/bin/sh"), me), Ok(()));
        let dir = std::env::temp_dir().join(format!("vramscope-trust-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let file = dir.join("python3.14");
        std::fs::write(&file, "").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o777)).unwrap();
        // World-writable: anyone could have put their code there.
        let why = trusted(&file, me).unwrap_err();
        assert!(why.contains("writable"), "{why}");
        // Someone else's (as root: a file of uid 4242's, writable by them alone).
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        if me == 0 {
            std::os::unix::fs::lchown(&file, Some(4242), None).unwrap();
            let err = trusted(&file, 0).unwrap_err();
            assert!(err.contains("is under uid 4242's control"), "{err}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The caller compares the identity itself right before `sys.remote_exec`: a process
    /// that is no longer the one checked gets nothing (the next call, with the right
    /// identity, runs and the first never does).
    #[test]
    fn the_caller_calls_only_while_the_pid_is_the_process_checked() {
        let py = match std::env::var("VRAMSCOPE_PYTHON314") {
            Ok(py) if !py.is_empty() => PathBuf::from(py),
            _ => {
                eprintln!("SKIPPED: needs VRAMSCOPE_PYTHON314 (a CPython 3.14)");
                return;
            }
        };
        let dir = tempfile::tempdir().unwrap();
        let ready = dir.path().join("ready");
        let child = Command::new(&py)
            .args([
                "-c",
                "import sys\nopen(sys.argv[1], 'w').close()\nwhile True: sum(range(100))",
                ready.to_str().unwrap(),
            ])
            .spawn()
            .unwrap();
        // Killed when the test ends, passed or failed.
        struct Killed(std::process::Child);
        impl Drop for Killed {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        let child = Killed(child);
        let pid = child.0.id() as i32;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let wait = |path: &Path, what: &str| {
            while !path.exists() {
                assert!(std::time::Instant::now() < deadline, "{what}");
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        };
        wait(&ready, "python never started");
        let script = |name: &str| {
            let marker = dir.path().join(name);
            let script = dir.path().join(format!("{name}.py"));
            std::fs::write(&script, format!("open({:?}, 'w').close()\n", marker)).unwrap();
            (marker, script.to_string_lossy().into_owned())
        };
        let process = super::super::process::Process::bind(pid).unwrap();
        let mut stale = process.identity();
        stale.image ^= 1;
        let (stale_marker, stale_script) = script("stale");
        let candidates = [py];
        assert_eq!(
            queue(pid, &stale_script, "3.14", &stale, &candidates),
            Err(Failure::ChangedBeforeCall)
        );
        let (marker, fresh) = script("fresh");
        assert_eq!(
            queue(pid, &fresh, "3.14", &process.identity(), &candidates),
            Ok(())
        );
        wait(&marker, "the right call never ran");
        assert!(!stale_marker.exists(), "called into a process that changed");
    }

    #[test]
    fn a_candidate_that_does_not_run_is_named() {
        let missing = PathBuf::from("/nonexistent/vramscope-test/python3.14");
        let Err(Failure::NoInterpreter(line)) = queue(
            1,
            "/tmp/x.py",
            "3.14",
            &Identity::parse("1:2:3:4:5").unwrap(),
            &[missing],
        ) else {
            panic!("a missing interpreter queued something");
        };
        assert!(
            line.starts_with("/nonexistent/vramscope-test/python3.14 cannot be checked (")
                && line.contains("No such file"),
            "{line}"
        );
    }
}
