//! The allocator part of the detail pane, for a process that publishes its allocator's
//! figures: who is writing, a bar that splits NVML's figure into allocated, the allocator's
//! cache and what lies outside the allocator, charts of allocated and reserved (every writer
//! sample, so spikes between two polls show), a line of step ends and OOMs on the same time
//! axis, and the latest events. Where the true peak was and every OOM with its figures are
//! pinned above the charts: the event list scrolls within a second, and they are what the
//! person came for, and so is what held the memory at the peak or the OOM (`held_sites`).
//! The bar is `allocator_breakdown`'s, the pinned lines `allocator_pins`' and `held_sites`'.

use super::allocator_breakdown::{breakdown, readings_apart};
use super::allocator_pins::{forecast_spans, oom_lines, peak_line};
use super::panel_text::separator;
use super::{own_scale, panel_text, spark};
use crate::history::column_of;
use crate::model::StepOrigin;
use crate::model::{
    AllocatorEvent, AllocatorSnapshot, EventKind, ProcessAllocator, WriterLiveness,
};
use crate::terminal_kit::theme::Theme;
use crate::tui::rows::TableRow;
use crate::tui::view::View;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

/// Recent events listed under the chart.
const EVENTS_SHOWN: usize = 4;

/// The lines, `width` cells wide (none for a process that publishes no allocator figures);
/// `range` and `chart_w` match the pane's other charts so every chart shares one time axis.
pub fn lines(
    view: &View,
    row: &TableRow,
    width: u16,
    range: (u64, u64),
    chart_w: u16,
    gpu_total: Option<f64>,
) -> Vec<Line<'static>> {
    let Some(allocator) = &row.allocator else {
        return Vec::new();
    };
    let theme = view.theme;
    let channel = channel(view, row);
    let mut out = vec![writer_line(theme, allocator, channel)];
    let apart = readings_apart(view, row, allocator, channel);
    out.extend(breakdown(
        theme,
        allocator,
        (row.vram.as_ref().ok().copied(), apart),
        width,
    ));
    let steps = allocator.steps_from;
    let mut peak = peak_line(theme, allocator.peak.as_ref(), steps, view.now_ms);
    // An attached writer's framework counter holds a peak reached before the attach, when
    // nothing was watching: said as such, with no time or step invented for it.
    if allocator.attached
        && allocator.peak.as_ref().is_some_and(|p| !p.located)
        && let Some(last) = peak.spans.last_mut()
    {
        *last = Span::styled(" (reached before the attach: framework counter)", theme.dim);
    }
    if allocator.liveness.is_running() {
        peak.spans
            .extend(forecast_spans(theme, &allocator.forecast));
    }
    out.push(peak);
    out.extend(oom_lines(theme, &allocator.ooms, steps, view.now_ms));
    if let Some(channel) = channel {
        out.extend(super::held_sites::lines(
            theme,
            width,
            channel,
            view.ui.time_cursor,
            view.now_ms,
        ));
    }
    let slot = channel.and_then(|c| {
        let (i, slot) = c.slot_on_gpu(row.gpu_index)?;
        Some((c, i, view.history.allocator_slot(&c.path, slot)?))
    });
    match slot {
        Some((channel, i, series)) => {
            let peaks = channel.chart_peaks.get(i).copied().unwrap_or_default();
            let charts = [
                ("alloc", series.allocated, peaks.allocated, theme.sparkline),
                ("resv", series.reserved, peaks.reserved, theme.sparkline_alt),
            ];
            for (name, series, all_time, style) in charts {
                let charted = spark::Charted { series, all_time };
                // Scaled to its own series, the GPU's total named: scaled to the whole GPU,
                // an allocator going from 2 to 8 GiB drew a flat line.
                let of = gpu_total.map(|t| (t as u64, "GPU"));
                let [plot, label] =
                    own_scale::row_chart(view, charted, range, (chart_w, style), of);
                out.push(relabel(plot, theme, name));
                out.push(label);
            }
            out.push(ticks(view, channel, range, chart_w));
            // Pinned above already: OOMs and new peaks.
            let shown = channel
                .recent_events
                .iter()
                .rev()
                .filter(|e| !e.kind.is_oom() && !matches!(e.kind, EventKind::NewHighWater { .. }))
                .take(EVENTS_SHOWN);
            out.extend(shown.map(|e| event_line(theme, e, steps, view.now_ms)));
        }
        _ => out.push(Line::styled("no allocator history yet", theme.dim)),
    }
    out
}

