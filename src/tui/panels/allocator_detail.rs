//! The allocator part of the detail pane, for a process that publishes its allocator's
//! figures: who is writing, a bar that splits NVML's figure into allocated, the allocator's
//! cache and what lies outside the allocator, charts of allocated and reserved (every writer
//! sample, so spikes between two polls show), a line of step ends and OOMs on the same time
//! axis, and the latest events. Where the true peak was and every OOM with its figures are
//! pinned above the charts: the event list scrolls within a second, and they are what the
//! person came for.

use super::{fmt, spark};
use crate::history::column_of;
use crate::model::allocator::split;
use crate::model::time::age_label;
use crate::model::writer_fold::{Oom, OomOutcome, PeakAt};
use crate::model::{AllocatorEvent, EventKind, ProcessAllocator, WriterLiveness, units};
use crate::state::ChannelState;
use crate::tui::rows::TableRow;
use crate::tui::theme::Theme;
use crate::tui::view::View;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

/// Recent events listed under the chart.
const EVENTS_SHOWN: usize = 4;
/// OOMs pinned above the charts, the newest first; older ones are counted.
const OOMS_PINNED: usize = 3;

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
    out.push(peak_line(theme, allocator.peak.as_ref(), view.now_ms));
    out.extend(oom_lines(theme, &allocator.ooms, view.now_ms));
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

/// How far apart NVML's figure for the row and the allocator's figures were read, when more
/// than about one NVML interval: the breakdown then mixes two moments. The allocator's are
/// as of the last poll while the writer runs; after it ended, as of its last sample or
/// event (later polls only re-read what it left).
fn readings_apart(
    view: &View,
    row: &TableRow,
    allocator: &ProcessAllocator,
    state: Option<&ChannelState>,
) -> Option<u64> {
    let state = state?;
    let nvml_at = view
        .snapshot
        .devices
        .iter()
        .find(|d| d.info.index == row.gpu_index)?
        .sample
        .as_ref()?
        .at_ms;
    let allocator_at = if allocator.liveness.is_running() {
        state.fold.last_poll_ms
    } else {
        let last_point = state
            .on_gpu(row.gpu_index)
            .and_then(|(_, series)| series?.allocated.last())
            .map(|(at, _)| at);
        let last_event = state.fold.recent.back().map(|e| e.at_ms);
        last_point.max(last_event)?
    };
    let apart = nvml_at.abs_diff(allocator_at);
    (apart > view.ui.interval_ms).then_some(apart)
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

/// `A.PEAK 12.0 GiB at step 40, backward, 2m ago`: the true peak and where it happened, or
/// that only the framework's counter knows it (then when and where are not known).
fn peak_line(theme: &Theme, peak: Option<&PeakAt>, now_ms: u64) -> Line<'static> {
    let mut spans = vec![fmt::label(theme, "A.PEAK")];
    let Some(peak) = peak else {
        spans.push(Span::styled("-", theme.dim));
        return Line::from(spans);
    };
    spans.push(Span::styled(units::bytes(peak.value), theme.value));
    if !peak.located {
        spans.push(Span::styled(
            " (time unknown: framework counter)",
            theme.dim,
        ));
        return Line::from(spans);
    }
    let mut place = Vec::new();
    if let Some(step) = peak.step {
        place.push(format!("step {step}"));
    }
    if !peak.phase.is_empty() {
        place.push(peak.phase.clone());
    }
    place.push(age_label(peak.at_ms, now_ms));
    let at = if peak.step.is_some() { " at " } else { " " };
    spans.push(Span::styled(
        format!("{at}{}", place.join(", ")),
        theme.label,
    ));
    Line::from(spans)
}

/// The newest OOMs, each with what was asked, what was free, what the allocator held, where
/// and whether it killed the program; older ones are counted.
fn oom_lines(theme: &Theme, ooms: &[Oom], now_ms: u64) -> Vec<Line<'static>> {
    let mut out: Vec<Line<'static>> = ooms
        .iter()
        .rev()
        .take(OOMS_PINNED)
        .map(|oom| oom_line(theme, oom, now_ms))
        .collect();
    if ooms.len() > OOMS_PINNED {
        out.push(Line::styled(
            format!("{} earlier OOMs", ooms.len() - OOMS_PINNED),
            theme.dim,
        ));
    }
    out
}

