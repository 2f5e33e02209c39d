//! Writing lines of text straight into the buffer, for the panels drawn every frame.
//!
//! ratatui's `Paragraph` and `Buffer::set_line` split every string into grapheme clusters
//! and look up each one's width; almost everything on our screen is ASCII, where a byte is
//! a cell, or bar, sparkline and border glyphs known to be one cell each (`terminal_kit::narrow`).
//! These writers take that shortcut for such spans and hand anything else to ratatui, so the
//! cells come out exactly as `Paragraph` would leave them, at a fraction of the cost (the
//! process table and GPU lines were a third of a frame's CPU).

use crate::terminal_kit::narrow::known_narrow;
use ratatui::buffer::{Buffer, CellWidth};
use ratatui::layout::{Alignment, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

/// Writes `spans` at (x, y), each patched over `base`, at most `max_width` cells, like
/// `Buffer::set_line`; returns the x after the last cell written.
fn spans_at<'a, 'b: 'a>(
    buf: &mut Buffer,
    x: u16,
    y: u16,
    spans: impl IntoIterator<Item = &'a Span<'b>>,
    base: Style,
    max_width: u16,
) -> u16 {
    let end = x.saturating_add(max_width).min(buf.area.right());
    let mut x = x;
    if y < buf.area.top() || y >= buf.area.bottom() || x < buf.area.left() {
        return x;
    }
    for span in spans {
        if x >= end {
            break;
        }
        let style = base.patch(span.style);
        if span.content.is_ascii() {
            // Control characters are dropped, as ratatui does: a command line must never be
            // able to write escape sequences to the terminal.
            let bytes = span.content.bytes().filter(|b| !b.is_ascii_control());
            x = one_cell_each(buf, x, y, end, bytes.map(char::from), style);
        } else if let Some(chars) = narrow_chars(&span.content) {
            // Bars and sparklines: the same one cell per character, without ratatui's
            // grapheme split and width lookup.
            x = one_cell_each(buf, x, y, end, chars, style);
        } else {
            x = buf
                .set_stringn(x, y, &span.content, usize::from(end - x), style)
                .0;
        }
    }
    x
}

/// Writes `chars` one per cell from (x, y), stopping at `end`; returns the x after the last.
/// The row's cells as one slice: indexing the buffer by position for each cell recomputed and
/// bounds-checked the index every time. (x, y) must lie in the buffer, `end` at most its right.
fn one_cell_each(
    buf: &mut Buffer,
    x: u16,
    y: u16,
    end: u16,
    chars: impl Iterator<Item = char>,
    style: Style,
) -> u16 {
    let area = buf.area;
    let first = usize::from(y - area.y) * usize::from(area.width) + usize::from(x - area.x);
    let cells = &mut buf.content[first..first + usize::from(end - x)];
    let mut written = 0;
    for (cell, c) in cells.iter_mut().zip(chars) {
        cell.set_char(c).set_style(style);
        written += 1;
    }
    x + written
}

/// The cells `spans_at` fills with `span` given room: one per character, controls dropped,
/// for ASCII and known-narrow text, counted without a width lookup per character (layouts
/// ask for every figure of every frame); else what `set_stringn` writes, grapheme by
/// grapheme, those holding a control dropped (`Span::width` counts controls as one cell).
pub fn cells(span: &Span) -> usize {
    let text: &str = &span.content;
    if text.is_ascii() {
        return text.bytes().filter(|b| !b.is_ascii_control()).count();
    }
    match narrow_chars(text) {
        Some(chars) => chars.count(),
        None => span
            .styled_graphemes(Style::new())
            .map(|g| usize::from(g.symbol.cell_width()))
            .sum(),
    }
}

/// The characters of `text` when each is one cell (see `known_narrow`), controls dropped as
/// ratatui drops them; `None` when any needs ratatui's own rules.
fn narrow_chars(text: &str) -> Option<impl Iterator<Item = char> + '_> {
    let all_narrow = text
        .char_indices()
        .all(|(at, c)| c.is_control() || known_narrow(&text.as_bytes()[at..at + c.len_utf8()]));
    all_narrow.then(|| text.chars().filter(|c| !c.is_control()))
}

/// Draws `line` in the one-row `area` with its alignment, like a one-line `Paragraph` (whose
/// area style is the default, so only the line's own styles land).
pub fn line_in(buf: &mut Buffer, area: Rect, line: &Line) {
    aligned(buf, area, line, |buf, area, line| {
        Paragraph::new(line.clone()).render(area, buf)
    });
}

/// Draws `line` in a one-row table cell: like `line_in`, except that a right-aligned figure
/// too wide for its column loses its start, keeping its end (the unit) readable.
pub fn cell_in(buf: &mut Buffer, area: Rect, line: &Line) {
    aligned(buf, area, line, |buf, area, line| line.render(area, buf));
}

