//! Drawing the cluster screen: pure functions of the `Screen`, the person's choices and
//! the theme.
//!
//! ```text
//! ┌ header: source, clock, nodes, ranks, queries a refresh, view, PAUSED ───────┐
//! │ ! problems: the source's, each target's, with since when               (red) │
//! │ OOM in job J: rank R on NODE GPU G at T                                 (red) │
//! │ job J: N ranks, median step S                                               │
//! │ RANK NODE GPU ALLOC RESERVED PEAK PEAK GROWTH STEP OOM IN OOMS STATE        │
//! │ ...                          (or NODE GPUS MEMORY UTIL RANKS STATE, GPUs below)│
//! │ job J, last 5m (past from Prometheus since T)       (`charts`, when 16 rows fit) │
//! │ alloc / resv / worst / util sparklines with their current values             │
//! └ status: keys, or the filter being typed ────────────────────────────────────┘
//! ```

use super::charts::{HEIGHT as CHART_HEIGHT, Subject};
use super::help;
use super::state::{Line, Mode, Ui};
use crate::cluster::cells::{
    NODE_HEADINGS, RANK_HEADINGS, gpu_detail_lines, gpu_line, job_title, node_cells, oom_line,
    rank_cells,
};
use crate::cluster::charts::Charts;
use crate::cluster::options::ClusterView;
use crate::cluster::view::{Screen, clock};
use crate::terminal_kit::theme::Theme;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line as TextLine, Span};
use ratatui::widgets::Paragraph;

/// Draws the screen; `charts` is the charts' history with how old a reading may be and still
/// be shown as current.
pub fn draw(
    frame: &mut Frame,
    screen: &Screen,
    charts: (&Charts, u64),
    ui: &mut Ui,
    lines: &[Line],
    theme: &Theme,
) {
    let area = frame.area();
    if area.height < 3 || area.width < 20 {
        return;
    }
    if ui.mode == Mode::Help {
        help::draw(frame, area, ui, theme);
        return;
    }
    frame.render_widget(Paragraph::new(header(screen, ui, theme)), row(area, 0));
    let max_problems = usize::from(area.height / 3);
    let mut problems: Vec<TextLine> = screen
        .problems
        .iter()
        .take(max_problems)
        .map(|p| TextLine::from(Span::styled(format!("! {p}"), theme.crit)))
        .collect();
    if screen.problems.len() > max_problems {
        problems.push(TextLine::from(Span::styled(
            format!("! and {} more", screen.problems.len() - max_problems),
            theme.crit,
        )));
    }
    let top = 1 + problems.len() as u16;
    if !problems.is_empty() {
        let rect = Rect::new(area.x, area.y + 1, area.width, problems.len() as u16);
        frame.render_widget(Paragraph::new(problems), rect);
    }
    let mut body = Rect::new(
        area.x,
        area.y + top,
        area.width,
        area.height.saturating_sub(top + 1),
    );
    // The charts under the table, where there is room for both.
    let subject = subject(screen, ui, lines);
    if let Some(subject) = subject
        && body.height >= CHARTS_FROM_HEIGHT
        && area.width >= 60
    {
        body.height -= CHART_HEIGHT + 1;
        let at = Rect::new(area.x, body.y + body.height + 1, area.width, CHART_HEIGHT);
        super::charts::draw(
            frame,
            at,
            &subject,
            charts.0,
            (screen.now_ms, charts.1),
            theme,
        );
    }
    body_lines(frame, body, screen, ui, lines, theme);
    frame.render_widget(
        Paragraph::new(status(ui, theme)),
        row(area, area.height - 1),
    );
}

/// Rows the body needs before the charts take some of it.
const CHARTS_FROM_HEIGHT: u16 = 16;