/// `2m ago  OOM fatal  step 80  wanted 6.00 GiB, 1.00 GiB free, alloc 9.00 GiB, resv 10.0 GiB
/// backward`: the phase last, where a narrow pane cuts it rather than a figure.
fn oom_line(theme: &Theme, oom: &Oom, now_ms: u64) -> Line<'static> {
    let b = |r: &crate::model::Reading<u64>| fmt::or_na_bytes(r);
    let outcome = match oom.outcome {
        OomOutcome::Fatal => theme.crit,
        OomOutcome::Caught => theme.ok,
        OomOutcome::Pending => theme.dim,
    };
    let mut spans = vec![
        Span::styled(format!("{:>8}  ", age_label(oom.at_ms, now_ms)), theme.dim),
        Span::styled("OOM ", theme.crit),
        Span::styled(oom.outcome.label(), outcome),
    ];
    if let Some(step) = oom.step {
        spans.push(Span::styled(format!("  step {step}"), theme.label));
    }
    spans.push(Span::styled(
        format!(
            "  wanted {}, {} free, alloc {}, resv {}",
            b(&oom.requested),
            b(&oom.device_free),
            b(&oom.allocated),
            b(&oom.reserved)
        ),
        theme.label,
    ));
    if !oom.phase.is_empty() {
        spans.push(Span::styled(format!("  {}", oom.phase), theme.value));
    }
    Line::from(spans)
}

/// ` │ ` between the parts of a line.
fn separator(theme: &Theme) -> Span<'static> {
    Span::styled(format!(" {} ", theme.glyphs.separator), theme.dim)
}

/// The bar, `width` cells, and its legend. `used` is NVML's figure, `apart` how far apart it
/// and the allocator's were read when that is more than an interval. Only figures of one
/// moment are subtracted: when the readings are apart, or reserved exceeds used (which one
/// moment cannot give), what lies outside the allocator is not claimed.
fn breakdown(
    theme: &Theme,
    allocator: &ProcessAllocator,
    (used, apart): (Option<u64>, Option<u64>),
    width: u16,
) -> Vec<Line<'static>> {
    let d = &allocator.device;
    let (Ok(allocated), Ok(reserved), Some(used)) = (&d.allocated, &d.reserved, used) else {
        let why = if used.is_none() {
            "NVML's figure for this process is n/a"
        } else {
            "the allocator does not publish allocated and reserved"
        };
        return vec![
            Line::styled(format!("no breakdown: {why}"), theme.dim),
            Line::default(),
        ];
    };
    let mut parts = split(*allocated, *reserved, used);
    let skew = match apart {
        Some(ms) => Some(format!("NVML and the allocator read {} apart", seconds(ms))),
        None if parts.skewed => Some("reserved > used: read at different moments".to_string()),
        None => None,
    };
    if skew.is_some() {
        parts.outside = 0;
    }
    let glyphs = theme.glyphs.breakdown;
    let styles = [theme.sparkline, theme.sparkline_alt, theme.warn];
    let inner = usize::from(width.saturating_sub(2));
    let cells = cells_for(&[parts.allocated, parts.cache, parts.outside], inner);
    let mut bar = vec![Span::styled(theme.glyphs.bar_left, theme.border)];
    for ((n, glyph), style) in cells.iter().zip(glyphs).zip(styles) {
        bar.push(Span::styled(glyph.repeat(*n), style));
    }
    bar.push(Span::styled(theme.glyphs.bar_right, theme.border));

    let mut legend = Vec::new();
    let names = ["allocated", "cache", "outside"];
    let values = [parts.allocated, parts.cache, parts.outside];
    for (i, ((name, value), glyph)) in names.iter().zip(values).zip(glyphs).enumerate() {
        if i > 0 {
            legend.push(separator(theme));
        }
        legend.push(Span::styled(format!("{glyph} {name} "), styles[i]));
        if i == 2 && skew.is_some() {
            legend.push(Span::styled(fmt::NA, theme.dim));
        } else {
            legend.push(Span::styled(units::bytes(value), theme.value));
        }
    }
    legend.push(Span::styled(
        format!(" = {} used (NVML)", units::bytes(used)),
        theme.label,
    ));
    if let Some(skew) = skew {
        legend.push(Span::styled(format!("; {skew}"), theme.warn));
    }
    vec![Line::from(bar), Line::from(legend)]
}

