//! The kill confirmation dialog: which signal goes to which process, and how to answer.

use super::centered;
use crate::tui::ui_state::KillRequest;
use crate::tui::view::View;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

pub fn render(frame: &mut Frame, area: Rect, view: &View, request: &KillRequest) {
    let theme = view.theme;
    let lines = vec![
        Line::from(vec![
            Span::styled("send ", theme.label),
            Span::styled(request.signal.name(), theme.crit),
            Span::styled(" to pid ", theme.label),
            Span::styled(request.pid.to_string(), theme.value),
            Span::styled(" (user ", theme.label),
            Span::styled(request.user.clone(), theme.value),
            Span::styled(")", theme.label),
        ]),
        Line::styled(request.command.clone(), theme.value),
        Line::default(),
        Line::from(vec![
            Span::styled("y", theme.key),
            Span::styled(" to confirm, any other key cancels", theme.label),
        ]),
    ];
    let want_w = lines
        .iter()
        .map(Line::width)
        .max()
        .unwrap_or(0)
        .saturating_add(4)
        .clamp(40, 100);
    let popup = centered(area, u16::try_from(want_w).unwrap_or(100), 6);
    let block =
        super::overlay_block(theme, theme.crit).title(Line::styled(" Kill process? ", theme.crit));
    frame.render_widget(Clear, popup);
    frame.render_widget(Paragraph::new(lines).block(block), popup);
}
