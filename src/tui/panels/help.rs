//! The help overlay: every key and what it does, then what the screen's labels mean. `KEYS`
//! is the one list; the key handler's bindings and this table must agree. It scrolls when
//! the terminal is shorter than the text.

use super::centered;
use crate::tui::ui_state::UiState;
use crate::tui::view::View;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

/// Key names and what they do, in the order shown.
pub const KEYS: &[(&str, &str)] = &[
    ("Up / Down", "move the selection"),
    ("PgUp / PgDn", "move ten rows"),
    ("Home / End", "first / last process"),
    (
        "Enter",
        "details of the selected process (Enter/Esc closes)",
    ),
    ("/", "filter: pid user command container pod gpu:N"),
    ("Esc", "close an overlay, clear the filter"),
    ("s / S", "next sort column / reverse the order"),
    (
        "x",
        "every column (a page at a time if too wide) / the chosen ones",
    ),
    ("b", "group the processes by GPU / one list"),
    ("Space", "pause the view (sampling goes on)"),
    ("r", "reset peaks"),
    ("+ / -", "refresh more / less often"),
    ("z / Z", "zoom the charts' time window in / out"),
    (
        "a",
        "attach the writer to the selected process (again: detach)",
    ),
    ("k", "send SIGTERM to the selected process"),
    ("K", "send SIGKILL to the selected process"),
    (
        "m",
        "ask the selected process for a memory snapshot (--sites)",
    ),
    ("w", "why figures are n/a: every reason in full"),
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

/// What the screen's terse labels mean, for the part of the help after the keys.
pub const LEGEND: &[(&str, &str)] = &[
    ("%", "after a GPU's memory: share of its total in use"),
    (
        "max of 5m",
        "highest point in the chart's window (its span, 5 minutes here)",
    ),
    (
        "all-time",
        "highest since vramscope started or r reset peaks",
    ),
    (
        "pk 63G 2m",
        "one-line GPUs: the all-time peak and how long ago",
    ),
    (
        "PEAK",
        "a process's highest VRAM since it was first seen or r reset peaks",
    ),
    ("SM%", "share of the GPU's time the process ran kernels"),
    ("RSS / CPU%", "the process's host memory and CPU use"),
    (
        "ALLOC / RESV",
        "allocator figures: allocated and reserved by the framework",
    ),
    (
        "STEP 92+a",
        "92 steps since vramscope attach: the job kept no step count",
    ),
    (
        "rows a-b of n",
        "which rows the table shows; per GPU: processes on it",
    ),
    (
        "gpu:3",
        "in the filter: only rows on GPU 3 (with text: both must match)",
    ),
];

/// Width of the key column.
const KEY_W: usize = 14;

/// Borders and padding around the text.
const FRAME_W: usize = 4;

/// Keys that do nothing in this state are not listed: a recording's cursor takes Space and
/// `+`/`-`, and neither a recording nor `--read-only` signals, attaches to or asks a snapshot
/// of a process.
fn entries(ui: &UiState) -> Vec<&'static (&'static str, &'static str)> {
    let cursor: &'static [(&str, &str)] = if ui.time_cursor { CURSOR_KEYS } else { &[] };
    let live = KEYS.iter().filter(|(key, _)| {
        let replaced = ui.time_cursor && matches!(*key, "Space" | "+ / -");
        let no_signals = (ui.time_cursor || ui.read_only) && matches!(*key, "k" | "K" | "a" | "m");
        !replaced && !no_signals
    });
    cursor.iter().chain(live).collect()
}

