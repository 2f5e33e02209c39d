//! Edge-case tests for [`Series`]: gaps, clocks stepping back, non-finite
//! values, peak resets, degenerate windows and configs.

use super::{Column, Peak, Series, SeriesConfig, TierSpec};

const BASE: u64 = 1_700_000_000_000;
const SEC: u64 = 1_000;

#[test]
fn gaps_yield_none_columns() {
    let mut s = Series::default();
    for i in 0..10 {
        s.push(BASE + i * SEC, 5.0);
    }
    s.push_gap(BASE + 10 * SEC);
    s.push_gap(BASE + 12 * SEC);
    assert!(s.in_gap());
    assert_eq!(s.last(), Some((BASE + 9 * SEC, 5.0)));
    for i in 20..30 {
        s.push(BASE + i * SEC, 7.0);
    }
    assert!(!s.in_gap());
    let gaps = s.raw().filter(|(_, v)| v.is_none()).count();
    assert_eq!(gaps, 1, "repeated gap reports coalesce");

    let cols = s.query(BASE, BASE + 30 * SEC, 30);
    assert_eq!(
        cols[9],
        Some(Column {
            min: 5.0,
            max: 5.0,
            last: 5.0
        })
    );
    assert_eq!(cols[10], None, "column holding only the gap marker");
    assert!(cols[11..20].iter().all(Option::is_none));
    assert_eq!(cols[20].map(|c| c.last), Some(7.0));
}

#[test]
fn time_going_backwards_is_clamped() {
    let mut s = Series::default();
    s.push(BASE + 1_000, 1.0);
    s.push(BASE + 500, 3.0);
    s.push_gap(0);
    s.push(BASE + 1_200, 2.0);
    assert_eq!(s.last(), Some((BASE + 1_200, 2.0)));
    assert_eq!(
        s.peak(),
        Some(Peak {
            value: 3.0,
            at_ms: BASE + 1_000
        })
    );
    let times: Vec<u64> = s.raw().map(|(at, _)| at).collect();
    assert_eq!(
        times,
        vec![BASE + 1_000, BASE + 1_000, BASE + 1_000, BASE + 1_200]
    );
    let cols = s.query(BASE, BASE + 2_000, 2);
    assert_eq!(
        cols[1],
        Some(Column {
            min: 1.0,
            max: 3.0,
            last: 2.0
        })
    );
}

#[test]
fn non_finite_values_are_ignored() {
    let mut s = Series::default();
    s.push(BASE, f64::NAN);
    s.push(BASE, f64::INFINITY);
    s.push(BASE, f64::NEG_INFINITY);
    assert_eq!(s.last(), None);
    assert_eq!(s.peak(), None);
    assert!(s.query(BASE - 10, BASE + 10, 4).iter().all(Option::is_none));
    s.push(BASE + 1, 2.5);
    s.push(BASE + 2, f64::NAN);
    assert_eq!(s.last(), Some((BASE + 1, 2.5)));
    assert_eq!(
        s.window_peak(0, u64::MAX),
        Some(Peak {
            value: 2.5,
            at_ms: BASE + 1
        })
    );
}

#[test]
fn reset_peak_restarts_from_next_value() {
    let mut s = Series::default();
    s.push(BASE, 10.0);
    s.push(BASE + 1, 5.0);
    s.reset_peak();
    assert_eq!(s.peak(), None);
    s.push(BASE + 2, 3.0);
    assert_eq!(
        s.peak(),
        Some(Peak {
            value: 3.0,
            at_ms: BASE + 2
        })
    );
    s.push(BASE + 3, 4.0);
    assert_eq!(
        s.peak(),
        Some(Peak {
            value: 4.0,
            at_ms: BASE + 3
        })
    );
    // History itself is untouched by a reset.
    assert_eq!(
        s.window_peak(BASE, BASE + 10),
        Some(Peak {
            value: 10.0,
            at_ms: BASE
        })
    );
}

#[test]
fn degenerate_windows() {
    let mut s = Series::default();
    s.push(BASE, 1.0);
    assert!(s.query(BASE, BASE + 10, 0).is_empty());
    assert_eq!(s.query(BASE + 10, BASE, 5), vec![None; 5]);
    assert_eq!(s.query(BASE, BASE, 3), vec![None; 3]);
    assert_eq!(s.window_peak(BASE, BASE), None);
    assert_eq!(s.window_peak(BASE + 1, BASE), None);
    // Unallocatable widths come back empty instead of aborting.
    assert!(s.query(BASE, BASE + 10, usize::MAX).is_empty());
    // More columns than milliseconds: one point, one column.
    let cols = s.query(BASE, BASE + 4, 40);
    assert_eq!(cols.iter().flatten().count(), 1);
    assert_eq!(cols[0].map(|c| c.max), Some(1.0));
}

#[test]
fn extreme_times_and_configs_do_not_panic() {
    let cfg = SeriesConfig {
        raw_span_ms: 0,
        min_spacing_ms: 0,
        tiers: vec![
            TierSpec {
                bucket_ms: 0,
                span_ms: 0,
            },
            TierSpec {
                bucket_ms: u64::MAX,
                span_ms: 1,
            },
        ],
    };
    let mut s = Series::new(cfg);
    for t in [0, 5, u64::MAX - 1, u64::MAX, 3] {
        s.push(t, t as f64);
        s.push_gap(t);
    }
    assert_eq!(s.raw().count(), 1);
    assert_eq!(
        s.peak(),
        Some(Peak {
            value: u64::MAX as f64,
            at_ms: u64::MAX - 1
        })
    );
    // Capacity-1 rings keep only the sample at u64::MAX, which no half-open
    // window can contain.
    assert_eq!(s.query(0, u64::MAX, 7), vec![None; 7]);
    assert_eq!(s.window_peak(0, u64::MAX), None);
    assert!(s.memory_bytes() < 2_000);
}

#[test]
fn no_column_before_the_first_reading_is_drawn() {
    // 1 s readings from 30 s into a 60 s window: the first half has nothing to show.
    let mut s = Series::default();
    let start = BASE + 30 * SEC + 400;
    for i in 0..30 {
        s.push(start + i * SEC, 10.0 + (i % 3) as f64);
    }
    let now = start + 29 * SEC + 1;
    let cols = s.until(now).query_held(now - 60 * SEC, now, 55);
    let first = cols.iter().position(Option::is_some).expect("some data");
    assert!(first >= 26, "drawn from column {first}: {cols:?}");
}
