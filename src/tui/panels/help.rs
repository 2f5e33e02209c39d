//! The help overlay: every key and what it does. `KEYS` is the one list; the key handler's
//! bindings and this table must agree.

use super::centered;
use crate::tui::view::View;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Padding, Paragraph};

/// Key names and what they do, in the order shown.
pub const KEYS: &[(&str, &str)] = &[
    ("Up / Down", "move the selection"),
    ("PgUp / PgDn", "move ten rows"),
    ("Home / End", "first / last process"),
    (
        "Enter",
        "details of the selected process (Enter/Esc closes)",
    ),
    ("/", "filter by pid, user, command or container"),
    ("Esc", "close an overlay, clear the filter"),
    ("s / S", "next sort column / reverse the order"),
    ("Space", "pause the view (sampling goes on)"),
    ("r", "reset peaks"),
    ("+ / -", "refresh more / less often"),
    ("z / Z", "zoom the charts' time window in / out"),
    ("k", "send SIGTERM to the selected process"),
    ("K", "send SIGKILL to the selected process"),
    ("Ctrl-L", "repaint the screen"),
    ("Ctrl-Z", "suspend"),
    ("? / F1", "this help"),
    ("q / Ctrl-C", "quit"),
];

/// The time cursor's keys, shown when the data is a recording (`vramscope replay`, `demo`).
pub const CURSOR_KEYS: &[(&str, &str)] = &[
    ("Space", "play / pause"),
    ("+ / -", "faster / slower"),
    ("Left / Right", "10 s back / forward"),
    (", / .", "one sample back / forward"),
    ("p", "jump to the largest peak"),
    ("o", "jump to the next OOM"),
    ("n / N", "jump to the next / previous event"),
    ("g / G", "jump to the start / end"),
];

/// Width of the key column.
const KEY_W: usize = 14;

pub fn render(frame: &mut Frame, area: Rect, view: &View) {
    let theme = view.theme;
    let cursor: &[(&str, &str)] = if view.ui.time_cursor {
        CURSOR_KEYS
    } else {
        &[]
    };
    // The cursor's bindings replace the live ones they share keys with; a recording's
    // processes are never signalled.
    let live = KEYS
        .iter()
        .filter(|(key, _)| !view.ui.time_cursor || !matches!(*key, "Space" | "+ / -" | "k" | "K"));
    let entries: Vec<&(&str, &str)> = cursor.iter().chain(live).collect();
    let entry = |(key, what): &(&str, &str)| {
        vec![
            Span::styled(format!("{key:<KEY_W$}"), theme.key),
            Span::styled(what.to_string(), theme.value),
        ]
    };
    // Five lines go to borders and notes; when the keys do not fit one per line (the replay
    // keys at 80x24), they go two to a line, the second column after the widest first one.
    let one_column = entries.len() + 5 <= usize::from(area.height);
    let mut lines: Vec<Line> = if one_column {
        entries.iter().map(|e| Line::from(entry(e))).collect()
    } else {
        let half = entries.len().div_ceil(2);
        let (left, right) = entries.split_at(half);
        // Borders, padding and a two-cell gap; descriptions are cut to their column.
        let column = usize::from(area.width).saturating_sub(8) / 2;
        let cut = |(key, what): &(&str, &str)| {
            let what: String = what.chars().take(column.saturating_sub(KEY_W)).collect();
            vec![
                Span::styled(format!("{key:<KEY_W$}"), theme.key),
                Span::styled(
                    format!("{what:<w$}", w = column.saturating_sub(KEY_W)),
                    theme.value,
                ),
            ]
        };
        left.iter()
            .enumerate()
            .map(|(i, e)| {
                let mut spans = cut(e);
                if let Some(r) = right.get(i) {
                    spans.push(Span::raw("  "));
                    spans.extend(cut(r));
                }
                Line::from(spans)
            })
            .collect()
    };
    lines.push(Line::default());
    lines.push(Line::styled(
        format!(
            "PID{} : not visible from this pid namespace.  n/a : figure unreadable",
            theme.glyphs.hidden_pid
        ),
        theme.dim,
    ));
    if view.ui.time_cursor {
        lines.push(Line::styled(
            "replay: k and K send no signals (recorded pids are not live processes)",
            theme.warn,
        ));
    } else if view.ui.read_only {
        lines.push(Line::styled("read-only: k and K are disabled", theme.warn));
    }
    let width = lines
        .iter()
        .map(Line::width)
        .max()
        .unwrap_or(0)
        .saturating_add(4);
    let height = lines.len().saturating_add(2);
    let popup = centered(
        area,
        u16::try_from(width).unwrap_or(u16::MAX),
        u16::try_from(height).unwrap_or(u16::MAX),
    );
    let block = Block::new()
        .borders(Borders::ALL)
        .border_set(theme.glyphs.border)
        .border_style(theme.title)
        .padding(Padding::horizontal(1))
        .title(Line::styled(
            " vramscope keys (any key closes) ",
            theme.title,
        ));
    frame.render_widget(Clear, popup);
    frame.render_widget(Paragraph::new(lines).block(block), popup);
}
