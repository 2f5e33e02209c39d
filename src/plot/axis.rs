//! The time axis: tick marks on round wall-clock times (every 5 s, 10 min, 6 h...) labelled
//! `HH:MM:SS` in UTC, like the report's times.

use crate::model::time::{ROUND_STEPS_MS, utc_label};

const SECOND: u64 = 1000;
const MINUTE: u64 = 60 * SECOND;
const HOUR: u64 = 60 * MINUTE;
const DAY: u64 = 24 * HOUR;

/// Tick times between `first_ms` and `last_ms` (at most `max_ticks` + 1 of them) and their
/// spacing.
pub fn ticks(first_ms: u64, last_ms: u64, max_ticks: u64) -> (Vec<u64>, u64) {
    let span = last_ms.saturating_sub(first_ms);
    let max_ticks = max_ticks.max(1);
    let step = ROUND_STEPS_MS
        .iter()
        .copied()
        .find(|s| span / s <= max_ticks)
        // Beyond weeks: whole weeks, as many as it takes.
        .unwrap_or_else(|| (span / max_ticks / (7 * DAY) + 1) * 7 * DAY);
    let mut tick = first_ms.div_ceil(step).saturating_mul(step);
    let mut out = Vec::new();
    while tick <= last_ms && out.len() as u64 <= max_ticks {
        out.push(tick);
        match tick.checked_add(step) {
            Some(next) => tick = next,
            None => break,
        }
    }
    (out, step)
}

/// `22:13:50`, `22:13:50.250` when ticks are less than a second apart, or the date when
/// they are days apart.
pub fn label(ms: u64, step: u64) -> String {
    let full = utc_label(ms);
    let mut parts = full.split(' ');
    let date = parts.next().unwrap_or_default();
    let time = parts.next().unwrap_or_default();
    if step >= DAY {
        date.to_string()
    } else if step < SECOND {
        time.to_string()
    } else {
        time.split('.').next().unwrap_or_default().to_string()
    }
}

/// `2023-11-14 22:13:20 → 22:14:19 UTC (59s)`: the span the plot covers.
pub fn span_label(first_ms: u64, last_ms: u64) -> String {
    let start = utc_label(first_ms);
    let end = utc_label(last_ms);
    let trim = |s: &str| s.split('.').next().unwrap_or_default().to_string();
    let (start_date, end_date) = (start.split(' ').next(), end.split(' ').next());
    let end = if start_date == end_date {
        label(last_ms, SECOND)
    } else {
        trim(&end)
    };
    format!(
        "{} → {end} UTC ({})",
        trim(&start),
        crate::model::time::duration_label(last_ms.saturating_sub(first_ms))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_700_000_000_000; // 2023-11-14 22:13:20 UTC

    #[test]
    fn ticks_fall_on_round_times() {
        let (ticks, step) = ticks(T0 + 300, T0 + 59_000, 8);
        assert_eq!(step, 10 * SECOND);
        assert_eq!(ticks.first(), Some(&(T0 + 10_000)));
        assert!(ticks.iter().all(|t| t % step == 0));
        assert_eq!(label(T0 + 10_000, step), "22:13:30");
        let (_, fine) = super::ticks(T0, T0 + 900, 8);
        assert_eq!(label(T0 + 200, fine), "22:13:20.200");
    }

    #[test]
    fn any_span_gives_few_ticks() {
        for (first, last) in [
            (0, u64::MAX),
            (T0, T0),
            (u64::MAX - 5, u64::MAX),
            (0, 40 * DAY),
        ] {
            let (ticks, _) = ticks(first, last, 10);
            assert!(ticks.len() <= 11, "{first}..{last}: {}", ticks.len());
        }
        assert_eq!(
            span_label(T0, T0 + 59_000),
            "2023-11-14 22:13:20 → 22:14:19 UTC (59s)"
        );
    }
}
