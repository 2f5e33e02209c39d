//! [`Capped`]: a [`Series`] read as it stood at one moment. A paused screen (and any output
//! of a snapshot) reads its history through one, so readings taken after the snapshot never
//! reach a chart drawn for it, while sampling goes on into the same series underneath.

use super::{Column, Peak, Series};

/// `series` up to and including `at_ms`.
#[derive(Clone, Copy, Debug)]
pub struct Capped<'a> {
    series: &'a Series,
    /// Exclusive: one past the moment.
    end_ms: u64,
}

impl Series {
    /// This series as it stood at `at_ms`.
    pub fn until(&self, at_ms: u64) -> Capped<'_> {
        Capped {
            series: self,
            end_ms: at_ms.saturating_add(1),
        }
    }
}

impl Capped<'_> {
    /// [`Series::window_peak`], over the part of the window before the cap.
    pub fn window_peak(&self, from_ms: u64, to_ms: u64) -> Option<Peak> {
        self.series.window_peak(from_ms, to_ms.min(self.end_ms))
    }

    /// [`Series::query_held`] over `[from_ms, to_ms)` cut at the cap (charts end their
    /// window at the snapshot's moment, so the cut takes nothing from them), the latest
    /// reading before the cap holding as the latest reading does live.
    pub fn query_held(&self, from_ms: u64, to_ms: u64, columns: usize) -> Vec<Option<Column>> {
        let to_ms = to_ms.min(self.end_ms);
        self.series.held(from_ms, to_ms, columns, self.end_ms)
    }

    /// [`Series::first_at`], when it lies before the cap.
    pub fn first_at(&self) -> Option<u64> {
        self.series.first_at().filter(|at| *at < self.end_ms)
    }

    /// The latest reading before the cap, even if breaks came after it.
    pub fn last(&self) -> Option<(u64, f64)> {
        self.series.last_before(self.end_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: u64 = 1_700_000_000_000;

    #[test]
    fn readings_after_the_cap_change_nothing_read_through_it() {
        let mut s = Series::default();
        for i in 0..60 {
            s.push(BASE + i * 1_000, 10.0 + (i % 7) as f64);
        }
        let at = BASE + 59_000;
        let window = (BASE, at + 1);
        let before = (
            s.until(at).query_held(window.0, window.1, 30),
            s.until(at).window_peak(window.0, window.1),
            s.until(at).first_at(),
            s.until(at).last(),
        );
        // A spike and a break after the moment, then readings again.
        s.push(BASE + 60_000, 99.0);
        s.push_gap(BASE + 61_000);
        s.push(BASE + 62_000, 5.0);
        let after = (
            s.until(at).query_held(window.0, window.1, 30),
            s.until(at).window_peak(window.0, window.1),
            s.until(at).first_at(),
            s.until(at).last(),
        );
        assert_eq!(before, after);
        assert_eq!(after.3, Some((at, 10.0 + (59 % 7) as f64)));
        // Uncapped, the same window's peak is the same, but the latest reading is not.
        assert_eq!(s.last(), Some((BASE + 62_000, 5.0)));
        // A window reaching past the cap is cut at it: the spike is not there.
        assert_eq!(
            s.until(at)
                .window_peak(BASE, BASE + 70_000)
                .map(|p| p.value),
            Some(16.0)
        );
        assert_eq!(
            s.window_peak(BASE, BASE + 70_000).map(|p| p.value),
            Some(99.0)
        );
    }

    #[test]
    fn a_cap_older_than_raw_reaches_reads_no_bucket_still_open_at_it() {
        // Raw keeps the last 10 readings; 10 s buckets after that.
        let mut s = Series::new(crate::history::SeriesConfig {
            raw_span_ms: 10_000,
            min_spacing_ms: 1_000,
            tiers: vec![crate::history::TierSpec {
                bucket_ms: 10_000,
                span_ms: 3_600_000,
            }],
        });
        // Paused at 55 s, in the middle of the bucket [50 s, 60 s); a spike at 57 s.
        let at = BASE + 55_000;
        for i in 0..120 {
            let value = if i == 57 { 99.0 } else { 1.0 };
            s.push(BASE + i * 1_000, value);
        }
        let columns = s.until(at).query_held(BASE + 15_000, at + 1, 40);
        assert!(
            columns.iter().flatten().all(|c| c.max < 99.0),
            "a reading from after the moment drawn: {columns:?}"
        );
        // What was before it is still drawn.
        assert!(columns.iter().flatten().any(|c| c.max == 1.0));
        // Uncapped, the bucket with the spike is there.
        let live = s.query_held(BASE + 15_000, at + 1, 40);
        assert!(live.iter().flatten().any(|c| c.max == 99.0));
    }

    #[test]
    fn a_series_in_a_break_at_the_cap_reads_its_last_reading_before_it() {
        let mut s = Series::default();
        for i in 0..10 {
            s.push(BASE + i * 1_000, 3.0);
        }
        s.push_gap(BASE + 10_000);
        let at = BASE + 20_000;
        assert_eq!(s.until(at).last(), Some((BASE + 9_000, 3.0)));
        assert_eq!(s.until(BASE + 4_500).last(), Some((BASE + 4_000, 3.0)));
        assert_eq!(s.until(BASE - 1).last(), None);
        assert_eq!(s.until(BASE - 1).first_at(), None);
        let cols = s.until(at).query_held(BASE, at + 1, 20);
        assert_eq!(cols, s.query_held(BASE, at + 1, 20));
    }
}
