//! A chart scaled to its own series, for the detail pane: a process moving between 4.0 and
//! 4.6 GiB on an 80 GiB GPU fills the plot from its lowest reading to its highest rather
//! than drawing a flat line at the bottom. The plot's left labels say where it starts and
//! ends, an axis row of round ages sits under it, and the label line under that gives the
//! window's peak and what the scale is of (the GPU's or the host's total):
//!
//! ```text
//!    4.6G    ▂▅█▲▇▅▃▂
//!    4.0G ▁▁▁▁▁▁▁▁▁▁▁▁
//!        ╵2m          ╵1m          now
//!        ▲ 4.62 GiB 40s ago (max of 2m) │ all-time 4.62 GiB 40s ago │ 4.0G-4.6G of 80.0G GPU
//! ```

use super::{spark, time_axis};
use crate::model::units;
use crate::terminal_kit::sparkline;
use crate::tui::view::View;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

/// Cells before the plot for its scale labels (`  4.62G `).
pub const LABEL_W: u16 = 8;

/// The chart: `rows` plot rows (two at least, for the two labels), the axis, the label line.
/// `total` is what the figure is a share of, named on the label line.
pub fn chart(
    view: &View,
    charted: spark::Charted,
    range: (u64, u64),
    (width, rows, style): (u16, u16, Style),
    total: Option<(u64, &str)>,
) -> Vec<Line<'static>> {
    let theme = view.theme;
    let rows = rows.max(2);
    let (floor, top, highest) = bounds(&charted, range, width);
    let plot = sparkline::Plot {
        width,
        height: rows,
        scale: Some(top),
        style,
    };
    let drawn = sparkline::spark_from(theme, charted.series, range, (plot, floor), true);
    let label = |value: f64| format!("{:>w$} ", units::short_bytes(value as u64), w = 7);
    let blank = " ".repeat(usize::from(LABEL_W));
    let last = drawn.rows.len().saturating_sub(1);
    let mut lines = Vec::with_capacity(drawn.rows.len() + 2);
    for (i, row) in drawn.rows.iter().enumerate() {
        let head = match i {
            0 if highest.is_some() => label(top),
            i if i == last && highest.is_some() => label(floor),
            _ => blank.clone(),
        };
        let mut spans = vec![Span::styled(head, theme.dim)];
        spans.extend(row.spans.iter().cloned());
        lines.push(Line::from(spans));
    }
    let mut axis = vec![Span::raw(blank.clone())];
    axis.extend(time_axis::axis(theme, range, width).spans);
    lines.push(Line::from(axis));
    let seen_ms = spark::seen_ms(charted.series, range);
    let mut peak = vec![Span::raw(blank)];
    let format = |v: f64| units::bytes(v as u64);
    peak.extend(
        spark::peak_label(
            theme,
            &drawn,
            charted.all_time,
            seen_ms,
            view.now_ms,
            format,
        )
        .spans,
    );
    peak.extend(scale_span(
        view,
        (floor, top),
        total.filter(|_| highest.is_some()),
    ));
    lines.push(Line::from(peak));
    lines
}

/// Where a chart of `width` columns scaled to its own series starts and ends over `range`
/// (the window's lowest reading and its highest), and that highest; a flat or empty window
/// keeps the absolute scale, from zero: there is no range to spread.
fn bounds(charted: &spark::Charted, range: (u64, u64), width: u16) -> (f64, f64, Option<f64>) {
    let cells = charted
        .series
        .query_held(range.0, range.1, usize::from(width));
    let lowest = cells
        .iter()
        .flatten()
        .map(|c| c.min)
        .fold(f64::INFINITY, f64::min);
    let highest = charted
        .series
        .window_peak(range.0, range.1)
        .map(|p| p.value);
    let (floor, top) = match highest {
        Some(high) if lowest.is_finite() && high > lowest => (lowest, high),
        Some(high) => (0.0, high),
        None => (0.0, 0.0),
    };
    (floor, top, highest)
}

/// ` │ 4.0G-4.6G of 80.0G GPU` (or ` │ of 80.0G GPU` from zero): what the scale spans, of
/// what total; nothing without a total.
fn scale_span(
    view: &View,
    (floor, top): (f64, f64),
    total: Option<(u64, &str)>,
) -> Option<Span<'static>> {
    let (total, of) = total?;
    let total = units::short_bytes(total);
    let scale = if floor > 0.0 {
        let (low, high) = (floor as u64, top as u64);
        let (low, high) = (units::short_bytes(low), units::short_bytes(high));
        format!("{low}-{high} of {total} {of}")
    } else {
        format!("of {total} {of}")
    };
    Some(Span::styled(
        format!(" {} {scale}", view.theme.glyphs.separator),
        view.theme.dim,
    ))
}

/// A one-row chart scaled to its own series, for the allocator's allocated and reserved
/// (an allocator going from 2 to 8 GiB on an 80 GiB GPU fills the row): the window's
/// length before the plot, as `spark::tall_chart_with_peak` draws it, and under it the peak
/// label with what the row spans, `▲ 7.90 GiB 3s ago (max of 2m) │ 2.0G-8.0G of 80.0G GPU`.
pub fn row_chart(
    view: &View,
    charted: spark::Charted,
    range: (u64, u64),
    (width, style): (u16, Style),
    total: Option<(u64, &str)>,
) -> [Line<'static>; 2] {
    let theme = view.theme;
    let (floor, top, highest) = bounds(&charted, range, width);
    let plot = sparkline::Plot {
        width,
        height: 1,
        scale: Some(top),
        style,
    };
    let drawn = sparkline::spark_from(theme, charted.series, range, (plot, floor), true);
    let window_ms = range.1.saturating_sub(range.0);
    let head = format!("{:>4} ", time_axis::age_label(window_ms));
    let mut row = vec![Span::styled(head, theme.dim)];
    row.extend(drawn.rows.iter().flat_map(|r| r.spans.iter().cloned()));
    let seen_ms = spark::seen_ms(charted.series, range);
    let mut label = vec![Span::raw(" ".repeat(usize::from(spark::LABEL_W)))];
    label.extend(
        spark::peak_label(theme, &drawn, charted.all_time, seen_ms, view.now_ms, |v| {
            units::bytes(v as u64)
        })
        .spans,
    );
    label.extend(scale_span(
        view,
        (floor, top),
        total.filter(|_| highest.is_some()),
    ));
    [Line::from(row), Line::from(label)]
}
