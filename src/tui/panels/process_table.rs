//! The process table: one row per (process, GPU), sort column marked in the header, selected
//! row highlighted and kept in view, exited processes dimmed with their age. On narrow
//! terminals the least important columns go first; PID, VRAM and COMMAND always stay.

use super::{buffer_write, command, panel_text};
use crate::model::units;
use crate::terminal_kit::theme::Theme;
use crate::tui::rows::{TableRow, ranked};
use crate::tui::ui_state::{SortColumn, TablePlace};
use crate::tui::view::View;
use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

/// A fixed-width column; COMMAND takes what is left.
#[derive(Clone, Copy)]
struct Col {
    kind: SortColumn,
    width: u16,
    /// Lower goes first when space runs out; `None` never goes.
    drop_rank: Option<u8>,
}

const fn col(kind: SortColumn, width: u16, drop_rank: Option<u8>) -> Col {
    Col {
        kind,
        width,
        drop_rank,
    }
}

/// CPU% goes first on narrow terminals, then host RSS, SM%, USER, PEAK and GPU; the columns
/// only `--columns` or `x` bring (TYPE, %MEM, ELAPSED) go before any of them.
const COLUMNS: [Col; 11] = [
    col(SortColumn::Pid, 8, None),
    col(SortColumn::User, 8, Some(3)),
    // Last to go: without it one process on two GPUs reads as two identical rows.
    col(SortColumn::Gpu, 3, Some(9)),
    col(SortColumn::Type, 4, Some(0)),
    // Wide enough for `exited 10m ago` and `left GPU 10m`, which rows no longer listed show
    // instead of a size.
    col(SortColumn::Vram, 14, None),
    col(SortColumn::VramPeak, 8, Some(6)),
    col(SortColumn::Sm, 4, Some(2)),
    col(SortColumn::HostRss, 8, Some(1)),
    col(SortColumn::HostMem, 5, Some(0)),
    col(SortColumn::Cpu, 5, Some(0)),
    col(SortColumn::Elapsed, 8, Some(0)),
];

/// Shown while some process is instrumented. Allocated and reserved outlast NVML's PEAK
/// column, since they are what the person instrumented a program for; STEP and the
/// allocator's peak go before it.
const ALLOCATOR_COLUMNS: [Col; 4] = [
    col(SortColumn::Allocated, 8, Some(8)),
    col(SortColumn::Reserved, 8, Some(7)),
    col(SortColumn::AllocPeak, 8, Some(5)),
    col(SortColumn::Step, 6, Some(4)),
];

/// Shown, after GPU, while some writer reports a rank; it goes after PEAK, before RESV.
const RANK_COLUMN: Col = col(SortColumn::Rank, 4, Some(7));

/// Shown right before COMMAND while some process runs in a Kubernetes pod (and POD is
/// chosen, as by default): `namespace/pod:container`, in the narrowest of these that holds
/// the longest one (pods of a Deployment have long names). It outlasts USER, which in a
/// container is mostly root and says less than the pod does, and STEP and A.PEAK (rank 5,
/// a tie that A.PEAK, further left, loses first): on a shared node which pod a process
/// belongs to says more than its step.
const POD_COLUMNS: [Col; 4] = [
    col(SortColumn::Pod, 16, Some(5)),
    col(SortColumn::Pod, 24, Some(5)),
    col(SortColumn::Pod, 32, Some(5)),
    col(SortColumn::Pod, 40, Some(5)),
];

/// The POD column for `rows`, when one of them runs in a pod.
fn pod_column(rows: &[TableRow]) -> Option<&'static Col> {
    let longest = rows
        .iter()
        .filter_map(TableRow::pod)
        .map(|pod| pod.full_label().chars().count())
        .max()?;
    POD_COLUMNS
        .iter()
        .find(|c| usize::from(c.width) >= longest)
        .or(POD_COLUMNS.last())
}

/// COMMAND keeps at least this many cells before any other column is given up.
const MIN_COMMAND: u16 = 20;

