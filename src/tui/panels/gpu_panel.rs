//! The full panel for one GPU, drawn when there is room:
//!
//! ```text
//! ─ GPU 0 NVIDIA H100 80GB HBM3 [STALE] ─────────────────────── 00000000:17:00.0 ─
//! mem  ▕██████████████░░░░░░░░░░░░░░░░░▏ 41.2 GiB / 80.0 GiB  51%
//!   5m ▁▁▂▃▅▇▲▆▃▂▁▁▁▁▁▁▁▁▁▁▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂▂ 41.2G
//!      ▲ 63.0 GiB 2m ago (max of 5m) │ all-time 70.1 GiB 1h ago
//! util ▁▂▃▃▅▆▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇   87%
//! 64°C  412W/700W  SM/mem 1980/2619MHz  fan n/a  enc/dec 0/0%  P0  thr power-cap
//! ```
//!
//! Both sparklines share one width and so one time axis; memory is scaled to the GPU's total
//! (a full plot means a full GPU), utilisation to 100 %. Given more rows, both charts grow
//! to as many rows each (the window's length on the first) and a time axis with round ticks
//! follows them:
//!
//! ```text
//!   5m                                       ▲
//!      ▂▂▂▂▂▂▅▅▅▅▅▅▅█████                   █         ▂▂▂▂▂▂▅▅▅▅▅▅
//!      ██████████████████▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇▇█▇▇▇▇▇▇▇▇▇████████████ 20.0G
//!      ▲ 76.0 GiB 1m ago (max of 5m) │ all-time 76.0 GiB 1m ago
//! util         ▂▂▂▂▂▂█████                                 ▂▂▂▂▂▂
//!      ███████████████████▅▅▅▅▅▅▅▅▅▅▅▅▅▅▅▅▅▅▅▅▅▅▅▅▅▅▅▅▅▅▅▅██████████   50%
//!      ╵5m          ╵4m          ╵3m          ╵2m          ╵1m      now
//! ```
//!
//! PCIe throughput joins the last line when `--pcie` asks for it.

use super::panel_text::{self, Rank};
use super::{buffer_write, mig_lines, spark, time_axis};
use crate::model::device::throttle_reason_names;
use crate::model::figures::device as gpu;
use crate::model::units::{self, MemoryUnits};
use crate::model::{DeviceSample, DeviceSnapshot, Reading};
use crate::terminal_kit::sparkline::{self, Plot};
use crate::terminal_kit::theme::Theme;
use crate::tui::view::View;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders};

/// Rows a full panel takes with one-row charts: the title border and five lines.
pub const HEIGHT: u16 = 6;

/// Rows a full panel takes with charts `chart_rows` tall: each chart grows, and charts of
/// more than one row get a time axis under them.
pub fn height_for(chart_rows: u16) -> u16 {
    let extra = chart_rows.saturating_sub(1);
    let axis = u16::from(chart_rows > 1);
    HEIGHT
        .saturating_add(extra.saturating_mul(2))
        .saturating_add(axis)
}

/// Rows a MIG GPU's instances want in a full panel: one each and one for the note; `0` for
/// a GPU not in MIG mode (or whose instances could not be read: one line says so).
pub fn mig_rows_wanted(device: &DeviceSnapshot) -> u16 {
    device
        .sample
        .as_ref()
        .and_then(DeviceSample::mig_enabled)
        .and_then(|m| m.instances.as_ref().ok())
        .map_or(0, |list| u16::try_from(list.len() + 1).unwrap_or(u16::MAX))
}

/// The tallest charts a panel `height` rows high has room for ([`height_for`]'s inverse).
fn chart_rows_in(height: u16) -> u16 {
    if height >= height_for(2) {
        height.saturating_sub(HEIGHT - 1) / 2
    } else {
        1
    }
}

/// Cells after each sparkline for its current value.
const VALUE_W: u16 = 6;

