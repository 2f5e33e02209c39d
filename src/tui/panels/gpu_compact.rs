//! One line per GPU, for many GPUs or small terminals:
//!
//! ```text
//! 0 H100 80GB HBM3 ▕████░░░░▏ 41.2/80.0 GiB 51% pk 63.0G 2m  util 87%  64°C  412W
//! ```
//!
//! `pk` is the all-time peak and how long ago it happened; a costly throttle and ECC errors
//! follow, and a narrow row keeps them longest. When every GPU is the same model, a caption
//! names it once above the rows (when there is a row for it) and the rows leave it out.
//! When the GPUs outnumber the rows, the last row says how many are not shown.

use super::buffer_write;
use super::gpu_panel::{alarm_figures, pcie_figure};
use super::panel_text::{self, Rank};
use crate::model::DeviceSnapshot;
use crate::model::units;
use crate::terminal_kit::sparkline;
use crate::terminal_kit::theme::Theme;
use crate::tui::view::View;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};

/// Cells for the GPU's name; longer names are cut.
const NAME_W: usize = 14;
/// The bar never grows past this: figures matter more than a long bar.
const BAR_MAX: u16 = 32;

/// Draws one row per GPU in `area`; `caption`: the model every GPU shares, said once on a
/// row of its own instead of on every row.
pub fn render(frame: &mut Frame, area: Rect, view: &View, caption: Option<&str>) {
    let devices = &view.snapshot.devices;
    let mut area = area;
    if let Some(model) = caption {
        let [top, rest] =
            Layout::vertical([Constraint::Length(1), Constraint::Fill(1)]).areas(area);
        buffer_write::lines_in(
            frame.buffer_mut(),
            top,
            &[models_caption(view.theme, devices.len(), model)],
        );
        area = rest;
    }
    let named = caption.is_none();
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
        .map(|d| parts(view, d, index_w, named).fit(width))
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
    buffer_write::lines_in(frame.buffer_mut(), area, &lines);
}

/// `8 GPUs: NVIDIA H100 80GB HBM3`: the model every GPU shares, said once.
pub fn models_caption(theme: &Theme, count: usize, model: &str) -> Line<'static> {
    Line::from(vec![
        Span::styled(format!("{count} GPUs: "), theme.label),
        Span::styled(model.to_string(), theme.title),
    ])
}

/// The model every GPU is, when there are several and they are all the same one.
pub fn shared_model(view: &View) -> Option<String> {
    let devices = &view.snapshot.devices;
    let first = devices.first()?.info.name.as_ref().ok()?;
    let same = devices.len() > 1
        && devices
            .iter()
            .all(|d| d.info.name.as_ref().is_ok_and(|n| n == first));
    same.then(|| first.clone())
}

/// Where the GPU name sits in `Parts::prefix` (after the index and a blank), when the row
/// has one.
const NAME_SPAN: usize = 2;

/// One row before the bar is sized: what goes left and right of it. The right side is a list
/// of figures, each kept whole: a narrow terminal loses figures from the end, never half of
/// one (a temperature cut to its first digit reads as a different temperature).
struct Parts {
    prefix: Vec<Span<'static>>,
    /// Whether `prefix` names the GPU (at [`NAME_SPAN`]).
    named: bool,
    figures: Vec<(Rank, Vec<Span<'static>>)>,
    fraction: Option<f64>,
}

impl Parts {
    fn text_width(&self) -> usize {
        self.prefix
            .iter()
            .chain(self.figures.iter().flat_map(|(_, f)| f))
            .map(buffer_write::cells)
            .sum()
    }

    /// Drops figures, lowest ranked first, until the row fits `width` cells without a bar;
    /// when even the memory figure does not fit, the name gives up cells, since a shortened
    /// name misleads nobody.
    fn fit(mut self, width: usize) -> Self {
        let prefix: usize = self.prefix.iter().map(buffer_write::cells).sum();
        let figures = std::mem::take(&mut self.figures);
        // The first figure's leading blank is part of the row's look: kept whatever is dropped.
        self.figures = panel_text::fitting_ranked(figures, width.saturating_sub(prefix))
            .into_iter()
            .map(|f| (Rank::Figure, f))
            .collect();
        let over = self.text_width().saturating_sub(width);
        let name = self.prefix.get_mut(NAME_SPAN).filter(|_| self.named);
        if let Some(name) = name.filter(|_| over > 0) {
            let keep = name.width().saturating_sub(over);
            name.content = name.content.chars().take(keep).collect::<String>().into();
        }
        self
    }

    fn into_line(self, theme: &Theme, bar_w: u16) -> Line<'static> {
        let mut spans = self.prefix;
        match self.fraction {
            Some(f) if bar_w >= 6 => {
                spans.extend(sparkline::bar(theme, f, bar_w, theme.level(f * 100.0)));
            }
            // Keep the figures aligned with the rows that do have a bar.
            _ if bar_w >= 6 => spans.push(Span::raw(" ".repeat(usize::from(bar_w)))),
            _ => {}
        }
        spans.extend(self.figures.into_iter().flat_map(|(_, f)| f));
        Line::from(spans)
    }
}

