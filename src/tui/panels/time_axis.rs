//! Round time for charts: windows that read as `2m` or `30s` rather than `109s`, and an axis
//! row under tall charts with ticks at round ages (30 s, 1 m, 5 m ...), as a person would
//! mark a time scale by hand:
//!
//! ```text
//! ╵2m                   ╵1m30s                ╵1m                   ╵30s              now
//! ```

use crate::model::time::ROUND_STEPS_MS;
use crate::terminal_kit::theme::Theme;
use ratatui::text::{Line, Span};

const SECOND: u64 = 1_000;
const MINUTE: u64 = 60 * SECOND;
const HOUR: u64 = 60 * MINUTE;
const DAY: u64 = 24 * HOUR;

/// Window lengths a chart may cover, shortest first; past the last, whole days.
const ROUND_SPANS: &[u64] = &[
    SECOND,
    2 * SECOND,
    5 * SECOND,
    10 * SECOND,
    15 * SECOND,
    30 * SECOND,
    MINUTE,
    2 * MINUTE,
    3 * MINUTE,
    5 * MINUTE,
    10 * MINUTE,
    15 * MINUTE,
    20 * MINUTE,
    30 * MINUTE,
    HOUR,
    2 * HOUR,
    3 * HOUR,
    6 * HOUR,
    12 * HOUR,
    DAY,
];

/// Fewest cells between two ticks, so that their labels (`╵1m30s`) never touch.
const MIN_TICK_CELLS: u64 = 20;

/// The shortest round window at least `ms` long: a chart then covers `2m` rather than
/// `88s`, each column a little more than one sample, so no column is left without one.
pub fn round_span(ms: u64) -> u64 {
    match ROUND_SPANS.iter().find(|&&s| s >= ms) {
        Some(&s) => s,
        None => ms.div_ceil(DAY).saturating_mul(DAY),
    }
}

/// `30s`, `1m`, `1m30s`, `2h`, `1h30m`, `3d`: an age on the axis, exact and short.
pub fn age_label(ms: u64) -> String {
    let secs = ms / SECOND;
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    match (d, h, m, s) {
        (0, 0, 0, s) => format!("{s}s"),
        (0, 0, m, 0) => format!("{m}m"),
        (0, 0, m, s) => format!("{m}m{s}s"),
        (0, h, 0, _) => format!("{h}h"),
        (0, h, m, _) => format!("{h}h{m}m"),
        (d, 0, _, _) => format!("{d}d"),
        (d, h, _, _) => format!("{d}d{h}h"),
    }
}

/// The round distance between ticks on a `width`-cell axis over `window_ms`: the shortest
/// that leaves [`MIN_TICK_CELLS`] between two ticks.
fn tick_step(window_ms: u64, width: u16) -> u64 {
    let width = u64::from(width).max(1);
    let fits = |step: u64| step.saturating_mul(width) >= MIN_TICK_CELLS.saturating_mul(window_ms);
    // Whole seconds up to a day; past that, whole days.
    let steps = ROUND_STEPS_MS
        .iter()
        .filter(|&&s| (SECOND..=DAY).contains(&s));
    match steps.copied().find(|&s| fits(s)) {
        Some(s) => s,
        None => {
            let days = (MIN_TICK_CELLS.saturating_mul(window_ms) / width).div_ceil(DAY);
            days.max(1).saturating_mul(DAY)
        }
    }
}

/// The axis row under a chart `width` cells wide over `[from_ms, to_ms)`, laid out on the
/// same column grid as the chart's query: a tick at each round age with its label after it,
/// and `now` at the right end. Labels that would touch are left out, never cut.
pub fn axis(theme: &Theme, (from_ms, to_ms): (u64, u64), width: u16) -> Line<'static> {
    let cells = usize::from(width);
    let window = to_ms.saturating_sub(from_ms);
    if cells == 0 || window == 0 {
        return Line::default();
    }
    let step = tick_step(window, width);
    let mut row: Vec<&str> = vec![" "; cells];
    let mut labels: Vec<(usize, String)> = Vec::new();
    // Oldest first, so the window's start keeps its tick when the newest would not fit.
    let mut age = window / step * step;
    while age >= step {
        let at = to_ms.saturating_sub(age).max(from_ms);
        if let Some(col) = crate::history::column_of(at, from_ms, to_ms, cells) {
            labels.push((col, age_label(age)));
        }
        age -= step;
    }
    let now = "now";
    let now_at = cells.saturating_sub(now.len());
    let mut free_from = 0;
    let mut text = String::with_capacity(cells * 3);
    for (col, label) in &labels {
        let end = col + 1 + label.len();
        // One blank cell before the next label, and room left for `now`.
        if *col < free_from || end >= now_at {
            continue;
        }
        row[*col] = theme.glyphs.step_tick;
        for (i, _) in label.char_indices() {
            row[col + 1 + i] = &label[i..=i];
        }
        free_from = end + 1;
    }
    if now_at >= free_from {
        for (i, _) in now.char_indices() {
            row[now_at + i] = &now[i..=i];
        }
    }
    for cell in row {
        text.push_str(cell);
    }
    Line::from(Span::styled(text, theme.dim))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_round_up_to_values_people_use() {
        assert_eq!(round_span(60_000), MINUTE);
        assert_eq!(round_span(88_000), 2 * MINUTE);
        assert_eq!(round_span(109_000), 2 * MINUTE);
        assert_eq!(round_span(121_000), 3 * MINUTE);
        assert_eq!(round_span(400), SECOND);
        assert_eq!(round_span(DAY + 1), 2 * DAY);
    }

    #[test]
    fn ages_read_exactly() {
        assert_eq!(age_label(30_000), "30s");
        assert_eq!(age_label(60_000), "1m");
        assert_eq!(age_label(90_000), "1m30s");
        assert_eq!(age_label(2 * HOUR), "2h");
        assert_eq!(age_label(HOUR + 30 * MINUTE), "1h30m");
        assert_eq!(age_label(3 * DAY), "3d");
    }

    #[test]
    fn axis_ticks_round_ages_at_their_columns() {
        let theme = Theme::new(false, false);
        // Two minutes over 88 columns: a tick every 30 s, 22 columns apart.
        let line = axis(&theme, (0, 120_000), 88);
        let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
        assert_eq!(text.chars().count(), 88, "{text:?}");
        assert!(text.starts_with("╵2m "), "{text:?}");
        let at = |needle: &str| {
            let byte = text.find(needle).expect(needle);
            text[..byte].chars().count()
        };
        assert_eq!(at("╵1m30s"), 22);
        assert_eq!(at("╵1m "), 44);
        assert_eq!(at("╵30s"), 66);
        assert!(text.ends_with("now"), "{text:?}");
    }

    #[test]
    fn narrow_axes_space_their_ticks_out() {
        let theme = Theme::new(false, true);
        let line = axis(&theme, (0, 300_000), 60);
        let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
        assert!(text.is_ascii(), "{text:?}");
        assert_eq!(text.len(), 60);
        // Five minutes in 60 cells: a tick every 2 minutes, 24 cells apart.
        assert!(!text.contains("1m"), "{text:?}");
        assert_eq!(text.find("|4m"), Some(12), "{text:?}");
        assert_eq!(text.find("|2m"), Some(36), "{text:?}");
        // Too narrow for a tick 20 cells from the next: only the window's start and now.
        let line = axis(&theme, (0, 300_000), 30);
        let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
        assert_eq!(text, format!("|5m{}now", " ".repeat(24)));
    }
}
