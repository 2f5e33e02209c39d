//! The host line: `host RAM 12.3/62.8 GiB (avail 48.0 GiB)  swap 0 B/2.00 GiB  CPU 23%  load
//! 1.20 0.80 0.50`, and on the right the active process filter. Shown with or without a GPU.

use super::buffer_write;
use super::panel_text;
use crate::model::units;
use crate::tui::view::View;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

pub fn render(frame: &mut Frame, area: Rect, view: &View) {
    let theme = view.theme;
    let mut spans = vec![Span::styled("host RAM ", theme.label)];
    match &view.snapshot.host_memory {
        Some(Ok(m)) => {
            let pct = if m.total > 0 {
                m.used as f64 * 100.0 / m.total as f64
            } else {
                0.0
            };
            spans.push(Span::styled(
                units::bytes_pair(m.used, m.total),
                theme.level(pct),
            ));
            spans.push(Span::styled(" (avail ", theme.label));
            spans.push(Span::styled(units::bytes(m.available), theme.value));
            spans.push(Span::styled(")  swap ", theme.label));
            if m.swap_total > 0 {
                spans.push(Span::styled(
                    format!(
                        "{}/{}",
                        units::bytes(m.swap_used),
                        units::bytes(m.swap_total)
                    ),
                    theme.value,
                ));
            } else {
                spans.push(Span::styled("none", theme.dim));
            }
        }
        Some(Err(absent)) => {
            spans.push(Span::styled(
                format!("{} ({absent})", panel_text::NA),
                theme.status_error,
            ));
        }
        None => spans.push(Span::styled(
            format!("{} (no sample yet)", panel_text::NA),
            theme.dim,
        )),
    }
    if let Some(load) = &view.snapshot.host_load {
        spans.push(Span::styled("  CPU ", theme.label));
        spans.push(match load.cpu_percent {
            Some(pct) => Span::styled(
                panel_text::percent(f64::from(pct)),
                theme.level(f64::from(pct)),
            ),
            // A share needs two passes: the first has none yet.
            None => Span::styled(panel_text::NA, theme.dim),
        });
        let [one, five, fifteen] = load.load_average;
        spans.push(Span::styled("  load ", theme.label));
        spans.push(Span::styled(
            format!("{one:.2} {five:.2} {fifteen:.2}"),
            theme.value,
        ));
    }
    let left = Line::from(spans);
    if !view.ui.filter.is_empty() {
        let filter = Line::from(vec![
            Span::styled("filter ", theme.label),
            Span::styled(format!("\"{}\"", view.ui.filter), theme.warn),
        ]);
        if left.width() + filter.width() < usize::from(area.width) {
            buffer_write::line_in(frame.buffer_mut(), area, &filter.right_aligned());
        }
    }
    buffer_write::line_in(frame.buffer_mut(), area, &left);
}