/// Draws the panel in `area` with charts `chart_rows` tall; a MIG GPU's instances take
/// every row left between its memory chart and its last line.
pub fn render(
    frame: &mut Frame,
    area: Rect,
    view: &View,
    device: &DeviceSnapshot,
    chart_rows: u16,
) {
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
    let chart_rows = chart_rows.clamp(1, chart_rows_in(area.height));

    let sample = device.sample.as_ref();
    let mut lines = Vec::with_capacity(usize::from(area.height));
    // Room for `  86% in allocators` on every panel once one has it: identical GPUs then
    // get bars of one length, whichever of them runs an instrumented program.
    let any_share = view
        .snapshot
        .devices
        .iter()
        .any(|d| panel_text::instrumented_share(d).is_some());
    let share_room = if any_share {
        allocator_share_text("100%").len()
    } else {
        0
    };
    let bar_room = inner
        .width
        .saturating_sub(u16::try_from(share_room).unwrap_or(u16::MAX));
    lines.push(memory_line(theme, view.ui.units, device, bar_room));

    let chart_w = inner.width.saturating_sub(spark::LABEL_W + VALUE_W);
    let range = spark::window(view, chart_w);
    match view.history.device(&device.info.key()) {
        Some(series) => {
            let total = device.memory_total().map(|t| t as f64);
            let plot = Plot {
                width: chart_w,
                height: chart_rows,
                scale: total,
                style: theme.sparkline,
            };
            let charted = spark::Charted {
                series: series.memory_used,
                all_time: device.memory_peak,
            };
            let mut memory = spark::tall_chart_with_peak(view, charted, range, plot);
            // Who made an all-time peak read between two refreshes, which no process's
            // refreshed figure shows: the spike's owner (`peak_owner`), or that none could
            // be named. A peak a refresh read is in the rows' own figures.
            if let (Some(_), Some(owner), Some(label)) = (
                device.memory_peak,
                device
                    .memory_peak_owner
                    .as_ref()
                    .filter(|o| o.between_refreshes),
                memory.last_mut(),
            ) {
                let text = match owner.pid() {
                    Some(pid) => format!(" by pid {pid}"),
                    None => " not attributed".into(),
                };
                label.spans.push(Span::styled(text, theme.label));
            }
            let now = device
                .memory_used()
                .map_or(panel_text::NA.into(), units::short_bytes);
            // The current value ends the chart's bottom row, just above the peak label.
            let bottom = memory.len().saturating_sub(2);
            if let Some(row) = memory.get_mut(bottom) {
                row.spans
                    .push(Span::styled(format!(" {now:>5}"), theme.value));
            }
            lines.extend(memory);

            // In MIG mode NVML has no utilisation: the instances take the chart's rows, and
            // any the layout added for them. The time axis belongs to the memory chart: it
            // goes under it, never under the instances.
            if let Some(mig) = sample.and_then(DeviceSample::mig_enabled) {
                if chart_rows > 1 {
                    let mut axis = vec![Span::raw(" ".repeat(usize::from(spark::LABEL_W)))];
                    axis.extend(time_axis::axis(theme, range, chart_w).spans);
                    lines.push(Line::from(axis));
                }
                let used = u16::try_from(lines.len() + 1).unwrap_or(u16::MAX);
                let rows = inner.height.saturating_sub(used).max(1);
                lines.extend(mig_lines::lines(theme, mig, rows, inner.width));
                lines.push(last_line(theme, device, sample, inner.width));
                buffer_write::lines_in(frame.buffer_mut(), inner, &lines);
                return;
            }
            // Utilisation is routinely pinned at 100 %: its peak says little, so no marker.
            let plot = Plot {
                scale: Some(100.0),
                style: theme.sparkline_alt,
                ..plot
            };
            let util = sparkline::spark(theme, series.gpu_util, range, plot, false);
            let last = util.rows.len().saturating_sub(1);
            for (i, row) in util.rows.into_iter().enumerate() {
                let head = if i == 0 { "util " } else { "     " };
                let mut line = vec![Span::styled(head, theme.label)];
                line.extend(row.spans);
                if i == last {
                    line.push(match sample.map(|s| &s.gpu_util) {
                        Some(Ok(u)) => Span::styled(format!(" {:>4}%", u), theme.value),
                        _ => Span::styled(format!(" {:>5}", panel_text::NA), theme.dim),
                    });
                }
                lines.push(Line::from(line));
            }
            if chart_rows > 1 {
                let mut axis = vec![Span::raw(" ".repeat(usize::from(spark::LABEL_W)))];
                axis.extend(time_axis::axis(theme, range, chart_w).spans);
                lines.push(Line::from(axis));
            }
        }
        None => lines.push(Line::styled("no history yet", theme.dim)),
    }

    lines.push(last_line(theme, device, sample, inner.width));
    buffer_write::lines_in(frame.buffer_mut(), inner, &lines);
}