pub fn render(frame: &mut Frame, area: Rect, view: &View, rows: &[TableRow]) {
    if area.height == 0 || area.width == 0 {
        return;
    }
    let theme = view.theme;
    let fitted = fit_columns(
        area.width,
        Wanted {
            allocator_columns: !view.snapshot.allocators.is_empty(),
            rank_column: ranked(view.snapshot),
            pod_column: pod_column(rows).filter(|_| view.ui.shows(SortColumn::Pod)),
            sort: view.ui.sort,
            page: view.ui.every_column.then_some(view.ui.column_page),
        },
        |c| view.ui.shows(c),
    );
    view.ui.next_column_page.set(fitted.next_page);
    let columns = &fitted.columns;
    let mut kinds: Vec<(SortColumn, u16)> = columns.iter().map(|c| (c.kind, c.width)).collect();
    let fixed: u16 = kinds.iter().map(|(_, w)| w + 1).sum();
    kinds.push((SortColumn::Command, area.width.saturating_sub(fixed)));

    let buf = frame.buffer_mut();
    let mut cells: Vec<Cell> = columns
        .iter()
        // Labels sit at their column's right; POD's, over a wide column of names, at its left.
        .map(|c| header_cell(view, c.kind, c.kind != SortColumn::Pod))
        .collect();
    cells.push(header_cell(view, SortColumn::Command, false));
    put_row(buf, area, 0, theme.header_row, &kinds, &cells);

    let visible = usize::from(area.height.saturating_sub(1));
    let selected = view.ui.selected.min(rows.len().saturating_sub(1));
    let lines = table_lines(rows, view.ui.group_by_gpu);
    let selected_line = lines
        .iter()
        .position(|l| *l == TableLine::Row(selected))
        .unwrap_or(0);
    let offset = scroll_offset(
        view,
        rows.get(selected),
        selected_line,
        lines.len(),
        visible,
    );
    for (line_no, line) in lines.iter().skip(offset).take(visible).enumerate() {
        let i = match *line {
            TableLine::Row(i) => i,
            TableLine::Gpu(gpu) => {
                let y = area.y + line_no as u16 + 1;
                let title = gpu_line(view, rows, gpu);
                buffer_write::line_in(buf, Rect::new(area.x, y, area.width, 1), &title);
                continue;
            }
        };
        let row = &rows[i];
        let mut style = if row.is_exited() {
            theme.dim
        } else {
            Style::new()
        };
        if i == selected {
            style = style.patch(theme.selected);
        }
        cells.clear();
        cells.extend(
            kinds
                .iter()
                .map(|(kind, width)| cell(view, *kind, *width, row)),
        );
        put_row(buf, area, line_no as u16 + 1, style, &kinds, &cells);
    }
    let row_offset = lines[..offset.min(lines.len())]
        .iter()
        .filter(|l| matches!(l, TableLine::Row(_)))
        .count();
    let rows_shown = lines
        .iter()
        .skip(offset)
        .take(visible)
        .filter(|l| matches!(l, TableLine::Row(_)))
        .count();
    let hint = hidden_hint(view, &fitted);
    put_position(
        buf,
        area,
        fixed,
        view,
        rows,
        (row_offset, rows_shown),
        &hint,
    );

    if rows.is_empty() && area.height > 1 {
        let text = if let Some(why) = unread_list(view) {
            why
        } else if view.ui.filter.is_empty() {
            "no processes on the GPUs".to_string()
        } else {
            format!("no process matches \"{}\"", view.ui.filter)
        };
        let below = Rect {
            y: area.y.saturating_add(1),
            height: 1,
            ..area
        };
        frame.render_widget(Paragraph::new(Line::styled(text, theme.dim)), below);
    }
}

/// The first table line shown. Scrolled down, the selected row keeps the screen line it had
/// at the last frame while the rows around it move (a refresh re-sorted them); at the top,
/// the table stays at its top, where a row that grows goes. Moved by a key, the selection
/// keeps the window it was in, scrolled just enough to stay in view. The place is kept for
/// the next frame.
fn scroll_offset(
    view: &View,
    selected: Option<&TableRow>,
    selected_line: usize,
    lines: usize,
    visible: usize,
) -> usize {
    let last_offset = lines.saturating_sub(visible);
    let mut place = view.ui.table_place.borrow_mut();
    let wanted = match (&*place, selected) {
        (Some(before), Some(row)) if before.key == row.key && before.offset > 0 => {
            selected_line.saturating_sub(before.line)
        }
        (Some(before), _) => before.offset,
        // The first frame: the selected row the last one shown, if it is below the first page.
        (None, _) => (selected_line + 1).saturating_sub(visible),
    };
    let offset = wanted
        .min(last_offset)
        .max((selected_line + 1).saturating_sub(visible))
        .min(selected_line);
    *place = selected.map(|row| TablePlace {
        key: row.key.clone(),
        line: selected_line.saturating_sub(offset),
        offset,
    });
    offset
}

