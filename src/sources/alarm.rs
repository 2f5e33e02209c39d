//! A one-shot alarm one thread sleeps on and others set or cancel without waking it: a
//! Linux timerfd. The sampling watchdog sleeps on it, so a healthy monitor never wakes the
//! watchdog at all; a sampling tick sets it on starting and cancels it on finishing, which
//! is two cheap syscalls instead of a thread wakeup every second.

use std::io;
use std::time::Duration;

pub struct Alarm {
    fd: libc::c_int,
}

impl Alarm {
    pub fn new() -> io::Result<Self> {
        // SAFETY: plain syscall; the fd is owned by the returned value and closed on drop.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Alarm { fd })
    }

    /// Rings once, `after` from now, replacing any earlier setting.
    pub fn set(&self, after: Duration) {
        // A zero it_value would cancel rather than ring at once.
        let after = after.max(Duration::from_nanos(1));
        self.settime(libc::timespec {
            tv_sec: after.as_secs().min(i64::MAX as u64) as libc::time_t,
            tv_nsec: after.subsec_nanos() as libc::c_long,
        });
    }

    pub fn cancel(&self) {
        self.settime(libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        });
    }

    fn settime(&self, value: libc::timespec) {
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: value,
        };
        // SAFETY: `spec` is a valid itimerspec and the old value is not asked for. Cannot
        // fail with a valid fd and in-range values, which both hold here.
        unsafe { libc::timerfd_settime(self.fd, 0, &spec, std::ptr::null_mut()) };
    }

    /// Blocks until the alarm rings. Returns at once if it rang since the last wait.
    pub fn wait(&self) {
        let mut expirations = 0u64;
        loop {
            // SAFETY: reads 8 bytes into a u64 we own.
            let n = unsafe {
                libc::read(
                    self.fd,
                    (&mut expirations as *mut u64).cast(),
                    std::mem::size_of::<u64>(),
                )
            };
            if n >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                return;
            }
        }
    }
}

impl Drop for Alarm {
    fn drop(&mut self) {
        // SAFETY: we own the fd and nothing else closes it.
        unsafe { libc::close(self.fd) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn rings_after_the_time_set() {
        let alarm = Alarm::new().unwrap();
        let start = Instant::now();
        alarm.set(Duration::from_millis(30));
        alarm.wait();
        assert!(start.elapsed() >= Duration::from_millis(30));
    }

    #[test]
    fn a_cancelled_alarm_does_not_ring_and_a_later_one_does() {
        let alarm = Arc::new(Alarm::new().unwrap());
        alarm.set(Duration::from_millis(20));
        alarm.cancel();
        let start = Instant::now();
        let setter = {
            let alarm = Arc::clone(&alarm);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(150));
                alarm.set(Duration::from_millis(1));
            })
        };
        alarm.wait();
        // The cancelled 20 ms setting would have returned long before the thread's.
        assert!(start.elapsed() >= Duration::from_millis(150));
        setter.join().unwrap();
    }
}
