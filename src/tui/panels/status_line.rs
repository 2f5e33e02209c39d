//! The bottom line. While the filter is being typed it is the filter prompt; otherwise it shows
//! the one-off message if there is one, else what could not be read and why (faults first,
//! then figures the hardware simply lacks), with a key hint on the right.

use super::put;
use crate::model::{Absent, DeviceSample};
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
    let hint = Line::from(vec![
        Span::styled("?", theme.key),
        Span::styled(" help  ", theme.label),
        Span::styled("q", theme.key),
        Span::styled(" quit", theme.label),
    ]);
    let hint_w = u16::try_from(hint.width()).unwrap_or(u16::MAX);
    let left_area = if area.width > hint_w.saturating_mul(3) {
        put::line_in(frame.buffer_mut(), area, &hint.right_aligned());
        Rect {
            width: area.width.saturating_sub(hint_w + 1),
            ..area
        }
    } else {
        area
    };
    let left = match &view.ui.flash {
        Some(message) => Line::styled(message.clone(), theme.warn),
        None => problems_line(view),
    };
    put::line_in(frame.buffer_mut(), left_area, &left);
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
    put::line_in(frame.buffer_mut(), area, &Line::from(spans));
    let x = area
        .x
        .saturating_add(typed_w.min(area.width.saturating_sub(1)));
    Position::new(x, area.y)
}

/// One status item: what is missing, why, and on which GPUs.
struct Item {
    field: &'static str,
    reason: String,
    expected: bool,
    gpus: Vec<u32>,
}

/// `GPU 1 lost; temp: no permission on GPU 1; fan: not supported on GPU 0,1`.
fn problems_line(view: &View) -> Line<'static> {
    let theme = view.theme;
    let mut spans: Vec<Span> = Vec::new();
    let mut push = |text: String, style| {
        if !spans.is_empty() {
            spans.push(Span::styled("; ", theme.dim));
        }
        spans.push(Span::styled(text, style));
    };
    if let Some(problem) = &view.snapshot.nvml_problem {
        push(format!("NVML: {}", problem.cause()), theme.status_error);
    }
    // A refused channel file: the first reason in full, then how many more.
    if let Some(first) = view.snapshot.rejected_channels.first() {
        let more = view.snapshot.rejected_channels.len() - 1;
        let text = match more {
            0 => format!("channel refused: {first}"),
            n => format!("channel refused: {first} (+{n} more)"),
        };
        push(text, theme.warn);
    }
    let mut items: Vec<Item> = Vec::new();
    for device in &view.snapshot.devices {
        let index = device.info.index;
        let Some(sample) = &device.sample else {
            continue;
        };
        if sample.lost {
            push(format!("GPU {index} lost"), theme.crit);
            continue;
        }
        if device.stale {
            let age = crate::model::time::age_label(sample.at_ms, view.now_ms);
            push(format!("GPU {index} stale: last sample {age}"), theme.warn);
        }
        for (field, absent) in absences(sample) {
            let reason = absent.reason();
            match items
                .iter_mut()
                .find(|i| i.field == field && i.reason == reason)
            {
                Some(item) => {
                    if !item.gpus.contains(&index) {
                        item.gpus.push(index);
                    }
                }
                None => items.push(Item {
                    field,
                    reason,
                    expected: absent.is_expected(),
                    gpus: vec![index],
                }),
            }
        }
    }
    if let Some(Err(absent)) = &view.snapshot.host_memory {
        push(format!("host memory: {absent}"), theme.status_error);
    }
    // Faults first: they are what the person can act on.
    items.sort_by_key(|i| i.expected);
    for item in items {
        let gpus: Vec<String> = item.gpus.iter().map(u32::to_string).collect();
        let text = format!("{}: {} on GPU {}", item.field, item.reason, gpus.join(","));
        push(
            text,
            if item.expected {
                theme.dim
            } else {
                theme.status_error
            },
        );
    }
    if spans.is_empty() && !view.snapshot.devices.is_empty() {
        spans.push(Span::styled("all figures readable", theme.dim));
    }
    Line::from(spans)
}

/// Every unreadable figure of one sample, named as the panels name it.
fn absences(s: &DeviceSample) -> Vec<(&'static str, &Absent)> {
    let pcie = [&s.pcie_tx_kbs, &s.pcie_rx_kbs]
        .into_iter()
        .filter_map(|r| r.as_ref().and_then(|r| r.as_ref().err()))
        .map(|a| ("PCIe", a));
    [
        ("mem", s.memory.as_ref().err()),
        ("util", s.gpu_util.as_ref().err()),
        ("mem util", s.mem_util.as_ref().err()),
        ("temp", s.temperature_c.as_ref().err()),
        ("power", s.power_mw.as_ref().err()),
        ("power limit", s.power_limit_mw.as_ref().err()),
        ("SM clock", s.sm_clock_mhz.as_ref().err()),
        ("mem clock", s.mem_clock_mhz.as_ref().err()),
        ("fan", s.fan_percent.as_ref().err()),
        ("enc", s.encoder_util.as_ref().err()),
        ("dec", s.decoder_util.as_ref().err()),
        ("throttle", s.throttle_reasons.as_ref().err()),
        ("pstate", s.pstate.as_ref().err()),
        ("ECC", s.ecc_corrected.as_ref().err()),
        ("ECC", s.ecc_uncorrected.as_ref().err()),
        ("processes", s.processes.as_ref().err()),
    ]
    .into_iter()
    .filter_map(|(field, absent)| absent.map(|a| (field, a)))
    .chain(pcie)
    .collect()
}
