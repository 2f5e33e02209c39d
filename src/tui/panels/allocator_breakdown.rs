//! The detail pane's split of NVML's figure for an instrumented process into what its
//! allocator holds for live tensors, what it keeps cached, and what lies outside it; said
//! to be unknown when the two figures were read at different moments.

use super::panel_text;
use super::panel_text::separator;
use crate::model::allocator::split;
use crate::model::{AllocatorSnapshot, ProcessAllocator, units};
use crate::terminal_kit::theme::Theme;
use crate::tui::rows::TableRow;
use crate::tui::view::View;
use ratatui::text::{Line, Span};

/// How far apart NVML's figure for the row and the allocator's figures were read, when more
/// than about one NVML interval: the breakdown then mixes two moments. The allocator's are
/// as of the last poll while the writer runs; after it ended, as of its last sample or
/// event (later polls only re-read what it left).
pub fn readings_apart(
    view: &View,
    row: &TableRow,
    allocator: &ProcessAllocator,
    channel: Option<&AllocatorSnapshot>,
) -> Option<u64> {
    let channel = channel?;
    let nvml_at = view
        .snapshot
        .devices
        .iter()
        .find(|d| d.info.index == row.gpu_index)?
        .sample
        .as_ref()?
        .at_ms;
    let allocator_at = if allocator.liveness.is_running() {
        channel.last_poll_ms
    } else {
        let last_point = channel
            .slot_on_gpu(row.gpu_index)
            .and_then(|(_, slot)| view.history.allocator_slot(&channel.path, slot))
            .and_then(|series| series.allocated.last())
            .map(|(at, _)| at);
        let last_event = channel.recent_events.last().map(|e| e.at_ms);
        last_point.max(last_event)?
    };
    let apart = nvml_at.abs_diff(allocator_at);
    (apart > view.interval_ms).then_some(apart)
}

/// The bar, `width` cells, and its legend. `used` is NVML's figure, `apart` how far apart it
/// and the allocator's were read when that is more than an interval. Only figures of one
/// moment are subtracted: when the readings are apart, or reserved exceeds used (which one
/// moment cannot give), what lies outside the allocator is not claimed.
pub fn breakdown(
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
            legend.push(Span::styled(panel_text::NA, theme.dim));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::WriterLiveness;

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
            steps_from: crate::model::StepOrigin::Job,
            label: String::new(),
            liveness: WriterLiveness::Live,
            rank: None,
            attached: false,
            forecast: crate::model::foresight::foresee(&[], Default::default()),
            step_peaks: Default::default(),
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
