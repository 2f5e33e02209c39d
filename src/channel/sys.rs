//! The few operating-system facts the channel needs: clocks, ids, process start times, pid
//! namespaces and the flock probe. Only libc and std, so the writer builds without the monitor.

use std::fs;
use std::io;
use std::os::fd::RawFd;
use std::os::unix::fs::MetadataExt;
use std::sync::OnceLock;

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes it.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// `CLOCK_MONOTONIC` in ns: the clock of every `*_ns` field.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// `CLOCK_REALTIME` in ns.
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// CPU time used by the calling thread, ns (for benchmarks and self-measurement).
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Our effective uid: files are created with it and readers compare owners with it.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Our pid in our own pid namespace.
pub fn pid() -> u32 {
    std::process::id()
}

/// Field 22 of a `/proc/<pid>/stat` text (start time in clock ticks since boot). The command
/// name (field 2) may hold spaces and parentheses, so fields are counted after the last `)`.
pub fn parse_starttime(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // `rest` starts with field 3 (state), so field 22 is the 20th word.
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

/// The start time of `pid`, or of this process when `None`.
pub fn starttime(pid: Option<u32>) -> io::Result<u64> {
    let path = match pid {
        Some(p) => format!("/proc/{p}/stat"),
        None => "/proc/self/stat".to_string(),
    };
    let text = fs::read_to_string(path)?;
    parse_starttime(&text)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unparsable /proc stat"))
}

/// The inode of `/proc/<pid>/ns/pid` (this process when `None`): equal inodes, same namespace.
pub fn pid_ns_inode(pid: Option<u32>) -> Option<u64> {
    let Some(p) = pid else {
        // A process never changes its own pid namespace (unshare and setns move children).
        static OWN: OnceLock<Option<u64>> = OnceLock::new();
        return *OWN.get_or_init(|| fs::metadata("/proc/self/ns/pid").ok().map(|m| m.ino()));
    };
    fs::metadata(format!("/proc/{p}/ns/pid"))
        .ok()
        .map(|m| m.ino())
}

/// What a non-blocking shared flock says about the exclusive lock a live writer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockProbe {
    /// EWOULDBLOCK: someone holds the writer's lock.
    Held,
    /// We got the lock (and dropped it at once): the writer is gone.
    Free,
    /// Some other error: no information.
    Unknown,
}

/// Probes the writer's lock through our own descriptor, never waiting and never keeping it.
pub fn probe_lock(fd: RawFd) -> LockProbe {
    // SAFETY: flock on a descriptor we own; LOCK_NB makes it return at once.
    let rc = unsafe { libc::flock(fd, libc::LOCK_SH | libc::LOCK_NB) };
    if rc == 0 {
        // SAFETY: as above. Unlock at once so a writer creating a new file is never held up.
        unsafe { libc::flock(fd, libc::LOCK_UN) };
        return LockProbe::Free;
    }
    match io::Error::last_os_error().raw_os_error() {
        Some(libc::EWOULDBLOCK) => LockProbe::Held,
        _ => LockProbe::Unknown,
    }
}

/// Converts a libc return value (`-1` on failure) into an io::Result.
pub fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starttime_is_field_22_even_with_odd_command_names() {
        let fields: Vec<String> = (3..=52).map(|n| n.to_string()).collect();
        let stat = format!("42 (a) b (c)) {}", fields.join(" "));
        assert_eq!(parse_starttime(&stat), Some(22));
        assert_eq!(parse_starttime("42 (x) R 1 2"), None);
        assert_eq!(parse_starttime("no parenthesis"), None);
    }

    #[test]
    fn our_own_starttime_and_namespace_are_readable() {
        let own = starttime(None).expect("own stat");
        assert_eq!(starttime(Some(pid())).expect("stat by pid"), own);
        assert_eq!(pid_ns_inode(None), pid_ns_inode(Some(pid())));
        assert!(monotonic_ns() > 0 && realtime_ns() > monotonic_ns());
    }
}
