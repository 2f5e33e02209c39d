//! A small panel for one GPU, laid out in a grid when there are many GPUs and room for their
//! history (8 GPUs at 200x50 take three rows of three):
//!
//! ```text
//! ─ GPU 0 [STALE] ──────────────────────────────────────────────
//! mem  ▁▁▂▃▅▇▲▆▃▂▁▁▁▁▁▁▁▁▁▁▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂ 41.2G
//! util ▁▂▃▃▅▆▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇   87%
//! 41.2/80.0 GiB 51%  ▲63.0G 2m  64°C  412W/700W  thr hw-slowdown  ECC 3 corr 1 uncorr
//! ```
//!
//! The title names the model only when the GPUs differ (the grid's caption says it once
//! otherwise). The last line keeps alarms (a costly throttle, ECC errors) longest when it is
//! too narrow for every figure. Both charts share one window with the full panels: memory
//! scaled to the GPU's total, utilisation to 100 %, each peak marked. Every tile's charts
//! cover the same window, so the grid draws one time axis under each of its columns
//! (`axis`) rather than one per tile, which would take a fifth of each tile's rows.

use super::buffer_write;
use super::gpu_panel::{alarm_figures, pcie_figure};
use super::panel_text::{self, Rank};
use super::spark;
use crate::model::DeviceSnapshot;
use crate::model::figures::device as gpu;
use crate::model::units;
use crate::terminal_kit::sparkline::{self, Plot};
use crate::terminal_kit::theme::Theme;
use crate::tui::view::View;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders};

/// Rows a tile takes: its title rule and three lines.
pub const HEIGHT: u16 = 4;
/// Narrowest tile worth drawing: a chart of about forty columns beside its labels.
pub const MIN_WIDTH: u16 = 56;

/// Cells after each chart for its current value.
const VALUE_W: u16 = 6;

/// Draws `device`'s tile in `area`; `named`: the title names the model.
pub fn render(frame: &mut Frame, area: Rect, view: &View, device: &DeviceSnapshot, named: bool) {
    let theme = view.theme;
    let mut title = format!(" GPU {} ", device.info.index);
    if named {
        title.push_str(panel_text::short_gpu_name(&device.info.display_name()));
        title.push(' ');
    }
    let mut spans = vec![Span::styled(title, theme.title)];
    if device.sample.as_ref().is_some_and(|s| s.lost) {
        spans.push(Span::styled("[LOST] ", theme.crit));
    } else if device.stale {
        spans.push(Span::styled("[STALE] ", theme.warn));
    }
    spans.extend(super::gpu_panel::mig_tag(theme, device));
    let block = Block::new()
        .borders(Borders::TOP)
        .border_set(theme.glyphs.border)
        .border_style(theme.border)
        .title(Line::from(spans));
    let inner = block.inner(area);
    frame.render_widget(block, area);

    let chart_w = inner.width.saturating_sub(spark::LABEL_W + VALUE_W);
    let range = spark::window(view, chart_w);
    let sample = device.sample.as_ref();
    let mut lines = Vec::with_capacity(3);
    match view.history.device(&device.info.key()) {
        Some(series) => {
            let memory = Plot::row(
                chart_w,
                device.memory_total().map(|t| t as f64),
                theme.sparkline,
            );
            let used = device
                .memory_used()
                .map_or(panel_text::NA.into(), units::short_bytes);
            lines.push(chart_line(
                view,
                ("mem  ", series.memory_used, memory),
                range,
                Span::styled(format!(" {used:>5}"), theme.value),
            ));
            let util = Plot::row(chart_w, Some(100.0), theme.sparkline_alt);
            let now = match sample.map(|s| &s.gpu_util) {
                Some(Ok(u)) => Span::styled(format!(" {u:>4}%"), theme.value),
                _ => Span::styled(format!(" {:>5}", panel_text::NA), theme.dim),
            };
            lines.push(chart_line(
                view,
                ("util ", series.gpu_util, util),
                range,
                now,
            ));
        }
        None => lines.push(Line::styled("no history yet", theme.dim)),
    }
    lines.push(figures_line(view, device, inner.width));
    buffer_write::lines_in(frame.buffer_mut(), inner, &lines);
}

