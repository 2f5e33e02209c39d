//! The per-tick host figures of one process: CPU time from the process's CPU-time clock and
//! RSS from `/proc/PID/statm`, read through a file kept open while the process is watched.
//!
//! Why not sysinfo for these: its refresh of one pid opens and reads `status`, `stat` and
//! `statm` every tick, and the kernel spends most of that formatting `status` and `stat`'s
//! fifty-odd fields. `clock_gettime` on the process's CPU clock is one cheap syscall with ns
//! precision (stat counts 10 ms ticks), and `statm` is seven numbers. The open descriptor
//! also guards against pid reuse: once its process has exited, reads fail with ESRCH instead
//! of describing a newcomer with the same number.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::time::Instant;

/// What one reading gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MeterReading {
    /// CPU time used by all the process's threads, user and system, in ns.
    pub cpu_ns: u64,
    pub rss_bytes: u64,
}

/// One watched process: its open `statm`, its CPU clock, and the previous CPU reading, for
/// CPU % as a difference.
pub struct ProcessMeter {
    statm: File,
    cpu_clock: libc::clockid_t,
    previous: Option<(u64, Instant)>,
}

impl ProcessMeter {
    pub fn open(local_pid: u32) -> io::Result<Self> {
        let mut cpu_clock: libc::clockid_t = 0;
        let pid = libc::pid_t::try_from(local_pid).map_err(io::Error::other)?;
        // SAFETY: writes one clockid_t into a local we own.
        let rc = unsafe { libc::clock_getcpuclockid(pid, &mut cpu_clock) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(Self {
            statm: File::open(format!("/proc/{local_pid}/statm"))?,
            cpu_clock,
            previous: None,
        })
    }

    /// Reads the figures now, with the CPU share since the previous read in percent of one
    /// core (above 100 for a process using several); the first read has no share yet. `buf`
    /// is reused between calls to avoid an allocation per pid.
    pub fn read(&mut self, buf: &mut Vec<u8>) -> io::Result<(MeterReading, Option<f32>)> {
        let mut time = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: writes one timespec into a local we own.
        if unsafe { libc::clock_gettime(self.cpu_clock, &mut time) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // Read after the clock: if the process exited and its pid was taken meanwhile, the
        // clock may have read the newcomer, but this read fails and the figures are dropped.
        buf.clear();
        buf.resize(256, 0);
        let n = self.statm.read_at(buf, 0)?;
        let rss_pages = parse_statm(&buf[..n])
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unreadable statm line"))?;
        let figures = MeterReading {
            cpu_ns: time.tv_sec as u64 * 1_000_000_000 + time.tv_nsec as u64,
            rss_bytes: rss_pages * page_size(),
        };
        let now = Instant::now();
        let share = match self.previous {
            Some((ns, at)) if now > at => {
                let seconds = now.duration_since(at).as_secs_f64();
                let used = figures.cpu_ns.saturating_sub(ns) as f64 / 1e9;
                Some((used / seconds * 100.0) as f32)
            }
            _ => None,
        };
        self.previous = Some((figures.cpu_ns, now));
        Ok((figures, share))
    }
}

/// Resident pages: the second of `statm`'s fields.
pub fn parse_statm(line: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(line).ok()?;
    text.split_ascii_whitespace().nth(1)?.parse().ok()
}

fn page_size() -> u64 {
    static PAGE_SIZE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *PAGE_SIZE.get_or_init(|| {
        // SAFETY: sysconf only reads a system constant.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        u64::try_from(page).ok().filter(|&p| p > 0).unwrap_or(4096)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statm_gives_resident_pages() {
        assert_eq!(parse_statm(b"1000 777 300 10 0 500 0\n"), Some(777));
        assert_eq!(parse_statm(b"1000"), None);
        assert_eq!(parse_statm(b"x y z"), None);
    }

    #[test]
    fn reads_our_own_process_and_notices_an_exit() {
        let mut buf = Vec::new();
        let mut own = ProcessMeter::open(std::process::id()).expect("own stat");
        let (figures, share) = own.read(&mut buf).expect("read");
        assert!(figures.rss_bytes > 0);
        assert_eq!(share, None, "a first reading has no CPU share");
        // Burn some CPU so the second reading has something to measure.
        let spin = Instant::now();
        let mut x = 0u64;
        while spin.elapsed().as_millis() < 60 {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        std::hint::black_box(x);
        let (_, share) = own.read(&mut buf).expect("second read");
        assert!(
            share.is_some_and(|p| p > 10.0),
            "spinning for 60 ms between reads shows as CPU use: {share:?}"
        );

        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        let mut theirs = ProcessMeter::open(child.id()).expect("child stat");
        theirs.read(&mut buf).expect("alive");
        child.kill().expect("kill");
        child.wait().expect("reap");
        assert!(
            theirs.read(&mut buf).is_err(),
            "a reaped process still reads"
        );
    }
}