/// One line of the table under its header: a process row (its index in `rows`), or, grouped
/// by GPU, the line that opens a GPU's rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TableLine {
    Row(usize),
    Gpu(u32),
}

/// The table's lines: the rows in order, each GPU's opened by its line when `grouped` (the
/// rows then come sorted by GPU first, `rows::table_rows`).
fn table_lines(rows: &[TableRow], grouped: bool) -> Vec<TableLine> {
    let mut lines = Vec::with_capacity(rows.len() + 8);
    for (i, row) in rows.iter().enumerate() {
        if grouped && (i == 0 || rows[i - 1].gpu_index != row.gpu_index) {
            lines.push(TableLine::Gpu(row.gpu_index));
        }
        lines.push(TableLine::Row(i));
    }
    lines
}

/// `── GPU 0 NVIDIA H100 80GB HBM3  2 processes, 38.0 GiB`: the GPU a group's rows are on,
/// how many of them still run there and the VRAM NVML lists for them.
fn gpu_line(view: &View, rows: &[TableRow], gpu: u32) -> Line<'static> {
    let theme = view.theme;
    let mine = rows.iter().filter(|r| r.gpu_index == gpu && !r.is_exited());
    let (count, vram) = mine.fold((0, 0), |(n, sum), r| {
        (n + 1, sum + r.vram.as_ref().ok().copied().unwrap_or(0))
    });
    let name = view
        .snapshot
        .devices
        .iter()
        .find(|d| d.info.index == gpu)
        .map(|d| d.info.display_name())
        .unwrap_or_default();
    let noun = if count == 1 { "process" } else { "processes" };
    let rule = theme.glyphs.border.horizontal_top;
    Line::from(vec![
        Span::styled(format!("{rule}{rule} "), theme.border),
        Span::styled(format!("GPU {gpu} {name}"), theme.title),
        Span::styled(
            format!("  {count} {noun}, {} ", view.ui.units.bytes(vram)),
            theme.label,
        ),
    ])
}

/// `rows 20-38 of 64  per GPU 0:12 1:52` at the right of the header row, after COMMAND's
/// label: where the window is in a long table, and how the rows spread over the GPUs. The
/// per-GPU part goes first when the line is short; nothing is drawn over the label.
fn put_position(
    buf: &mut Buffer,
    area: Rect,
    command_x: u16,
    view: &View,
    rows: &[TableRow],
    (offset, visible): (usize, usize),
    hint: &Option<Hint>,
) {
    // COMMAND's label, its sort arrow and a gap stay clear.
    let label = SortColumn::Command.label().len() + 2;
    let room = usize::from(area.width.saturating_sub(command_x)).saturating_sub(label);
    let put = |buf: &mut Buffer, candidates: Vec<Option<String>>| {
        let text = candidates
            .into_iter()
            .flatten()
            .find(|t| t.chars().count() <= room);
        if let Some(text) = text {
            let header = Rect::new(area.x, area.y, area.width, 1);
            let line = Line::styled(text, view.theme.header_row).right_aligned();
            buffer_write::line_in(buf, header, &line);
        }
    };
    if rows.is_empty() || visible == 0 {
        if let Some(h) = hint {
            put(
                buf,
                vec![
                    Some(h.long.clone()),
                    Some(h.short.clone()),
                    Some(h.tiny.clone()),
                ],
            );
        }
        return;
    }
    let to = (offset + visible).min(rows.len());
    let position = format!("rows {}-{to} of {}", offset + 1, rows.len());
    let mut per_gpu = std::collections::BTreeMap::<u32, usize>::new();
    for row in rows {
        *per_gpu.entry(row.gpu_index).or_default() += 1;
    }
    let counts = (view.snapshot.devices.len() > 1).then(|| {
        let counts: Vec<String> = per_gpu
            .iter()
            .map(|(gpu, n)| format!("{gpu}:{n}"))
            .collect();
        format!("per GPU {}", counts.join(" "))
    });
    let compact = format!("{}-{to}/{}", offset + 1, rows.len());
    // What the width hides outranks the per-GPU counts and the long position: it is what
    // the person cannot see at all.
    let candidates = match hint {
        Some(h) => vec![
            counts.map(|c| format!("{position}  {c}  {}", h.long)),
            Some(format!("{position}  {}", h.long)),
            Some(format!("{compact}  {}", h.long)),
            Some(h.long.clone()),
            Some(h.short.clone()),
            Some(h.tiny.clone()),
            Some(compact),
        ],
        None => vec![
            counts.map(|c| format!("{position}  {c}")),
            Some(position),
            Some(compact),
        ],
    };
    put(buf, candidates);
}