/// The panel's last line: the figures, or why there are none.
fn last_line(
    theme: &Theme,
    device: &DeviceSnapshot,
    sample: Option<&DeviceSample>,
    width: u16,
) -> Line<'static> {
    match sample {
        Some(s) if s.lost => Line::styled(
            "GPU lost: it stopped answering NVML (fell off the bus?); check dmesg and nvidia-smi",
            theme.crit,
        ),
        Some(s) => stats_line(theme, device, s, width),
        None => Line::styled("waiting for the first sample", theme.dim),
    }
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
    spans.extend(mig_tag(theme, device));
    Line::from(spans)
}

/// `[MIG]`, and a pending change of mode with what to do about it, for the GPU's title.
pub fn mig_tag(theme: &Theme, device: &DeviceSnapshot) -> Vec<Span<'static>> {
    let Some(mig) = device.sample.as_ref().and_then(|s| s.mig.as_ref()) else {
        return Vec::new();
    };
    let mut spans = Vec::new();
    if mig.enabled {
        spans.push(Span::styled("[MIG] ", theme.label));
    }
    if let Some(note) = mig.pending_note() {
        spans.push(Span::styled(format!("[{note}] "), theme.warn));
    }
    spans
}

/// `  86% in allocators`, after a GPU's memory figures.
fn allocator_share_text(share: &str) -> String {
    format!("  {share} in allocators")
}

/// `mem  ▕████░░░░▏ 41.2 GiB / 80.0 GiB  51%`, or the reason memory is unknown; the bar
/// and figures fill `width` cells, and the allocators' share, when there is one, follows
/// in the room the caller left for it.
fn memory_line(
    theme: &Theme,
    units: MemoryUnits,
    device: &DeviceSnapshot,
    width: u16,
) -> Line<'static> {
    let mut spans = vec![Span::styled("mem  ", theme.label)];
    let memory = match device.sample.as_ref().map(|s| &s.memory) {
        Some(Ok(m)) => m,
        Some(Err(absent)) => {
            spans.push(Span::styled(
                format!("{} ({absent})", panel_text::NA),
                theme.dim,
            ));
            return Line::from(spans);
        }
        None => {
            spans.push(Span::styled(
                format!("{} (no sample yet)", panel_text::NA),
                theme.dim,
            ));
            return Line::from(spans);
        }
    };
    let fraction = if memory.total > 0 {
        memory.used as f64 / memory.total as f64
    } else {
        0.0
    };
    let pct = if memory.total > 0 {
        panel_text::percent(fraction * 100.0)
    } else {
        panel_text::NA.to_string()
    };
    let mut text = format!(
        // Fixed widths keep the bar's end in one column across panels.
        " {:>8} / {} {pct:>4}",
        units.bytes(memory.used),
        units.bytes(memory.total)
    );
    let bar_w = width
        .saturating_sub(spark::LABEL_W)
        .saturating_sub(u16::try_from(text.len()).unwrap_or(u16::MAX));
    if let Some(share) = panel_text::instrumented_share(device) {
        text.push_str(&allocator_share_text(&share));
    }
    if bar_w >= 4 {
        spans.extend(sparkline::bar(
            theme,
            fraction,
            bar_w,
            theme.level(fraction * 100.0),
        ));
    }
    spans.push(Span::styled(text, theme.value));
    Line::from(spans)
}

