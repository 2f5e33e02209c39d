//! Small charts shared by panels: one-row sparklines over a time window, drawn from each
//! column's maximum so a short spike survives downsampling, with the window's peak marked on the
//! plot itself and a label line saying how high and how long ago; and horizontal fill bars.

use super::fmt;
use crate::history::{Peak, Series, column_of};
use crate::model::units;
use crate::tui::theme::Theme;
use crate::tui::view::View;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

/// Shortest window a chart covers: a narrow chart at a fast interval would otherwise show
/// only seconds of history.
const MIN_WINDOW_MS: u64 = 60_000;

/// The time span `[from_ms, to_ms)` a chart `width` columns wide covers: one interval per
/// column, at least a minute, times the zoom (`z`, `Z`), ending just after the moment the
/// screen shows.
pub fn window(view: &View, width: u16) -> (u64, u64) {
    let usual = u64::from(width)
        .saturating_mul(view.ui.interval_ms)
        .max(MIN_WINDOW_MS);
    let window = if view.ui.zoom >= 0 {
        usual.saturating_mul(1 << view.ui.zoom)
    } else {
        (usual >> -view.ui.zoom).max(1_000)
    };
    let to = view.now_ms.saturating_add(1);
    (to.saturating_sub(window), to)
}

/// A drawn sparkline and the peak it marks.
pub struct Spark {
    pub line: Line<'static>,
    pub peak: Option<Peak>,
    /// Every reading in the window was the same: there is no peak worth pointing at.
    pub flat: bool,
}

/// Draws `series` over `[from_ms, to_ms)` in `width` cells, scaled to `0..=scale_max` (or to
/// the window's own peak when `None`). With `mark_peak`, the window's peak is drawn at its
/// column unless the window is flat (a marker on a flat line only adds noise).
pub fn spark(
    theme: &Theme,
    series: &Series,
    (from_ms, to_ms): (u64, u64),
    width: u16,
    scale_max: Option<f64>,
    style: Style,
    mark_peak: bool,
) -> Spark {
    let columns = usize::from(width);
    let peak = series.window_peak(from_ms, to_ms);
    let data = series.query_held(from_ms, to_ms, columns);
    let scale = scale_max
        .filter(|m| *m > 0.0)
        .or(peak.map(|p| p.value))
        .unwrap_or(0.0);
    let lowest = data
        .iter()
        .flatten()
        .map(|c| c.min)
        .fold(f64::INFINITY, f64::min);
    let flat = peak.is_none_or(|p| p.value <= lowest);
    let marker_col = peak
        .filter(|_| mark_peak && !flat)
        .and_then(|p| column_of(p.at_ms, from_ms, to_ms, columns));
    let glyphs = &theme.glyphs;

    // At most three spans (before, marker, after): one allocation per run, not per cell.
    let mut spans = Vec::with_capacity(3);
    let mut run = String::with_capacity(columns * 3);
    for (col, cell) in data.iter().enumerate() {
        if Some(col) == marker_col {
            spans.push(Span::styled(std::mem::take(&mut run), style));
            spans.push(Span::styled(glyphs.peak, theme.peak_marker));
            continue;
        }
        let glyph = match cell {
            Some(c) => glyphs.spark_level(c.max, scale),
            None => glyphs.spark.first().copied().unwrap_or(" "),
        };
        run.push_str(glyph);
    }
    spans.push(Span::styled(run, style));
    Spark {
        line: Line::from(spans),
        peak,
        flat,
    }
}

/// Cells before a chart for its label (`mem  `, `util `), or for the window length
/// (`  5m `) on the plot line of a chart with a peak label.
pub const LABEL_W: u16 = 5;

