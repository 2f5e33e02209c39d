//! The monitor's charts: the window a chart covers at the screen's moment and zoom, and a
//! chart with its peak labelled (how high and how long ago), drawn with the terminal kit's
//! sparklines (`terminal_kit::sparkline`).

use super::time_axis;
use crate::history::{Capped, Peak};
use crate::model::units;
use crate::terminal_kit::sparkline::{Plot, Spark, spark};
use crate::terminal_kit::theme::Theme;
use crate::tui::view::View;
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