/// `0.4s`, `3s`, `2m`: a gap between two readings.
fn seconds(ms: u64) -> String {
    match ms {
        0..10_000 => format!("{:.1}s", ms as f64 / 1000.0),
        10_000..120_000 => format!("{}s", ms / 1000),
        _ => format!("{}m", ms / 60_000),
    }
}

/// Cells for each part, rounded so they add up to `inner` exactly (largest remainder).
fn cells_for(parts: &[u64], inner: usize) -> Vec<usize> {
    let total: u64 = parts.iter().sum();
    if total == 0 || inner == 0 {
        return vec![0; parts.len()];
    }
    let exact: Vec<f64> = parts
        .iter()
        .map(|&p| p as f64 * inner as f64 / total as f64)
        .collect();
    let mut cells: Vec<usize> = exact.iter().map(|e| e.floor() as usize).collect();
    let mut left = inner.saturating_sub(cells.iter().sum());
    let mut order: Vec<usize> = (0..parts.len()).collect();
    order.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())));
    for i in order {
        if left == 0 {
            break;
        }
        cells[i] += 1;
        left -= 1;
    }
    cells
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
        EventKind::ForeignPeakReset { before, after } | EventKind::EmptyCache { before, after } => {
            format!("{} -> {}", b(before), b(after))
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bar_cells_add_up_to_the_bar_width() {
        for inner in [0usize, 1, 7, 40, 101] {
            let cells = cells_for(&[3, 3, 3], inner);
            assert_eq!(cells.iter().sum::<usize>(), inner);
        }
        assert_eq!(cells_for(&[0, 0, 0], 10), vec![0, 0, 0]);
        assert_eq!(cells_for(&[10, 0, 30], 8), vec![2, 0, 6]);
    }

    fn text(line: &Line) -> String {
        line.spans.iter().map(|s| s.content.as_ref()).collect()
    }

    /// 9 GiB allocated and 10 reserved against NVML's `used`, read `apart` ms apart.
    fn legend(used: u64, apart: Option<u64>) -> String {
        const GIB: u64 = 1 << 30;
        let mut device = crate::model::writer_fold::test_support::device(None, None);
        device.allocated = Ok(9 * GIB);
        device.reserved = Ok(10 * GIB);
        let allocator = ProcessAllocator {
            device,
            peak: None,
            ooms: Vec::new(),
            step: None,
            label: String::new(),
            liveness: WriterLiveness::Live,
            rank: None,
        };
        let lines = breakdown(
            &Theme::new(false, true),
            &allocator,
            (Some(used), apart),
            40,
        );
        text(&lines[1])
    }

    #[test]
    fn outside_is_claimed_only_from_figures_of_one_moment() {
        const GIB: u64 = 1 << 30;
        let same_moment = legend(12 * GIB, None);
        assert!(
            same_moment.contains("outside 2.00 GiB = 12.0 GiB used"),
            "{same_moment}"
        );
        assert!(!same_moment.contains("apart"), "{same_moment}");
        // Read 2.5 s apart: the 2 GiB would be a mix of two moments.
        let apart = legend(12 * GIB, Some(2_500));
        assert!(
            apart.contains(
                "outside n/a = 12.0 GiB used (NVML); NVML and the allocator read 2.5s apart"
            ),
            "{apart}"
        );
        // Reserved above used cannot be one moment either.
        let skewed = legend(8 * GIB, None);
        assert!(
            skewed.contains(
                "outside n/a = 8.00 GiB used (NVML); reserved > used: read at different moments"
            ),
            "{skewed}"
        );
    }
}
