//! When samplers wake.

use std::time::{Duration, Instant};

/// Ticks on one clock shared by every sampler: tick n of any sampler falls at
/// `epoch + n * period`, so the GPUs and the host report together and the screen redraws
/// once per tick rather than once per sampler. Drift-free (the time the calls take does not
/// push later ticks back), and after a stall sampling resumes at the next tick due: missed
/// ticks are not made up, so a blocked call never leaves a queue of them behind it.
#[derive(Clone, Copy)]
pub struct Schedule {
    pub epoch: Instant,
}

/// What a sampler does when it wakes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tick {
    /// Every job: the GPUs' full samples, the host, the channels.
    Full,
    /// Between full ticks: the GPUs' used memory alone (the fast memory sampling).
    Peek,
}

impl Schedule {
    /// When the next tick falls and its kind: a full one every `interval_ms`, and where
    /// `peek_ms` is set and shorter, a peek at every multiple of it that is not a full tick.
    pub fn next(&self, interval_ms: u64, peek_ms: Option<u64>) -> (Instant, Tick) {
        let elapsed_ms = self.epoch.elapsed().as_millis() as u64;
        let (at_ms, tick) = next_tick(elapsed_ms, interval_ms.max(1), peek_ms);
        (self.epoch + Duration::from_millis(at_ms), tick)
    }
}

/// Whether peek ticks fall between full ticks: a peek period set, and shorter than the
/// refresh period.
pub fn peeks_between(period_ms: u64, peek_ms: Option<u64>) -> bool {
    peek_ms.is_some_and(|p| p > 0 && p < period_ms)
}

/// The next tick after `elapsed_ms` (ms since the epoch) and its kind.
fn next_tick(elapsed_ms: u64, period_ms: u64, peek_ms: Option<u64>) -> (u64, Tick) {
    let full = (elapsed_ms / period_ms + 1) * period_ms;
    match peek_ms.filter(|_| peeks_between(period_ms, peek_ms)) {
        Some(p) => {
            let peek = (elapsed_ms / p + 1) * p;
            if peek < full {
                (peek, Tick::Peek)
            } else {
                (full, Tick::Full)
            }
        }
        None => (full, Tick::Full),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ticks from `0` until `until_ms`, as the sampler would wake for them.
    fn ticks(period_ms: u64, peek_ms: Option<u64>, until_ms: u64) -> Vec<(u64, Tick)> {
        let mut at = 0;
        let mut out = Vec::new();
        loop {
            let next = next_tick(at, period_ms, peek_ms);
            if next.0 > until_ms {
                return out;
            }
            out.push(next);
            at = next.0;
        }
    }

    #[test]
    fn peeks_fall_between_full_ticks_and_never_replace_one() {
        let got = ticks(1000, Some(100), 2000);
        let full: Vec<u64> = got
            .iter()
            .filter(|t| t.1 == Tick::Full)
            .map(|t| t.0)
            .collect();
        assert_eq!(full, [1000, 2000]);
        let peeks = got.iter().filter(|t| t.1 == Tick::Peek).count();
        assert_eq!(peeks, 18, "nine peeks between two full ticks: {got:?}");
    }

    #[test]
    fn a_peek_period_not_dividing_the_interval_still_keeps_every_full_tick() {
        let got = ticks(1000, Some(300), 2000);
        let expected = [
            (300, Tick::Peek),
            (600, Tick::Peek),
            (900, Tick::Peek),
            (1000, Tick::Full),
            (1200, Tick::Peek),
            (1500, Tick::Peek),
            (1800, Tick::Peek),
            (2000, Tick::Full),
        ];
        assert_eq!(got, expected);
    }

    #[test]
    fn no_peeks_when_off_or_not_faster_than_the_interval() {
        for peek in [None, Some(1000), Some(5000), Some(0)] {
            assert!(
                ticks(1000, peek, 3000).iter().all(|t| t.1 == Tick::Full),
                "{peek:?}"
            );
        }
    }

    #[test]
    fn a_late_wakeup_skips_the_missed_ticks() {
        // A call blocked from 150 ms to 2.55 s: the next tick is the one due after it.
        assert_eq!(next_tick(2550, 1000, Some(100)), (2600, Tick::Peek));
        assert_eq!(next_tick(2950, 1000, Some(100)), (3000, Tick::Full));
    }
}
