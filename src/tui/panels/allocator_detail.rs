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
use super::{fmt, spark};
use crate::history::column_of;
use crate::model::{AllocatorEvent, EventKind, ProcessAllocator, WriterLiveness};
use crate::state::ChannelState;
use crate::tui::rows::TableRow;
use crate::tui::theme::Theme;
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
    let state = channel(view, row);
    let mut out = vec![writer_line(theme, allocator, state)];
    let apart = readings_apart(view, row, allocator, state);
    out.extend(breakdown(
        theme,
        allocator,
        (row.vram.as_ref().ok().copied(), apart),
        width,
    ));
    let mut peak = peak_line(theme, allocator.peak.as_ref(), view.now_ms);
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
    out.extend(oom_lines(theme, &allocator.ooms, view.now_ms));
    if let Some(state) = state {
        let sites_on = state.fold.identity.as_ref().is_some_and(|i| i.sites);
        out.extend(super::held_sites::lines(
            theme,
            state.fold.relevant_snapshot(),
            state.fold.snapshot_drops.dropped().as_ref(),
            sites_on,
            view.ui.time_cursor,
            view.now_ms,
        ));
    }
    let slot = state.and_then(|s| s.on_gpu(row.gpu_index));
    match (state, slot) {
        (Some(state), Some((_, Some(series)))) => {
            let charts = [
                ("alloc", &series.allocated, theme.sparkline),
                ("resv", &series.reserved, theme.sparkline_alt),
            ];
            for (name, points, style) in charts {
                let [plot, label] =
                    spark::chart_with_peak(view, points, range, (chart_w, gpu_total, style));
                out.push(relabel(plot, theme, name));
                out.push(label);
            }
            out.push(ticks(theme, state, range, chart_w));
            // Pinned above already: OOMs and new peaks.
            let shown = state
                .newest_events()
                .into_iter()
                .filter(|e| !e.kind.is_oom() && !matches!(e.kind, EventKind::NewHighWater { .. }))
                .take(EVENTS_SHOWN);
            out.extend(shown.map(|e| event_line(theme, e, view.now_ms)));
        }
        _ => out.push(Line::styled("no allocator history yet", theme.dim)),
    }
    out
}

fn channel<'a>(view: &View<'a>, row: &TableRow) -> Option<&'a ChannelState> {
    view.monitor
        .allocators()
        .for_pid(row.key.pid, row.process())
}

/// `PyTorch torch 2.5.1 │ rank 0/8 │ step 1234 │ forward/model.layers.3 │ live`.
fn writer_line(
    theme: &Theme,
    allocator: &ProcessAllocator,
    state: Option<&ChannelState>,
) -> Line<'static> {
    let mut spans = vec![fmt::label(theme, "allocator")];
    if let Some(id) = state.and_then(|s| s.fold.identity.as_ref()) {
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
    if let Some(state) = state
        && state
            .fold
            .lost_samples
            .saturating_add(state.fold.lost_events)
            > 0
    {
        spans.push(Span::styled(
            format!(
                " (missed {} samples, {} events)",
                state.fold.lost_samples, state.fold.lost_events
            ),
            theme.warn,
        ));
    }
    Line::from(spans)
}

/// ` │ ` between the parts of a line.
pub(super) fn separator(theme: &Theme) -> Span<'static> {
    Span::styled(format!(" {} ", theme.glyphs.separator), theme.dim)
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
fn ticks(theme: &Theme, state: &ChannelState, (from, to): (u64, u64), width: u16) -> Line<'static> {
    let columns = usize::from(width);
    let mut marks: Vec<Option<(&'static str, Style)>> = vec![None; columns];
    for (at, _) in &state.fold.step_ticks {
        if let Some(col) = column_of(*at, from, to, columns) {
            marks[col].get_or_insert((theme.glyphs.step_tick, theme.dim));
        }
    }
    // OOMs win their column: they are what the person is looking for.
    for oom in &state.fold.ooms {
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
fn event_line(theme: &Theme, event: &AllocatorEvent, now_ms: u64) -> Line<'static> {
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
        spans.push(Span::styled(format!("  step {step}"), theme.label));
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
    let b = |r: &crate::model::Reading<u64>| fmt::or_na_bytes(r);
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
                .map_or(fmt::NA.to_string(), |ns| format!(
                    "{:.0} ms",
                    *ns as f64 / 1e6
                ))
        ),
        EventKind::NewHighWater { peak, previous } => {
            format!("{} (was {})", b(peak), b(previous))
        }
        EventKind::AllocRetry { retries } => format!("{} so far", fmt::or_na_count(retries)),
        EventKind::SnapshotWritten { size, peak, .. } => {
            format!("{} file, peak {}", b(size), b(peak))
        }
        EventKind::ForeignPeakReset { before, after } | EventKind::EmptyCache { before, after } => {
            format!("{} -> {}", b(before), b(after))
        }
        _ => String::new(),
    }
}