/// What the charts are of: the selected rank's job or the selected node, else the first
/// job or node in the view.
fn subject(screen: &Screen, ui: &Ui, lines: &[Line]) -> Option<Subject> {
    let selected = lines.iter().find(|l| {
        l.key(screen)
            .is_some_and(|k| Some(&k) == ui.selected.as_ref())
    });
    let of = |line: &Line| match line {
        Line::Rank(r) => Some(Subject::Job(r.job.clone())),
        Line::JobTitle(j) => screen.jobs.get(*j).map(|j| Subject::Job(j.job.clone())),
        Line::Node(n) => screen.nodes.get(*n).map(|n| Subject::Node(n.node.clone())),
        _ => None,
    };
    selected.and_then(of).or_else(|| lines.iter().find_map(of))
}

fn row(area: Rect, y: u16) -> Rect {
    Rect::new(area.x, area.y + y, area.width, 1)
}

fn header<'a>(screen: &Screen, ui: &Ui, theme: &Theme) -> TextLine<'a> {
    let ranks: usize = screen.jobs.iter().map(|j| j.ranks.len()).sum();
    let view = match ui.view {
        ClusterView::Jobs => "jobs",
        ClusterView::Nodes => "nodes",
    };
    let mut spans = vec![
        Span::styled("vramscope cluster ", theme.title),
        Span::styled(screen.source.clone(), theme.value),
        Span::raw("  "),
        Span::styled(clock(screen.now_ms), theme.value),
        Span::raw("  "),
        Span::styled(
            format!("{} nodes, {ranks} ranks", screen.nodes.len()),
            theme.label,
        ),
        Span::raw("  "),
        Span::styled(
            format!("{} requests/refresh", screen.last_requests),
            theme.dim,
        ),
        Span::raw("  "),
        Span::styled(format!("view: {view}"), theme.label),
    ];
    if ui.paused {
        spans.push(Span::raw("  "));
        spans.push(Span::styled("PAUSED", theme.paused));
    }
    TextLine::from(spans)
}

fn status<'a>(ui: &Ui, theme: &Theme) -> TextLine<'a> {
    if ui.mode == Mode::Filter {
        return TextLine::from(vec![
            Span::styled("/", theme.key),
            Span::raw(ui.filter.clone()),
            Span::styled("  (Enter keeps it, Esc clears it)", theme.dim),
        ]);
    }
    let mut spans = Vec::new();
    for (key, what) in [
        ("q", "quit"),
        ("?", "help"),
        ("/", "filter"),
        ("v", "jobs/nodes"),
        ("s", "sort"),
        ("Enter", "open node"),
    ] {
        spans.push(Span::styled(key, theme.key));
        spans.push(Span::styled(format!(" {what}  "), theme.dim));
    }
    spans.push(Span::styled(
        format!("sort: {}", ui.sort.label()),
        theme.label,
    ));
    if ui.reversed {
        spans.push(Span::styled(" (reversed)", theme.label));
    }
    if !ui.filter.is_empty() {
        spans.push(Span::styled(
            format!("  filter: {}", ui.filter),
            theme.label,
        ));
    }
    TextLine::from(spans)
}

