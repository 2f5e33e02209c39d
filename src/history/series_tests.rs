//! Long-run tests for [`Series`]: peaks surviving a week of decimation and
//! memory staying bounded. Hostile-input tests live in `series_edge_tests`.

use super::{Column, Peak, Series};

const BASE: u64 = 1_700_000_000_000;
const SEC: u64 = 1_000;
const HOUR: u64 = 3_600 * SEC;
const DAY: u64 = 24 * HOUR;

fn baseline(i: u64) -> f64 {
    1_000.0 + (i % 97) as f64
}

#[test]
fn week_old_spike_survives_everywhere() {
    let mut s = Series::default();
    let spacing = 5 * SEC;
    let end = BASE + 7 * DAY;
    // Off the sampling grid, so a bucket-aligned or sample-aligned time would be wrong.
    let spike_at = BASE + 3 * DAY + 7 * HOUR + 1_234;
    let mut t = BASE;
    let mut i = 0;
    while t < end {
        s.push(t, baseline(i));
        if t < spike_at && spike_at < t + spacing {
            s.push(spike_at, 5_000.0);
        }
        t += spacing;
        i += 1;
    }

    assert_eq!(
        s.peak(),
        Some(Peak {
            value: 5_000.0,
            at_ms: spike_at
        })
    );
    let oldest_raw = s.raw().next().map(|(at, _)| at);
    assert!(
        oldest_raw.is_some_and(|at| at > spike_at + DAY),
        "spike must have left raw"
    );

    let cols = s.query(BASE, end, 80);
    assert_eq!(cols.len(), 80);
    let spike_col = ((spike_at - BASE) * 80 / (end - BASE)) as usize;
    assert_eq!(cols[spike_col].map(|c| c.max), Some(5_000.0));
    let spiky = cols.iter().flatten().filter(|c| c.max == 5_000.0).count();
    assert!(
        spiky <= 2,
        "only the column(s) its 1-minute bucket touches: {spiky}"
    );
    assert!(cols.iter().all(|c| c.is_some_and(|c| c.min >= 1_000.0)));

    let hour_around = s.window_peak(spike_at - HOUR, spike_at + HOUR);
    assert_eq!(
        hour_around,
        Some(Peak {
            value: 5_000.0,
            at_ms: spike_at
        })
    );
    let whole = s.window_peak(BASE, end);
    assert_eq!(
        whole,
        Some(Peak {
            value: 5_000.0,
            at_ms: spike_at
        })
    );
    let before = s.window_peak(BASE, spike_at - HOUR);
    assert!(before.is_some_and(|p| p.value < 1_100.0 && p.at_ms < spike_at - HOUR));
}

#[test]
fn recent_peaks_come_from_tier_and_raw_exactly() {
    let mut s = Series::default();
    let step = 100;
    let end = BASE + HOUR;
    let tier_spike = BASE + 30 * 60 * SEC + 37;
    let raw_dip = end - 60 * SEC;
    let mut t = BASE;
    while t < end {
        let v = if t == tier_spike - 37 {
            900.0
        } else if t == raw_dip {
            -5.0
        } else {
            10.0
        };
        s.push(t, v);
        if t == tier_spike - 37 {
            s.push(tier_spike, 950.0);
        }
        t += step;
    }
    // 15 min of raw at 10 Hz: the spike 30 min back is only in the 10 s tier.
    assert!(s.raw().next().is_some_and(|(at, _)| at > tier_spike));
    let p = s.window_peak(tier_spike - 60 * SEC, tier_spike + 60 * SEC);
    assert_eq!(
        p,
        Some(Peak {
            value: 950.0,
            at_ms: tier_spike
        })
    );
    assert_eq!(
        s.tier_buckets(0).map(|b| b.max()).fold(f64::MIN, f64::max),
        950.0
    );

    // Raw region: one-second columns resolve the dip to exactly one column.
    let cols = s.query(end - 120 * SEC, end, 120);
    let dipped: Vec<usize> = (0..120)
        .filter(|&c| cols[c].is_some_and(|c| c.min == -5.0))
        .collect();
    assert_eq!(dipped, vec![60]);
    assert_eq!(
        cols[60],
        Some(Column {
            min: -5.0,
            max: 10.0,
            last: 10.0
        })
    );
}

#[test]
fn memory_is_bounded_and_flat_after_a_week_at_10hz() {
    let mut s = Series::default();
    let mut t = BASE;
    let mut fill = |s: &mut Series, until: u64| {
        while t < until {
            s.push(t, (t % 1_013) as f64);
            t += 100;
        }
    };
    fill(&mut s, BASE + 7 * DAY);
    let week = s.memory_bytes();
    fill(&mut s, BASE + 14 * DAY);
    let fortnight = s.memory_bytes();
    // Full rings: 9000 raw x 16 B + (2160 + 10080) buckets x 48 B ~= 732 KB.
    assert!(week < 800_000, "7 days used {week} bytes");
    assert_eq!(week, fortnight);
    assert_eq!(s.tier_buckets(1).count(), 10_080);
    assert_eq!(s.raw().count(), 9_000);
}

#[test]
fn short_lived_series_stays_small() {
    let mut s = Series::default();
    for i in 0..600 {
        s.push(BASE + i * SEC, 1.0);
    }
    // Rings grow with use, so a 10-minute process costs ~20 KB, not the full ~730 KB.
    assert!(s.memory_bytes() < 30_000, "{}", s.memory_bytes());
}
