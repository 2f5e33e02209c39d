//! What the GPU area shows when NVML cannot be used at all: the cause and what to do about it,
//! prominently, while the host line and the rest of the screen stay live below.

use crate::model::NvmlProblem;
use crate::tui::view::View;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

/// Rows the panel wants: borders, cause, hint and a note.
pub const HEIGHT: u16 = 5;

pub fn render(frame: &mut Frame, area: Rect, view: &View, problem: &NvmlProblem) {
    let theme = view.theme;
    let lines = vec![
        Line::styled(problem.cause(), theme.crit),
        Line::from(vec![
            Span::styled("hint: ", theme.label),
            Span::styled(problem.hint(), theme.warn),
        ]),
        Line::from(vec![
            Span::styled(
                "GPU figures are unavailable; host memory is still sampled. Press ",
                theme.dim,
            ),
            Span::styled("d", theme.key),
            Span::styled(
                " to see what vramscope shows, on a simulated run.",
                theme.dim,
            ),
        ]),
    ];
    // Below three rows a border would eat the message: say it bare.
    if area.height < 3 {
        frame.render_widget(Paragraph::new(lines), area);
        return;
    }
    let block = Block::new()
        .borders(Borders::ALL)
        .border_set(theme.glyphs.border)
        .border_style(theme.crit)
        .title(Line::styled(" NVML unavailable ", theme.crit));
    frame.render_widget(
        Paragraph::new(lines).block(block).wrap(Wrap { trim: true }),
        area,
    );
}
