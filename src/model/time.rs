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

#[cfg(test)]
mod tests {
    use super::*;

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
