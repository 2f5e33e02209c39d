//! Sparklines over a time window, drawn from each column's maximum so a short spike survives
//! downsampling, with the window's peak marked on the plot itself; and horizontal fill bars.
//! Both screens chart with them: the monitor's panels and the cluster view's charts.

use crate::history::{Capped, Peak, column_of};
use crate::terminal_kit::theme::Theme;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

/// How a chart is drawn: `width` x `height` cells, scaled to `0..=scale` (to the window's own
/// peak when `None`), in `style`.
#[derive(Clone, Copy)]
pub struct Plot {
    pub width: u16,
    pub height: u16,
    pub scale: Option<f64>,
    pub style: Style,
}

impl Plot {
    /// A one-row sparkline.
    pub fn row(width: u16, scale: Option<f64>, style: Style) -> Self {
        Plot {
            width,
            height: 1,
            scale,
            style,
        }
    }
}

/// A drawn chart and the peak it marks.
pub struct Spark {
    /// Its rows, top first.
    pub rows: Vec<Line<'static>>,
    pub peak: Option<Peak>,
    /// Every reading in the window was the same: there is no peak worth pointing at.
    pub flat: bool,
}

/// Draws `series` over `[from_ms, to_ms)` as `plot` says: one row is a sparkline, more rows
/// stack the same levels into columns of blocks, so a tall chart reads finer. With
/// `mark_peak`, the window's peak is marked at its column, just above its top (on it when the
/// column is full), unless the window is flat (a marker on a flat line only adds noise).
pub fn spark(
    theme: &Theme,
    series: Capped,
    range: (u64, u64),
    plot: Plot,
    mark_peak: bool,
) -> Spark {
    spark_from(theme, series, range, (plot, 0.0), mark_peak)
}

/// [`spark`] on a scale from `floor` (the bottom of the plot) to the plot's `scale`: a
/// chart scaled to its own series (`own_scale`) starts at the window's lowest reading.
pub fn spark_from(
    theme: &Theme,
    series: Capped,
    (from_ms, to_ms): (u64, u64),
    (plot, floor): (Plot, f64),
    mark_peak: bool,
) -> Spark {
    let columns = usize::from(plot.width);
    let height = usize::from(plot.height.max(1));
    let peak = series.window_peak(from_ms, to_ms);
    let data = series.query_held(from_ms, to_ms, columns);
    let scale = plot
        .scale
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
    let visible = glyphs.spark.len().saturating_sub(1);
    let blank = glyphs.spark.first().copied().unwrap_or(" ");
    // Each column's height in levels over all rows; 0 is no data.
    let levels: Vec<usize> = data
        .iter()
        .map(|cell| {
            cell.map_or(0, |c| {
                stacked_level(c.max - floor, scale - floor, visible * height)
            })
        })
        .collect();
    // The marker sits in the row just above its column's top, or on the top row.
    let marker_row = marker_col
        .and_then(|col| levels.get(col))
        .map(|level| level.div_ceil(visible.max(1)).min(height - 1));
    let mut rows = Vec::with_capacity(height);
    for row in (0..height).rev() {
        // At most three spans (before, marker, after): one allocation per run, not per cell.
        let mut spans = Vec::with_capacity(3);
        let mut run = String::with_capacity(columns * 3);
        for (col, &level) in levels.iter().enumerate() {
            if Some(col) == marker_col && Some(row) == marker_row {
                spans.push(Span::styled(std::mem::take(&mut run), plot.style));
                spans.push(Span::styled(glyphs.peak, theme.peak_marker));
                continue;
            }
            let in_row = level.saturating_sub(row * visible).min(visible);
            run.push_str(glyphs.spark.get(in_row).copied().unwrap_or(blank));
        }
        spans.push(Span::styled(run, plot.style));
        rows.push(Line::from(spans));
    }
    Spark { rows, peak, flat }
}

/// `value` on a `0..=max` scale in `levels` steps, at least 1 so any reading, zero too, shows
/// and stays distinguishable from no data; rounded up so a non-zero reading is taller than
/// a zero one.
fn stacked_level(value: f64, max: f64, levels: usize) -> usize {
    if levels == 0 {
        return 0;
    }
    let fraction = if max > 0.0 && value.is_finite() {
        (value / max).clamp(0.0, 1.0)
    } else {
        0.0
    };
    ((fraction * levels as f64).ceil() as usize).clamp(1, levels)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Series;

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
        let plot = Plot::row(0, None, theme.sparkline);
        let s = spark(&theme, series.until(99), (0, 100), plot, true);
        assert_eq!(s.rows.iter().map(Line::width).sum::<usize>(), 0);
        assert!(s.peak.is_some());
    }

    #[test]
    fn tall_charts_stack_levels_and_mark_the_peak_above_its_column() {
        let theme = Theme::new(false, false);
        let mut series = Series::default();
        // Four one-second columns: half, a break, a quarter, the peak at three quarters.
        series.push(0, 50.0);
        series.push_gap(1_000);
        series.push(2_000, 25.0);
        series.push(3_000, 75.0);
        let plot = Plot {
            width: 4,
            height: 4,
            scale: Some(100.0),
            style: theme.sparkline,
        };
        let drawn = spark(&theme, series.until(3_999), (0, 4_000), plot, true);
        let rows: Vec<String> = drawn.rows.iter().map(|r| r.to_string()).collect();
        // Top first: 75 % of four rows is three full rows, the marker in the fourth.
        assert_eq!(rows, ["   ▲", "   █", "█  █", "█ ██"]);
    }
}
