//! Text formatting shared by the panels: styled spans, short ages, window and interval labels.
//! Units themselves live in `model::units`, one formatter for every output.
//! Everything absent renders as `n/a`, never as a zero.

use super::buffer_write;
use crate::model::Reading;
use crate::terminal_kit::theme::Theme;
use ratatui::text::Span;

pub use crate::model::NA;

/// A value span: the figure in the value style, `n/a` dimmed.
pub fn value_span<T>(
    theme: &Theme,
    value: &Reading<T>,
    f: impl FnOnce(&T) -> String,
) -> Span<'static> {
    match value {
        Ok(v) => Span::styled(f(v), theme.value),
        Err(_) => Span::styled(NA, theme.dim),
    }
}

/// A label span followed by a space.
pub fn label(theme: &Theme, text: &str) -> Span<'static> {
    Span::styled(format!("{text} "), theme.label)
}

/// The leading figures that fit in `width` cells (always the first): a narrow line loses whole
/// figures from its end, never half of one, since a number cut to its first digits reads as a
/// different number. Each figure carries its own leading separator.
pub fn fitting(mut figures: Vec<Vec<Span<'static>>>, width: usize) -> Vec<Vec<Span<'static>>> {
    let used = |f: &[Vec<Span>]| f.iter().flatten().map(buffer_write::cells).sum::<usize>();
    while figures.len() > 1 && used(&figures) > width {
        figures.pop();
    }
    figures
}

/// How much a figure on a GPU line matters when the line is too narrow for all of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rank {
    /// `fan n/a`: says only that a figure cannot be read.
    Absent,
    /// A reading.
    Figure,
    /// Something wrong (ECC errors, a costly throttle): what the line is there to say.
    Alarm,
}

/// The figures that fit in `width` cells, in their order: a narrow line drops the lowest
/// ranked first (the rightmost of equals), so an alarm outlasts every figure and an `n/a`
/// goes before any reading. Figures are dropped whole, as in [`fitting`]; a line that lost its
/// first figure does not start with the next one's separator.
pub fn fitting_ranked(
    mut figures: Vec<(Rank, Vec<Span<'static>>)>,
    width: usize,
) -> Vec<Vec<Span<'static>>> {
    let used = |f: &[(Rank, Vec<Span>)]| {
        f.iter()
            .flat_map(|(_, spans)| spans)
            .map(buffer_write::cells)
            .sum::<usize>()
    };
    while figures.len() > 1 && used(&figures) > width {
        let lowest = figures.iter().map(|(rank, _)| *rank).min();
        let Some(drop) = figures.iter().rposition(|(rank, _)| Some(*rank) == lowest) else {
            break;
        };
        figures.remove(drop);
    }
    let mut shown: Vec<Vec<Span<'static>>> = figures.into_iter().map(|(_, f)| f).collect();
    if let Some(first) = shown.first_mut()
        && first.first().is_some_and(|s| s.content.trim().is_empty())
    {
        first.remove(0);
    }
    shown
}

/// `2m` from `2m ago`: ages for tight lines.
pub fn short_age(then_ms: u64, now_ms: u64) -> String {
    let label = crate::model::time::age_label(then_ms, now_ms);
    label.trim_end_matches(" ago").to_string()
}

/// `45s`, `5m`, `2h`: the length of a chart window.
pub fn span_label(ms: u64) -> String {
    let secs = ms / 1000;
    match secs {
        0..=119 => format!("{secs}s"),
        120..=7199 => format!("{}m", secs / 60),
        _ => format!("{}h", secs / 3600),
    }
}

/// `1.0s`, `500ms`: the refresh interval.
pub fn interval_label(ms: u64) -> String {
    if ms >= 1000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        format!("{ms}ms")
    }
}

/// `51%` from a fraction of 100.
pub fn percent(value: f64) -> String {
    format!("{value:.0}%")
}

/// How long a process has run, as nvitop and ps write it: `04:32`, `3:04:32`, `12d 03:04`.
pub fn elapsed(ms: u64) -> String {
    let secs = ms / 1000;
    let (d, h, m, s) = (
        secs / 86_400,
        (secs / 3600) % 24,
        (secs / 60) % 60,
        secs % 60,
    );
    match (d, h) {
        (0, 0) => format!("{m:02}:{s:02}"),
        (0, _) => format!("{h}:{m:02}:{s:02}"),
        _ => format!("{d}d {h:02}:{m:02}"),
    }
}

/// GPU names without the vendor words every NVIDIA card shares, for tight lines.
pub fn short_gpu_name(name: &str) -> &str {
    let name = name.strip_prefix("NVIDIA ").unwrap_or(name);
    name.strip_prefix("GeForce ").unwrap_or(name)
}

/// Bytes, or `n/a`.
pub fn or_na_bytes(value: &Reading<u64>) -> String {
    crate::model::or_na(value, |v| crate::model::units::bytes(*v))
}

/// A count, or `n/a`.
pub fn or_na_count(value: &Reading<u64>) -> String {
    crate::model::or_na(value, |v| v.to_string())
}

/// How much of a GPU's used memory instrumented allocators account for (their reserved
/// bytes): `62%`; `None` when no instrumented process uses the GPU.
pub fn instrumented_share(device: &crate::model::DeviceSnapshot) -> Option<String> {
    let reserved = device.instrumented_reserved?;
    let used = device.memory_used()?;
    if used == 0 {
        return None;
    }
    // Reserved and used are read at different moments: a share above 100 % is that skew.
    Some(percent(reserved.min(used) as f64 * 100.0 / used as f64))
}

/// ` │ ` between the parts of a line.
pub fn separator(theme: &Theme) -> Span<'static> {
    Span::styled(format!(" {} ", theme.glyphs.separator), theme.dim)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_compact() {
        assert_eq!(span_label(60_000), "60s");
        assert_eq!(span_label(300_000), "5m");
        assert_eq!(short_age(0, 120_000), "2m");
        assert_eq!(interval_label(500), "500ms");
        assert_eq!(short_gpu_name("NVIDIA GeForce RTX 4090"), "RTX 4090");
    }

    #[test]
    fn elapsed_times_read_as_ps_writes_them() {
        assert_eq!(elapsed(272_000), "04:32");
        assert_eq!(elapsed(11_072_000), "3:04:32");
        assert_eq!(elapsed(12 * 86_400_000 + 11_072_000), "12d 03:04");
    }
}
