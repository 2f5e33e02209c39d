//! One GPU's chart: step shading behind, the grid, the device limit, every series, OOM
//! markers, then the labels of the limit, the OOMs and each series' peak, placed so that
//! they do not cover one another.

use super::axis;
use super::contents::{Contents, Panel};
use super::error::fail;
use super::labels::{Placer, Rect};
use super::layout::{self, MARGIN, PanelLayout, RIGHT_PAD, X_LABELS_H, Y_LABELS_W};
use super::style::{self, SMALL_SIZE, TEXT_SIZE};
use crate::model::units;
use plotters::coord::Shift;
use plotters::prelude::*;

const GIB: f64 = (1u64 << 30) as f64;
/// Width in pixels a time label needs, with room around it.
const TIME_LABEL_PX: i32 = 110;
/// Step labels appear on steps at least this wide.
const STEP_LABEL_PX: i32 = 56;
/// OOM labels drawn per chart; further OOMs get their marker only.
const OOM_LABELS: usize = 20;
/// Peak labels drawn per chart (the highest peaks); further series get their dot only.
const PEAK_LABELS: usize = 12;

fn gib(bytes: u64) -> f64 {
    bytes as f64 / GIB
}

/// Draws `panel` into its place on `root`.
pub fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    contents: &Contents,
    panel: &Panel,
    place: &PanelLayout,
    width: u32,
) -> Result<(), String> {
    let x0 = contents.first_ms;
    // A single instant still needs a width to draw on.
    let x1 = contents.last_ms.max(x0.saturating_add(1000));
    let top = panel.limit.max(panel.top()).map_or(0.0, gib);
    let y_top = if top > 0.0 { top * 1.1 } else { 1.0 };
    let plot_w = layout::plot_width(width);
    let max_ticks = u64::try_from((plot_w / TIME_LABEL_PX).max(2)).unwrap_or(2);
    let (ticks, tick_step) = axis::ticks(x0, x1, max_ticks);

    let w = i32::try_from(width).unwrap_or(i32::MAX);
    let area = root
        .clone()
        .shrink((MARGIN, place.chart_top()), (w - 2 * MARGIN, place.chart_h));
    let mut chart = ChartBuilder::on(&area)
        .margin_top(8)
        .margin_right(RIGHT_PAD)
        .x_label_area_size(X_LABELS_H)
        .y_label_area_size(Y_LABELS_W)
        .build_cartesian_2d((x0..x1).with_key_points(ticks), 0f64..y_top)
        .map_err(fail)?;
    let (px, py) = chart.plotting_area().get_pixel_range();
    let bounds = Rect::new(px.start, py.start, px.end - px.start, py.end - py.start);

    let shaded = layout::shade_steps(panel, width);
    if shaded {
        let bands = panel.steps.iter().filter(|s| s.step % 2 == 0).map(|s| {
            let from = s.start_ms.clamp(x0, x1);
            let to = s.end_ms.clamp(x0, x1);
            Rectangle::new([(from, 0.0), (to, y_top)], style::STEP_SHADE.filled())
        });
        chart.draw_series(bands).map_err(fail)?;
    }

    let decimals = if y_top < 5.0 { 1 } else { 0 };
    chart
        .configure_mesh()
        .x_label_formatter(&|ms| axis::label(*ms, tick_step))
        .y_label_formatter(&|v| format!("{v:.decimals$}"))
        .y_labels(8)
        .y_desc("GiB")
        .label_style(style::text(TEXT_SIZE, style::INK))
        .axis_desc_style(style::text(TEXT_SIZE, style::MUTED))
        .bold_line_style(style::GRID)
        .light_line_style(style::BACKGROUND)
        .max_light_lines(0)
        .axis_style(style::MUTED)
        .draw()
        .map_err(fail)?;

    if shaded {
        let small = style::text(SMALL_SIZE, style::MUTED);
        for s in &panel.steps {
            let (left, _) = chart.backend_coord(&(s.start_ms.max(x0), 0.0));
            let (right, _) = chart.backend_coord(&(s.end_ms.min(x1), 0.0));
            if right - left >= STEP_LABEL_PX {
                let at = (left + 3, bounds.bottom - style::line_height(SMALL_SIZE) - 2);
                root.draw(&Text::new(format!("step {}", s.step), at, small.clone()))
                    .map_err(fail)?;
            }
        }
    }

    let mut placer = Placer::new(bounds);
    if let Some(limit) = panel.limit {
        let y = gib(limit);
        chart
            .draw_series(DashedLineSeries::new(
                [(x0, y), (x1, y)],
                8,
                5,
                style::LIMIT.stroke_width(1),
            ))
            .map_err(fail)?;
        let text = format!("limit {}", units::bytes(limit));
        let (tw, th) = (
            style::text_width(&text, TEXT_SIZE),
            style::line_height(TEXT_SIZE),
        );
        // At the left end: runs tend to reach their peaks and OOMs later, on the right.
        let (_, ly) = chart.backend_coord(&(x1, y));
        let rect = Rect::new(bounds.left + 6, ly - th - 2, tw, th);
        placer.take(rect);
        root.draw(&Text::new(
            text,
            (rect.left, rect.top),
            style::text(TEXT_SIZE, style::LIMIT),
        ))
        .map_err(fail)?;
    }

    for series in &panel.series {
        let colour = style::colour(series.role, series.process);
        let line = colour.stroke_width(style::stroke(series.role));
        for segment in series.segments() {
            let points = segment.iter().map(|b| (b.peak_ms, gib(b.value)));
            if segment.len() == 1 {
                chart
                    .draw_series(points.map(|p| Circle::new(p, 2, colour.filled())))
                    .map_err(fail)?;
            } else {
                chart
                    .draw_series(LineSeries::new(points, line))
                    .map_err(fail)?;
            }
        }
    }

    oom_markers(root, &mut chart, panel, &mut placer, (x1, y_top))?;
    peak_markers(root, &chart, panel, &mut placer)
}

