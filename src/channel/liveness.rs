//! Whether a channel's writer is still there (§6): its flock, its process's start time, its
//! heartbeat. The lock is the authority; the start time catches a forked child that kept the
//! lock after the writer died; the heartbeat tells a hung writer from a live one.

use std::fs::File;
use std::os::unix::fs::FileExt;

use super::kinds::WriterState;
use super::layout::liveness::{STALL_MIN_NS, STALL_PERIODS};
use super::model::{Identity, Liveness};
use super::sys::{self, LockProbe};

/// How often the start-time check reads `/proc` (it costs an open and a read).
const PROCESS_CHECK_EVERY_NS: u64 = 1_000_000_000;

/// The verdict of §6 from what one poll saw. `process_gone`: the pid in the header no longer
/// runs with the header's start time.
pub fn assess(
    probe: LockProbe,
    state: WriterState,
    heartbeat_ns: Option<u64>,
    now_ns: u64,
    sample_period_us: u32,
    process_gone: bool,
) -> Liveness {
    if state.exited() {
        return Liveness::Ended { crashed: false };
    }
    if probe == LockProbe::Free || process_gone {
        return Liveness::Ended { crashed: true };
    }
    if sample_period_us == 0 {
        // An on-demand writer owes no heartbeat (§6).
        return Liveness::Alive;
    }
    let limit = STALL_MIN_NS.max(STALL_PERIODS * u64::from(sample_period_us) * 1_000);
    match heartbeat_ns {
        Some(hb) if now_ns > hb && now_ns - hb > limit => Liveness::Stalled {
            heartbeat_age_ns: now_ns - hb,
        },
        _ => Liveness::Alive,
    }
}

/// The start-time check, for writers in our own pid namespace (elsewhere their pid means
/// nothing to our `/proc`). At open it compares the start time in `/proc/<pid>/stat` with the
/// header's; after that it keeps that file open, because a descriptor of a `/proc/<pid>` file
/// stays bound to its process: once the process is gone, reading fails, even if the pid is
/// reused. Checked at most once per second.
pub struct ProcessCheck {
    stat: Option<File>,
    checked_at_ns: u64,
    gone: bool,
}

impl ProcessCheck {
    pub fn new(identity: &Identity, now_ns: u64) -> ProcessCheck {
        let ours = sys::pid_ns_inode(None);
        let mut check = ProcessCheck {
            stat: None,
            checked_at_ns: now_ns,
            gone: false,
        };
        let here = identity.pid_ns.is_some() && identity.pid_ns == ours;
        let Ok(pid) = u32::try_from(identity.pid) else {
            return check;
        };
        if !here {
            return check;
        }
        match File::open(format!("/proc/{pid}/stat")) {
            Ok(f) => {
                check.gone = starttime_of(&f) != Some(identity.starttime);
                check.stat = Some(f);
            }
            Err(_) => check.gone = true,
        }
        check
    }

    /// Whether the writer's process is gone or its pid reused, as of at most a second ago.
    pub fn gone(&mut self, now_ns: u64) -> bool {
        if self.gone {
            return true;
        }
        let Some(stat) = &self.stat else {
            return false;
        };
        if now_ns.saturating_sub(self.checked_at_ns) >= PROCESS_CHECK_EVERY_NS {
            self.checked_at_ns = now_ns;
            self.gone = starttime_of(stat).is_none();
        }
        self.gone
    }
}

/// The start time read from an open `/proc/<pid>/stat`; `None` once the process is gone.
fn starttime_of(stat: &File) -> Option<u64> {
    let mut buf = [0u8; 1024];
    let n = stat.read_at(&mut buf, 0).ok()?;
    sys::parse_starttime(&String::from_utf8_lossy(&buf[..n]))
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn verdicts() {
        use LockProbe::*;
        use WriterState::*;
        let a = |p, st, hb, now, period, gone| assess(p, st, hb, now, period, gone);
        const P: u32 = 100_000;
        assert_eq!(
            a(Held, Running, Some(10 * S), 11 * S, P, false),
            Liveness::Alive
        );
        assert_eq!(
            a(Free, Running, Some(10 * S), 11 * S, 0, false),
            Liveness::Ended { crashed: true }
        );
        assert_eq!(
            a(Held, ExitedError, Some(S), 100 * S, 0, false),
            Liveness::Ended { crashed: false }
        );
        assert_eq!(
            a(Held, Running, Some(S), 2 * S, 0, true),
            Liveness::Ended { crashed: true }
        );
        assert_eq!(
            a(Held, Running, Some(S), 7 * S, P, false),
            Liveness::Stalled {
                heartbeat_age_ns: 6 * S
            }
        );
        // Ten periods of 1 s allow a 9 s old heartbeat.
        assert_eq!(
            a(Held, Running, Some(S), 10 * S, 1_000_000, false),
            Liveness::Alive
        );
        assert_eq!(
            a(LockProbe::Unknown, Running, None, 100 * S, P, false),
            Liveness::Alive
        );
        // A heartbeat from the future (clock mismatch) is not a stall.
        assert_eq!(
            a(Held, Running, Some(50 * S), 10 * S, P, false),
            Liveness::Alive
        );
        // On-demand writers (period 0) are never stalled.
        assert_eq!(
            a(Held, Running, Some(S), 100 * S, 0, false),
            Liveness::Alive
        );
    }
}