/// The channel the snapshot joined to the row (`channel_of`), as of the snapshot.
fn channel<'a>(view: &View<'a>, row: &TableRow) -> Option<&'a AllocatorSnapshot> {
    crate::model::snapshot::channel_of(&view.snapshot.allocators, row.key.pid, row.process())
}

/// `PyTorch torch 2.5.1 │ rank 0/8 │ step 1234 │ forward/model.layers.3 │ live`.
fn writer_line(
    theme: &Theme,
    allocator: &ProcessAllocator,
    channel: Option<&AllocatorSnapshot>,
) -> Line<'static> {
    let mut spans = vec![panel_text::label(theme, "allocator")];
    if let Some(id) = channel.map(|c| &c.identity) {
        spans.push(Span::styled(
            format!("{} {}", id.kind, id.framework),
            theme.value,
        ));
        if id.attached {
            spans.push(separator(theme));
            spans.push(Span::styled("attached", theme.label));
        }
        if let (Some(rank), Some(world)) = (id.rank, id.world_size) {
            spans.push(separator(theme));
            spans.push(Span::styled(format!("rank {rank}/{world}"), theme.value));
        }
    }
    spans.push(separator(theme));
    spans.push(Span::styled("step ", theme.label));
    spans.push(match allocator.step {
        Some(step) => Span::styled(step.to_string(), theme.value),
        None => Span::styled("-", theme.dim),
    });
    if allocator.step.is_some() {
        spans.push(Span::styled(allocator.steps_from.after(), theme.label));
    }
    if !allocator.label.is_empty() {
        spans.push(separator(theme));
        spans.push(Span::styled(allocator.label.clone(), theme.value));
    }
    spans.push(separator(theme));
    let liveness_style = match allocator.liveness {
        WriterLiveness::Live => theme.ok,
        WriterLiveness::Stalled { .. } | WriterLiveness::Unreadable => theme.warn,
        WriterLiveness::Ended { crashed, error } if crashed || error => theme.crit,
        WriterLiveness::Ended { .. } => theme.dim,
    };
    spans.push(Span::styled(allocator.liveness.label(), liveness_style));
    if let Some(channel) = channel
        && channel.lost_samples.saturating_add(channel.lost_events) > 0
    {
        spans.push(Span::styled(
            format!(
                " (missed {} samples, {} events)",
                channel.lost_samples, channel.lost_events
            ),
            theme.warn,
        ));
    }
    Line::from(spans)
}