/// The time axis under a grid column `width` cells wide, its ticks under the tiles' chart
/// cells (`╵1m30s ... now`) and blank under the labels and the values beside them.
pub fn axis(view: &View, width: u16) -> Line<'static> {
    let chart_w = width.saturating_sub(spark::LABEL_W + VALUE_W);
    let range = spark::window(view, chart_w);
    let mut spans = vec![Span::raw(" ".repeat(usize::from(spark::LABEL_W)))];
    spans.extend(super::time_axis::axis(view.theme, range, chart_w).spans);
    Line::from(spans)
}

/// `label`, the series' chart with its peak marked, then `now`.
fn chart_line(
    view: &View,
    (label, series, plot): (&'static str, crate::history::Capped, Plot),
    range: (u64, u64),
    now: Span<'static>,
) -> Line<'static> {
    let drawn = sparkline::spark(view.theme, series, range, plot, true);
    let mut spans = vec![Span::styled(label, view.theme.label)];
    spans.extend(drawn.rows.into_iter().flat_map(|row| row.spans));
    spans.push(now);
    Line::from(spans)
}

/// Memory, the all-time peak, PCIe when asked for, temperature, power, and the alarms, as
/// many as fit in `width` cells: alarms kept longest, then figures from the left.
fn figures_line(view: &View, device: &DeviceSnapshot, width: u16) -> Line<'static> {
    let theme = view.theme;
    let Some(s) = device.sample.as_ref() else {
        return Line::styled("waiting for the first sample", theme.dim);
    };
    if s.lost {
        return Line::styled("GPU lost: check dmesg and nvidia-smi", theme.crit);
    }
    let mut figures: Vec<(Rank, Vec<Span<'static>>)> = Vec::with_capacity(8);
    figures.push(match &s.memory {
        Ok(m) if m.total > 0 => {
            let pct = m.used as f64 * 100.0 / m.total as f64;
            (
                Rank::Figure,
                vec![
                    Span::styled(view.ui.units.pair(m.used, m.total), theme.value),
                    Span::styled(format!(" {}", panel_text::percent(pct)), theme.level(pct)),
                ],
            )
        }
        Ok(m) => (
            Rank::Figure,
            vec![Span::styled(view.ui.units.bytes(m.used), theme.value)],
        ),
        Err(why) => (
            Rank::Absent,
            vec![Span::styled(
                format!("mem {} ({why})", panel_text::NA),
                theme.dim,
            )],
        ),
    });
    if let Some(peak) = device.memory_peak {
        figures.push((
            Rank::Figure,
            vec![
                Span::raw("  "),
                Span::styled(
                    format!(
                        "{}{}",
                        theme.glyphs.peak,
                        units::short_bytes(peak.value as u64)
                    ),
                    theme.peak_marker,
                ),
                Span::styled(
                    format!(" {}", panel_text::short_age(peak.at_ms, view.now_ms)),
                    theme.dim,
                ),
            ],
        ));
    }
    // Asked for with `--pcie`: kept before temperature and power, which go first.
    figures.extend(pcie_figure(theme, s, true));
    figures.push(reading(
        theme,
        gpu::TEMPERATURE_C.label,
        s.temperature_c
            .as_ref()
            .map(|t| format!("{t}{}", theme.glyphs.degree_c)),
    ));
    let limit = s
        .power_limit_mw
        .as_ref()
        .ok()
        .or(device.info.power_limit_mw.as_ref().ok());
    figures.push(reading(
        theme,
        gpu::POWER_MW.label,
        s.power_mw.as_ref().map(|mw| match limit {
            Some(l) => format!("{}/{}", units::watts(*mw), units::watts(*l)),
            None => units::watts(*mw),
        }),
    ));
    figures.extend(alarm_figures(theme, s, false));
    let shown = panel_text::fitting_ranked(figures, usize::from(width));
    Line::from(shown.into_iter().flatten().collect::<Vec<_>>())
}

/// A figure led by two blanks, or `label n/a` ranked as absent.
fn reading<E>(theme: &Theme, label: &str, value: Result<String, E>) -> (Rank, Vec<Span<'static>>) {
    match value {
        Ok(text) => (
            Rank::Figure,
            vec![Span::raw("  "), Span::styled(text, theme.value)],
        ),
        Err(_) => (
            Rank::Absent,
            vec![
                Span::raw("  "),
                panel_text::label(theme, label),
                Span::styled(panel_text::NA, theme.dim),
            ],
        ),
    }
}
