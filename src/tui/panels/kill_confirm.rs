//! The kill confirmation dialog: which signal goes to which process, and how to answer.

use super::confirm_dialog;
use crate::tui::ui_state::KillRequest;
use crate::tui::view::View;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

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
    ];
    confirm_dialog(frame, area, theme, lines, (" Kill process? ", theme.crit));
}