/// A chart's plot line with its window label replaced by a name.
fn relabel(plot: Line<'static>, theme: &Theme, name: &str) -> Line<'static> {
    let mut spans = plot.spans;
    if let Some(first) = spans.first_mut() {
        *first = Span::styled(
            format!("{name:<width$}", width = usize::from(spark::LABEL_W)),
            theme.label,
        );
    }
    Line::from(spans)
}

/// Step ends and OOMs at their columns on the charts' time axis.
fn ticks(
    view: &View,
    channel: &AllocatorSnapshot,
    (from, to): (u64, u64),
    width: u16,
) -> Line<'static> {
    let theme = view.theme;
    let columns = usize::from(width);
    let mut marks: Vec<Option<(&'static str, Style)>> = vec![None; columns];
    for at in view.history.step_ends(&channel.path) {
        if let Some(col) = column_of(at, from, to, columns) {
            marks[col].get_or_insert((theme.glyphs.step_tick, theme.dim));
        }
    }
    // OOMs win their column: they are what the person is looking for.
    for oom in &channel.ooms {
        if let Some(col) = column_of(oom.at_ms, from, to, columns) {
            marks[col] = Some((theme.glyphs.oom, theme.crit));
        }
    }
    let mut spans = vec![Span::styled(
        format!("{:<width$}", "steps", width = usize::from(spark::LABEL_W)),
        theme.label,
    )];
    let mut run = String::new();
    for mark in marks {
        match mark {
            None => run.push(' '),
            Some((glyph, style)) => {
                spans.push(Span::raw(std::mem::take(&mut run)));
                spans.push(Span::styled(glyph, style));
            }
        }
    }
    spans.push(Span::raw(run));
    Line::from(spans)
}

/// `12s ago  OOM  step 41  forward/model.head  wanted 2.00 GiB, 120 MiB free`.
fn event_line(
    theme: &Theme,
    event: &AllocatorEvent,
    steps: StepOrigin,
    now_ms: u64,
) -> Line<'static> {
    let style = if event.kind.is_oom() {
        theme.crit
    } else {
        theme.value
    };
    let mut spans = vec![
        Span::styled(
            format!(
                "{:>8}  ",
                crate::model::time::age_label(event.at_ms, now_ms)
            ),
            theme.dim,
        ),
        Span::styled(event.kind.title(), style),
    ];
    if let Some(step) = event.step {
        spans.push(Span::styled(
            format!("  {}", steps.words(step)),
            theme.label,
        ));
    }
    if !event.label.is_empty() {
        spans.push(Span::styled(format!("  {}", event.label), theme.value));
    }
    let detail = event_detail(&event.kind);
    if !detail.is_empty() {
        spans.push(Span::styled(format!("  {detail}"), theme.label));
    }
    Line::from(spans)
}

/// The figures that matter for each kind, in words.
fn event_detail(kind: &EventKind) -> String {
    let b = |r: &crate::model::Reading<u64>| panel_text::or_na_bytes(r);
    match kind {
        EventKind::Oom {
            requested,
            device_free,
            allocated,
            reserved,
            ..
        } => format!(
            "wanted {}, {} free, allocated {}, reserved {}",
            b(requested),
            b(device_free),
            b(allocated),
            b(reserved)
        ),
        EventKind::OomError { requested } if requested.is_ok() => {
            format!("wanted {}", b(requested))
        }
        EventKind::PhaseEnd { peak } => format!("peak {}", b(peak)),
        EventKind::StepEnd {
            peak_allocated,
            duration_ns,
            ..
        } => format!(
            "peak {}, {}",
            b(peak_allocated),
            duration_ns
                .as_ref()
                .map_or(panel_text::NA.to_string(), |ns| format!(
                    "{:.0} ms",
                    *ns as f64 / 1e6
                ))
        ),
        EventKind::NewHighWater { peak, previous } => {
            format!("{} (was {})", b(peak), b(previous))
        }
        EventKind::AllocRetry { retries } => format!("{} so far", panel_text::or_na_count(retries)),
        EventKind::SnapshotWritten { size, peak, .. } => {
            format!("{} file, peak {}", b(size), b(peak))
        }
        EventKind::ForeignPeakReset { before, after } | EventKind::EmptyCache { before, after } => {
            format!("{} -> {}", b(before), b(after))
        }
        EventKind::MemoryKinds {
            parameters,
            buffers,
            gradients,
            optimizer_state,
        } => format!(
            "params {}, buffers {}, grads {}, optimizer {}",
            b(parameters),
            b(buffers),
            b(gradients),
            b(optimizer_state)
        ),
        _ => String::new(),
    }
}

#[cfg(test)]
mod event_detail_tests {
    use super::*;
    use crate::model::absent::Absent;

    #[test]
    fn memory_by_kind_names_each_figure_and_an_unknown_one_is_na_not_zero() {
        let kind = EventKind::MemoryKinds {
            parameters: Ok(4 << 30),
            buffers: Err(Absent::NotSupported),
            gradients: Ok(4 << 30),
            optimizer_state: Ok(8 << 30),
        };
        let text = event_detail(&kind);
        assert!(text.starts_with("params 4.00 GiB, buffers n/a"), "{text}");
        assert!(text.ends_with("optimizer 8.00 GiB"), "{text}");
    }
}
