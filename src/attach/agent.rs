//! The agent's files, placed where the target reads them: a fresh directory in its own /tmp
//! (through /proc/PID/root, so a container's /tmp is the container's), holding the entry
//! script (`boot.py` for `sys.remote_exec`, the same text the ptrace path queues), the agent,
//! the request, and the embedded writer package. Nothing is installed into the program's
//! environment; the agent removes the directory once done, and each attach or detach removes
//! what a killed one left (`sweep`).
//!
//! That /tmp may be the target's user's own (a rootless container, a bind mount), so root
//! works in it only by descriptor and only as that user (the threat model's rule): the /tmp
//! is opened once, the fresh directory right after it is made, every file is created, read
//! and removed relative to those, on a thread whose filesystem identity is the user's. A
//! directory the user renames or swaps for a symlink can then lead the work only to files
//! the user could touch anyway, and no change of owner is ever needed.

use crate::job::inject::PACKAGE;
use crate::safe_fs::{Dir, Kind, Trust, as_user, bounds, read_bounded};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::time::Duration;

/// The entry script the bootstrap runs.
pub const AGENT: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/assets/attach_agent.py"
));

/// How a placed agent's directory is named: `vramscope-attach-PID-NANOS`.
const PREFIX: &str = "vramscope-attach-";
/// What its name ends with while it is being filled: a `sweep` takes only complete ones (whose
/// `waiter` is locked from the moment the name exists) for what a killed vramscope left.
const STAGING: &str = ".new";
/// How old a directory without its waiter (or still staged) must be before a `sweep` takes
/// it for a killed attach's: a young one may be another vramscope's, being placed right now.
const ABANDONED_AFTER: Duration = Duration::from_secs(5);
/// The most names a `sweep` reads in a /tmp.
const SWEEP_MAX_ENTRIES: usize = 1 << 16;

/// One placed agent. Everything is held by descriptor: the target's /tmp, opened once through
/// its `/proc/PID/root`, and the agent's own directory, opened right after it was made; no
/// path in a place the target's user controls is resolved again.
pub struct Placed {
    tmp: Dir,
    dir: Dir,
    /// Its name in `tmp`.
    name: OsString,
    /// What the target opens, in its own file system: `/tmp/NAME`.
    pub there: String,
    /// Whose /tmp it is: every file operation in it is done as this user ([`as_user`]).
    uid: u32,
    gid: u32,
    /// `waiter`, locked while vramscope waits for the answer: the agent removes the
    /// directory itself when it can take the lock (vramscope gave up, or was killed).
    _waiter: File,
}

/// What the agent is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    Attach,
    Detach,
}

impl Request {
    fn word(self) -> &'static str {
        match self {
            Request::Attach => "attach",
            Request::Detach => "detach",
        }
    }
}

/// Writes the agent into `tmp` (the target's /tmp) as `uid`/`gid`, the target's user: a
/// /tmp that user controls (their own container's, a bind mount) can then only lead the
/// writes to files the user could write anyway, and every file is theirs with no change of
/// owner. A /tmp that someone else may write (not root's or the user's, or writable by others
/// without the sticky bit) is refused.
pub fn place(tmp: Dir, pid: i32, uid: u32, gid: u32, request: Request) -> io::Result<Placed> {
    if let Some(why) = Trust::OwnedBy(uid).folder(&tmp.stat()?) {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} {why}", tmp.shown().display()),
        ));
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let name = OsString::from(format!("{PREFIX}{pid}-{nanos}"));
    let (dir, waiter) = as_user(uid, gid, || {
        sweep(&tmp, uid);
        let mut staged = name.clone();
        staged.push(STAGING);
        // A fresh name: creating fails rather than reuse anything that is there.
        tmp.create_dir(&staged, 0o700)?;
        let filled = tmp.sub(&staged).and_then(|dir| {
            let waiter = fill(&dir, &name, request)?;
            tmp.rename(&staged, &name)?;
            Ok((dir, waiter))
        });
        if filled.is_err() {
            let _ = tmp.remove_tree(&staged);
        }
        filled
    })??;
    Ok(Placed {
        tmp,
        dir,
        there: format!("/tmp/{}", name.to_string_lossy()),
        name,
        uid,
        gid,
        _waiter: waiter,
    })
}