type Chart<'a, DB> = ChartContext<
    'a,
    DB,
    Cartesian2d<
        plotters::coord::combinators::WithKeyPoints<plotters::coord::types::RangedCoordu64>,
        plotters::coord::types::RangedCoordf64,
    >,
>;

/// A red line and X at each OOM, labelled `OOM` with the request that failed when known.
fn oom_markers<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &mut Chart<'_, DB>,
    panel: &Panel,
    placer: &mut Placer,
    (x1, y_top): (u64, f64),
) -> Result<(), String> {
    let x0 = chart.x_range().start;
    let guide = style::OOM.mix(0.45).stroke_width(1);
    // With several instrumented processes on the GPU, say whose allocation failed.
    let several = panel
        .series
        .iter()
        .any(|s| s.process.is_some_and(|p| p > 0));
    for (i, oom) in panel.ooms.iter().enumerate() {
        let at = oom.at_ms.clamp(x0, x1);
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(at, 0.0), (at, y_top)],
                guide,
            )))
            .map_err(fail)?;
        let y = oom.bytes.map_or(y_top * 0.9, gib).min(y_top);
        let point = chart.backend_coord(&(at, y));
        root.draw(&Cross::new(point, 7, style::OOM.stroke_width(3)))
            .map_err(fail)?;
        placer.take(Rect::new(point.0 - 8, point.1 - 8, 16, 16));
        if i < OOM_LABELS {
            let mut text = match oom.requested {
                Some(r) => format!("OOM: asked {}", units::bytes(r)),
                None => "OOM".to_string(),
            };
            if let Some(free) = oom.device_free {
                text = format!("{text}, {} free", units::bytes(free));
            }
            if !oom.place.is_empty() {
                text = format!("{text}, {}", oom.place);
            }
            text = format!("{text} ({})", oom.outcome.label());
            if let (true, Some(pid)) = (several, oom.pid) {
                text = format!("{text} (pid {pid})");
            }
            label(root, placer, point, text, style::OOM)?;
        }
    }
    Ok(())
}

/// A dot at each series' highest point; the highest ones labelled with their value, placed
/// first so that they get the best spots.
fn peak_markers<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &Chart<'_, DB>,
    panel: &Panel,
    placer: &mut Placer,
) -> Result<(), String> {
    let mut peaks: Vec<_> = panel
        .series
        .iter()
        .filter_map(|s| Some((s, s.peak()?)))
        .collect();
    peaks.sort_by_key(|(_, peak)| std::cmp::Reverse(peak.value));
    for (i, (series, peak)) in peaks.into_iter().enumerate() {
        let colour = style::colour(series.role, series.process);
        let point = chart.backend_coord(&(peak.peak_ms, gib(peak.value)));
        root.draw(&Circle::new(point, 4, colour.filled()))
            .map_err(fail)?;
        if i < PEAK_LABELS {
            let text = match &series.peak_where {
                Some(place) if !place.is_empty() => {
                    format!("peak {}, {place}", units::bytes(peak.value))
                }
                _ => format!("peak {}", units::bytes(peak.value)),
            };
            label(root, placer, point, text, colour)?;
        }
    }
    Ok(())
}

/// A label placed next to `point`, with a leader line when it had to move away.
fn label<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    placer: &mut Placer,
    point: (i32, i32),
    text: String,
    colour: RGBColor,
) -> Result<(), String> {
    let (w, h) = (
        style::text_width(&text, TEXT_SIZE),
        style::line_height(TEXT_SIZE),
    );
    let rect = placer.place(point, w, h);
    let near_x = point.0.clamp(rect.left, rect.right);
    let near_y = point.1.clamp(rect.top, rect.bottom);
    if (near_x - point.0).abs() + (near_y - point.1).abs() > 14 {
        root.draw(&PathElement::new(
            vec![point, (near_x, near_y)],
            colour.mix(0.6).stroke_width(1),
        ))
        .map_err(fail)?;
    }
    // A translucent backing keeps the label readable where it crosses a line.
    root.draw(&Rectangle::new(
        [
            (rect.left - 2, rect.top - 1),
            (rect.right + 2, rect.bottom + 1),
        ],
        style::BACKGROUND.mix(0.8).filled(),
    ))
    .map_err(fail)?;
    root.draw(&Text::new(
        text,
        (rect.left, rect.top),
        style::text(TEXT_SIZE, colour),
    ))
    .map_err(fail)
}