/// A memory chart's two lines: the window length and the sparkline (scaled to
/// `0..=scale`, drawn in `style`, the window's peak marked), then the peak label under it.
/// Callers may append the current value to the plot line.
pub fn chart_with_peak(
    view: &View,
    series: &Series,
    range: (u64, u64),
    (width, scale, style): (u16, Option<f64>, Style),
) -> [Line<'static>; 2] {
    let theme = view.theme;
    let window_ms = range.1.saturating_sub(range.0);
    // What the label speaks for: the window, or the part of it the history reaches into.
    let seen_from = series
        .first_at()
        .map_or(range.0, |first| first.max(range.0));
    let seen_ms = range.1.saturating_sub(seen_from).max(1);
    let drawn = spark(theme, series, range, width, scale, style, true);
    let mut label = vec![Span::raw(" ".repeat(usize::from(LABEL_W)))];
    label.extend(
        peak_label(theme, &drawn, series.peak(), seen_ms, view.now_ms, |v| {
            units::bytes(v as u64)
        })
        .spans,
    );
    let mut plot = vec![Span::styled(
        format!("{:>4} ", fmt::span_label(window_ms)),
        theme.dim,
    )];
    plot.extend(drawn.line.spans);
    [Line::from(plot), Line::from(label)]
}

/// A bar `width` cells wide (brackets included) filled to `fraction`; nothing if too narrow.
pub fn bar(theme: &Theme, fraction: f64, width: u16, fill: Style) -> Vec<Span<'static>> {
    let inner = usize::from(width.saturating_sub(2));
    if inner == 0 {
        return Vec::new();
    }
    let fraction = if fraction.is_finite() {
        fraction.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let filled = ((fraction * inner as f64).round() as usize).min(inner);
    let g = &theme.glyphs;
    vec![
        Span::styled(g.bar_left, theme.border),
        Span::styled(g.bar_fill.repeat(filled), fill),
        Span::styled(
            g.bar_empty.repeat(inner.saturating_sub(filled)),
            theme.bar_empty,
        ),
        Span::styled(g.bar_right, theme.border),
    ]
}

/// `▲ 63.0 GiB 2m ago (max of 5m) │ all-time 70.1 GiB 1h ago` under a chart drawn by
/// [`spark`]; a flat window reads `flat at 2.50 GiB over the last 5m`. `format` renders a value.
pub fn peak_label(
    theme: &Theme,
    drawn: &Spark,
    all_time: Option<Peak>,
    window_ms: u64,
    now_ms: u64,
    format: impl Fn(f64) -> String,
) -> Line<'static> {
    let age = |at| crate::model::time::age_label(at, now_ms);
    let mut spans = Vec::with_capacity(6);
    match drawn.peak {
        Some(p) if drawn.flat => {
            spans.push(Span::styled("flat at ", theme.label));
            spans.push(Span::styled(format(p.value), theme.value));
            spans.push(Span::styled(
                format!(" over the last {}", fmt::span_label(window_ms)),
                theme.label,
            ));
        }
        Some(p) => {
            spans.push(Span::styled(theme.glyphs.peak, theme.peak_marker));
            spans.push(Span::styled(format!(" {}", format(p.value)), theme.value));
            spans.push(Span::styled(
                format!(" {} (max of {})", age(p.at_ms), fmt::span_label(window_ms)),
                theme.label,
            ));
        }
        None => spans.push(Span::styled(
            format!("no data in the last {}", fmt::span_label(window_ms)),
            theme.dim,
        )),
    }
    if let Some(p) = all_time {
        spans.push(Span::styled(
            format!(" {} all-time ", theme.glyphs.separator),
            theme.dim,
        ));
        spans.push(Span::styled(format(p.value), theme.value));
        spans.push(Span::styled(format!(" {}", age(p.at_ms)), theme.label));
    }
    Line::from(spans)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_column_matches_query_grid() {
        assert_eq!(column_of(0, 0, 100, 10), Some(0));
        assert_eq!(column_of(99, 0, 100, 10), Some(9));
        assert_eq!(column_of(100, 0, 100, 10), None);
        assert_eq!(column_of(50, 0, 100, 0), None);
    }

    #[test]
    fn zero_width_draws_nothing() {
        let theme = Theme::new(true, false);
        let mut series = Series::default();
        series.push(10, 5.0);
        let s = spark(&theme, &series, (0, 100), 0, None, theme.sparkline, true);
        assert_eq!(s.line.width(), 0);
        assert!(s.peak.is_some());
    }
}
