//! `vramscope run -- CMD`: the launched job. Its environment gets the Python writer injected
//! (see `inject`), its output goes to a log file while the monitor owns the terminal, and a
//! thread waits for it so the monitor learns when it ends without polling.

pub mod inject;
pub mod signals;

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::Sender;

/// Where the job's output goes.
pub enum JobOutput {
    /// The job shares vramscope's terminal (no monitor on screen).
    Inherit,
    /// Its standard output goes to vramscope's standard error, leaving vramscope's own
    /// output (JSON, CSV) clean for a pipe.
    StdoutToStderr,
    /// Standard output and error both go to this file (made by [`create_log`], which is where
    /// a refused name is said); standard input is closed, since the monitor reads the
    /// keyboard.
    File(PathBuf, File),
}

/// A launched job.
pub struct Job {
    pub pid: u32,
    /// The command line, for the screen.
    pub label: String,
    pub log: Option<PathBuf>,
    child: Child,
}

/// How the job ended, for the screen and for vramscope's own exit status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobEnd {
    /// The exit status a shell would report: the code, or 128 + the signal.
    pub code: u8,
    pub text: String,
}

impl JobEnd {
    pub fn from_status(status: ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(code), _) => JobEnd {
                code: u8::try_from(code).unwrap_or(1),
                text: format!("exited with code {code}"),
            },
            (None, Some(signal)) => JobEnd {
                code: u8::try_from(128 + signal).unwrap_or(1),
                text: format!("killed by signal {signal}"),
            },
            (None, None) => JobEnd {
                code: 1,
                text: "ended".into(),
            },
        }
    }
}