fn parts(view: &View, device: &DeviceSnapshot, index_w: usize, named: bool) -> Parts {
    let theme = view.theme;
    let marker = if device.sample.as_ref().is_some_and(|s| s.lost) {
        Some(Span::styled(" LOST", theme.crit))
    } else if device.stale {
        Some(Span::styled(" STALE", theme.warn))
    } else {
        None
    };
    let mut prefix = vec![Span::styled(
        format!("{:>index_w$}", device.info.index),
        theme.title,
    )];
    if named {
        prefix.push(Span::raw(" "));
        // The marker shares the name's cells so that every row's bar starts in one column.
        let name_w = NAME_W.saturating_sub(marker.as_ref().map_or(0, buffer_write::cells));
        let name = device.info.display_name();
        let name: String = panel_text::short_gpu_name(&name)
            .chars()
            .take(name_w)
            .collect();
        prefix.push(Span::styled(format!("{name:<name_w$}"), theme.label));
        prefix.extend(marker);
    } else {
        // Without names, the marker is padded to one width for the same reason.
        let marker_w = " STALE".len();
        match marker {
            Some(m) => {
                let pad = marker_w.saturating_sub(buffer_write::cells(&m));
                prefix.push(m);
                prefix.push(Span::raw(" ".repeat(pad)));
            }
            None if any_marked(view) => prefix.push(Span::raw(" ".repeat(marker_w))),
            None => {}
        }
    }
    prefix.push(Span::raw(" "));

    let mut figures: Vec<(Rank, Vec<Span<'static>>)> = Vec::with_capacity(8);
    let memory = device.sample.as_ref().and_then(|s| s.memory.as_ref().ok());
    let mut fraction = None;
    match memory {
        Some(m) => {
            let mut figure = vec![Span::styled(
                format!(" {}", view.ui.units.pair(m.used, m.total)),
                theme.value,
            )];
            if m.total > 0 {
                let f = m.used as f64 / m.total as f64;
                fraction = Some(f);
                figure.push(Span::styled(
                    format!(" {:>4}", panel_text::percent(f * 100.0)),
                    theme.level(f * 100.0),
                ));
            }
            figures.push((Rank::Figure, figure));
        }
        None => figures.push((
            Rank::Figure,
            vec![Span::styled(format!(" mem {}", panel_text::NA), theme.dim)],
        )),
    }
    if let Some(share) = panel_text::instrumented_share(device) {
        figures.push((
            Rank::Figure,
            vec![
                Span::styled(" alloc ", theme.label),
                Span::styled(share, theme.value),
            ],
        ));
    }
    if let Some(peak) = device.memory_peak {
        figures.push((
            Rank::Figure,
            vec![
                Span::styled(" pk ", theme.label),
                Span::styled(units::short_bytes(peak.value as u64), theme.peak_marker),
                Span::styled(
                    format!(" {}", panel_text::short_age(peak.at_ms, view.now_ms)),
                    theme.dim,
                ),
            ],
        ));
    }
    let sample = device.sample.as_ref();
    // In MIG mode NVML has no utilisation: the instances, counted, in its place.
    match sample
        .and_then(crate::model::DeviceSample::mig_enabled)
        .and_then(super::mig_lines::summary)
    {
        Some(mig) => figures.push((
            Rank::Figure,
            vec![Span::styled(format!("  {mig}"), theme.value)],
        )),
        None => figures.push(reading(
            theme,
            (sample.map(|s| &s.gpu_util), "  util ", ""),
            |u| format!("{u:>3}%"),
        )),
    }
    figures.push(reading(
        theme,
        (sample.map(|s| &s.temperature_c), "  ", "temp "),
        |t| format!("{t}{}", theme.glyphs.degree_c),
    ));
    figures.push(reading(
        theme,
        (sample.map(|s| &s.power_mw), "  ", "power "),
        |mw| units::watts(*mw),
    ));
    if let Some(s) = sample.filter(|s| !s.lost) {
        figures.extend(pcie_figure(theme, s, true));
        figures.extend(alarm_figures(theme, s, false));
    }

    Parts {
        prefix,
        named,
        figures,
        fraction,
    }
}

/// Whether any GPU's row carries a LOST or STALE marker.
fn any_marked(view: &View) -> bool {
    view.snapshot
        .devices
        .iter()
        .any(|d| d.stale || d.sample.as_ref().is_some_and(|s| s.lost))
}

/// A figure after `lead` (label or blanks), or `n/a` after `absent_label` (a bare figure's
/// unit names it; a bare `n/a` would not), ranked below every reading. No sample at all
/// reads the same as an unreadable figure.
fn reading<T>(
    theme: &Theme,
    (value, lead, absent_label): (Option<&crate::model::Reading<T>>, &'static str, &str),
    f: impl FnOnce(&T) -> String,
) -> (Rank, Vec<Span<'static>>) {
    let label = |text: &'static str| {
        if text.trim().is_empty() {
            Span::raw(text)
        } else {
            Span::styled(text, theme.label)
        }
    };
    match value {
        Some(Ok(v)) => (
            Rank::Figure,
            vec![label(lead), Span::styled(f(v), theme.value)],
        ),
        _ => (
            Rank::Absent,
            vec![
                label(lead),
                Span::styled(format!("{absent_label}{}", panel_text::NA), theme.dim),
            ],
        ),
    }
}
