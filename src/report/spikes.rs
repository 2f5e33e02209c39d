//! Spikes: the largest rises that fall back within a short window, which is how a memory
//! spike looks in a series of readings. A start-up ramp or a leak rises and stays: it is no
//! spike, and measuring a spike from the window's lowest reading alone would let a ramp that
//! fills the window hide the spike on top of it. A spike's size is the smaller of its rise
//! from the lowest reading before it and its fall to the lowest reading after it (both
//! within `WINDOW_MS`). Streaming and bounded: a window's minimum from a monotonic queue,
//! a few candidates waiting for their fall, and only the few largest spikes kept, at most
//! one per window.

use std::collections::VecDeque;

/// A spike rises and falls back within this long of its top.
pub const WINDOW_MS: u64 = 10_000;
/// Spikes kept per series.
const KEPT: usize = 5;
/// Tops waiting for their fall; beyond this the smallest rise is given up.
const PENDING: usize = 64;

/// A spike from `from` up to `to` at `at_ms` and back, with the writer's step and phase at
/// its top where the series has them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rise {
    /// The level it rose from and fell back to: the higher of the lows before and after.
    pub from: u64,
    /// When the low before it was read.
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

/// A top still waiting to see how far it falls.
struct Pending {
    rise: Rise,
    /// The lowest reading since the top.
    back: u64,
}

impl Pending {
    fn settled(&self) -> Rise {
        let mut rise = self.rise.clone();
        rise.from = rise.from.max(self.back);
        rise
    }
}

#[derive(Default)]
pub struct RiseTracker {
    /// Readings of the window with increasing values: the front is the window's minimum.
    lows: VecDeque<(u64, u64)>,
    pending: Vec<Pending>,
    best: Vec<Rise>,
}

impl RiseTracker {
    /// Readings must come in time order (a reading out of order starts a fresh window).
    pub fn push(&mut self, at_ms: u64, value: u64) {
        self.push_with(at_ms, value, || (None, String::new()));
    }

    /// `context` gives the step and phase, asked for only when the top is worth following.
    pub fn push_with(
        &mut self,
        at_ms: u64,
        value: u64,
        context: impl FnOnce() -> (Option<u64>, String),
    ) {
        if self.lows.back().is_some_and(|&(t, _)| t > at_ms) {
            self.lows.clear();
            self.settle(u64::MAX);
        }
        for p in &mut self.pending {
            if p.rise.at_ms.saturating_add(WINDOW_MS) >= at_ms {
                p.back = p.back.min(value);
            }
        }
        self.settle(at_ms);
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
            self.follow(Pending {
                rise: Rise {
                    from,
                    from_ms,
                    to: value,
                    at_ms,
                    step,
                    phase,
                },
                back: value,
            });
        }
        while self.lows.back().is_some_and(|&(_, v)| v >= value) {
            self.lows.pop_back();
        }
        self.lows.push_back((at_ms, value));
    }

    /// Offers the tops whose window has passed (all of them for `u64::MAX`).
    fn settle(&mut self, at_ms: u64) {
        let (done, waiting): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|p| p.rise.at_ms.saturating_add(WINDOW_MS) < at_ms);
        self.pending = waiting;
        for p in done {
            let rise = p.settled();
            if rise.amount() > 0 {
                self.offer(rise);
            }
        }
    }

    fn follow(&mut self, top: Pending) {
        if self.pending.len() == PENDING
            && let Some((i, _)) = self
                .pending
                .iter()
                .enumerate()
                .min_by_key(|(_, p)| p.rise.amount())
        {
            self.pending.swap_remove(i);
        }
        self.pending.push(top);
    }

    /// The rise is an upper bound of the spike: one that cannot beat what is kept is not
    /// followed.
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

    /// Keeps the largest spikes, one per window: a spike overlapping a kept one replaces it
    /// only when larger.
    fn offer(&mut self, rise: Rise) {
        offer(&mut self.best, rise);
    }

    /// The kept spikes, largest first; tops still waiting count with the fall seen so far.
    pub fn top(&self) -> Vec<Rise> {
        let mut top = self.best.clone();
        for p in &self.pending {
            let rise = p.settled();
            if rise.amount() > 0 {
                offer(&mut top, rise);
            }
        }
        top.sort_by_key(|r| std::cmp::Reverse(r.amount()));
        top
    }
}

fn offer(best: &mut Vec<Rise>, rise: Rise) {
    let near = |r: &Rise| r.at_ms.abs_diff(rise.at_ms) < WINDOW_MS;
    if let Some(i) = best.iter().position(near) {
        if rise.amount() > best[i].amount() {
            best[i] = rise;
        }
        return;
    }
    if best.len() < KEPT {
        best.push(rise);
    } else if let Some((i, smallest)) = best.iter().enumerate().min_by_key(|(_, r)| r.amount())
        && rise.amount() > smallest.amount()
    {
        best[i] = rise;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_rise_from_the_windows_low_not_from_the_first_reading() {
        let mut t = RiseTracker::default();
        for (at, v) in [(0, 50), (1_000, 10), (2_000, 12), (3_000, 90), (4_000, 5)] {
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
            t.push(base + 2_000, 0);
        }
        let top = t.top();
        assert_eq!(top.len(), KEPT);
        assert_eq!(
            top.iter().map(|r| r.to).collect::<Vec<_>>(),
            vec![49, 48, 47, 46, 45]
        );
    }

    #[test]
    fn a_ramp_that_fills_the_window_is_no_spike_and_does_not_hide_the_one_on_top() {
        let mut t = RiseTracker::default();
        // 0 to 9 over 6 s, then steady at 9 with a spike to 12 at 8 s, well inside the
        // ramp's window; then a leak: one unit a second for a minute.
        for ms in (0..20_000u64).step_by(100) {
            let v = match ms {
                0..6_000 => ms * 9 / 6_000,
                8_000 => 12,
                _ => 9 + ms / 20_000,
            };
            t.push(ms, v);
        }
        for s in 20..80u64 {
            t.push(s * 1_000, 9 + s);
        }
        let top = t.top();
        assert_eq!(top.len(), 1, "{top:?}");
        assert_eq!((top[0].from, top[0].to, top[0].at_ms), (9, 12, 8_000));
        assert_eq!(top[0].amount(), 3);
    }
}