/// Why a GPU's process list, or one of its two lists, was not read: an empty table must not
/// say "no processes" for a list nobody could see.
fn unread_list(view: &View) -> Option<String> {
    view.snapshot.devices.iter().find_map(|d| {
        let s = d.sample.as_ref()?;
        let gaps = &s.list_gaps;
        let (list, why) = match (&s.processes, &gaps.compute, &gaps.graphics) {
            (Err(why), _, _) => ("process list", why),
            (_, Some(why), _) => ("compute process list", why),
            (_, _, Some(why)) => ("graphics process list", why),
            _ => return None,
        };
        Some(format!(
            "{list} n/a on GPU {}: {}",
            d.info.index,
            why.reason()
        ))
    })
}

/// Writes one table line straight into the buffer: the row's style once over the line, then
/// each column's text, one cell apart. (ratatui's Table styles every cell three times over,
/// which was a fifth of a frame's CPU.)
fn put_row(
    buf: &mut Buffer,
    area: Rect,
    line_no: u16,
    style: Style,
    kinds: &[(SortColumn, u16)],
    cells: &[Cell],
) {
    let y = area.y + line_no;
    if line_no >= area.height {
        return;
    }
    if style != Style::new() {
        buf.set_style(Rect::new(area.x, y, area.width, 1), style);
    }
    let mut x = area.x;
    let end = area.right();
    for ((_, width), line) in kinds.iter().zip(cells) {
        let width = (*width).min(end.saturating_sub(x));
        if width == 0 {
            break;
        }
        line.put(buf, Rect::new(x, y, width, 1));
        x = x.saturating_add(width + 1);
    }
}
/// What the table wants to show besides the chosen columns.
struct Wanted {
    allocator_columns: bool,
    rank_column: bool,
    pod_column: Option<&'static Col>,
    /// The sort column is widened to hold its label and mark (`GPU▲`) in its own cells.
    sort: SortColumn,
    /// With every column (`x`): the page of columns shown, by the first one after PID.
    page: Option<usize>,
}

/// The columns a frame draws and what the width left out.
struct Fitted {
    columns: Vec<Col>,
    /// Wanted columns the width left out, in the table's order: dropped, or (every column)
    /// on the pages after this one.
    hidden: Vec<SortColumn>,
    /// Every column: where the next page starts, while some are past the right edge.
    next_page: Option<usize>,
    /// Every column: this is a later page, the first ones are to the left.
    later_page: bool,
}

/// The chosen columns, each sort column wide enough for its mark, fitted to `width`: the
/// least important dropped until COMMAND has room (POD narrowing before any column that
/// outranks it goes); with every column (`x`), none dropped: the columns after PID page
/// sideways.
fn fit_columns(width: u16, wanted: Wanted, chosen: impl Fn(SortColumn) -> bool) -> Fitted {
    let mut kept: Vec<Col> = COLUMNS.iter().filter(|c| chosen(c.kind)).copied().collect();
    if wanted.rank_column {
        let after_gpu = kept
            .iter()
            .position(|c| c.kind == SortColumn::Gpu)
            .map_or(kept.len(), |i| i + 1);
        kept.insert(after_gpu, RANK_COLUMN);
    }
    if wanted.allocator_columns {
        // After CPU%, before COMMAND.
        kept.extend(ALLOCATOR_COLUMNS.iter().copied());
    }
    kept.extend(wanted.pod_column.copied());
    let label_and_mark = u16::try_from(wanted.sort.label().len() + 1).unwrap_or(u16::MAX);
    for c in kept.iter_mut().filter(|c| c.kind == wanted.sort) {
        c.width = c.width.max(label_and_mark);
    }
    match wanted.page {
        Some(first) => page_columns(width, kept, first),
        None => drop_columns(width, kept),
    }
}

