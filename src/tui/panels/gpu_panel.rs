//! The full panel for one GPU, drawn when there is room:
//!
//! ```text
//! ─ GPU 0 NVIDIA H100 80GB HBM3 [STALE] ─────────────────────── 00000000:17:00.0 ─
//! mem  ▕██████████████░░░░░░░░░░░░░░░░░▏ 41.2 GiB / 80.0 GiB  51%
//!   5m ▁▁▂▃▅▇▲▆▃▂▁▁▁▁▁▁▁▁▁▁▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂ 41.2G
//!      ▲ 63.0 GiB 2m ago (max of 5m) │ all-time 70.1 GiB 1h ago
//! util ▁▂▃▃▅▆▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇   87%
//! 64°C  412W/700W  SM 1980MHz  mem 2619MHz  fan n/a  enc 0% dec 0%  P0  throttle power-cap
//! ```
//!
//! Both sparklines share one width and so one time axis; memory is scaled to the GPU's total
//! (a full plot means a full GPU), utilisation to 100 %.

use super::{fmt, spark};
use crate::model::device::throttle_reason_names;
use crate::model::{DeviceSample, DeviceSnapshot};
use crate::tui::theme::Theme;
use crate::tui::view::View;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

/// Rows a full panel takes: the title border and five lines.
pub const HEIGHT: u16 = 6;

/// Cells before each chart for its label (`mem  `, `util `).
const LABEL_W: u16 = 5;
/// Cells after each sparkline for its current value.
const VALUE_W: u16 = 6;

pub fn render(frame: &mut Frame, area: Rect, view: &View, device: &DeviceSnapshot) {
    let theme = view.theme;
    let block = Block::new()
        .borders(Borders::TOP)
        .border_set(theme.glyphs.border)
        .border_style(theme.border)
        .title(title(theme, device));
    let block = match &device.info.pci_bus_id {
        Ok(bus) => block.title_top(Line::styled(format!(" {bus} "), theme.dim).right_aligned()),
        Err(_) => block,
    };
    let inner = block.inner(area);
    frame.render_widget(block, area);

    let sample = device.sample.as_ref();
    let mut lines = Vec::with_capacity(5);
    lines.push(memory_line(theme, device, inner.width));

    let chart_w = inner.width.saturating_sub(LABEL_W + VALUE_W);
    let range = spark::window(view, chart_w);
    let window_ms = range.1.saturating_sub(range.0);
    match view.monitor.device_series(&device.info.key()) {
        Some(series) => {
            let total = device.memory_total().map(|t| t as f64);
            let mem = spark::spark(theme, &series.memory_used, range, chart_w, total, theme.sparkline);
            let mut line = vec![Span::styled(
                format!("{:>4} ", fmt::span_label(window_ms)),
                theme.dim,
            )];
            line.extend(mem.line.spans);
            line.push(Span::styled(
                format!(" {:>5}", device.memory_used().map_or(fmt::NA.into(), fmt::short_bytes)),
                theme.value,
            ));
            lines.push(Line::from(line));

            let mut peak = vec![Span::raw(" ".repeat(usize::from(LABEL_W)))];
            let label = spark::peak_label(
                theme,
                mem.peak,
                series.memory_used.peak(),
                window_ms,
                view.now_ms,
                |v| fmt::bytes(v as u64),
            );
            peak.extend(label.spans);
            lines.push(Line::from(peak));

            let util = spark::spark(theme, &series.gpu_util, range, chart_w, Some(100.0), theme.sparkline_alt);
            let mut line = vec![Span::styled("util ", theme.label)];
            line.extend(util.line.spans);
            let now = sample.map(|s| &s.gpu_util);
            line.push(match now {
                Some(Ok(u)) => Span::styled(format!(" {:>4}%", u), theme.value),
                _ => Span::styled(format!(" {:>5}", fmt::NA), theme.dim),
            });
            lines.push(Line::from(line));
        }
        None => lines.push(Line::styled("no history yet", theme.dim)),
    }

    lines.push(match sample {
        Some(s) if s.lost => Line::styled(
            "GPU lost: it stopped answering NVML (fell off the bus?); check dmesg and nvidia-smi",
            theme.crit,
        ),
        Some(s) => stats_line(theme, device, s),
        None => Line::styled("waiting for the first sample", theme.dim),
    });
    frame.render_widget(Paragraph::new(lines), inner);
}

fn title(theme: &Theme, device: &DeviceSnapshot) -> Line<'static> {
    let mut spans = vec![Span::styled(
        format!(" GPU {} {} ", device.info.index, device.info.display_name()),
        theme.title,
    )];
    if device.stale {
        spans.push(Span::styled("[STALE] ", theme.warn));
    }
    if device.sample.as_ref().is_some_and(|s| s.lost) {
        spans.push(Span::styled("[LOST] ", theme.crit));
    }
    Line::from(spans)
}

