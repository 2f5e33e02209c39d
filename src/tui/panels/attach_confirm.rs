//! The attach (or detach) confirmation dialog: which process, whose, and what it costs.

use super::confirm_dialog;
use crate::tui::ui_state::AttachRequest;
use crate::tui::view::View;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

pub fn render(frame: &mut Frame, area: Rect, view: &View, request: &AttachRequest) {
    let theme = view.theme;
    let verb = if request.detach {
        "detach vramscope's writer from pid "
    } else {
        "attach vramscope's writer to pid "
    };
    let cost = if request.detach {
        "the writer stops and removes its channel; the program goes on"
    } else if request.stops {
        "its main thread stops for a few milliseconds (ptrace)"
    } else {
        "nothing stops: CPython 3.14's sys.remote_exec (PEP 768)"
    };
    let lines = vec![
        Line::from(vec![
            Span::styled(verb, theme.label),
            Span::styled(request.pid.to_string(), theme.value),
            Span::styled(" (user ", theme.label),
            Span::styled(request.user.clone(), theme.value),
            Span::styled(")", theme.label),
        ]),
        Line::styled(request.command.clone(), theme.value),
        Line::styled(cost, theme.label),
    ];
    let title = if request.detach {
        " Detach? "
    } else {
        " Attach? "
    };
    confirm_dialog(frame, area, theme, lines, (title, theme.warn));
}