fn drop_columns(width: u16, mut kept: Vec<Col>) -> Fitted {
    let need =
        |kept: &[Col]| -> u16 { kept.iter().map(|c| c.width + 1).sum::<u16>() + MIN_COMMAND };
    let mut hidden = Vec::new();
    while need(&kept) > width {
        let victim = kept
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.drop_rank.map(|r| (r, i)))
            .min();
        // Before a column as important as POD goes, POD narrows: a pod's name cut short
        // still tells the rows apart.
        if let Some((rank, _)) = victim
            && Some(rank) >= POD_COLUMNS[0].drop_rank
            && let Some(at) = kept.iter().position(|c| c.kind == SortColumn::Pod)
            && let Some(narrower) = POD_COLUMNS.iter().rev().find(|c| c.width < kept[at].width)
        {
            kept[at] = *narrower;
            continue;
        }
        match victim {
            Some((_, i)) => hidden.push(kept.remove(i).kind),
            None => break,
        }
    }
    let order = |k: &SortColumn| SortColumn::ALL.iter().position(|c| c == k);
    hidden.sort_by_key(order);
    Fitted {
        columns: kept,
        hidden,
        next_page: None,
        later_page: false,
    }
}

/// Every column: PID, then as many of the others from `first` on as leave COMMAND its
/// `MIN_COMMAND` cells (one at least), then COMMAND.
fn page_columns(width: u16, kept: Vec<Col>, first: usize) -> Fitted {
    let (pid, rest) = match kept.split_first() {
        Some((pid, rest)) if pid.kind == SortColumn::Pid => (Some(*pid), rest),
        _ => (None, &kept[..]),
    };
    let first = if first < rest.len() { first } else { 0 };
    let pid_w = pid.map_or(0, |c| c.width + 1);
    let room = width.saturating_sub(pid_w + MIN_COMMAND);
    let mut used = 0u16;
    let mut end = first;
    while let Some(c) = rest.get(end) {
        if used + c.width + 1 > room && end > first {
            break;
        }
        used += c.width + 1;
        end += 1;
    }
    let mut columns: Vec<Col> = pid.into_iter().collect();
    columns.extend_from_slice(&rest[first..end]);
    Fitted {
        columns,
        hidden: rest[end..].iter().map(|c| c.kind).collect(),
        next_page: (end < rest.len()).then_some(end),
        later_page: first > 0,
    }
}

/// What the header says about columns the width hides, long, short and shortest (`hidden:
/// CPU% RSS (x)`, `x: +CPU% RSS`, `x: 2 more`); on the last page of every column, that `x`
/// goes back.
struct Hint {
    long: String,
    short: String,
    tiny: String,
}

fn hidden_hint(view: &View, fitted: &Fitted) -> Option<Hint> {
    if fitted.hidden.is_empty() {
        if fitted.later_page {
            return Some(Hint {
                long: "x: the chosen columns".into(),
                short: "x: back".into(),
                tiny: "x: back".into(),
            });
        }
        return None;
    }
    let names: Vec<&str> = fitted.hidden.iter().map(|c| c.label()).collect();
    let names = names.join(" ");
    let more = if view.ui.every_column {
        "more"
    } else {
        "hidden"
    };
    Some(Hint {
        long: format!("{more}: {names} (x)"),
        short: format!("x: +{names}"),
        tiny: format!("x: {} more", fitted.hidden.len()),
    })
}

