//! Where every panel goes, for any terminal size. The one entry point is [`draw`].
//!
//! ```text
//! ┌──────────────────────────────────────────────────────────────────────────────┐
//! │ header: vramscope [PAUSED] driver, CUDA     node-7  every 1.0s  08:04:32 CET  │ 1 row
//! ├──────────────────────────────────────────────────────────────────────────────┤
//! │ GPU area, one of:                                                            │
//! │  - full panels, under 8 GPUs (two columns from 160 cells wide): 6 rows each, │ 6 x rows
//! │    their charts growing up to 8 rows with a time axis into the upper half    │ .. 21 x rows
//! │  - a grid of small panels (memory and utilisation charts, alarms), as many   │ 4 x rows
//! │    columns as fit 56 cells, when the table keeps 8 rows (8+ GPUs at 120x40)  │
//! │  - compact list, one row per GPU (small panes)                               │ 1 x GPUs
//! │    grid and list name the model once, on a caption row, when all share it   │ + 1
//! │  - the NVML problem box (cause + hint)                                       │ 5 rows
//! ├──────────────────────────────────────────────────────────────────────────────┤
//! │ host line: host RAM 12.3/62.8 GiB (avail 48.0 GiB)  swap ...   filter "py"   │ 1 row
//! ├──────────────────────────────────────────────────────────────────────────────┤
//! │ process table: header row + rows, scrolled to keep the selection visible     │ the rest
//! ├──────────────────────────────────────────────────────────────────────────────┤
//! │ status line (or the filter prompt while typing after `/`)       ? help q quit│ 1 row
//! └──────────────────────────────────────────────────────────────────────────────┘
//!      overlays, drawn last over the middle: help, detail pane, kill confirmation
//! ```
//!
//! Below [`MIN_WIDTH`] x [`MIN_HEIGHT`] only a "terminal too small" line is drawn (cut to
//! whatever fits, down to nothing at 0x0).

use super::panels::{
    detail, gpu_compact, gpu_panel, gpu_tile, header, help, host_line, kill_confirm, nvml_problem,
    process_table, reasons_overlay, status_line,
};
use super::ui_state::Mode;
use super::view::View;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;

pub const MIN_WIDTH: u16 = 20;
pub const MIN_HEIGHT: u16 = 5;

/// From this width, full GPU panels sit two to a row.
const TWO_COLUMNS_FROM: u16 = 160;
/// From this many GPUs, full panels give way to the grid of small ones (or the compact list).
const GRID_FROM_GPUS: usize = 8;
/// Rows the process table keeps (header and three processes) before GPU panels may grow.
const TABLE_MIN_FOR_FULL: u16 = 4;
/// Rows the process table keeps (header and seven processes) beside a grid of small panels:
/// below that, the one-line list, which leaves the table more.
const TABLE_MIN_FOR_GRID: u16 = 8;
/// The grid's time axis: one row under its tiles, whose charts all cover one window.
const GRID_AXIS_ROWS: u16 = 1;
/// Rows the process table keeps (header and five processes) when the compact list spends a
/// row naming the GPUs' one model.
const TABLE_MIN_FOR_CAPTION: u16 = 6;
/// Full panels' charts grow up to this many rows (nvitop's graphs are eight rows too).
const MAX_CHART_ROWS: u16 = 8;

/// How the GPU area is drawn and how tall it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GpuArea {
    Problem(u16),
    Waiting,
    Full {
        columns: u16,
        rows: u16,
        chart_rows: u16,
        /// Rows added to each panel for MIG instances beyond the utilisation chart's.
        mig_extra: u16,
    },
    /// Small panels, `columns` to a row, and a time axis row under them; `caption`: a row
    /// naming the GPUs' one model first.
    Grid {
        columns: u16,
        rows: u16,
        caption: bool,
    },
    Compact {
        rows: u16,
        caption: bool,
    },
}

