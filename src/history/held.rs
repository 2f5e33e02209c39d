//! Chart columns that read as the metric did: a column with no sample of its own shows the
//! last value known, because the metric held it until the next sample. Samples come every
//! interval (RSS every other one, a replay zoomed in at several columns per sample), so
//! without this a chart is striped with blanks that read as "no data" or a drop to zero.
//! A recorded break (sampler failing, GPU lost, process off the GPU) stays blank, and the
//! latest reading holds only as long as readings have been coming apart, so a series
//! nobody feeds any more ends where its data does.

use super::{Column, Series};

impl Series {
    /// [`Series::query`], with each empty column that no break touches holding the last
    /// reading before it (from inside the window or before it).
    pub fn query_held(&self, from_ms: u64, to_ms: u64, columns: usize) -> Vec<Option<Column>> {
        self.held(from_ms, to_ms, columns, u64::MAX)
    }

    /// [`Series::query_held`] of the series as it stood at `end_ms` (exclusive), for
    /// [`super::Capped`]: its buckets ended by then (`query_ending_by`), and its latest
    /// reading before then.
    pub(super) fn held(
        &self,
        from_ms: u64,
        to_ms: u64,
        columns: usize,
        end_ms: u64,
    ) -> Vec<Option<Column>> {
        let last = match end_ms {
            u64::MAX => self.last(),
            end_ms => self.last_before(end_ms),
        };
        let mut out = self.query_ending_by(from_ms, to_ms, columns, end_ms);
        if out.is_empty() || from_ms >= to_ms {
            return out;
        }
        let Some((last_at, _)) = last else {
            return out;
        };
        let holds_until = last_at.saturating_add(self.spacing_ms());
        let span = u128::from(to_ms - from_ms);
        let count = out.len() as u128;
        let start_of = |col: usize| {
            let offset = (col as u128 * span / count) as u64;
            from_ms.saturating_add(offset)
        };
        // Usually none or one: checked per empty column without searching every break kept.
        let gaps = self.gaps_in(from_ms, to_ms);
        let in_gap = |start: u64, end: u64| gaps.iter().any(|&(s, e)| s < end && e > start);
        let mut held = self.reading_before(from_ms).map(|(_, v)| v);
        for (col, cell) in out.iter_mut().enumerate() {
            if let Some(c) = cell {
                held = Some(c.last);
                continue;
            }
            let (start, end) = (start_of(col), start_of(col + 1).max(start_of(col) + 1));
            if start >= holds_until || in_gap(start, end) {
                held = None;
                continue;
            }
            *cell = held.map(|v| Column {
                min: v,
                max: v,
                last: v,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: u64 = 1_700_000_000_000;

    fn blanks(cols: &[Option<Column>]) -> usize {
        cols.iter().filter(|c| c.is_none()).count()
    }

    #[test]
    fn sparse_samples_fill_every_column() {
        // RSS every 2 s on a chart of 1 s columns: the raw query is half blank.
        let mut s = Series::default();
        for i in 0..=45 {
            s.push(BASE + i * 2_000, i as f64);
        }
        let (from, to) = (BASE, BASE + 90_001);
        assert_eq!(
            blanks(&s.query(from, to, 90)),
            44,
            "46 samples in 90 columns"
        );
        let held = s.query_held(from, to, 90);
        assert_eq!(blanks(&held), 0);
        assert_eq!(s.query(from, to, 90)[2], None);
        assert_eq!(
            held[2].map(|c| c.max),
            Some(1.0),
            "holds the reading before"
        );
        assert_eq!(held[4].map(|c| c.max), Some(2.0));
    }

    #[test]
    fn reading_before_the_window_fills_its_first_columns() {
        let mut s = Series::default();
        s.push(BASE, 7.0);
        s.push(BASE + 10_000, 9.0);
        let held = s.query_held(BASE + 1_000, BASE + 10_001, 9);
        assert!(held[..8].iter().all(|c| c.map(|c| c.max) == Some(7.0)));
        assert_eq!(held[8].map(|c| c.max), Some(9.0));
    }

    #[test]
    fn recorded_break_stays_blank() {
        let mut s = Series::default();
        for i in 0..10 {
            s.push(BASE + i * 1_000, 5.0);
        }
        for i in 10..20 {
            s.push_gap(BASE + i * 1_000);
        }
        for i in 20..30 {
            s.push(BASE + i * 1_000, 6.0);
        }
        let held = s.query_held(BASE, BASE + 30_000, 30);
        assert!(held[..10].iter().all(Option::is_some));
        assert!(held[10..20].iter().all(Option::is_none), "{held:?}");
        assert!(held[20..].iter().all(Option::is_some));
    }

    #[test]
    fn open_break_stays_blank_to_the_end() {
        let mut s = Series::default();
        s.push(BASE, 5.0);
        s.push(BASE + 1_000, 5.0);
        s.push_gap(BASE + 2_000);
        let held = s.query_held(BASE, BASE + 10_000, 10);
        assert_eq!(blanks(&held), 8);
    }

    #[test]
    fn a_peak_read_between_samples_is_kept_and_leaves_the_spacing_alone() {
        // Samples every second; the fast memory sampling's peak of 9 at 1.3 s between them.
        let mut s = Series::default();
        s.push(BASE, 1.0);
        s.push(BASE + 1_000, 1.0);
        s.push_between(BASE + 1_300, 9.0);
        s.push(BASE + 2_000, 1.0);
        assert_eq!(
            s.peak().map(|p| (p.value, p.at_ms)),
            Some((9.0, BASE + 1_300))
        );
        let held = s.query_held(BASE, BASE + 3_000, 30);
        assert_eq!(held[13].map(|c| c.max), Some(9.0), "{held:?}");
        // The latest sample holds a whole second, as samples come: not the 0.7 s since the peak.
        assert_eq!(blanks(&held), 0, "{held:?}");
    }

    #[test]
    fn fed_no_more_ends_after_one_spacing() {
        // A process that left: its last reading holds one spacing, not up to now.
        let mut s = Series::default();
        s.push(BASE, 5.0);
        s.push(BASE + 2_000, 5.0);
        let held = s.query_held(BASE, BASE + 20_000, 20);
        assert!(held[..4].iter().all(Option::is_some), "{held:?}");
        assert!(held[4..].iter().all(Option::is_none), "{held:?}");
    }

    #[test]
    fn break_before_the_window_is_not_bridged() {
        let mut s = Series::default();
        s.push(BASE, 5.0);
        s.push_gap(BASE + 1_000);
        s.push(BASE + 9_000, 6.0);
        let held = s.query_held(BASE + 2_000, BASE + 10_000, 8);
        assert_eq!(blanks(&held), 7);
        assert_eq!(held[7].map(|c| c.max), Some(6.0));
    }
}