/// One table cell: its text, borrowed from the row where the row holds it, and its side of
/// the column. Every visible cell is built every frame, and a `Line` per cell cost two
/// allocations (its text and its span list) and a copy of each user and command.
struct Cell<'a> {
    text: Span<'a>,
    /// Drawn right after `text`: the command's container id.
    suffix: Option<Span<'a>>,
    right: bool,
    /// Text cut at the column ends in this mark (commands, whose cut reads as whole).
    cut_mark: Option<&'static str>,
}

impl<'a> Cell<'a> {
    fn left(text: Span<'a>) -> Self {
        Cell {
            text,
            suffix: None,
            right: false,
            cut_mark: None,
        }
    }

    fn right(text: Span<'a>) -> Self {
        Cell {
            right: true,
            ..Cell::left(text)
        }
    }

    fn spans(&self) -> impl Iterator<Item = &Span<'a>> + Clone {
        std::iter::once(&self.text).chain(&self.suffix)
    }

    /// Draws the cell in its one-row `area`: as `buffer_write::cell_in` draws the same line, so a
    /// right-aligned figure too wide for its column keeps its end (the unit).
    fn put(&self, buf: &mut Buffer, area: Rect) {
        let width = usize::from(area.width);
        if let Some(mark) = self.cut_mark
            && self.spans().map(buffer_write::cells).sum::<usize>() > width
        {
            // Only cut cells pay for joining their text.
            let text: String = self.spans().map(|s| s.content.as_ref()).collect();
            let cut = command::cut(&text, width, mark).unwrap_or(text);
            buffer_write::cell_in(buf, area, &Line::styled(cut, self.text.style));
            return;
        }
        if !buffer_write::spans_fit(buf, area, self.spans(), Style::new(), self.right) {
            let line = Line::from(self.spans().cloned().collect::<Vec<_>>()).right_aligned();
            buffer_write::cell_in(buf, area, &line);
        }
    }
}

fn header_cell(view: &View, kind: SortColumn, right: bool) -> Cell<'static> {
    let g = &view.theme.glyphs;
    let text = if view.ui.sort == kind {
        let arrow = if view.ui.sort_descending {
            g.sort_descending
        } else {
            g.sort_ascending
        };
        Span::raw(format!("{}{arrow}", kind.label()))
    } else {
        Span::raw(kind.label())
    };
    Cell {
        right,
        ..Cell::left(text)
    }
}

/// A right-aligned figure; `n/a` dimmed; `-` for exited rows, whose live figures are gone
/// rather than unreadable (their VRAM cell says `exited 2m ago` instead).
fn figure<T>(
    theme: &Theme,
    row: &TableRow,
    value: Option<&T>,
    f: impl FnOnce(&T) -> String,
) -> Cell<'static> {
    Cell::right(match value {
        _ if row.is_exited() => Span::raw("-"),
        Some(v) => Span::raw(f(v)),
        None => Span::styled(panel_text::NA, theme.dim),
    })
}

