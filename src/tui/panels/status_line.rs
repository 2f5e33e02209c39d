//! The bottom line. While the filter is being typed it is the filter prompt; otherwise it shows
//! the one-off message if there is one, else what could not be read and why (faults only: what
//! the hardware lacks is listed by `w`), with a key hint on the right. A message too long to
//! sit beside the hint takes the whole line, and one longer than the line is cut with a mark.

use super::reasons::{self, Reason, Weight};
use super::{buffer_write, command};
use crate::tui::ui_state::Mode;
use crate::tui::view::View;
use ratatui::Frame;
use ratatui::layout::{Position, Rect};
use ratatui::text::{Line, Span};

/// Where the terminal's cursor goes: after the typed filter, else nowhere (hidden).
pub fn render(frame: &mut Frame, area: Rect, view: &View) -> Option<Position> {
    if area.width == 0 || area.height == 0 {
        return None;
    }
    if view.ui.mode == Mode::Filter {
        return Some(render_prompt(frame, area, view));
    }
    let theme = view.theme;
    let mut hint = Line::from(vec![
        Span::styled("?", theme.key),
        Span::styled(" help  ", theme.label),
        Span::styled("q", theme.key),
        Span::styled(" quit", theme.label),
    ]);
    let reasons = reasons::collect(view.snapshot, view.now_ms, true);
    if !reasons.is_empty() {
        hint.spans.splice(
            0..0,
            [
                Span::styled("w", theme.key),
                Span::styled(" why n/a  ", theme.label),
            ],
        );
    }
    let hint_w = u16::try_from(hint.width()).unwrap_or(u16::MAX);
    // A one-off message answers the key just pressed: it takes the hint's room rather than
    // lose its end, and what still does not fit is cut with the theme's mark.
    let flash_w = view
        .ui
        .flash
        .as_deref()
        .map_or(0, |m| u16::try_from(command::cells(m)).unwrap_or(u16::MAX));
    let hint_fits =
        area.width > hint_w.saturating_mul(3) && flash_w <= area.width.saturating_sub(hint_w + 1);
    let left_area = if hint_fits {
        buffer_write::line_in(frame.buffer_mut(), area, &hint.right_aligned());
        Rect {
            width: area.width.saturating_sub(hint_w + 1),
            ..area
        }
    } else {
        area
    };
    let left = match &view.ui.flash {
        Some(message) => {
            let width = usize::from(left_area.width);
            let shown =
                command::cut(message, width, theme.glyphs.cut).unwrap_or_else(|| message.clone());
            Line::styled(shown, theme.warn)
        }
        None => problems_line(view, &reasons, usize::from(left_area.width)),
    };
    buffer_write::line_in(frame.buffer_mut(), left_area, &left);
    None
}

/// `/text` and how to leave the prompt; returns where the cursor goes, after the text.
fn render_prompt(frame: &mut Frame, area: Rect, view: &View) -> Position {
    let theme = view.theme;
    let typed = Line::from(vec![
        Span::styled("/", theme.key),
        Span::styled(view.ui.filter.clone(), theme.value),
    ]);
    let typed_w = u16::try_from(typed.width()).unwrap_or(u16::MAX);
    let mut spans = typed.spans;
    spans.push(Span::styled(
        "   Enter keeps the filter, Esc clears it",
        theme.dim,
    ));
    buffer_write::line_in(frame.buffer_mut(), area, &Line::from(spans));
    let x = area
        .x
        .saturating_add(typed_w.min(area.width.saturating_sub(1)));
    Position::new(x, area.y)
}

/// The faults, `; ` between them, in the `width` cells left of the hint. When they do not
/// all fit, the last one shown is cut with the theme's mark and the line ends with how to see
/// every one in full (`w: all 5`). Facts of the hardware ("not supported") are not shown:
/// they are not problems, and `w` lists them.
fn problems_line(view: &View, reasons: &[Reason], width: usize) -> Line<'static> {
    let theme = view.theme;
    let faults: Vec<&Reason> = reasons
        .iter()
        .filter(|r| r.weight != Weight::Fact)
        .collect();
    if faults.is_empty() {
        if view.snapshot.devices.is_empty() {
            return Line::default();
        }
        let text = if reasons.is_empty() {
            "all figures readable"
        } else {
            "all supported figures readable"
        };
        return Line::styled(text, theme.dim);
    }
    let tail = match faults.len() {
        1 => " (w: in full)".to_string(),
        n => format!(" (w: all {n})"),
    };
    let tail_w = command::cells(&tail);
    let mut spans: Vec<Span> = Vec::new();
    let mut used = 0;
    for (i, reason) in faults.iter().enumerate() {
        let separator = if i == 0 { "" } else { "; " };
        let style = match reason.weight {
            Weight::Critical => theme.crit,
            Weight::Warning => theme.warn,
            Weight::Error | Weight::Fact => theme.status_error,
        };
        let text_w = separator.len() + command::cells(&reason.text);
        let last = i + 1 == faults.len();
        // The last fault needs no room for the tail after it.
        let room = width.saturating_sub(used + if last { 0 } else { tail_w });
        if text_w <= room {
            spans.push(Span::styled(separator, theme.dim));
            spans.push(Span::styled(reason.text.clone(), style));
            used += text_w;
            continue;
        }
        let room = width.saturating_sub(used + tail_w + separator.len());
        if let Some(cut) = command::cut(&reason.text, room, theme.glyphs.cut).filter(|_| room >= 8)
        {
            spans.push(Span::styled(separator, theme.dim));
            spans.push(Span::styled(cut, style));
        }
        spans.push(Span::styled(tail, theme.key));
        break;
    }
    Line::from(spans)
}