/// `mem  ▕████░░░░▏ 41.2 GiB / 80.0 GiB  51%`, or the reason memory is unknown.
fn memory_line(theme: &Theme, device: &DeviceSnapshot, width: u16) -> Line<'static> {
    let mut spans = vec![Span::styled("mem  ", theme.label)];
    let memory = match device.sample.as_ref().map(|s| &s.memory) {
        Some(Ok(m)) => m,
        Some(Err(absent)) => {
            spans.push(Span::styled(format!("{} ({absent})", fmt::NA), theme.dim));
            return Line::from(spans);
        }
        None => {
            spans.push(Span::styled(format!("{} (no sample yet)", fmt::NA), theme.dim));
            return Line::from(spans);
        }
    };
    let fraction = if memory.total > 0 {
        memory.used as f64 / memory.total as f64
    } else {
        0.0
    };
    let pct = if memory.total > 0 {
        fmt::percent(fraction * 100.0)
    } else {
        fmt::NA.to_string()
    };
    let text = format!(
        " {} / {}  {pct}",
        fmt::bytes(memory.used),
        fmt::bytes(memory.total)
    );
    let bar_w = width
        .saturating_sub(LABEL_W)
        .saturating_sub(u16::try_from(text.len()).unwrap_or(u16::MAX));
    if bar_w >= 4 {
        spans.extend(spark::bar(theme, fraction, bar_w, theme.level(fraction * 100.0)));
    }
    spans.push(Span::styled(text, theme.value));
    Line::from(spans)
}

/// Temperature, power, clocks, fan, codecs, pstate, throttle reasons and ECC errors.
fn stats_line(theme: &Theme, device: &DeviceSnapshot, s: &DeviceSample) -> Line<'static> {
    let gap = || Span::raw("  ");
    let mut spans = Vec::with_capacity(24);
    match &s.temperature_c {
        Ok(t) => spans.push(Span::styled(format!("{t}{}", theme.glyphs.degree_c), theme.value)),
        Err(_) => {
            spans.push(fmt::label(theme, "temp"));
            spans.push(Span::styled(fmt::NA, theme.dim));
        }
    }
    spans.push(gap());
    let limit = s.power_limit_mw.clone().or(device.info.power_limit_mw.clone());
    match &s.power_mw {
        Ok(_) => {
            spans.push(fmt::value_span(theme, &s.power_mw, |mw| crate::model::units::watts(*mw)));
            spans.push(Span::styled("/", theme.label));
            spans.push(fmt::value_span(theme, &limit, |mw| crate::model::units::watts(*mw)));
        }
        Err(_) => {
            spans.push(fmt::label(theme, "power"));
            spans.push(Span::styled(fmt::NA, theme.dim));
        }
    }
    let mut figure = |label: &str, value: Span<'static>| {
        spans.push(gap());
        spans.push(fmt::label(theme, label));
        spans.push(value);
    };
    figure("SM", fmt::value_span(theme, &s.sm_clock_mhz, |c| format!("{c}MHz")));
    figure("mem", fmt::value_span(theme, &s.mem_clock_mhz, |c| format!("{c}MHz")));
    figure("fan", fmt::value_span(theme, &s.fan_percent, |f| format!("{f}%")));
    figure("enc", fmt::value_span(theme, &s.encoder_util, |u| format!("{u}%")));
    figure("dec", fmt::value_span(theme, &s.decoder_util, |u| format!("{u}%")));
    spans.push(gap());
    match &s.pstate {
        Ok(p) => spans.push(Span::styled(format!("P{p}"), theme.value)),
        Err(_) => {
            spans.push(fmt::label(theme, "pstate"));
            spans.push(Span::styled(fmt::NA, theme.dim));
        }
    }
    match &s.throttle_reasons {
        Ok(bits) => {
            let names = throttle_reason_names(*bits);
            if !names.is_empty() {
                // Idle and app clocks are routine; anything else costs performance.
                let benign = names.iter().all(|n| matches!(*n, "idle" | "app-clocks"));
                spans.push(gap());
                spans.push(fmt::label(theme, "throttle"));
                spans.push(Span::styled(
                    names.join(","),
                    if benign { theme.value } else { theme.warn },
                ));
            }
        }
        Err(_) => {
            spans.push(gap());
            spans.push(fmt::label(theme, "throttle"));
            spans.push(Span::styled(fmt::NA, theme.dim));
        }
    }
    let corrected = s.ecc_corrected.as_ref().map_or(0, |v| *v);
    let uncorrected = s.ecc_uncorrected.as_ref().map_or(0, |v| *v);
    if corrected > 0 || uncorrected > 0 {
        spans.push(gap());
        spans.push(Span::styled(
            format!("ECC {corrected} corr {uncorrected} uncorr"),
            if uncorrected > 0 { theme.crit } else { theme.warn },
        ));
    }
    Line::from(spans)
}