fn cell<'a>(view: &View, kind: SortColumn, width: u16, row: &'a TableRow) -> Cell<'a> {
    let theme = view.theme;
    match kind {
        SortColumn::Pid => {
            // Not for a row the host pass has not read yet: its user and command are n/a
            // for that reason alone, not because it is out of sight.
            let marker = if row.not_visible_here() {
                theme.glyphs.hidden_pid
            } else {
                ""
            };
            Cell::right(Span::raw(format!("{}{marker}", row.key.pid)))
        }
        SortColumn::User => Cell::left(match row.user() {
            Some(user) => Span::raw(user),
            None => Span::styled(panel_text::NA, theme.dim),
        }),
        SortColumn::Gpu => Cell::right(Span::raw(row.gpu_index.to_string())),
        SortColumn::Type => figure(theme, row, row.kind.as_ref(), |k| k.letter().to_string()),
        SortColumn::HostMem => figure(theme, row, row.host_mem_pct.as_ref(), |p| format!("{p:.1}")),
        SortColumn::Elapsed => figure(
            theme,
            row,
            row.started_ms
                .map(|start| view.now_ms.saturating_sub(start))
                .as_ref(),
            |ms| panel_text::elapsed(*ms),
        ),
        // Blank for a process without one, as the allocator columns are.
        SortColumn::Rank => Cell::right(Span::raw(
            row.rank().map(|r| r.to_string()).unwrap_or_default(),
        )),
        SortColumn::Vram if row.is_exited() => Cell::right(Span::raw(
            row.gone_label(view.now_ms, true).unwrap_or_default(),
        )),
        SortColumn::Vram => figure(theme, row, row.vram.as_ref().ok(), |v| match row.vram_pct {
            Some(pct) => format!(
                "{} {:>4}",
                view.ui.units.bytes(*v),
                panel_text::percent(pct)
            ),
            None => view.ui.units.bytes(*v),
        }),
        SortColumn::VramPeak => {
            // The peak outlives the process: exited rows show it too.
            Cell::right(match row.vram_peak {
                Some(p) => Span::raw(view.ui.units.bytes(p.value as u64)),
                None => Span::styled(panel_text::NA, theme.dim),
            })
        }
        SortColumn::Sm => figure(theme, row, row.sm.as_ref().ok(), |v| v.to_string()),
        SortColumn::HostRss => figure(theme, row, row.rss().as_ref(), |v| units::bytes(*v)),
        SortColumn::Cpu => figure(theme, row, row.cpu().as_ref(), |v| format!("{v:.1}")),
        SortColumn::Allocated | SortColumn::Reserved | SortColumn::AllocPeak => {
            allocator_cell(theme, row, row.allocator_figure(kind).map(units::bytes))
        }
        // `92+a`: 92 steps since an attach, not the job's step 92 (the help says so). Too
        // wide, it is cut at its end with the mark, so its number never loses a digit.
        SortColumn::Step => Cell {
            cut_mark: Some(theme.glyphs.cut),
            ..allocator_cell(
                theme,
                row,
                row.allocator
                    .as_ref()
                    .and_then(|a| Some(a.steps_from.cell(a.step?))),
            )
        },
        SortColumn::Pod => pod_cell(view, row, usize::from(width)),
        SortColumn::Command => command_cell(view, row),
    }
}

/// An allocator figure: blank for a process that publishes none (most rows, which would
/// otherwise be a wall of `n/a`), `n/a` for an instrumented one that cannot read it.
fn allocator_cell(theme: &Theme, row: &TableRow, text: Option<String>) -> Cell<'static> {
    Cell::right(match (&row.allocator, text) {
        (None, _) => Span::raw(""),
        (Some(_), Some(text)) => Span::raw(text),
        (Some(_), None) => Span::styled(panel_text::NA, theme.dim),
    })
}

/// `ml-team/trainer-0:trainer`, or `ml-team/trainer-0` when the container's name does not
/// fit too; a pod without names shows its uid, dimmed. Blank for a process in no pod, as
/// RANK is for one without a rank.
fn pod_cell<'a>(view: &View, row: &'a TableRow, width: usize) -> Cell<'a> {
    let theme = view.theme;
    let Some(pod) = row.pod() else {
        return Cell::left(Span::raw(""));
    };
    let full = pod.full_label();
    let text = if pod.name.is_err() {
        Span::styled(full, theme.dim)
    } else if full.chars().count() <= width {
        Span::raw(full)
    } else {
        Span::raw(pod.label())
    };
    Cell {
        cut_mark: Some(theme.glyphs.cut),
        ..Cell::left(text)
    }
}

/// `python train.py [3f5c2a1b9d8e]`: the command first, since it is what names the row; the
/// program and script by name (see `command::short`), a cut marked.
fn command_cell<'a>(view: &View, row: &'a TableRow) -> Cell<'a> {
    let theme = view.theme;
    let text = match row.command() {
        Some(full) => Span::raw(command::short(full)),
        None => Span::styled(panel_text::NA, theme.dim),
    };
    // A writer `vramscope attach` started says so: its history begins at the attach.
    let attached = row.allocator.as_ref().is_some_and(|a| a.attached);
    let container = row.container();
    let suffix = match (container, attached) {
        (Some(c), true) => Some(format!(" [{c}] [attached]")),
        (Some(c), false) => Some(format!(" [{c}]")),
        (None, true) => Some(" [attached]".to_string()),
        (None, false) => None,
    };
    Cell {
        suffix: suffix.map(|s| Span::styled(s, theme.label)),
        cut_mark: Some(theme.glyphs.cut),
        ..Cell::left(text)
    }
}
