//! The refresh period over time: what a recording's header began at, then each change the
//! monitor's `+`/`-` keys made (`SourceEvent::Interval`). Replay steps by it and plot breaks
//! its lines by it, each reading the period in force at the moment in question.

/// A value that changes at given moments: the refresh period (or a gap derived from it) from
/// each moment on. Never empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Periods {
    /// `(from_ms, value)`, sorted by time; the first holds from the beginning of time.
    steps: Vec<(u64, u64)>,
}

impl Periods {
    /// `ms` at every moment, until a change.
    pub fn constant(ms: u64) -> Self {
        Periods {
            steps: vec![(0, ms)],
        }
    }

    /// `ms` from `at_ms` on. A change recorded out of order (a clock stepped back) applies
    /// from its own moment, like one in order.
    pub fn change(&mut self, at_ms: u64, ms: u64) {
        if self.at(at_ms) == ms {
            return;
        }
        let after = self.steps.partition_point(|&(from, _)| from <= at_ms);
        self.steps.insert(after, (at_ms, ms));
    }

    /// The value in force at `at_ms`.
    pub fn at(&self, at_ms: u64) -> u64 {
        let after = self.steps.partition_point(|&(from, _)| from <= at_ms);
        // The first step holds from 0, so there is always one at or before `at_ms`.
        self.steps
            .get(after.saturating_sub(1))
            .map_or(0, |&(_, ms)| ms)
    }

    /// The largest value in force at any moment from `from_ms` to `until_ms`.
    pub fn max_within(&self, from_ms: u64, until_ms: u64) -> u64 {
        let first = self.at(from_ms);
        self.steps
            .iter()
            .filter(|&&(from, _)| from > from_ms && from <= until_ms)
            .map(|&(_, ms)| ms)
            .fold(first, u64::max)
    }

    /// The same moments, each value mapped.
    pub fn map(&self, f: impl Fn(u64) -> u64) -> Periods {
        Periods {
            steps: self.steps.iter().map(|&(from, ms)| (from, f(ms))).collect(),
        }
    }

    /// Each change after the first period, `(from_ms, value)`, in time order.
    pub fn changes(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.steps.iter().skip(1).copied()
    }

    /// How many periods there were: 1 when it never changed.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Never: there is always the first period. (For clippy's `len_without_is_empty`.)
    pub fn is_empty(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_period_holds_from_its_change_on() {
        let mut p = Periods::constant(1_000);
        p.change(5_000, 250);
        p.change(9_000, 30_000);
        p.change(9_500, 30_000);
        assert_eq!(p.len(), 3, "an unchanged period is not a change");
        assert_eq!(p.at(0), 1_000);
        assert_eq!(p.at(4_999), 1_000);
        assert_eq!(p.at(5_000), 250);
        assert_eq!(p.at(8_999), 250);
        assert_eq!(p.at(u64::MAX), 30_000);
        assert_eq!(p.max_within(5_100, 8_000), 250);
        assert_eq!(p.max_within(4_000, 8_000), 1_000);
        assert_eq!(p.max_within(6_000, 9_000), 30_000);
        assert_eq!(p.map(|ms| ms * 10).at(6_000), 2_500);
        assert_eq!(
            p.changes().collect::<Vec<_>>(),
            [(5_000, 250), (9_000, 30_000)]
        );
    }

    #[test]
    fn a_change_out_of_order_applies_from_its_own_moment() {
        let mut p = Periods::constant(1_000);
        p.change(9_000, 500);
        p.change(3_000, 2_000);
        assert_eq!(p.at(2_999), 1_000);
        assert_eq!(p.at(3_000), 2_000);
        assert_eq!(p.at(9_000), 500);
    }
}