/// The help's lines for a text column `width` cells wide: keys, notes and the legend, long
/// descriptions wrapped under their own column rather than cut.
pub fn lines(view: &View, width: usize) -> Vec<Line<'static>> {
    let theme = view.theme;
    let what_w = width.saturating_sub(KEY_W).max(12);
    let entry = |key: &str, what: &str, key_style| -> Vec<Line<'static>> {
        wrap(what, what_w)
            .into_iter()
            .enumerate()
            .map(|(i, part)| {
                let key = if i == 0 { key } else { "" };
                Line::from(vec![
                    Span::styled(format!("{key:<KEY_W$}"), key_style),
                    Span::styled(part, theme.value),
                ])
            })
            .collect()
    };
    let mut lines: Vec<Line> = entries(view.ui)
        .into_iter()
        .flat_map(|(key, what)| entry(key, what, theme.key))
        .collect();
    lines.push(Line::default());
    let notes = [
        format!(
            "PID{} : not visible from this pid namespace.",
            theme.glyphs.hidden_pid
        ),
        "n/a : figure unreadable (w lists why; faults show on the status line); a process \
         first seen has user and command n/a until the host pass has read it."
            .to_string(),
    ];
    for note in notes {
        lines.extend(
            wrap(&note, width)
                .into_iter()
                .map(|l| Line::styled(l, theme.dim)),
        );
    }
    let warning = if view.ui.time_cursor {
        Some("replay: k and K send no signals (recorded pids are not live processes)")
    } else if view.ui.read_only {
        Some("read-only: k and K are disabled")
    } else {
        None
    };
    if let Some(warning) = warning {
        lines.extend(
            wrap(warning, width)
                .into_iter()
                .map(|l| Line::styled(l, theme.warn)),
        );
    }
    lines.push(Line::default());
    lines.push(Line::styled("What the labels mean", theme.title));
    lines.extend(
        LEGEND
            .iter()
            .flat_map(|(label, what)| entry(label, what, theme.label)),
    );
    lines
}

/// Words of `text` in lines of at most `width` characters; a word longer than a line is cut.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut out: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let word: String = word.chars().take(width).collect();
        let used = line.chars().count();
        if used > 0 && used + 1 + word.chars().count() > width {
            out.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&word);
    }
    out.push(line);
    out
}

pub fn render(frame: &mut Frame, area: Rect, view: &View) {
    let theme = view.theme;
    let widest = lines(view, usize::MAX / 2)
        .iter()
        .map(Line::width)
        .max()
        .unwrap_or(0);
    let text_w = widest.min(usize::from(area.width).saturating_sub(FRAME_W));
    let lines = lines(view, text_w);
    let popup = centered(
        area,
        u16::try_from(text_w + FRAME_W).unwrap_or(u16::MAX),
        u16::try_from(lines.len() + 2).unwrap_or(u16::MAX),
    );
    let shown = usize::from(popup.height.saturating_sub(2));
    let last_start = lines.len().saturating_sub(shown);
    // Keys stop scrolling at the end the last frame had (it depends on the terminal's size).
    view.ui.help_scroll_end.set(last_start);
    let from = view.ui.help_scroll.min(last_start);
    let mut block = super::overlay_block(theme, theme.title).title(Line::styled(
        if last_start > 0 {
            " vramscope keys (any other key closes) "
        } else {
            " vramscope keys (any key closes) "
        },
        theme.title,
    ));
    if last_start > 0 {
        let to = (from + shown).min(lines.len());
        block = block.title_bottom(
            Line::styled(
                format!(" {}-{to} of {}, Up/Down scroll ", from + 1, lines.len()),
                theme.title,
            )
            .right_aligned(),
        );
    }
    let visible: Vec<Line> = lines.into_iter().skip(from).take(shown).collect();
    frame.render_widget(Clear, popup);
    frame.render_widget(Paragraph::new(visible).block(block), popup);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys_listed(ui: &UiState) -> Vec<&'static str> {
        entries(ui).iter().map(|(key, _)| *key).collect()
    }

    #[test]
    fn read_only_lists_no_key_that_reaches_into_a_process() {
        let live = keys_listed(&UiState::new(false, false));
        for key in ["k", "K", "a", "m"] {
            assert!(live.contains(&key), "{key} is listed live: {live:?}");
        }
        let read_only = keys_listed(&UiState::new(false, true));
        for key in ["k", "K", "a", "m"] {
            assert!(
                !read_only.contains(&key),
                "{key} under --read-only: {read_only:?}"
            );
        }
        assert!(
            read_only.contains(&"s / S"),
            "the rest stays: {read_only:?}"
        );
    }
}