impl GpuArea {
    fn height(self) -> u16 {
        match self {
            GpuArea::Problem(h) => h,
            GpuArea::Waiting => 1,
            GpuArea::Full {
                rows,
                chart_rows,
                mig_extra,
                ..
            } => rows.saturating_mul(gpu_panel::height_for(chart_rows).saturating_add(mig_extra)),
            GpuArea::Grid { rows, caption, .. } => rows
                .saturating_mul(gpu_tile::HEIGHT)
                .saturating_add(u16::from(caption))
                .saturating_add(GRID_AXIS_ROWS),
            GpuArea::Compact { rows, caption } => rows.saturating_add(u16::from(caption)),
        }
    }
}

/// Draws the whole screen from `view`. Never panics, whatever the size. Returns where the
/// terminal's cursor goes (the filter prompt), `None` to hide it.
pub fn draw(frame: &mut Frame, view: &View) -> Option<Position> {
    let area = frame.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        let text = format!(
            "too small {}x{}, need {MIN_WIDTH}x{MIN_HEIGHT}",
            area.width, area.height
        );
        frame.render_widget(Paragraph::new(Line::styled(text, view.theme.warn)), area);
        return None;
    }
    let rows = view.rows;
    // Header, host line and status line take one row each; the rest is shared.
    let body = area.height.saturating_sub(3);
    let plan = plan_gpus(view, area.width, body);
    let [top, gpus, host, table, status] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(plan.height().min(body)),
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(area);

    header::render(frame, top, view);
    draw_gpus(frame, gpus, view, plan);
    host_line::render(frame, host, view);
    process_table::render(frame, table, view, rows);
    let cursor = status_line::render(frame, status, view);

    match &view.ui.mode {
        Mode::Help => help::render(frame, area, view),
        Mode::Detail => {
            let selected = view.ui.selected.min(rows.len().saturating_sub(1));
            detail::render(frame, area, view, rows.get(selected));
        }
        Mode::ConfirmKill(request) => kill_confirm::render(frame, area, view, request),
        Mode::ConfirmAttach(request) => {
            super::panels::attach_confirm::render(frame, area, view, request)
        }
        Mode::Reasons => reasons_overlay::render(frame, area, view),
        Mode::Normal | Mode::Filter => {}
    }
    cursor
}

/// Full panels when they fit beside a usable table and the GPUs are few, their charts as tall
/// as half the screen allows; else a grid of small panels when they leave the table room;
/// else one line each.
fn plan_gpus(view: &View, width: u16, body: u16) -> GpuArea {
    if view.snapshot.nvml_problem.is_some() {
        // Keep at least two table rows (header and one process) when the screen is short.
        return GpuArea::Problem(nvml_problem::HEIGHT.min(body.saturating_sub(2)).max(1));
    }
    let count = view.snapshot.devices.len();
    if count == 0 {
        return GpuArea::Waiting;
    }
    let count16 = u16::try_from(count).unwrap_or(u16::MAX);
    let columns: u16 = if width >= TWO_COLUMNS_FROM && count >= 2 {
        2
    } else {
        1
    };
    let rows = count16.div_ceil(columns);
    let full_height = rows.saturating_mul(gpu_panel::HEIGHT);
    if count < GRID_FROM_GPUS && full_height.saturating_add(TABLE_MIN_FOR_FULL) <= body {
        // Charts grow into the upper half of the screen; the table keeps the lower half.
        let room = (body / 2).max(full_height);
        let chart_rows = (1..=MAX_CHART_ROWS)
            .rev()
            .find(|&h| rows.saturating_mul(gpu_panel::height_for(h)) <= room)
            .unwrap_or(1);
        // A MIG GPU's instances take the utilisation chart's rows; where they want more, the
        // panel grows while the table keeps its rows beside a grid.
        let wanted = view
            .snapshot
            .devices
            .iter()
            .map(gpu_panel::mig_rows_wanted)
            .max()
            .unwrap_or(0);
        let spare = body
            .saturating_sub(rows.saturating_mul(gpu_panel::height_for(chart_rows)))
            .saturating_sub(TABLE_MIN_FOR_GRID)
            / rows;
        let mig_extra = wanted.saturating_sub(chart_rows).min(spare);
        return GpuArea::Full {
            columns,
            rows,
            chart_rows,
            mig_extra,
        };
    }
    let caption = gpu_compact::shared_model(view).is_some();
    let columns = ((width.saturating_add(2)) / (gpu_tile::MIN_WIDTH + 2)).min(count16);
    if columns >= 1 {
        let grid = GpuArea::Grid {
            columns,
            rows: count16.div_ceil(columns),
            caption,
        };
        if grid.height().saturating_add(TABLE_MIN_FOR_GRID) <= body {
            return grid;
        }
    }
    let caption = caption
        && count16
            .saturating_add(1)
            .saturating_add(TABLE_MIN_FOR_CAPTION)
            <= body;
    let rows = count16
        .min(body.saturating_sub(2 + u16::from(caption)))
        .max(1);
    GpuArea::Compact { rows, caption }
}

