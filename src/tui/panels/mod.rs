//! The screen's panels, one file each. Every panel is a pure function of the `View` (plus,
//! where it needs one, the item it draws): it reads, draws into its `Rect`, and changes nothing.
//! `tui::layout` decides where each goes.

pub mod allocator_breakdown;
pub mod allocator_detail;
pub mod allocator_pins;
pub mod attach_confirm;
pub mod buffer_write;
pub mod command;
pub mod detail;
pub mod gpu_compact;
pub mod gpu_panel;
pub mod gpu_tile;
pub mod header;
pub mod held_sites;
pub mod help;
pub mod host_line;
pub mod kill_confirm;
pub mod mig_lines;
pub mod nvml_problem;
pub mod own_scale;
pub mod panel_text;
pub mod process_table;
pub mod reasons;
pub mod reasons_overlay;
pub mod spark;
pub mod status_line;
pub mod time_axis;

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::widgets::{Block, Borders, Padding};

use crate::terminal_kit::theme::Theme;

/// The frame every overlay (detail, help, kill confirmation, reasons) is drawn in: the
/// theme's border glyphs in `style`, a cell of padding each side.
pub fn overlay_block(theme: &Theme, style: Style) -> Block<'static> {
    Block::new()
        .borders(Borders::ALL)
        .border_set(theme.glyphs.border)
        .border_style(style)
        .padding(Padding::horizontal(1))
}

/// A yes/no dialog (kill, attach, detach): `lines` say what would happen, then the one
/// answer line every confirmation shares; as wide as its longest line (40 to 100 cells),
/// centred, in an overlay frame of `style` titled `title`.
pub fn confirm_dialog(
    frame: &mut ratatui::Frame,
    area: Rect,
    theme: &Theme,
    mut lines: Vec<ratatui::text::Line<'static>>,
    (title, style): (&'static str, Style),
) {
    use ratatui::text::{Line, Span};
    use ratatui::widgets::{Clear, Paragraph};
    lines.push(Line::from(vec![
        Span::styled("y", theme.key),
        Span::styled(" to confirm, any other key cancels", theme.label),
    ]));
    let want_w = lines
        .iter()
        .map(Line::width)
        .max()
        .unwrap_or(0)
        .saturating_add(4)
        .clamp(40, 100);
    let popup = centered(area, u16::try_from(want_w).unwrap_or(100), 6);
    let block = overlay_block(theme, style).title(Line::styled(title, style));
    frame.render_widget(Clear, popup);
    frame.render_widget(Paragraph::new(lines).block(block), popup);
}

/// A `width` x `height` rectangle centred in `area`, shrunk to fit it.
pub fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let width = width.min(area.width);
    let height = height.min(area.height);
    Rect {
        x: area.x.saturating_add(area.width.saturating_sub(width) / 2),
        y: area
            .y
            .saturating_add(area.height.saturating_sub(height) / 2),
        width,
        height,
    }
}
