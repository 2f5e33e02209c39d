//! The process an attach is bound to, rather than its number: a pidfd and a descriptor of its
//! `/proc/PID` taken at preflight, and the identity the confirmation shows (start time,
//! executable, user). A pid is handed out again once its process is reaped, and a process
//! can `exec` another program while the person reads the `[y/N]` prompt; so the identity is
//! compared again after the confirmation and once the target is stopped under ptrace (a
//! stopped thread cannot exec), and any change is one line with nothing written and nothing
//! injected.
//!
//! Everything is read through the `/proc/PID` descriptor, which keeps naming the process it
//! was opened for: once that one is gone its files cannot be read, even when the pid already
//! names a newcomer. The pidfd says the same through the kernel's own process reference.

use super::pidfd::Pidfd;
use crate::safe_fs::{Dir, bounds, read_bounded};
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// What identifies one running program, as the confirmation showed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    /// `/proc/PID/stat` field 22 (clock ticks since boot): another process under the same
    /// pid has another.
    pub starttime: u64,
    /// Device and inode of the executable (`/proc/PID/exe`): an exec of another program
    /// changes them.
    pub exe: (u64, u64),
    /// The real uid (`Uid:` of `/proc/PID/status`): an exec of a setuid program changes it.
    pub uid: u32,
    /// A hash (FNV-1a) of its auxiliary vector (`/proc/PID/auxv`), which the kernel writes
    /// once per exec: where it put the image, its stack's random bytes, the vDSO. An exec of
    /// the same executable changes it too (address randomisation), and the addresses the
    /// injection would call are then stale; without randomisation they are the same again.
    pub image: u64,
}

impl Identity {
    /// `STARTTIME:DEV:INO:UID:IMAGE` (IMAGE in hex): the form the `sys.remote_exec` caller
    /// compares before it calls, and the TUI hands to the attach it starts.
    pub fn token(&self) -> String {
        format!(
            "{}:{}:{}:{}:{:x}",
            self.starttime, self.exe.0, self.exe.1, self.uid, self.image
        )
    }

    pub fn parse(token: &str) -> Option<Identity> {
        let mut f = token.split(':');
        let mut number = || f.next()?.parse::<u64>().ok();
        let (starttime, dev, ino, uid) = (number()?, number()?, number()?, number()?);
        let image = u64::from_str_radix(f.next()?, 16).ok()?;
        if f.next().is_some() {
            return None;
        }
        Some(Identity {
            starttime,
            exe: (dev, ino),
            uid: u32::try_from(uid).ok()?,
            image,
        })
    }

    /// [`Identity::parse`] for a command-line option.
    pub fn parse_arg(token: &str) -> Result<Identity, String> {
        Identity::parse(token).ok_or_else(|| format!("{token:?} is not STARTTIME:DEV:INO:UID"))
    }

    /// The identity of `pid` now, as another vramscope records what it shows (the TUI's
    /// dialog); None when it cannot be read.
    pub fn of(pid: i32) -> Option<Identity> {
        Identity::read(&Dir::open(Path::new(&format!("/proc/{pid}"))).ok()?).ok()
    }

    /// The identity of the process whose `/proc/PID` is `proc`.
    fn read(proc: &Dir) -> io::Result<Identity> {
        let stat = read_proc(proc, "stat")?;
        let starttime = crate::channel::sys::parse_starttime(&stat)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unparsable stat"))?;
        let status = read_proc(proc, "status")?;
        let uid = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no Uid in status"))?;
        let auxv = proc.open_read(OsStr::new("auxv"))?;
        let auxv = read_bounded(&auxv, bounds::PROC_FILE).map_err(|e| match e {
            crate::safe_fs::ReadError::Io(e) => e,
            other => io::Error::other(other.to_string()),
        })?;
        Ok(Identity {
            starttime,
            exe: exe_of(proc)?,
            uid,
            image: fnv1a(&auxv),
        })
    }

