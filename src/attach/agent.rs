//! The agent's files, placed where the target reads them: a fresh directory in its own /tmp
//! (through /proc/PID/root, so a container's /tmp is the container's), owned by the target's
//! user, holding the entry script (`boot.py` for `sys.remote_exec`, the same text the ptrace
//! path queues), the agent, the request, and the embedded writer package. Nothing is
//! installed into the program's environment; the agent removes the directory once done, and
//! each attach or detach removes what a killed one left (`sweep`).

use crate::inject::PACKAGE;
use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The entry script the bootstrap runs.
pub const AGENT: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/assets/attach_agent.py"
));

/// One placed agent: where vramscope sees it and where the target does.
pub struct Placed {
    /// Through `/proc/self/fd/N/`: still this directory after the target exits (and its
    /// `/proc/PID/root` with it), so vramscope can remove what it placed.
    pub here: PathBuf,
    pub there: String,
    _tmp: fs::File,
    /// `waiter`, locked while vramscope waits for the answer: the agent removes the
    /// directory itself when it can take the lock (vramscope gave up, or was killed).
    _waiter: fs::File,
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

/// Writes the agent under `root`/tmp (root: `/proc/PID/root`), owned by `uid`/`gid`.
pub fn place(root: &Path, pid: i32, uid: u32, gid: u32, request: Request) -> io::Result<Placed> {
    // Held open for as long as the agent is placed; a /tmp that is a symlink is refused.
    let tmp_dir = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(root.join("tmp"))?;
    let tmp = PathBuf::from(format!("/proc/self/fd/{}", tmp_dir.as_raw_fd()));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    sweep(&tmp, uid);
    let name = format!("vramscope-attach-{pid}-{nanos}");
    let here = tmp.join(&name);
    // A fresh name: creating fails rather than reuse anything that is there.
    DirBuilder::new().mode(0o700).create(&here)?;
    let result = (|| {
        // The waiter first, locked as soon as it exists: a `sweep` takes a directory whose
        // waiter is free (or missing, once it is old) for one a killed vramscope left.
        let mut waiter = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(here.join("waiter"))?;
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(waiter.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(io::Error::last_os_error());
        }
        waiter.write_all(std::process::id().to_string().as_bytes())?;
        write(&here.join("agent.py"), AGENT)?;
        // What `sys.remote_exec` runs (3.14): the same bootstrap the ptrace path queues.
        write(&here.join("boot.py"), &bootstrap(&format!("/tmp/{name}")))?;
        write(&here.join("request"), request.word())?;
        for (path, text) in PACKAGE {
            let target = here.join("lib/vramscope").join(path);
            if let Some(parent) = target.parent() {
                DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(parent)?;
            }
            write(&target, text)?;
        }
        chown_tree(&here, uid, gid)?;
        Ok(waiter)
    })();
    match result {
        Ok(waiter) => Ok(Placed {
            here,
            there: format!("/tmp/{name}"),
            _tmp: tmp_dir,
            _waiter: waiter,
        }),
        Err(e) => {
            let _ = fs::remove_dir_all(&here);
            Err(e)
        }
    }
}

fn write(path: &Path, text: &str) -> io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    f.write_all(text.as_bytes())
}

fn chown_tree(dir: &Path, uid: u32, gid: u32) -> io::Result<()> {
    std::os::unix::fs::lchown(dir, Some(uid), Some(gid))?;
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if fs::symlink_metadata(&path)?.is_dir() {
            chown_tree(&path, uid, gid)?;
        } else {
            std::os::unix::fs::lchown(&path, Some(uid), Some(gid))?;
        }
    }
    Ok(())
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

/// The agent's answer, once it wrote one.
pub fn status(placed: &Placed) -> Option<String> {
    let text = fs::read_to_string(placed.here.join("status")).ok()?;
    Some(crate::channel::sanitize(text.trim().as_bytes()))
}

/// Stops waiting (the lock goes with `placed`): the agent removes its directory itself when
/// it runs.
pub fn stop_waiting(placed: Placed) {
    // It may have run in between: then nobody else removes the directory.
    if placed.here.join("status").exists() {
        let _ = fs::remove_dir_all(&placed.here);
    }
}

/// Marks the agent queued: a later `sweep` leaves it for the agent to remove.
pub fn queued(placed: &Placed) {
    let _ = write(&placed.here.join("queued"), "");
}

/// Removes what killed attaches left in this /tmp: each `vramscope-attach-PID-N` directory
/// owned by `uid` (the agent's user: never another user's) that nobody waits on (its
/// `waiter` lock is free) and that no agent will still use: never queued (vramscope was
/// killed before queueing it), already answered (killed while reading the answer), or whose
/// process is gone (it exited with the agent still pending). One that is queued for a live
/// process is the agent's to remove when it runs.
fn sweep(tmp: &Path, uid: u32) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("vramscope-attach-")
            .and_then(|rest| rest.split_once('-'))
            .filter(|(pid, n)| {
                !pid.is_empty()
                    && !n.is_empty()
                    && pid.bytes().all(|c| c.is_ascii_digit())
                    && n.bytes().all(|c| c.is_ascii_digit())
            })
            .map(|(pid, _)| pid.to_string())
        else {
            continue;
        };
        let dir = entry.path();
        // Not through a symlink, and only the agent's user's.
        let age = match fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() && m.uid() == uid => m
                .modified()
                .ok()
                .and_then(|t| t.elapsed().ok())
                .unwrap_or_default(),
            _ => continue,
        };
        let live = Path::new(&format!("/proc/{pid}")).exists();
        let in_use = live && dir.join("queued").exists() && !dir.join("status").exists();
        if in_use {
            continue;
        }
        let Ok(waiter) = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(dir.join("waiter"))
        else {
            // Killed in the microseconds between making it and its waiter; a young one may
            // be another vramscope's, being placed right now.
            if age > std::time::Duration::from_secs(5) {
                let _ = fs::remove_dir_all(&dir);
            }
            continue;
        };
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(waiter.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            let _ = fs::remove_dir_all(&dir);
        }
    }
}

/// Removes the directory (the agent answered, or was never queued).
pub fn remove(placed: &Placed) {
    let _ = fs::remove_dir_all(&placed.here);
}

#[cfg(test)]
mod tests {
    use super::*;

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
