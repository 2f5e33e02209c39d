//! When samplers wake.

use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// Ticks on one clock shared by every sampler: tick n of any sampler falls at
/// `epoch + n * period`, so the GPUs and the host report together and the screen redraws
/// once per tick rather than once per sampler. Drift-free (the time the calls take does not
/// push later ticks back), and after a stall sampling resumes at the next tick due.
#[derive(Clone, Copy)]
pub struct Schedule {
    pub epoch: Instant,
}

impl Schedule {
    pub fn wait(&self, interval_ms: &AtomicU64) {
        let period_ms = interval_ms.load(Ordering::Relaxed).max(1);
        let now = Instant::now();
        let elapsed_ms = now.duration_since(self.epoch).as_millis() as u64;
        let next = self.epoch + Duration::from_millis((elapsed_ms / period_ms + 1) * period_ms);
        thread::sleep(next - now);
    }
}
