//! Wall-clock timestamps in milliseconds since the Unix epoch: the one time axis of history,
//! output and recordings.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, now. A clock before 1970 reads as 0 rather than failing.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// "3s ago", "4m ago", "2h ago", "5d ago": compact ages for peak labels.
pub fn age_label(then_ms: u64, now_ms: u64) -> String {
    let secs = now_ms.saturating_sub(then_ms) / 1000;
    match secs {
        0..=59 => format!("{secs}s ago"),
        60..=3599 => format!("{}m ago", secs / 60),
        3600..=86_399 => format!("{}h ago", secs / 3600),
        _ => format!("{}d ago", secs / 86_400),
    }
}

/// `2026-11-21 09:41:12.345 UTC`: a moment in a recording, without a time-zone database,
/// identical on every machine.
pub fn utc_label(ms: u64) -> String {
    let secs = ms / 1000;
    let (y, m, d) = civil_date(secs / 86_400);
    let (h, min, s) = ((secs / 3600) % 24, (secs / 60) % 60, secs % 60);
    format!(
        "{y:04}-{m:02}-{d:02} {h:02}:{min:02}:{s:02}.{:03} UTC",
        ms % 1000
    )
}

/// Year, month and day of a day number since 1970-01-01 (Howard Hinnant's civil-from-days).
fn civil_date(days: u64) -> (i64, u32, u32) {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// `1h 05m`, `3m 20s`, `12s`: how long something lasted.
pub fn duration_label(ms: u64) -> String {
    let secs = ms / 1000;
    match secs {
        0..=59 => format!("{secs}s"),
        60..=3599 => format!("{}m {:02}s", secs / 60, secs % 60),
        _ => format!("{}h {:02}m", secs / 3600, (secs / 60) % 60),
    }
}

/// Time spacings a reader counts in without effort, 1 ms to a week, shortest first: the
/// plot's time axis and the monitor's chart axis both pick their ticks from it.
pub const ROUND_STEPS_MS: [u64; 29] = {
    const SECOND: u64 = 1000;
    const MINUTE: u64 = 60 * SECOND;
    const HOUR: u64 = 60 * MINUTE;
    const DAY: u64 = 24 * HOUR;
    [
        1,
        2,
        5,
        10,
        20,
        50,
        100,
        200,
        500,
        SECOND,
        2 * SECOND,
        5 * SECOND,
        10 * SECOND,
        15 * SECOND,
        30 * SECOND,
        MINUTE,
        2 * MINUTE,
        5 * MINUTE,
        10 * MINUTE,
        15 * MINUTE,
        30 * MINUTE,
        HOUR,
        2 * HOUR,
        3 * HOUR,
        6 * HOUR,
        12 * HOUR,
        DAY,
        2 * DAY,
        7 * DAY,
    ]
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_labels_match_known_dates() {
        assert_eq!(utc_label(0), "1970-01-01 00:00:00.000 UTC");
        assert_eq!(utc_label(1_700_000_000_123), "2023-11-14 22:13:20.123 UTC");
        // A leap day.
        assert_eq!(utc_label(951_782_400_000), "2000-02-29 00:00:00.000 UTC");
        assert_eq!(duration_label(3_725_000), "1h 02m");
        assert_eq!(duration_label(200_000), "3m 20s");
    }

    #[test]
    fn ages_pick_the_largest_whole_unit() {
        assert_eq!(age_label(0, 999), "0s ago");
        assert_eq!(age_label(0, 59_000), "59s ago");
        assert_eq!(age_label(0, 61_000), "1m ago");
        assert_eq!(age_label(0, 7_200_000), "2h ago");
        assert_eq!(age_label(0, 3 * 86_400_000), "3d ago");
        assert_eq!(age_label(5_000, 1_000), "0s ago");
    }
}
