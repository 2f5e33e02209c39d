//! One line per GPU, for many GPUs or small terminals:
//!
//! ```text
//! 0 H100 80GB HBM3 ▕████░░░░▏ 41.2/80.0 GiB 51% pk 63.0G 2m  util 87%  64°C  412W
//! ```
//!
//! `pk` is the all-time peak and how long ago it happened. When the GPUs outnumber the rows,
//! the last row says how many are not shown.

use super::{fmt, put, spark};
use crate::model::DeviceSnapshot;
use crate::model::units;
use crate::tui::theme::Theme;
use crate::tui::view::View;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

/// Cells for the GPU's name; longer names are cut.
const NAME_W: usize = 14;
/// The bar never grows past this: figures matter more than a long bar.
const BAR_MAX: u16 = 32;

pub fn render(frame: &mut Frame, area: Rect, view: &View) {
    let devices = &view.snapshot.devices;
    let rows = usize::from(area.height);
    let (shown, hidden) = if devices.len() > rows {
        let shown = rows.saturating_sub(1);
        (shown, devices.len().saturating_sub(shown))
    } else {
        (devices.len(), 0)
    };
    let max_index = devices.iter().map(|d| d.info.index).max().unwrap_or(0);
    let index_w = max_index.to_string().len();
    let width = usize::from(area.width);
    let parts: Vec<Parts> = devices
        .iter()
        .take(shown)
        .map(|d| parts(view, d, index_w).fit(width))
        .collect();
    // One bar width for every row, so the bars line up and compare at a glance.
    let widest = parts.iter().map(Parts::text_width).max().unwrap_or(0);
    let room = usize::from(area.width).saturating_sub(widest);
    let bar_w = u16::try_from(room).unwrap_or(u16::MAX).min(BAR_MAX);
    let mut lines: Vec<Line> = parts
        .into_iter()
        .map(|p| p.into_line(view.theme, bar_w))
        .collect();
    if hidden > 0 {
        lines.push(Line::styled(
            format!("+{hidden} more GPUs: enlarge the terminal"),
            view.theme.warn,
        ));
    }
    put::lines_in(frame.buffer_mut(), area, &lines);
}

/// Where the GPU name sits in `Parts::prefix` (after the index).
const NAME_SPAN: usize = 1;

/// One row before the bar is sized: what goes left and right of it. The right side is a list
/// of figures, each kept whole: a narrow terminal loses figures from the end, never half of
/// one (a temperature cut to its first digit reads as a different temperature).
struct Parts {
    prefix: Vec<Span<'static>>,
    figures: Vec<Vec<Span<'static>>>,
    fraction: Option<f64>,
}

impl Parts {
    fn text_width(&self) -> usize {
        self.prefix
            .iter()
            .chain(self.figures.iter().flatten())
            .map(put::cells)
            .sum()
    }

    /// Drops trailing figures until the row fits `width` cells without a bar; when even the
    /// memory figure does not fit, the name gives up cells, since a shortened name misleads
    /// nobody.
    fn fit(mut self, width: usize) -> Self {
        let prefix: usize = self.prefix.iter().map(put::cells).sum();
        self.figures = fmt::fitting(self.figures, width.saturating_sub(prefix));
        let over = self.text_width().saturating_sub(width);
        if let Some(name) = self.prefix.get_mut(NAME_SPAN).filter(|_| over > 0) {
            let keep = name.width().saturating_sub(over);
            name.content = name.content.chars().take(keep).collect::<String>().into();
        }
        self
    }

    fn into_line(self, theme: &Theme, bar_w: u16) -> Line<'static> {
        let mut spans = self.prefix;
        match self.fraction {
            Some(f) if bar_w >= 6 => {
                spans.extend(spark::bar(theme, f, bar_w, theme.level(f * 100.0)));
            }
            // Keep the figures aligned with the rows that do have a bar.
            _ if bar_w >= 6 => spans.push(Span::raw(" ".repeat(usize::from(bar_w)))),
            _ => {}
        }
        spans.extend(self.figures.into_iter().flatten());
        Line::from(spans)
    }
}

fn parts(view: &View, device: &DeviceSnapshot, index_w: usize) -> Parts {
    let theme = view.theme;
    let marker = if device.sample.as_ref().is_some_and(|s| s.lost) {
        Some(Span::styled(" LOST", theme.crit))
    } else if device.stale {
        Some(Span::styled(" STALE", theme.warn))
    } else {
        None
    };
    // The marker shares the name's cells so that every row's bar starts in the same column.
    let name_w = NAME_W.saturating_sub(marker.as_ref().map_or(0, put::cells));
    let name = device.info.display_name();
    let name: String = fmt::short_gpu_name(&name).chars().take(name_w).collect();
    let mut prefix = vec![
        Span::styled(format!("{:>index_w$} ", device.info.index), theme.title),
        Span::styled(format!("{name:<name_w$}"), theme.label),
    ];
    prefix.extend(marker);
    prefix.push(Span::raw(" "));

    let mut figures: Vec<Vec<Span<'static>>> = Vec::with_capacity(5);
    let memory = device.sample.as_ref().and_then(|s| s.memory.as_ref().ok());
    let mut fraction = None;
    match memory {
        Some(m) => {
            let mut figure = vec![Span::styled(
                format!(" {}", units::bytes_pair(m.used, m.total)),
                theme.value,
            )];
            if m.total > 0 {
                let f = m.used as f64 / m.total as f64;
                fraction = Some(f);
                figure.push(Span::styled(
                    format!(" {:>4}", fmt::percent(f * 100.0)),
                    theme.level(f * 100.0),
                ));
            }
            figures.push(figure);
        }
        None => figures.push(vec![Span::styled(format!(" mem {}", fmt::NA), theme.dim)]),
    }
    if let Some(share) = fmt::instrumented_share(device) {
        figures.push(vec![
            Span::styled(" alloc ", theme.label),
            Span::styled(share, theme.value),
        ]);
    }
    if let Some(peak) = view
        .monitor
        .device_series(&device.info.key())
        .and_then(|s| s.memory_used.peak())
    {
        figures.push(vec![
            Span::styled(" pk ", theme.label),
            Span::styled(units::short_bytes(peak.value as u64), theme.peak_marker),
            Span::styled(
                format!(" {}", fmt::short_age(peak.at_ms, view.now_ms)),
                theme.dim,
            ),
        ]);
    }
    let sample = device.sample.as_ref();
    figures.push(vec![
        Span::styled("  util ", theme.label),
        reading_span(theme, sample.map(|s| &s.gpu_util), "", |u| {
            format!("{u:>3}%")
        }),
    ]);
    figures.push(vec![
        Span::raw("  "),
        reading_span(theme, sample.map(|s| &s.temperature_c), "temp ", |t| {
            format!("{t}{}", theme.glyphs.degree_c)
        }),
    ]);
    figures.push(vec![
        Span::raw("  "),
        reading_span(theme, sample.map(|s| &s.power_mw), "power ", |mw| {
            units::watts(*mw)
        }),
    ]);

    Parts {
        prefix,
        figures,
        fraction,
    }
}

/// A figure, or `n/a` after `absent_label` (a bare figure's unit names it; a bare `n/a`
/// would not). No sample at all reads the same as an unreadable figure.
fn reading_span<T>(
    theme: &Theme,
    value: Option<&crate::model::Reading<T>>,
    absent_label: &str,
    f: impl FnOnce(&T) -> String,
) -> Span<'static> {
    match value {
        Some(Ok(v)) => Span::styled(f(v), theme.value),
        _ => Span::styled(format!("{absent_label}{}", fmt::NA), theme.dim),
    }
}
