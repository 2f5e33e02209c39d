//! The cluster screen's help: its keys and what its marks mean.

use super::state::Ui;
use crate::terminal_kit::theme::Theme;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

const KEYS: [(&str, &str); 13] = [
    ("q, Ctrl-C", "quit"),
    ("?, h, F1", "this help (any key closes it)"),
    ("v, Tab", "switch between the job view and the node view"),
    (
        "Up/Down, j/k",
        "select a rank or node (the charts below follow its job or node)",
    ),
    ("PgUp/PgDn, Home/End", "select further"),
    (
        "Enter",
        "open or close the selected node: each GPU's temperature, power, clocks, processes",
    ),
    (
        "/",
        "filter: words matched within job, node and target; rank:N and gpu:N match exactly",
    ),
    ("Esc", "clear the filter"),
    (
        "s",
        "sort ranks by: risk, rank, node, alloc, peak, peak growth, step",
    ),
    ("S", "reverse the order"),
    ("space", "pause the screen (reading goes on)"),
    ("Ctrl-L", "redraw the whole screen"),
    ("Ctrl-Z", "suspend"),
];

const MARKS: [(&str, &str); 8] = [
    (
        "nearest OOM",
        "the rank whose steps-to-OOM forecast is the smallest in its job",
    ),
    (
        "fastest growth",
        "the rank whose peak grew fastest over the last minutes",
    ),
    ("straggler -N", "N steps behind the job's median step"),
    (
        "STEP 92+a",
        "92 steps since vramscope attach (the job kept no count): not in the median",
    ),
    (
        "STALE age: why",
        "figures not current: their source stopped answering, or its exporter stopped sampling",
    ),
    (
        "missing since T",
        "the source answers but no longer lists it; last figures shown",
    ),
    ("n/a", "no exporter gives this figure (never shown as 0)"),
    (
        "n/a: none read since T",
        "a chart's value when its last refresh did not read all of its ranks or GPUs",
    ),
];

pub fn draw(frame: &mut Frame, area: Rect, ui: &Ui, theme: &Theme) {
    let mut lines = vec![Line::from(Span::styled("Keys", theme.title))];
    for (key, what) in KEYS {
        lines.push(Line::from(vec![
            Span::styled(format!("  {key:<22}"), theme.key),
            Span::styled(what, theme.value),
        ]));
    }
    lines.push(Line::default());
    lines.push(Line::from(Span::styled("Marks", theme.title)));
    for (mark, what) in MARKS {
        lines.push(Line::from(vec![
            Span::styled(format!("  {mark:<22}"), theme.label),
            Span::styled(what, theme.value),
        ]));
    }
    let block = Block::default()
        .borders(Borders::ALL)
        .border_set(theme.glyphs.border)
        .border_style(theme.border)
        .title(Span::styled(" vramscope cluster: help ", theme.title));
    frame.render_widget(
        Paragraph::new(lines)
            .block(block)
            .scroll((ui.help_scroll, 0)),
        area,
    );
}
