//! Small charts shared by panels: one-row sparklines over a time window, drawn from each
//! column's maximum so a short spike survives downsampling, with the window's peak marked on the
//! plot itself and a label line saying how high and how long ago; and horizontal fill bars.

use super::time_axis;
use crate::history::{Capped, Peak, column_of};
use crate::model::units;
use crate::tui::theme::Theme;
use crate::tui::view::View;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

/// Shortest window a chart covers: a narrow chart at a fast interval would otherwise show
/// only seconds of history.
const MIN_WINDOW_MS: u64 = 60_000;

/// The time span `[from_ms, to_ms)` a chart `width` columns wide covers: one interval per
/// column, at least a minute, times the zoom (`z`, `Z`), rounded up to a length people use
/// (`2m`, not `88s`), ending just after the moment the screen shows.
pub fn window(view: &View, width: u16) -> (u64, u64) {
    let usual = u64::from(width)
        .saturating_mul(view.interval_ms)
        .max(MIN_WINDOW_MS);
    // For `z` and `Z` to say the span they lead to.
    view.ui.chart_usual_ms.set(usual);
    let window = zoomed_span(usual, view.ui.zoom);
    let to = view.now_ms.saturating_add(1);
    (to.saturating_sub(window), to)
}

/// A chart's window of `usual` ms at `zoom` (2^zoom times as long), rounded as [`window`]
/// rounds it.
pub fn zoomed_span(usual: u64, zoom: i8) -> u64 {
    let window = if zoom >= 0 {
        usual.saturating_mul(1 << zoom)
    } else {
        (usual >> -zoom).max(1_000)
    };
    super::time_axis::round_span(window)
}

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

/// Cells before a chart for its label (`mem  `, `util `), or for the window length
/// (`  5m `) on the plot line of a chart with a peak label.
pub const LABEL_W: u16 = 5;

/// A series to chart, read up to the snapshot's moment, with its all-time peak as the
/// snapshot carries it.
#[derive(Clone, Copy)]
pub struct Charted<'a> {
    pub series: Capped<'a>,
    pub all_time: Option<Peak>,
}

/// What a peak label speaks for, in ms: the window `range`, or the part of it `series`'
/// history reaches into.
pub fn seen_ms(series: Capped, range: (u64, u64)) -> u64 {
    let seen_from = series
        .first_at()
        .map_or(range.0, |first| first.max(range.0));
    range.1.saturating_sub(seen_from).max(1)
}

/// A memory chart `plot.height` rows tall (scaled to `0..=plot.scale`, drawn in its style,
/// the window's peak marked): the plot's rows, top first, the first labelled with the
/// window's length, then the peak label.
pub fn tall_chart_with_peak(
    view: &View,
    Charted { series, all_time }: Charted,
    range: (u64, u64),
    plot: Plot,
) -> Vec<Line<'static>> {
    let theme = view.theme;
    let window_ms = range.1.saturating_sub(range.0);
    let seen_ms = seen_ms(series, range);
    let drawn = spark(theme, series, range, plot, true);
    let mut label = vec![Span::raw(" ".repeat(usize::from(LABEL_W)))];
    label.extend(
        peak_label(theme, &drawn, all_time, seen_ms, view.now_ms, |v| {
            units::bytes(v as u64)
        })
        .spans,
    );
    let mut lines = Vec::with_capacity(drawn.rows.len() + 1);
    for (i, row) in drawn.rows.iter().enumerate() {
        let head = if i == 0 {
            format!("{:>4} ", time_axis::age_label(window_ms))
        } else {
            " ".repeat(usize::from(LABEL_W))
        };
        let mut spans = vec![Span::styled(head, theme.dim)];
        spans.extend(row.spans.iter().cloned());
        lines.push(Line::from(spans));
    }
    lines.push(Line::from(label));
    lines
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
                format!(" over the last {}", time_axis::age_label(window_ms)),
                theme.label,
            ));
        }
        Some(p) => {
            spans.push(Span::styled(theme.glyphs.peak, theme.peak_marker));
            spans.push(Span::styled(format!(" {}", format(p.value)), theme.value));
            spans.push(Span::styled(
                format!(
                    " {} (max of {})",
                    age(p.at_ms),
                    time_axis::age_label(window_ms)
                ),
                theme.label,
            ));
        }
        None => spans.push(Span::styled(
            format!("no data in the last {}", time_axis::age_label(window_ms)),
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