/// `64°C  412W/700W  SM/mem 1980/2619MHz  fan 30%  enc/dec 0/0%  P0  thr power-cap`, plus
/// ECC errors when there are any: short labels so that it fits 80 columns.
/// Temperature, power, clocks, fan, enc/dec, pstate, throttle reasons and ECC, as many as fit
/// in `width` cells, each whole; a narrow line keeps alarms and drops `n/a` first.
fn stats_line(
    theme: &Theme,
    device: &DeviceSnapshot,
    s: &DeviceSample,
    width: u16,
) -> Line<'static> {
    let gap = || Span::raw("  ");
    let na = || Span::styled(panel_text::NA, theme.dim);
    let mut figures: Vec<(Rank, Vec<Span<'static>>)> = Vec::with_capacity(8);
    figures.push(match &s.temperature_c {
        Ok(t) => (
            Rank::Figure,
            vec![Span::styled(
                format!("{t}{}", theme.glyphs.degree_c),
                theme.value,
            )],
        ),
        Err(_) => (
            Rank::Absent,
            vec![panel_text::label(theme, gpu::TEMPERATURE_C.label), na()],
        ),
    });
    let limit = s
        .power_limit_mw
        .clone()
        .or(device.info.power_limit_mw.clone());
    figures.push(match &s.power_mw {
        Ok(mw) => (
            Rank::Figure,
            vec![
                gap(),
                Span::styled(units::watts(*mw), theme.value),
                Span::styled("/", theme.label),
                panel_text::value_span(theme, &limit, |mw| units::watts(*mw)),
            ],
        ),
        Err(_) => (
            Rank::Absent,
            vec![gap(), panel_text::label(theme, gpu::POWER_MW.label), na()],
        ),
    });
    let mut clocks = vec![gap(), panel_text::label(theme, "SM/mem")];
    pair(theme, &mut clocks, &s.sm_clock_mhz, &s.mem_clock_mhz, "MHz");
    figures.push((rank_of(&[&s.sm_clock_mhz, &s.mem_clock_mhz]), clocks));
    figures.push((
        rank_of(&[&s.fan_percent]),
        vec![
            gap(),
            panel_text::label(theme, gpu::FAN_PERCENT.label),
            panel_text::value_span(theme, &s.fan_percent, |f| format!("{f}%")),
        ],
    ));
    let mut codec = vec![gap(), panel_text::label(theme, "enc/dec")];
    pair(theme, &mut codec, &s.encoder_util, &s.decoder_util, "%");
    figures.push((rank_of(&[&s.encoder_util, &s.decoder_util]), codec));
    figures.push(match &s.pstate {
        Ok(p) => (
            Rank::Figure,
            vec![gap(), Span::styled(format!("P{p}"), theme.value)],
        ),
        Err(_) => (
            Rank::Absent,
            vec![gap(), panel_text::label(theme, "pstate"), na()],
        ),
    });
    figures.extend(pcie_figure(theme, s, false));
    figures.extend(alarm_figures(theme, s, true));
    let shown = panel_text::fitting_ranked(figures, usize::from(width));
    Line::from(shown.into_iter().flatten().collect::<Vec<_>>())
}

