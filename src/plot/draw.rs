//! The whole figure on any plotters backend: a title band (file, host, time span), then per
//! GPU a header line, its chart (`panel`) and its legend.

use super::axis;
use super::contents::{Contents, Panel, clean};
use super::error::fail;
use super::layout::{
    HEADER_H, LEGEND_ROW_H, Layout, LegendEntry, MARGIN, Swatch, TITLE_H, Y_LABELS_W, shade_steps,
};
use super::panel;
use super::style::{self, HEADER_SIZE, SUBTITLE_SIZE, TEXT_SIZE, TITLE_SIZE};
use crate::model::units;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Draws `contents`, read from a file called `name`, onto `root` as laid out in `layout`.
pub fn figure<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    contents: &Contents,
    layout: &Layout,
    name: &str,
) -> Result<(), String> {
    root.fill(&style::BACKGROUND).map_err(fail)?;
    title(root, contents, name)?;
    for (panel, place) in contents.panels.iter().zip(&layout.panels) {
        let shaded = shade_steps(panel, layout.width);
        header(root, panel, place.top, layout.width, shaded)?;
        panel::draw(root, contents, panel, place, layout.width)?;
        for (row, entries) in place.legend.iter().enumerate() {
            let y = place.legend_top() + i32::try_from(row).unwrap_or(0) * LEGEND_ROW_H;
            for entry in entries {
                legend_entry(root, entry, (MARGIN + Y_LABELS_W + entry.x, y))?;
            }
        }
    }
    Ok(())
}

fn title<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    contents: &Contents,
    name: &str,
) -> Result<(), String> {
    let mut heading = clean(name, 80);
    if let Some(host) = &contents.host {
        heading = format!("{heading} · {host}");
    }
    root.draw_text(&heading, &style::bold(TITLE_SIZE, style::INK), (MARGIN, 12))
        .map_err(fail)?;
    let gpus = contents.panels.len();
    let mut sub = format!(
        "{} · {gpus} {}",
        axis::span_label(contents.first_ms, contents.last_ms),
        if gpus == 1 { "chart" } else { "charts" }
    );
    if contents.ooms_dropped > 0 {
        sub.push_str(&format!(
            " · {} more OOMs not marked",
            contents.ooms_dropped
        ));
    }
    let y = 16 + style::line_height(TITLE_SIZE);
    root.draw_text(&sub, &style::text(SUBTITLE_SIZE, style::MUTED), (MARGIN, y))
        .map_err(fail)?;
    if let Some(damage) = &contents.damaged {
        let text = format!("damaged recording, plotted up to: {}", clean(damage, 160));
        root.draw_text(
            &text,
            &style::text(SUBTITLE_SIZE, style::DAMAGE),
            (MARGIN, TITLE_H),
        )
        .map_err(fail)?;
    }
    Ok(())
}

/// `GPU 0 · NVIDIA H100 80GB HBM3`, with notes on the right: what is shaded, OOM count.
fn header<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    panel: &Panel,
    top: i32,
    width: u32,
    shaded: bool,
) -> Result<(), String> {
    let mut heading = panel.title.clone();
    if let Some(limit) = panel.limit {
        heading = format!("{heading} · {}", units::bytes(limit));
    }
    let y = top + (HEADER_H - style::line_height(HEADER_SIZE)) / 2;
    root.draw_text(&heading, &style::bold(HEADER_SIZE, style::INK), (MARGIN, y))
        .map_err(fail)?;
    let mut notes = Vec::new();
    match (&panel.steps_of, shaded) {
        (Some(who), true) => notes.push(format!("shaded: steps of {who}")),
        (None, true) => notes.push("shaded: steps".to_string()),
        _ if panel.steps_overflow => notes.push("too many steps to shade".to_string()),
        _ if !panel.steps.is_empty() => notes.push("steps too dense to shade".to_string()),
        _ => {}
    }
    match panel.ooms.len() {
        0 => {}
        1 => notes.push("1 OOM".to_string()),
        n => notes.push(format!("{n} OOMs")),
    }
    if !notes.is_empty() {
        let right = i32::try_from(width).unwrap_or(i32::MAX) - MARGIN;
        let style = style::text(TEXT_SIZE, style::MUTED).pos(Pos::new(HPos::Right, VPos::Top));
        root.draw_text(&notes.join(" · "), &style, (right, y + 2))
            .map_err(fail)?;
    }
    Ok(())
}

fn legend_entry<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    entry: &LegendEntry,
    (x, y): (i32, i32),
) -> Result<(), String> {
    let mid = y + LEGEND_ROW_H / 2;
    match entry.swatch {
        Swatch::Line(colour, width) => root
            .draw(&PathElement::new(
                vec![(x, mid), (x + 22, mid)],
                colour.stroke_width(width + 1),
            ))
            .map_err(fail)?,
        Swatch::Oom => root
            .draw(&Cross::new((x + 11, mid), 5, style::OOM.stroke_width(2)))
            .map_err(fail)?,
        Swatch::Step => root
            .draw(&Rectangle::new(
                [(x, mid - 7), (x + 22, mid + 7)],
                style::STEP_SHADE.filled(),
            ))
            .map_err(fail)?,
    }
    let text_y = y + (LEGEND_ROW_H - style::line_height(TEXT_SIZE)) / 2;
    root.draw_text(
        &entry.label,
        &style::text(TEXT_SIZE, style::INK),
        (x + 28, text_y),
    )
    .map_err(fail)
}