fn draw_gpus(frame: &mut Frame, area: Rect, view: &View, plan: GpuArea) {
    match plan {
        GpuArea::Problem(_) => {
            if let Some(problem) = &view.snapshot.nvml_problem {
                nvml_problem::render(frame, area, view, problem);
            }
        }
        GpuArea::Waiting => {
            let text = Line::styled("waiting for the first GPU sample...", view.theme.dim);
            frame.render_widget(Paragraph::new(text), area);
        }
        GpuArea::Compact { caption, .. } => {
            let model = gpu_compact::shared_model(view).filter(|_| caption);
            gpu_compact::render(frame, area, view, model.as_deref());
        }
        GpuArea::Full {
            columns,
            rows,
            chart_rows,
            mig_extra,
        } => {
            let height = gpu_panel::height_for(chart_rows).saturating_add(mig_extra);
            panels_in(
                area,
                (columns, rows, height),
                view,
                |frame, cell, device| gpu_panel::render(frame, cell, view, device, chart_rows),
                frame,
            );
        }
        GpuArea::Grid {
            columns,
            rows,
            caption,
        } => {
            let mut area = area;
            let model = gpu_compact::shared_model(view).filter(|_| caption);
            if let Some(model) = &model {
                let [top, rest] =
                    Layout::vertical([Constraint::Length(1), Constraint::Fill(1)]).areas(area);
                let line =
                    gpu_compact::models_caption(view.theme, view.snapshot.devices.len(), model);
                frame.render_widget(Paragraph::new(line), top);
                area = rest;
            }
            let named = model.is_none();
            let tiles_h = rows.saturating_mul(gpu_tile::HEIGHT);
            let [tiles, axis] = Layout::vertical([
                Constraint::Length(tiles_h),
                Constraint::Length(GRID_AXIS_ROWS),
            ])
            .areas(area);
            panels_in(
                tiles,
                (columns, rows, gpu_tile::HEIGHT),
                view,
                |frame, cell, device| gpu_tile::render(frame, cell, view, device, named),
                frame,
            );
            for cell in grid_cells(axis, columns).iter() {
                frame.render_widget(Paragraph::new(gpu_tile::axis(view, cell.width)), *cell);
            }
        }
    }
}

/// `columns` cells across `area`, two blank columns between them: the grid's columns, the
/// same for its tiles and for the time axis under them.
fn grid_cells(area: Rect, columns: u16) -> std::rc::Rc<[Rect]> {
    Layout::horizontal(vec![Constraint::Fill(1); usize::from(columns)])
        .spacing(2)
        .split(area)
}

/// Lays the GPUs out in `rows` of `columns` cells `height` rows tall, two blank columns
/// between cells, and draws each with `draw`.
fn panels_in(
    area: Rect,
    (columns, rows, height): (u16, u16, u16),
    view: &View,
    mut draw: impl FnMut(&mut Frame, Rect, &crate::model::DeviceSnapshot),
    frame: &mut Frame,
) {
    let row_areas =
        Layout::vertical(vec![Constraint::Length(height); usize::from(rows)]).split(area);
    let mut devices = view.snapshot.devices.iter();
    for row_area in row_areas.iter() {
        let cells = grid_cells(*row_area, columns);
        for cell in cells.iter() {
            if let Some(device) = devices.next() {
                draw(frame, *cell, device);
            }
        }
    }
}