/// The agent's files in its fresh directory `dir`, to be named `name`; the waiter, locked.
fn fill(dir: &Dir, name: &OsStr, request: Request) -> io::Result<File> {
    // The waiter first, locked as soon as it exists: a `sweep` takes a directory whose
    // waiter is free for one a killed vramscope left.
    let mut waiter = dir.create_new(OsStr::new("waiter"), 0o600)?;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(waiter.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(io::Error::last_os_error());
    }
    waiter.write_all(std::process::id().to_string().as_bytes())?;
    write(dir, "agent.py", AGENT)?;
    // What `sys.remote_exec` runs (3.14): the same bootstrap the ptrace path queues.
    let there = format!("/tmp/{}", name.to_string_lossy());
    write(dir, "boot.py", &bootstrap(&there))?;
    write(dir, "request", request.word())?;
    for (path, text) in PACKAGE {
        let mut parts: Vec<&str> = ["lib", "vramscope"].into_iter().collect();
        parts.extend(path.split('/'));
        let Some((file, folders)) = parts.split_last() else {
            continue;
        };
        write(&folders_in(dir, folders)?, file, text)?;
    }
    Ok(waiter)
}

/// `dir`/`folders...`, each made (0700) where it is not there yet and opened without
/// following.
fn folders_in(dir: &Dir, folders: &[&str]) -> io::Result<Dir> {
    let mut here = dir.try_clone()?;
    for folder in folders {
        let name = OsStr::new(folder);
        match here.create_dir(name, 0o700) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        here = here.sub(name)?;
    }
    Ok(here)
}

fn write(dir: &Dir, name: &str, text: &str) -> io::Result<()> {
    dir.create_new(OsStr::new(name), 0o600)?
        .write_all(text.as_bytes())
}

/// The text `PyRun_SimpleString` runs in `__main__`: one `try` statement that binds no name
/// there. It execs a short loader in a fresh namespace, which reads the agent (closing the
/// file: an unclosed one would leave a `__warningregistry__` in the namespace it ran in) and
/// runs it in another; nothing it raises escapes (a pending call that failed would turn into
/// a SystemError in the program).
pub fn bootstrap(there: &str) -> String {
    let loader = "with open(d + '/agent.py', 'rb') as f:\n    c = f.read()\n\
                  exec(compile(c, d + '/agent.py', 'exec'), {'__name__': '__vramscope_attach__', \
                  '__builtins__': __builtins__, '__vramscope_dir__': d})\n";
    format!(
        "try:\n    __import__('builtins').exec({loader:?}, {{'d': {there:?}, \
         '__builtins__': __import__('builtins')}})\nexcept BaseException:\n    pass\n"
    )
}

/// The agent's answer, once it wrote one: read as the target's user, at most
/// [`bounds::AGENT_STATUS`], a regular file only (its user could put a FIFO or a huge file
/// under that name). What cannot be read is a failure, said as such.
pub fn status(placed: &Placed) -> Option<String> {
    let read = as_user(placed.uid, placed.gid, || {
        let file = match placed.dir.open_read(OsStr::new("status")) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
            Err(e) => return Some(format!("failed: its answer cannot be read: {e}")),
        };
        Some(match read_bounded(&file, bounds::AGENT_STATUS) {
            Ok(text) => crate::channel::sanitize(String::from_utf8_lossy(&text).trim().as_bytes()),
            Err(e) => format!("failed: its answer {e}"),
        })
    });
    read.unwrap_or_else(|e| Some(format!("failed: its answer cannot be read: {e}")))
}

/// Stops waiting (the lock goes with `placed`): the agent removes its directory itself when
/// it runs.
pub fn stop_waiting(placed: Placed) {
    // It may have run in between: then nobody else removes the directory.
    let _ = as_user(placed.uid, placed.gid, || {
        if placed.dir.stat_at(OsStr::new("status")).is_ok() {
            remove_own(&placed);
        }
    });
}

