//! Spikes: the largest rises within a short window, which is how a memory spike looks in a
//! series of readings. Streaming and bounded: a window's minimum from a monotonic queue, and
//! only the few largest rises kept, at most one per window.

use std::collections::VecDeque;

/// A rise is measured from the lowest reading of the preceding `WINDOW_MS`.
pub const WINDOW_MS: u64 = 10_000;
/// Rises kept per series.
const KEPT: usize = 5;

/// A rise from `from` to `to`, ending at `at_ms`, with the writer's step and phase at its
/// top where the series has them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rise {
    pub from: u64,
    pub from_ms: u64,
    pub to: u64,
    pub at_ms: u64,
    pub step: Option<u64>,
    pub phase: String,
}

impl Rise {
    pub fn amount(&self) -> u64 {
        self.to.saturating_sub(self.from)
    }
}

#[derive(Default)]
pub struct RiseTracker {
    /// Readings of the window with increasing values: the front is the window's minimum.
    lows: VecDeque<(u64, u64)>,
    best: Vec<Rise>,
}

impl RiseTracker {
    /// Readings must come in time order (a reading out of order starts a fresh window).
    pub fn push(&mut self, at_ms: u64, value: u64) {
        self.push_with(at_ms, value, || (None, String::new()));
    }

    /// `context` gives the step and phase, asked for only when the rise is worth keeping.
    pub fn push_with(
        &mut self,
        at_ms: u64,
        value: u64,
        context: impl FnOnce() -> (Option<u64>, String),
    ) {
        if self.lows.back().is_some_and(|&(t, _)| t > at_ms) {
            self.lows.clear();
        }
        while self
            .lows
            .front()
            .is_some_and(|&(t, _)| t.saturating_add(WINDOW_MS) < at_ms)
        {
            self.lows.pop_front();
        }
        if let Some(&(from_ms, from)) = self.lows.front()
            && value > from
            && self.worth_keeping(at_ms, value - from)
        {
            let (step, phase) = context();
            self.offer(Rise {
                from,
                from_ms,
                to: value,
                at_ms,
                step,
                phase,
            });
        }
        while self.lows.back().is_some_and(|&(_, v)| v >= value) {
            self.lows.pop_back();
        }
        self.lows.push_back((at_ms, value));
    }

    fn worth_keeping(&self, at_ms: u64, amount: u64) -> bool {
        if let Some(near) = self
            .best
            .iter()
            .find(|r| r.at_ms.abs_diff(at_ms) < WINDOW_MS)
        {
            return amount > near.amount();
        }
        self.best.len() < KEPT || self.best.iter().any(|r| amount > r.amount())
    }

    /// Keeps the largest rises, one per window: a rise overlapping a kept one replaces it
    /// only when larger.
    fn offer(&mut self, rise: Rise) {
        let near = |r: &Rise| r.at_ms.abs_diff(rise.at_ms) < WINDOW_MS;
        if let Some(i) = self.best.iter().position(near) {
            if rise.amount() > self.best[i].amount() {
                self.best[i] = rise;
            }
            return;
        }
        if self.best.len() < KEPT {
            self.best.push(rise);
        } else if let Some((i, smallest)) =
            self.best.iter().enumerate().min_by_key(|(_, r)| r.amount())
            && rise.amount() > smallest.amount()
        {
            self.best[i] = rise;
        }
    }

    /// The kept rises, largest first.
    pub fn top(&self) -> Vec<Rise> {
        let mut top = self.best.clone();
        top.sort_by_key(|r| std::cmp::Reverse(r.amount()));
        top
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_rise_from_the_windows_low_not_from_the_first_reading() {
        let mut t = RiseTracker::default();
        for (at, v) in [(0, 50), (1_000, 10), (2_000, 12), (3_000, 90), (4_000, 20)] {
            t.push(at, v);
        }
        assert_eq!(
            t.top(),
            vec![Rise {
                from: 10,
                from_ms: 1_000,
                to: 90,
                at_ms: 3_000,
                step: None,
                phase: String::new(),
            }]
        );
    }

    #[test]
    fn a_slow_climb_is_not_a_spike_and_spikes_far_apart_are_kept_apart() {
        let mut t = RiseTracker::default();
        // One unit a second for ten minutes: no window sees more than ten units.
        for s in 0..600u64 {
            t.push(s * 1_000, 1_000 + s);
        }
        assert!(t.top().iter().all(|r| r.amount() <= 11), "{:?}", t.top());
        let mut t = RiseTracker::default();
        for s in 0..120u64 {
            let v = match s {
                30 => 500,
                90 => 300,
                _ => 100,
            };
            t.push(s * 1_000, v);
        }
        let top = t.top();
        assert_eq!(top.len(), 2, "{top:?}");
        assert_eq!((top[0].to, top[0].at_ms), (500, 30_000));
        assert_eq!((top[1].to, top[1].at_ms), (300, 90_000));
    }

    #[test]
    fn keeps_only_the_largest_few() {
        let mut t = RiseTracker::default();
        for k in 0..50u64 {
            let base = k * 100_000;
            t.push(base, 0);
            t.push(base + 1_000, k);
        }
        let top = t.top();
        assert_eq!(top.len(), KEPT);
        assert_eq!(
            top.iter().map(|r| r.to).collect::<Vec<_>>(),
            vec![49, 48, 47, 46, 45]
        );
    }
}