    /// How `now` differs from `self` (what was shown), in words; None when it does not.
    fn change(&self, now: &Identity, pid: i32) -> Option<String> {
        if now.starttime != self.starttime {
            Some(format!(
                "pid {pid} now names another process (it started after the one checked)"
            ))
        } else if now.exe != self.exe || now.image != self.image {
            Some(format!(
                "process {pid} runs another program than the one checked (it called exec)"
            ))
        } else if now.uid != self.uid {
            Some(format!(
                "process {pid} now runs as uid {}, not as uid {} as checked",
                now.uid, self.uid
            ))
        } else {
            None
        }
    }
}

/// FNV-1a, 64 bits: the same few lines in the `sys.remote_exec` caller's Python.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// One `/proc/PID` file, bounded.
fn read_proc(proc: &Dir, name: &str) -> io::Result<String> {
    let file = proc.open_read(OsStr::new(name))?;
    let bytes = read_bounded(&file, bounds::PROC_FILE).map_err(|e| match e {
        crate::safe_fs::ReadError::Io(e) => e,
        other => io::Error::other(other.to_string()),
    })?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Device and inode of the file `exe` names: the kernel's link is followed on purpose (it
/// is /proc's, not a user's).
fn exe_of(proc: &Dir) -> io::Result<(u64, u64)> {
    // SAFETY: an all-zero `stat` is a valid value of the plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: the descriptor is open, the name NUL-terminated, `st` writable.
    let rc = unsafe { libc::fstatat(proc.as_fd().as_raw_fd(), c"exe".as_ptr(), &mut st, 0) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((st.st_dev, st.st_ino))
}

/// The process, pinned.
#[derive(Debug)]
pub struct Process {
    pub pid: i32,
    /// None before Linux 5.3 (no pidfd_open): the `/proc/PID` descriptor alone pins it then.
    pidfd: Option<Pidfd>,
    proc: Dir,
    identity: Identity,
    /// The real gid (`Gid:`), the agent's files' group.
    gid: u32,
}

impl Process {
    /// Pins `pid` and reads its identity; the error is the line to print.
    pub fn bind(pid: i32) -> Result<Process, String> {
        let gone = || format!("no process {pid} (it exited, or it is not in this pid namespace)");
        // The pidfd first: once the process is seen alive after `/proc/PID` was opened, that
        // descriptor is of the same process (its pid cannot have been reused meanwhile).
        let pidfd = match Pidfd::open(pid) {
            Ok(fd) => Some(fd),
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => None,
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Err(gone()),
            Err(e) => return Err(format!("cannot pin process {pid}: {e}")),
        };
        let proc = Dir::open(Path::new(&format!("/proc/{pid}"))).map_err(|_| gone())?;
        let identity =
            Identity::read(&proc).map_err(|e| format!("cannot read process {pid}: {e}"))?;
        let gid = read_proc(&proc, "status")
            .ok()
            .and_then(|status| {
                let gids = status.lines().find_map(|l| l.strip_prefix("Gid:"))?;
                gids.split_whitespace().next()?.parse().ok()
            })
            .ok_or_else(|| format!("cannot read process {pid}'s group"))?;
        let process = Process {
            pid,
            pidfd,
            proc,
            identity,
            gid,
        };
        if !process.alive() {
            return Err(gone());
        }
        Ok(process)
    }

    /// The identity read at preflight (what the confirmation shows).
    pub fn identity(&self) -> Identity {
        self.identity
    }

    /// Its real gid, read at preflight.
    pub fn gid(&self) -> u32 {
        self.gid
    }

    /// Whether it has not exited (a zombie not yet reaped still counts: it has a pid).
    pub fn alive(&self) -> bool {
        match &self.pidfd {
            Some(fd) => fd.alive(),
            None => Identity::read(&self.proc).is_ok(),
        }
    }

    /// Whether it is still the process checked: alive, same start time, executable and uid.
    /// The error is the line to print.
    pub fn check(&self) -> Result<(), String> {
        let pid = self.pid;
        let now = Identity::read(&self.proc)
            .ok()
            .filter(|_| self.alive())
            .ok_or_else(|| format!("process {pid} exited before the attach: nothing done"))?;
        match self.identity.change(&now, pid) {
            Some(why) => Err(format!("{why}: nothing done")),
            None => Ok(()),
        }
    }

    /// Whether it is the process `shown` describes (what another vramscope showed, the TUI's
    /// dialog); the error is the line to print.
    pub fn is(&self, shown: &Identity) -> Result<(), String> {
        match shown.change(&self.identity, self.pid) {
            Some(why) => Err(format!("{why}: nothing done")),
            None => Ok(()),
        }
    }

    /// Its /tmp: `root` followed (the kernel's link to its root directory, a container's
    /// own), `tmp` under it opened without following. The process must still be alive once
    /// it is open: the root was then its own.
    pub fn tmp(&self) -> io::Result<Dir> {
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
        // SAFETY: the descriptor is open and the name NUL-terminated; openat returns a new
        // descriptor or -1.
        let fd = unsafe { libc::openat(self.proc.as_fd().as_raw_fd(), c"root".as_ptr(), flags) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: just returned by openat, owned by nobody else.
        let root = unsafe { OwnedFd::from_raw_fd(fd) };
        let root = Dir::from_fd(root, PathBuf::from(format!("/proc/{}/root", self.pid)));
        let tmp = root.sub(OsStr::new("tmp"))?;
        if !self.alive() {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        Ok(tmp)
    }

    /// The bytes of the file it maps at `start` (a mapping of file offset 0, as
    /// `target::parse_maps` lists them), read through `/proc/PID/map_files/START-END`: the
    /// kernel's link to the very file mapped, whatever its path names now (in a container
    /// its user may swap that path for a FIFO or a link to `/dev/zero`), read bounded and
    /// only if it is a regular file.
    pub fn mapped_file(&self, start: u64) -> io::Result<Vec<u8>> {
        let maps = read_bounded(&self.proc.open_read(OsStr::new("maps"))?, bounds::PROC_MAPS)
            .map_err(io::Error::other)?;
        // map_files names a range as `%lx-%lx`, without the zeros maps pads it with.
        let range = String::from_utf8_lossy(&maps)
            .lines()
            .filter_map(|line| {
                let (a, b) = line.split(' ').next()?.split_once('-')?;
                let a = u64::from_str_radix(a, 16).ok()?;
                let b = u64::from_str_radix(b, 16).ok()?;
                (a == start).then(|| format!("{a:x}-{b:x}"))
            })
            .next()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
        let files = self.proc.sub(OsStr::new("map_files"))?;
        let name = std::ffi::CString::new(range)?;
        let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
        // SAFETY: the descriptor is open and the name NUL-terminated; the kernel's link is
        // followed on purpose (it names the mapped file itself); openat returns a new
        // descriptor or -1.
        let fd = unsafe { libc::openat(files.as_fd().as_raw_fd(), name.as_ptr(), flags) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: just returned by openat, owned by nobody else.
        let file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        read_bounded(&file, bounds::MAPPED_LIBRARY).map_err(io::Error::other)
    }

    /// For tests: the process as if the confirmation had shown `identity`.
    #[cfg(test)]
    pub fn shown_as(mut self, identity: Identity) -> Process {
        self.identity = identity;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
        let t = Instant::now();
        while !ok() {
            assert!(t.elapsed() < Duration::from_secs(30), "{what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits until the shell `pid` sleeps in its `read`: its exec is then complete. `spawn`
    /// can return while the kernel is still inside the exec (a vfork parent resumes once the
    /// child has its new memory, before the auxiliary vector is written), and an identity read
    /// then is not the one the running shell has.
    fn reading_its_stdin(pid: i32) {
        wait_until("the shell never waited on its stdin", || {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                stat.rsplit_once(") ")
                    .is_some_and(|(_, rest)| rest.starts_with('S'))
            })
        });
    }

    /// Kills the child when the test ends, passed or failed.
    struct Killed(std::process::Child);

    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[test]
    fn a_process_that_execs_the_same_program_is_no_longer_the_one_checked() {
        // A shell that execs a shell (the same executable) once told to.
        let child = Command::new("sh")
            .args(["-c", "read x; exec sh -c 'sleep 30; :'"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        let mut child = Killed(child);
        let pid = child.0.id() as i32;
        reading_its_stdin(pid);
        let process = Process::bind(pid).unwrap();
        use std::io::Write;
        child.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
        wait_until("the second shell never ran", || {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c == b"sh\0-c\0sleep 30; :\0")
        });
        assert_eq!(
            Identity::of(pid).map(|i| i.exe),
            Some(process.identity().exe)
        );
        assert_eq!(
            process.check().unwrap_err(),
            format!(
                "process {pid} runs another program than the one checked (it called exec): nothing done"
            )
        );
    }

    #[test]
    fn a_process_that_execs_or_exits_after_the_check_is_no_longer_the_one_checked() {
        // A shell that execs `sleep` once told to (a line on its stdin).
        let child = Command::new("sh")
            .args(["-c", "read x; exec sleep 30"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        let mut child = Killed(child);
        let pid = child.0.id() as i32;
        reading_its_stdin(pid);
        let process = Process::bind(pid).unwrap();
        assert_eq!(process.check(), Ok(()));
        let shown = process.identity();
        assert_eq!(Identity::parse(&shown.token()), Some(shown));
        assert_eq!(process.is(&shown), Ok(()));
        use std::io::Write;
        child.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
        wait_until("sleep never ran", || {
            std::fs::read_link(format!("/proc/{pid}/exe"))
                .is_ok_and(|p| p.to_string_lossy().ends_with("/sleep"))
        });
        let err = process.check().unwrap_err();
        assert_eq!(
            err,
            format!(
                "process {pid} runs another program than the one checked (it called exec): nothing done"
            )
        );
        let later = Process::bind(pid).unwrap();
        assert_eq!(
            later.is(&shown).unwrap_err(),
            err,
            "what another vramscope showed"
        );
        let mut other_start = shown;
        other_start.starttime += 1;
        assert!(
            later
                .is(&other_start)
                .unwrap_err()
                .starts_with(&format!("pid {pid} now names another process")),
        );
        drop(child);
        assert_eq!(
            later.check().unwrap_err(),
            format!("process {pid} exited before the attach: nothing done")
        );
        assert!(later.tmp().is_err());
        assert!(Process::bind(pid).is_err());
    }

    #[test]
    fn its_tmp_is_the_one_its_root_holds() {
        let process = Process::bind(std::process::id() as i32).unwrap();
        let tmp = process.tmp().unwrap();
        let ours = std::fs::metadata("/tmp").unwrap();
        use std::os::unix::fs::MetadataExt;
        let st = tmp.stat().unwrap();
        assert_eq!((st.dev, st.ino), (ours.dev(), ours.ino()));
        let shown = process.identity();
        assert_eq!(Identity::parse(&shown.token()), Some(shown));
        assert_eq!(Identity::parse("1:2:3:4:ff").map(|i| i.image), Some(0xff));
        for bad in ["1:2:3:4", "1:2:3:4:5:6", "1:2:3:x:5", "1:2:3:4:zz"] {
            assert_eq!(Identity::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_mapped_library_is_read_through_the_kernels_link_to_it() {
        let pid = std::process::id() as i32;
        let target = crate::attach::target::Target::read(pid).unwrap();
        let (base, path) = target
            .mapped
            .iter()
            .find(|(_, p)| p.contains("libc"))
            .cloned()
            .expect("this test binary maps libc");
        let process = Process::bind(pid).unwrap();
        let bytes = process.mapped_file(base).unwrap();
        assert_eq!(&bytes[..4], b"\x7fELF", "{path}");
        assert_eq!(bytes, std::fs::read(&path).unwrap());
        let err = process.mapped_file(1).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }
}
