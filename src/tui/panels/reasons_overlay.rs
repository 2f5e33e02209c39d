//! The `w` overlay: every reason a figure is missing, in full and wrapped, faults first, then
//! what the hardware or driver does not report. The status line has room for the faults only,
//! and cuts them; this is where each can be read whole. Up/Down scroll a list longer than the
//! screen (many refused channel files); any other key closes it.

use super::reasons::{self, Weight};
use super::{centered, command};
use crate::tui::view::View;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Clear;

/// Borders and padding around the text: two cells each side, one row above and below.
const FRAME_W: u16 = 4;
const FRAME_H: u16 = 2;

pub fn render(frame: &mut Frame, area: Rect, view: &View) {
    let theme = view.theme;
    let width = area.width.saturating_sub(4).min(100);
    let text_w = usize::from(width.saturating_sub(FRAME_W)).max(1);
    let lines = wrapped(view, text_w);
    let total = lines.len();
    // The last row says how to scroll or close; the rows above show the lines from the scroll.
    let rows = usize::from(area.height.saturating_sub(FRAME_H + 1));
    let first = view.ui.reasons_scroll.min(total.saturating_sub(rows));
    let mut shown: Vec<Line> = lines.into_iter().skip(first).take(rows).collect();
    let last = first + shown.len();
    shown.push(Line::styled(
        if first > 0 || last < total {
            format!(
                "lines {}-{last} of {total}; Up/Down scroll, other keys close",
                first + 1
            )
        } else {
            "any key closes".into()
        },
        theme.dim,
    ));
    let height = u16::try_from(shown.len())
        .unwrap_or(u16::MAX)
        .saturating_add(FRAME_H);
    let popup = centered(area, width, height);
    let block = super::overlay_block(theme, theme.border)
        .title(Line::styled(" Why figures are n/a ", theme.title));
    frame.render_widget(Clear, popup);
    let inner = block.inner(popup);
    frame.render_widget(block, popup);
    super::buffer_write::lines_in(frame.buffer_mut(), inner, &shown);
}

/// Every reason wrapped to `width`, under a heading for faults and one for facts; a
/// continued line is indented two cells.
fn wrapped(view: &View, width: usize) -> Vec<Line<'static>> {
    let theme = view.theme;
    let all = reasons::collect(view.snapshot, view.now_ms, false);
    let (faults, facts): (Vec<_>, Vec<_>) = all.iter().partition(|r| r.weight != Weight::Fact);
    let mut lines = Vec::new();
    if all.is_empty() {
        lines.push(Line::styled("every figure is readable", theme.value));
    }
    for (heading, group) in [
        ("problems", &faults),
        ("not reported by this hardware or driver", &facts),
    ] {
        if group.is_empty() {
            continue;
        }
        if !lines.is_empty() {
            lines.push(Line::default());
        }
        lines.push(Line::styled(heading, theme.label));
        for reason in group {
            let style = match reason.weight {
                Weight::Critical => theme.crit,
                Weight::Warning => theme.warn,
                Weight::Error => theme.status_error,
                Weight::Fact => theme.value,
            };
            let parts = command::wrap(
                &reason.text,
                width.saturating_sub(2),
                width.saturating_sub(4),
            );
            for (i, part) in parts.into_iter().enumerate() {
                let indent = if i == 0 { "  " } else { "    " };
                lines.push(Line::from(vec![
                    Span::raw(indent),
                    Span::styled(part, style),
                ]));
            }
        }
    }
    lines
}