fn body_lines(
    frame: &mut Frame,
    body: Rect,
    screen: &Screen,
    ui: &mut Ui,
    lines: &[Line],
    theme: &Theme,
) {
    let height = usize::from(body.height);
    if height == 0 {
        return;
    }
    // Keep the selection in sight.
    let selected_at = lines.iter().position(|l| {
        l.key(screen)
            .is_some_and(|k| Some(&k) == ui.selected.as_ref())
    });
    if let Some(at) = selected_at {
        if at < ui.scroll {
            ui.scroll = at;
        } else if at >= ui.scroll + height {
            ui.scroll = at + 1 - height;
        }
    }
    ui.scroll = ui.scroll.min(lines.len().saturating_sub(height));
    // Cells of the lines in sight only: a job of thousands of ranks shows a screenful.
    let visible = ui.scroll..(ui.scroll + height).min(lines.len());
    let rank_cells_of: Vec<Option<[String; 11]>> = lines[visible.clone()]
        .iter()
        .map(|l| match l {
            Line::Rank(r) => Some(rank_cells(r)),
            _ => None,
        })
        .collect();
    let node_cells_of: Vec<Option<[String; 6]>> = lines[visible]
        .iter()
        .map(|l| match l {
            Line::Node(i) => screen.nodes.get(*i).map(node_cells),
            _ => None,
        })
        .collect();
    let rank_widths = widths(&RANK_HEADINGS, rank_cells_of.iter().flatten());
    let node_widths = widths(&NODE_HEADINGS, node_cells_of.iter().flatten());
    let mut text = Vec::with_capacity(height);
    for (i, line) in lines.iter().enumerate().skip(ui.scroll).take(height) {
        let selected = Some(i) == selected_at;
        let shown = match line {
            Line::JobTitle(j) => screen
                .jobs
                .get(*j)
                .map(|job| TextLine::from(Span::styled(job_title(job), theme.title))),
            Line::Oom(j, o) => screen.jobs.get(*j).and_then(|job| {
                let oom = job.ooms.get(*o)?;
                Some(TextLine::from(Span::styled(
                    oom_line(&job.job, oom),
                    theme.crit.add_modifier(Modifier::BOLD),
                )))
            }),
            Line::RankHeadings => Some(columns(
                &RANK_HEADINGS.map(String::from),
                &rank_widths,
                theme.header_row,
            )),
            Line::NodeHeadings => Some(columns(
                &NODE_HEADINGS.map(String::from),
                &node_widths,
                theme.header_row,
            )),
            Line::Rank(r) => rank_cells_of[i - ui.scroll].as_ref().map(|cells| {
                let style = if r.ooms.is_some_and(|n| n > 0) || r.nearest_oom {
                    theme.crit
                } else if !r.fresh.is_current() || r.behind.is_some() || r.fastest_growth {
                    theme.warn
                } else {
                    theme.value
                };
                columns(cells, &rank_widths, style)
            }),
            Line::Node(n) => node_cells_of[i - ui.scroll].as_ref().map(|cells| {
                let current = screen
                    .nodes
                    .get(*n)
                    .is_some_and(|node| node.fresh.is_current());
                columns(
                    cells,
                    &node_widths,
                    if current { theme.value } else { theme.warn },
                )
            }),
            Line::Gpu(n, g) => screen.nodes.get(*n).and_then(|node| {
                let gpu = node.gpus.get(*g)?;
                let style = if gpu.fresh.is_current() && !gpu.reading.lost {
                    theme.dim
                } else {
                    theme.warn
                };
                Some(TextLine::from(Span::styled(
                    format!("    {}", gpu_line(gpu)),
                    style,
                )))
            }),
            Line::GpuDetail(n, g, k) => screen.nodes.get(*n).and_then(|node| {
                let gpu = node.gpus.get(*g)?;
                let text = gpu_detail_lines(gpu).into_iter().nth(*k)?;
                let style = if text.contains(crate::model::NA) {
                    theme.dim
                } else {
                    theme.value
                };
                Some(TextLine::from(Span::styled(
                    format!("        {text}"),
                    style,
                )))
            }),
        };
        let mut shown = shown.unwrap_or_default();
        if selected {
            shown = shown.patch_style(theme.selected);
        }
        text.push(shown);
    }
    frame.render_widget(Paragraph::new(text), body);
}

fn widths<'a, const N: usize>(
    headings: &[&str; N],
    rows: impl Iterator<Item = &'a [String; N]>,
) -> [usize; N] {
    let mut w = headings.map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in w.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    w
}

fn columns<'a, const N: usize>(
    cells: &[String; N],
    widths: &[usize; N],
    style: Style,
) -> TextLine<'a> {
    let mut text = String::new();
    for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
        if i > 0 {
            text.push_str("  ");
        }
        text.push_str(cell);
        if i + 1 < N {
            text.extend(std::iter::repeat_n(
                ' ',
                w.saturating_sub(cell.chars().count()),
            ));
        }
    }
    TextLine::from(Span::styled(text, style))
}