/// `PCIe tx 1000 KiB/s rx 1.95 MiB/s`, or with `short` `PCIe 1000K/2.0M/s` (transmit, then
/// receive): only when `--pcie` asked for it, so only then sampled.
pub fn pcie_figure(
    theme: &Theme,
    s: &DeviceSample,
    short: bool,
) -> Option<(Rank, Vec<Span<'static>>)> {
    let (tx, rx) = (s.pcie_tx_kbs.as_ref()?, s.pcie_rx_kbs.as_ref()?);
    let rate = |r: &Reading<u32>| match r {
        Ok(kbs) => {
            let bytes = u64::from(*kbs).saturating_mul(1024);
            let text = if short {
                units::short_bytes(bytes)
            } else {
                format!("{}/s", units::bytes(bytes))
            };
            Span::styled(text, theme.value)
        }
        Err(_) => Span::styled(panel_text::NA, theme.dim),
    };
    let rank = if tx.is_err() && rx.is_err() {
        Rank::Absent
    } else {
        Rank::Figure
    };
    let spans = if short {
        vec![
            Span::raw("  "),
            panel_text::label(theme, "PCIe"),
            rate(tx),
            Span::styled("/", theme.label),
            rate(rx),
            Span::styled("/s", theme.value),
        ]
    } else {
        vec![
            Span::raw("  "),
            panel_text::label(theme, "PCIe tx"),
            rate(tx),
            Span::styled(" rx ", theme.label),
            rate(rx),
        ]
    };
    Some((rank, spans))
}

/// Throttle reasons and ECC errors, each a figure led by two blanks: a costly throttle or
/// any ECC error is an alarm. `routine` keeps benign reasons (idle, app clocks) and an
/// unreadable throttle state as figures; without it, only alarms come back.
pub fn alarm_figures(
    theme: &Theme,
    s: &DeviceSample,
    routine: bool,
) -> Vec<(Rank, Vec<Span<'static>>)> {
    let gap = || Span::raw("  ");
    let mut figures = Vec::with_capacity(2);
    match &s.throttle_reasons {
        Ok(bits) => {
            let names = throttle_reason_names(*bits);
            if !names.is_empty() {
                // Idle and app clocks are routine; anything else costs performance.
                let benign = names.iter().all(|n| matches!(*n, "idle" | "app-clocks"));
                let (style, rank) = if benign {
                    (theme.value, Rank::Figure)
                } else {
                    (theme.warn, Rank::Alarm)
                };
                if routine || rank == Rank::Alarm {
                    figures.push((
                        rank,
                        vec![
                            gap(),
                            panel_text::label(theme, "thr"),
                            Span::styled(names.join(","), style),
                        ],
                    ));
                }
            }
        }
        Err(_) if routine => figures.push((
            Rank::Absent,
            vec![
                gap(),
                panel_text::label(theme, "thr"),
                Span::styled(panel_text::NA, theme.dim),
            ],
        )),
        Err(_) => {}
    }
    // Only shown when non-zero: the count itself is the alarm.
    let corrected = s.ecc_corrected.as_ref().ok().copied();
    let uncorrected = s.ecc_uncorrected.as_ref().ok().copied();
    let count = |c: Option<u64>| c.map_or_else(|| panel_text::NA.to_string(), |v| v.to_string());
    if corrected.unwrap_or(0) > 0 || uncorrected.unwrap_or(0) > 0 {
        let style = if uncorrected.unwrap_or(0) > 0 {
            theme.crit
        } else {
            theme.warn
        };
        figures.push((
            Rank::Alarm,
            vec![
                gap(),
                Span::styled(
                    format!(
                        "ECC {} corr {} uncorr",
                        count(corrected),
                        count(uncorrected)
                    ),
                    style,
                ),
            ],
        ));
    }
    figures
}

/// A figure made of `readings` is absent only when none of them can be read.
fn rank_of(readings: &[&Reading<u32>]) -> Rank {
    if readings.iter().all(|r| r.is_err()) {
        Rank::Absent
    } else {
        Rank::Figure
    }
}

/// `1980/2619MHz`, `n/a/2619MHz`, or a single `n/a` when both sides are unreadable.
fn pair(
    theme: &Theme,
    spans: &mut Vec<Span<'static>>,
    a: &Reading<u32>,
    b: &Reading<u32>,
    unit: &'static str,
) {
    if a.is_err() && b.is_err() {
        spans.push(Span::styled(panel_text::NA, theme.dim));
        return;
    }
    spans.push(panel_text::value_span(theme, a, u32::to_string));
    spans.push(Span::styled("/", theme.label));
    spans.push(panel_text::value_span(theme, b, u32::to_string));
    spans.push(Span::styled(unit, theme.value));
}
