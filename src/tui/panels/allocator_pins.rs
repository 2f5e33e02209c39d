//! What the detail pane pins above an instrumented process's charts and scrolling events:
//! where its true peak was, and its newest OOMs with their figures and outcome.

use super::panel_text;
use crate::model::StepOrigin;
use crate::model::foresight::{Forecast, describe};
use crate::model::time::age_label;
use crate::model::units;
use crate::model::writer_fold::{Oom, OomOutcome, PeakAt};
use crate::terminal_kit::theme::Theme;
use ratatui::text::{Line, Span};

/// ` │ OOM in about 120 steps (4 min)` when the step peaks foresee one, ` │ step peaks
/// rising 16.0 MiB/step` for a leak with the ceiling far off; nothing when the forecast is
/// silent. Appended to the peak's line.
pub fn forecast_spans(theme: &Theme, forecast: &Forecast) -> Vec<Span<'static>> {
    let Some(words) = describe(forecast) else {
        return Vec::new();
    };
    let style = match forecast {
        Forecast::OomIn { .. } => theme.warn,
        _ => theme.label,
    };
    vec![
        super::panel_text::separator(theme),
        Span::styled(words, style),
    ]
}

/// OOMs pinned above the charts, the newest first; older ones are counted.
const OOMS_PINNED: usize = 3;

/// `A.PEAK 12.0 GiB at step 40, backward, 2m ago`: the true peak and where it happened, or
/// that only the framework's counter knows it (then when and where are not known).
pub fn peak_line(
    theme: &Theme,
    peak: Option<&PeakAt>,
    steps: StepOrigin,
    now_ms: u64,
) -> Line<'static> {
    let mut spans = vec![panel_text::label(theme, "A.PEAK")];
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
        place.push(steps.words(step));
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
pub fn oom_lines(
    theme: &Theme,
    ooms: &[Oom],
    steps: StepOrigin,
    now_ms: u64,
) -> Vec<Line<'static>> {
    let mut out: Vec<Line<'static>> = ooms
        .iter()
        .rev()
        .take(OOMS_PINNED)
        .map(|oom| oom_line(theme, oom, steps, now_ms))
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
fn oom_line(theme: &Theme, oom: &Oom, steps: StepOrigin, now_ms: u64) -> Line<'static> {
    let b = |r: &crate::model::Reading<u64>| panel_text::or_na_bytes(r);
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
        spans.push(Span::styled(
            format!("  {}", steps.words(step)),
            theme.label,
        ));
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
    if let Some(note) = oom.sources_note() {
        spans.push(Span::styled(format!("  ({note})"), theme.dim));
    }
    Line::from(spans)
}