/// Marks the agent queued: a later `sweep` leaves it for the agent to remove.
pub fn queued(placed: &Placed) {
    let _ = as_user(placed.uid, placed.gid, || {
        placed.dir.create_new(OsStr::new("queued"), 0o600)
    });
}

/// Removes the directory (the agent answered, or was never queued).
pub fn remove(placed: &Placed) {
    let _ = as_user(placed.uid, placed.gid, || remove_own(placed));
}

/// Removes what `placed.name` names in the target's /tmp if it still is the directory that
/// was made (not something the user renamed into its place). Called as the user.
fn remove_own(placed: &Placed) {
    let same = match (placed.tmp.stat_at(&placed.name), placed.dir.stat()) {
        (Ok(there), Ok(made)) => there.same_file(&made),
        _ => false,
    };
    if same {
        let _ = placed.tmp.remove_tree(&placed.name);
    }
}

/// A placed agent's directory name: its pid, and whether it is still staged.
fn parse_name(name: &OsStr) -> Option<(&str, bool)> {
    let rest = name.to_str()?.strip_prefix(PREFIX)?;
    let (rest, staged) = match rest.strip_suffix(STAGING) {
        Some(rest) => (rest, true),
        None => (rest, false),
    };
    let (pid, n) = rest.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
    (digits(pid) && digits(n)).then_some((pid, staged))
}

/// Removes what killed attaches left in this /tmp: each `vramscope-attach-PID-N` directory
/// owned by `uid` (the agent's user: never another user's) that nobody waits on (its
/// `waiter` lock is free) and that no agent will still use: never queued (vramscope was
/// killed before queueing it), already answered (killed while reading the answer), or whose
/// process is gone (it exited with the agent still pending). One that is queued for a live
/// process is the agent's to remove when it runs; one still staged, or without its waiter, is
/// taken only once [`ABANDONED_AFTER`] old. Called as `uid`, relative to `tmp`.
fn sweep(tmp: &Dir, uid: u32) {
    let Ok(entries) = tmp.entries(SWEEP_MAX_ENTRIES) else {
        return;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default();
    for entry in entries {
        let Some((pid, staged)) = parse_name(&entry.name) else {
            continue;
        };
        // Not through a symlink, and only the agent's user's.
        let Ok(st) = tmp.stat_at(&entry.name) else {
            continue;
        };
        if st.kind != Kind::Dir || st.uid != uid {
            continue;
        }
        let old = now.saturating_sub(st.mtime) > ABANDONED_AFTER.as_secs() as i64;
        if staged {
            if old {
                let _ = tmp.remove_tree(&entry.name);
            }
            continue;
        }
        let Ok(dir) = tmp.sub(&entry.name) else {
            continue;
        };
        let has = |name: &str| dir.stat_at(OsStr::new(name)).is_ok();
        // path-ok: /proc/PID is the kernel's, named by a number.
        let live = std::path::Path::new(&format!("/proc/{pid}")).exists();
        if live && has("queued") && !has("status") {
            continue;
        }
        let Ok(waiter) = dir.open_file(
            OsStr::new("waiter"),
            libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY,
            0,
        ) else {
            if old {
                let _ = tmp.remove_tree(&entry.name);
            }
            continue;
        };
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(waiter.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            let _ = tmp.remove_tree(&entry.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn bootstrap_runs_the_agent_without_touching_main_globals() {
        // The bootstrap's text, exec'd in a module namespace, must bind nothing there.
        let dir = std::env::temp_dir().join(format!("vramscope-boot-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        fs::write(
            dir.join("agent.py"),
            "import sys\nsys.stdout.write('ran in %s with %s\\n' % (__name__, __vramscope_dir__))\n",
        )
        .unwrap();
        let code = bootstrap(dir.to_str().unwrap());
        let script = format!(
            "g = {{'__name__': '__main__'}}\nexec({code:?}, g)\nprint(sorted(k for k in g if k != '__builtins__'))\n"
        );
        let out = std::process::Command::new("python3")
            .args(["-c", &script])
            .output();
        let Ok(out) = out else {
            eprintln!("SKIPPED: python3 is not installed");
            return;
        };
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            stdout,
            format!(
                "ran in __vramscope_attach__ with {}\n['__name__']\n",
                dir.display()
            )
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
