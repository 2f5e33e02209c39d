//! Where everything goes, in pixels, before anything is drawn: the title band, then per GPU a
//! header line, the chart and its legend (wrapped into rows). The default height gives every
//! chart the same comfortable height; a requested height shares what is left among them.

use super::contents::{Contents, Panel};
use super::style::{self, TEXT_SIZE};
use plotters::style::RGBColor;

pub const MARGIN: i32 = 16;
pub const TITLE_H: i32 = 66;
pub const DAMAGE_H: i32 = 24;
pub const HEADER_H: i32 = 30;
pub const LEGEND_ROW_H: i32 = 22;
pub const PANEL_GAP: i32 = 18;
pub const DEFAULT_CHART_H: i32 = 330;
pub const MIN_CHART_H: i32 = 120;
/// Room left of the plot for the GiB labels, and below it for the times.
pub const Y_LABELS_W: i32 = 70;
pub const X_LABELS_H: i32 = 30;
/// Room right of the plot, so the last time label and the limit label fit.
pub const RIGHT_PAD: i32 = 28;
/// Steps are shaded only when they average at least this many pixels: denser shading is
/// a grey smear.
const MIN_STEP_PX: i32 = 3;
/// Swatch and spacing around a legend entry's text.
const SWATCH_W: i32 = 28;
const ENTRY_GAP: i32 = 22;

/// What a legend entry's swatch shows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Swatch {
    Line(RGBColor, u32),
    Oom,
    Step,
}

#[derive(Clone, Debug, PartialEq)]
pub struct LegendEntry {
    pub swatch: Swatch,
    pub label: String,
    /// Left edge, relative to the legend's start.
    pub x: i32,
}

#[derive(Clone, Debug)]
pub struct PanelLayout {
    /// Top of the panel's header line.
    pub top: i32,
    pub chart_h: i32,
    pub legend: Vec<Vec<LegendEntry>>,
}

impl PanelLayout {
    pub fn chart_top(&self) -> i32 {
        self.top + HEADER_H
    }

    pub fn legend_top(&self) -> i32 {
        self.chart_top() + self.chart_h + 4
    }
}

#[derive(Clone, Debug)]
pub struct Layout {
    pub width: u32,
    pub height: u32,
    pub panels: Vec<PanelLayout>,
}

/// Lays out `contents` on a `width`-pixel-wide canvas, `height` high when given.
pub fn layout(contents: &Contents, width: u32, height: Option<u32>) -> Result<Layout, String> {
    let title_h = TITLE_H
        + if contents.damaged.is_some() {
            DAMAGE_H
        } else {
            0
        };
    let w = i32::try_from(width).unwrap_or(i32::MAX);
    let legends: Vec<Vec<Vec<LegendEntry>>> = contents
        .panels
        .iter()
        .map(|p| rows(legend(p, width), w - 2 * MARGIN - Y_LABELS_W))
        .collect();
    let fixed: i32 = title_h
        + legends
            .iter()
            .map(|l| HEADER_H + legend_h(l) + PANEL_GAP)
            .sum::<i32>();
    let count = i32::try_from(contents.panels.len().max(1)).unwrap_or(i32::MAX);
    let default_height = fixed + count * DEFAULT_CHART_H;
    let chart_h = match height {
        None => DEFAULT_CHART_H,
        Some(h) => {
            let h = i32::try_from(h).unwrap_or(i32::MAX);
            let each = (h - fixed) / count;
            if each < MIN_CHART_H {
                return Err(format!(
                    "a height of {h} px leaves {} px per GPU chart, below the {MIN_CHART_H} px \
                     minimum (this recording needs at least {} px; without --height it is {default_height} px)",
                    each.max(0),
                    fixed + count * MIN_CHART_H
                ));
            }
            each
        }
    };
    let mut top = title_h;
    let mut panels = Vec::with_capacity(legends.len());
    for legend in legends {
        let h = HEADER_H + chart_h + legend_h(&legend) + PANEL_GAP;
        panels.push(PanelLayout {
            top,
            chart_h,
            legend,
        });
        top += h;
    }
    Ok(Layout {
        width,
        height: height.unwrap_or_else(|| u32::try_from(default_height).unwrap_or(u32::MAX)),
        panels,
    })
}

/// Width in pixels of the area the series are drawn in.
pub fn plot_width(width: u32) -> i32 {
    i32::try_from(width).unwrap_or(i32::MAX) - 2 * MARGIN - Y_LABELS_W - RIGHT_PAD
}

/// Whether the panel's steps are shaded at this width.
pub fn shade_steps(panel: &Panel, width: u32) -> bool {
    let count = i32::try_from(panel.steps.len()).unwrap_or(i32::MAX);
    count > 0 && !panel.steps_overflow && count.saturating_mul(MIN_STEP_PX) <= plot_width(width)
}

fn legend_h(rows: &[Vec<LegendEntry>]) -> i32 {
    i32::try_from(rows.len()).unwrap_or(0) * LEGEND_ROW_H + 4
}

/// A panel's legend: every series, then the OOM marker and the step shading when shown.
fn legend(panel: &Panel, width: u32) -> Vec<(Swatch, String)> {
    let mut entries: Vec<(Swatch, String)> = panel
        .series
        .iter()
        .map(|s| {
            let colour = style::colour(s.role, s.process);
            (Swatch::Line(colour, style::stroke(s.role)), s.label.clone())
        })
        .collect();
    if !panel.ooms.is_empty() {
        entries.push((Swatch::Oom, "out of memory".into()));
    }
    if shade_steps(panel, width) {
        entries.push((Swatch::Step, "every other step".into()));
    }
    entries
}

/// Entries flowed into rows no wider than `width`.
fn rows(entries: Vec<(Swatch, String)>, width: i32) -> Vec<Vec<LegendEntry>> {
    let mut rows: Vec<Vec<LegendEntry>> = Vec::new();
    let mut row: Vec<LegendEntry> = Vec::new();
    let mut x = 0;
    for (swatch, label) in entries {
        let w = SWATCH_W + style::text_width(&label, TEXT_SIZE) + ENTRY_GAP;
        if !row.is_empty() && x + w > width {
            rows.push(std::mem::take(&mut row));
            x = 0;
        }
        row.push(LegendEntry { swatch, label, x });
        x += w;
    }
    if !row.is_empty() {
        rows.push(row);
    }
    rows
}
