//! The per-tick host figures of one process (CPU time and RSS) from `/proc/PID/stat`, read
//! through a file kept open for as long as the process is watched.
//!
//! Why not sysinfo for these: its refresh of one pid opens and reads `status`, `stat` and
//! `statm` every tick, and `status` alone is the costliest file in /proc to produce. One
//! `pread` of `stat` on an open descriptor gives both figures with no path lookup. An open
//! descriptor also cannot be fooled by pid reuse: once its process has exited, reads fail
//! with ESRCH instead of describing a newcomer with the same number.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::time::Instant;

/// What one read of `stat` gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatFigures {
    /// utime + stime, in clock ticks.
    pub cpu_ticks: u64,
    pub rss_bytes: u64,
}

/// An open `/proc/PID/stat` and the previous CPU reading, for CPU % as a difference.
pub struct StatFile {
    file: File,
    previous: Option<(u64, Instant)>,
}

/// A CPU share needs two readings; the first has none.
pub enum CpuShare {
    FirstReading,
    /// Percent of one core (above 100 for a process using several).
    Percent(f32),
}

impl StatFile {
    pub fn open(local_pid: u32) -> io::Result<Self> {
        Ok(Self {
            file: File::open(format!("/proc/{local_pid}/stat"))?,
            previous: None,
        })
    }

    /// Reads the figures now; `buf` is reused between calls to avoid an allocation per pid.
    pub fn read(&mut self, buf: &mut Vec<u8>) -> io::Result<(StatFigures, CpuShare)> {
        buf.clear();
        buf.resize(1024, 0);
        let n = self.file.read_at(buf, 0)?;
        let figures = parse(&buf[..n], units().page_size)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unreadable stat line"))?;
        let now = Instant::now();
        let share = match self.previous {
            Some((ticks, at)) if now > at => {
                let seconds = now.duration_since(at).as_secs_f64();
                let used = figures.cpu_ticks.saturating_sub(ticks) as f64 / units().ticks_per_sec;
                CpuShare::Percent((used / seconds * 100.0) as f32)
            }
            _ => CpuShare::FirstReading,
        };
        self.previous = Some((figures.cpu_ticks, now));
        Ok((figures, share))
    }
}

/// Parses a `stat` line. The command name (field 2) is in parentheses and may itself hold
/// spaces and parentheses, so fields are counted from the last ')'.
pub fn parse(line: &[u8], page_size: u64) -> Option<StatFigures> {
    let close = line.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(line.get(close + 1..)?).ok()?;
    // rest starts at field 3 (state); utime is field 14, stime 15, rss (pages) 24.
    let mut fields = rest.split_ascii_whitespace();
    let field = |fields: &mut std::str::SplitAsciiWhitespace, skip: usize| -> Option<u64> {
        fields.nth(skip)?.parse().ok()
    };
    let utime = field(&mut fields, 11)?;
    let stime = field(&mut fields, 0)?;
    let rss_pages = field(&mut fields, 8)?;
    Some(StatFigures {
        cpu_ticks: utime + stime,
        rss_bytes: rss_pages * page_size,
    })
}

struct Units {
    page_size: u64,
    ticks_per_sec: f64,
}

fn units() -> &'static Units {
    static UNITS: std::sync::OnceLock<Units> = std::sync::OnceLock::new();
    UNITS.get_or_init(|| {
        // SAFETY: sysconf only reads system constants.
        let (page, ticks) = unsafe {
            (
                libc::sysconf(libc::_SC_PAGESIZE),
                libc::sysconf(libc::_SC_CLK_TCK),
            )
        };
        Units {
            page_size: if page > 0 { page as u64 } else { 4096 },
            ticks_per_sec: if ticks > 0 { ticks as f64 } else { 100.0 },
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fields_after_a_hostile_command_name() {
        // A command name may contain ") (" and spaces; fields count from the last ')'.
        let line = b"4242 (evil) 1 2 (x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 \
                     12345 1000000 777 18446744073709551615";
        let figures = parse(line, 4096).expect("parses");
        assert_eq!(figures.cpu_ticks, 300);
        assert_eq!(figures.rss_bytes, 777 * 4096);
    }

    #[test]
    fn truncated_lines_are_rejected() {
        assert_eq!(parse(b"12 (sh) S 1 2 3", 4096), None);
        assert_eq!(parse(b"no parenthesis at all", 4096), None);
    }

    #[test]
    fn reads_our_own_process_and_notices_an_exit() {
        let mut buf = Vec::new();
        let mut own = StatFile::open(std::process::id()).expect("own stat");
        let (figures, share) = own.read(&mut buf).expect("read");
        assert!(figures.rss_bytes > 0);
        assert!(matches!(share, CpuShare::FirstReading));
        // Burn some CPU so the second reading has something to measure.
        let spin = Instant::now();
        let mut x = 0u64;
        while spin.elapsed().as_millis() < 60 {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        std::hint::black_box(x);
        let (_, share) = own.read(&mut buf).expect("second read");
        let CpuShare::Percent(p) = share else {
            panic!("second reading has a share")
        };
        assert!(p > 10.0, "spinning thread used only {p}% of a core");

        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        let mut theirs = StatFile::open(child.id()).expect("child stat");
        theirs.read(&mut buf).expect("alive");
        child.kill().expect("kill");
        child.wait().expect("reap");
        assert!(
            theirs.read(&mut buf).is_err(),
            "a reaped process still reads"
        );
    }
}