impl Job {
    /// Starts `command` with `env` added to vramscope's own environment.
    pub fn launch(
        command: &[OsString],
        env: &[(String, OsString)],
        output: JobOutput,
    ) -> io::Result<Job> {
        let (program, args) = command
            .split_first()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no command to run"))?;
        let mut cmd = Command::new(program);
        cmd.args(args);
        for (name, value) in env {
            cmd.env(name, value);
        }
        let log = match output {
            JobOutput::Inherit => None,
            JobOutput::StdoutToStderr => {
                use std::os::fd::AsFd;
                let err = io::stderr().as_fd().try_clone_to_owned()?;
                cmd.stdout(Stdio::from(err));
                None
            }
            JobOutput::File(path, file) => {
                cmd.stdin(Stdio::null())
                    .stdout(file.try_clone()?)
                    .stderr(file);
                Some(path)
            }
        };
        let child = cmd.spawn().map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot start {}: {e}", program.to_string_lossy()),
            )
        })?;
        Ok(Job {
            pid: child.id(),
            label: command
                .iter()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" "),
            log,
            child,
        })
    }

    /// Waits on a thread of its own and sends the end to `tx`.
    pub fn watch<E: From<JobEnd> + Send + 'static>(
        self,
        tx: Sender<E>,
    ) -> Result<(), crate::threads::SpawnFailed> {
        crate::threads::spawn("job-wait", move || {
            let _ = tx.send(self.wait().into());
        })?;
        Ok(())
    }

    /// Blocks until the job ends.
    pub fn wait(mut self) -> JobEnd {
        if let Err(e) = self.exited(true) {
            return JobEnd {
                code: 1,
                text: format!("cannot wait for it: {e}"),
            };
        }
        self.reap()
    }

    /// Whether the job has ended, without blocking.
    pub fn try_end(&mut self) -> Option<JobEnd> {
        match self.exited(false) {
            Ok(true) => Some(self.reap()),
            _ => None,
        }
    }

    /// Whether the job has exited, leaving it unreaped (its pid stays taken while forwarded
    /// signals may still be on their way); with `block`, waits until it has.
    fn exited(&self, block: bool) -> io::Result<bool> {
        let flags = libc::WEXITED | libc::WNOWAIT | if block { 0 } else { libc::WNOHANG };
        loop {
            // SAFETY: a zeroed siginfo is a valid out-parameter for waitid.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: waits on our own child by pid and writes into `info`, which we own.
            let rc = unsafe { libc::waitid(libc::P_PID, self.pid, &mut info, flags) };
            if rc == 0 {
                // SAFETY: waitid filled `info` (si_pid stays 0 when nothing exited yet).
                return Ok(unsafe { info.si_pid() } != 0);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// Collects the exited job's status, after stopping signal forwarding to its pid.
    fn reap(&mut self) -> JobEnd {
        crate::job::signals::before_reaping();
        match self.child.wait() {
            Ok(status) => JobEnd::from_status(status),
            Err(e) => JobEnd {
                code: 1,
                text: format!("cannot wait for it: {e}"),
            },
        }
    }
}

/// Creates (or empties) the job's log at `path`: private (0600), and never through a
/// symlink, since a default name in a shared temp directory could be planted by someone
/// else. As root its folder is walked from `/` and checked, the log is opened relative to it
/// and checked on its descriptor (a regular file of root's with one link) before it is
/// emptied (`safe_fs`): a user's symlink, hard link or folder is refused, never written.
pub fn create_log(path: &Path) -> io::Result<File> {
    let trust = crate::safe_fs::Trust::for_euid(crate::channel::sys::euid());
    let (dir, name) = crate::safe_fs::place(path, trust)?;
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC;
    crate::safe_fs::open_checked(&dir, &name, flags, 0o600, trust)
}

/// A name nobody can guess ahead of time: the pid and the clock's nanoseconds.
pub fn unique_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{}-{nanos:09}", std::process::id())
}

/// Whether `pid` is `root` or one of its descendants (torchrun's ranks are the launcher's
/// children): follows parent pids through /proc, a few dozen levels at most.
pub fn descends_from(pid: u32, root: u32) -> bool {
    let mut current = pid;
    for _ in 0..64 {
        if current == root {
            return true;
        }
        match parent_of(current) {
            Some(parent) if parent > 1 && parent != current => current = parent,
            _ => return false,
        }
    }
    false
}

/// The parent pid from /proc/PID/stat (field 4, after the command in parentheses, which may
/// itself hold spaces and parentheses).
fn parent_of(pid: u32) -> Option<u32> {
    // path-ok: /proc/PID/stat is the kernel's, named by a number, not a user's file.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

/// A private directory for the injected Python files of this run, removed when dropped.
/// Made by descriptor in a folder that was walked and checked (`scratch_base`), and removed
/// relative to that folder: the path is only what the job is told (the folders on it are
/// root's or sticky as root, the user's own otherwise, so nobody else can swap them).
pub struct ScratchDir {
    path: PathBuf,
    base: crate::safe_fs::Dir,
    name: OsString,
}

impl ScratchDir {
    /// `$XDG_RUNTIME_DIR/vramscope-run-<pid>`, else under the temp directory; mode 0700.
    pub fn create() -> io::Result<ScratchDir> {
        let euid = crate::channel::sys::euid();
        let (base_path, base) = scratch_base(
            std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from),
            std::env::temp_dir(),
            euid,
        )?;
        let name = OsString::from(format!("vramscope-run-{}", unique_suffix()));
        // mkdirat: a name someone made first fails the create rather than being used.
        base.create_dir(&name, 0o700)?;
        Ok(ScratchDir {
            path: base_path.join(&name),
            base,
            name,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Leaves the directory to `pid`, a job still running that loads parts of the writer from
    /// it lazily, and has a detached watcher remove it once that pid has gone. (A pid reused
    /// meanwhile only delays the removal.)
    pub fn remove_after(self, pid: u32) {
        use std::os::unix::process::CommandExt;
        let watcher = "while kill -0 \"$1\" 2>/dev/null; do sleep 1; done; rm -rf -- \"$2\"";
        // Not waited for: it outlives us, reparented, and a failure to start it leaves the
        // directory as before, in place.
        let _watcher = Command::new("sh")
            .args(["-c", watcher, "vramscope-cleanup", &pid.to_string()])
            .arg(&self.path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Out of the terminal's process group: a Ctrl-C meant for the shell spares it.
            .process_group(0)
            .spawn();
        std::mem::forget(self);
    }
}

/// Where the scratch directory goes, opened: `runtime` when it is a folder, else `temp`,
/// else /tmp, each walked (`safe_fs::walk`) with the checks the caller needs. As root
/// (`euid` 0) only a folder whose every step root may rely on: under `sudo -E` both
/// variables may name the user's own folders, where the user could swap the fresh directory
/// for a symlink before root writes the Python files into it.
fn scratch_base(
    runtime: Option<PathBuf>,
    temp: PathBuf,
    euid: u32,
) -> io::Result<(PathBuf, crate::safe_fs::Dir)> {
    let trust = crate::safe_fs::Trust::for_euid(euid);
    let mut last = None;
    for candidate in runtime.into_iter().chain([temp, PathBuf::from("/tmp")]) {
        match crate::safe_fs::walk(&candidate, trust) {
            Ok(dir) => return Ok((candidate, dir)),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no folder for the scratch directory")))
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = self.base.remove_tree(&self.name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_reports_its_exit_code_and_its_output_reaches_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("job.log");
        let command: Vec<OsString> = ["sh", "-c", "echo \"$GREETING\"; exit 3"]
            .iter()
            .map(OsString::from)
            .collect();
        let env = [("GREETING".to_string(), OsString::from("hello from the job"))];
        let file = create_log(&log).unwrap();
        let job = Job::launch(&command, &env, JobOutput::File(log.clone(), file)).unwrap();
        assert_eq!(job.label, "sh -c echo \"$GREETING\"; exit 3");
        let end = job.wait();
        assert_eq!(end.code, 3);
        assert_eq!(end.text, "exited with code 3");
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            "hello from the job\n"
        );
    }

    #[test]
    fn a_killed_job_reads_as_the_shell_would_say() {
        let command: Vec<OsString> = ["sh", "-c", "kill -9 $$"]
            .iter()
            .map(OsString::from)
            .collect();
        let end = Job::launch(&command, &[], JobOutput::Inherit)
            .unwrap()
            .wait();
        assert_eq!(end.code, 137);
        assert_eq!(end.text, "killed by signal 9");
    }

    #[test]
    fn a_missing_program_is_one_clear_error() {
        let command = vec![OsString::from("/nonexistent/train")];
        let err = Job::launch(&command, &[], JobOutput::Inherit)
            .err()
            .unwrap();
        assert!(
            err.to_string()
                .starts_with("cannot start /nonexistent/train")
        );
    }

    #[test]
    fn the_log_is_private_and_never_written_through_a_symlink() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("victim");
        std::fs::write(&target, "precious").unwrap();
        let planted = dir.path().join("job.log");
        std::os::unix::fs::symlink(&target, &planted).unwrap();
        let command = vec![OsString::from("true")];
        assert!(create_log(&planted).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");
        let log = dir.path().join("real.log");
        let file = create_log(&log).unwrap();
        Job::launch(&command, &[], JobOutput::File(log.clone(), file))
            .unwrap()
            .wait();
        let mode = std::fs::metadata(&log).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    /// Needs root to give a folder away; CI runs as root.
    #[test]
    fn as_root_a_log_in_another_users_folder_or_a_hard_link_is_refused_untouched() {
        use std::os::unix::fs::PermissionsExt;
        if crate::channel::sys::euid() != 0 {
            eprintln!("skipped: not root");
            return;
        }
        let top = tempfile::tempdir().unwrap();
        std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let theirs = top.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        let err = create_log(&theirs.join("job.log")).unwrap_err();
        assert!(err.to_string().ends_with("belongs to uid 65534"), "{err}");
        assert!(!theirs.join("job.log").exists());
        let target = top.path().join("precious");
        std::fs::write(&target, "root's").unwrap();
        std::fs::hard_link(&target, top.path().join("job.log")).unwrap();
        let err = create_log(&top.path().join("job.log")).unwrap_err();
        assert!(err.to_string().ends_with("has 2 hard links"), "{err}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "root's");
    }

    /// Needs root to give a folder away; CI runs as root.
    #[test]
    fn as_root_the_scratch_directory_is_never_in_a_users_folder() {
        if crate::channel::sys::euid() != 0 {
            eprintln!("skipped: not root");
            return;
        }
        let top = tempfile::tempdir().unwrap();
        let theirs = top.path().join("run-user");
        std::fs::create_dir(&theirs).unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        let ours = top.path().to_path_buf();
        let base = |runtime: &PathBuf, temp: &PathBuf, euid| {
            scratch_base(Some(runtime.clone()), temp.clone(), euid)
                .unwrap()
                .0
        };
        assert_eq!(base(&theirs, &ours, 0), ours);
        assert_eq!(base(&theirs, &theirs, 0), PathBuf::from("/tmp"));
        assert_eq!(base(&theirs, &ours, 65534), theirs);
        // What is made is made in the folder that was checked, and removed from it.
        let scratch = {
            let (path, dir) = scratch_base(None, ours.clone(), 0).unwrap();
            dir.create_dir(std::ffi::OsStr::new("s"), 0o700).unwrap();
            ScratchDir {
                path: path.join("s"),
                base: dir,
                name: "s".into(),
            }
        };
        std::fs::write(scratch.path().join("f"), "x").unwrap();
        drop(scratch);
        assert!(!ours.join("s").exists());
    }

    #[test]
    fn children_descend_from_their_launcher() {
        let me = std::process::id();
        let mut child = Command::new("sleep").arg("5").spawn().unwrap();
        assert!(descends_from(child.id(), me));
        assert!(descends_from(me, me));
        assert!(!descends_from(me, child.id()));
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