/// The alignment both share; `rare` draws what the fast path doesn't handle (centred lines,
/// right-aligned ones too wide for the area).
fn aligned(buf: &mut Buffer, area: Rect, line: &Line, rare: impl FnOnce(&mut Buffer, Rect, &Line)) {
    let right = match line.alignment {
        None | Some(Alignment::Left) => false,
        Some(Alignment::Right) => true,
        Some(Alignment::Center) => {
            if !area.is_empty() {
                rare(buf, Rect { height: 1, ..area }, line);
            }
            return;
        }
    };
    if !spans_fit(buf, area, &line.spans, line.style, right) {
        rare(buf, Rect { height: 1, ..area }, line);
    }
}

/// The fast path of a one-row cell: `spans` over `base` from the left of `area` (cut at its
/// end), or against its right when they fit. False, with nothing drawn, for right-aligned
/// spans too wide for the area: the caller draws those as a `Line` (see `cell_in`).
pub fn spans_fit<'a, 'b: 'a, I>(
    buf: &mut Buffer,
    area: Rect,
    spans: I,
    base: Style,
    right: bool,
) -> bool
where
    I: IntoIterator<Item = &'a Span<'b>>,
    I::IntoIter: Clone,
{
    if area.is_empty() {
        return true;
    }
    let spans = spans.into_iter();
    if !right {
        spans_at(buf, area.x, area.y, spans, base, area.width);
        return true;
    }
    let width = spans.clone().map(cells).sum::<usize>();
    match u16::try_from(width) {
        Ok(width) if width <= area.width => {
            spans_at(buf, area.right() - width, area.y, spans, base, width);
            true
        }
        _ => false,
    }
}

/// Draws `lines` one per row from the top of `area`, like a `Paragraph` without wrapping.
pub fn lines_in(buf: &mut Buffer, area: Rect, lines: &[Line]) {
    for (row, line) in area.rows().zip(lines) {
        line_in(buf, row, line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::style::{Color, Style};
    use ratatui::text::Span;

    /// The same lines through ratatui's Paragraph and through our writer.
    fn both(lines: Vec<Line<'static>>, width: u16) -> (Buffer, Buffer) {
        let area = Rect::new(0, 0, width, lines.len() as u16);
        let mut theirs = Buffer::empty(area);
        Paragraph::new(lines.clone()).render(area, &mut theirs);
        let mut ours = Buffer::empty(area);
        lines_in(&mut ours, area, &lines);
        (theirs, ours)
    }

    #[test]
    fn matches_paragraph_cell_for_cell() {
        let red = Style::new().fg(Color::Red);
        let lines = vec![
            Line::from(vec![Span::styled("GPU ", red), Span::raw("0 ▕██░░▏ 40°C")]),
            Line::from("a line far too long for the area it is drawn in"),
            Line::from(vec![Span::raw("tab\there"), Span::raw("\u{1b}[31mesc")]).style(red),
            Line::from("right").right_aligned(),
            Line::from("much too wide to sit right").right_aligned(),
            Line::from("中文 wide glyphs"),
            Line::from(vec![
                Span::raw("╭─⣿\u{85}▁▂ 41°C"),
                Span::styled("▕█░▏", red),
            ]),
            Line::from("e\u{301} combines, ░ does not"),
            Line::from("centred").centered(),
            Line::from("a\t世").right_aligned(),
        ];
        let (theirs, ours) = both(lines, 20);
        assert_eq!(theirs, ours);
    }

    #[test]
    fn cells_counts_what_spans_at_writes() {
        for text in [
            "GPU 0",
            "▕██░░▏ 41°C",
            "中文",
            "e\u{301}x",
            "tab\there",
            "\u{85}⣿",
            "a\t世",
            "",
        ] {
            let span = Span::raw(text);
            let mut buf = Buffer::empty(Rect::new(0, 0, 20, 1));
            let end = spans_at(&mut buf, 0, 0, [&span], Style::new(), 20);
            assert_eq!(cells(&span), usize::from(end), "{text:?}");
        }
        assert_eq!(
            cells(&Span::raw("▕██░░▏ 41°C")),
            Span::raw("▕██░░▏ 41°C").width()
        );
    }

    #[test]
    fn an_overwide_table_figure_keeps_its_end() {
        let area = Rect::new(0, 0, 6, 1);
        let figure = Line::from("12.50 GiB").right_aligned();
        let mut cell = Buffer::empty(area);
        cell_in(&mut cell, area, &figure);
        assert_eq!(cell, Buffer::with_lines(["50 GiB"]));
        let mut paragraph = Buffer::empty(area);
        line_in(&mut paragraph, area, &figure);
        assert_eq!(paragraph, Buffer::with_lines(["12.50 "]));
    }

    #[test]
    fn nothing_lands_outside_the_buffer() {
        let mut buf = Buffer::empty(Rect::new(0, 0, 4, 1));
        let (abcdef, abc) = (Span::raw("abcdef"), Span::raw("abc"));
        assert_eq!(spans_at(&mut buf, 2, 0, [&abcdef], Style::new(), 10), 4);
        assert_eq!(spans_at(&mut buf, 0, 5, [&abc], Style::new(), 10), 0);
        line_in(&mut buf, Rect::new(0, 0, 0, 0), &Line::from("x"));
        assert_eq!(buf[(2, 0)].symbol(), "a");
        assert_eq!(buf[(3, 0)].symbol(), "b");
    }
}
