//! The top line: program name, PAUSED and read-only markers, driver and CUDA versions, refresh
//! interval, the host the data comes from and the time the screen shows.

use super::buffer_write;
use super::panel_text;
use crate::terminal_kit::clock;
use crate::tui::view::View;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

pub fn render(frame: &mut Frame, area: Rect, view: &View) {
    let theme = view.theme;
    let mut left = vec![Span::styled("vramscope", theme.title)];
    // The markers come first so that a narrow terminal still shows them.
    if view.ui.frozen.is_some() {
        left.push(Span::raw(" "));
        left.push(Span::styled(" PAUSED ", theme.paused));
    }
    if view.ui.read_only {
        left.push(Span::styled(" read-only", theme.warn));
    }
    if let Some(banner) = &view.ui.banner {
        left.push(Span::raw(" "));
        left.push(Span::styled(format!(" {banner} "), theme.paused));
    }
    if let Some(recording) = &view.ui.recording {
        left.push(Span::raw(" "));
        left.push(Span::styled(format!(" {recording} "), theme.paused));
    }
    if let Some(job) = &view.ui.job {
        left.push(Span::styled("  job ", theme.label));
        left.push(Span::styled(job.pid.to_string(), theme.value));
        left.push(match &job.end {
            None => Span::styled(" running", theme.ok),
            Some(end) if end.code == 0 => Span::styled(format!(" {}", end.text), theme.dim),
            Some(end) => Span::styled(format!(" {}", end.text), theme.crit),
        });
    }
    match &view.snapshot.driver {
        Some(driver) => {
            left.push(Span::styled("  driver ", theme.label));
            left.push(panel_text::value_span(
                theme,
                &driver.driver_version,
                Clone::clone,
            ));
            left.push(Span::styled("  CUDA ", theme.label));
            left.push(match driver.cuda_label() {
                Some(cuda) => Span::styled(cuda, theme.value),
                None => Span::styled(panel_text::NA, theme.dim),
            });
        }
        None if view.snapshot.nvml_problem.is_some() => {
            left.push(Span::styled("  NVML unavailable", theme.crit));
        }
        None => left.push(Span::styled("  starting NVML...", theme.dim)),
    }
    let left = Line::from(left);
    // The host name tells panes from several nodes apart, so it is the last to go: the
    // refresh period goes first when the line is short.
    let host: Vec<Span> = match &view.ui.host {
        Some(host) => vec![Span::styled(host.clone(), theme.value), Span::raw("  ")],
        None => Vec::new(),
    };
    let every = vec![
        Span::styled("every ", theme.label),
        Span::styled(panel_text::interval_label(view.interval_ms), theme.value),
        Span::raw("  "),
    ];
    let clock = Span::styled(clock::time_of_day(view.now_ms, view.ui.clock), theme.value);
    let full: Vec<Span> = [host.clone(), every, vec![clock.clone()]].concat();
    let short: Vec<Span> = [host, vec![clock]].concat();
    let right = [Line::from(full), Line::from(short)]
        .into_iter()
        .find(|right| left.width() + right.width() < usize::from(area.width));
    if let Some(right) = right {
        buffer_write::line_in(frame.buffer_mut(), area, &right.right_aligned());
    }
    buffer_write::line_in(frame.buffer_mut(), area, &left);
}
