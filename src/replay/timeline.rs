//! A recording loaded for replay: its events in time order, and the moments worth jumping
//! to (the largest peak, OOMs, the writers' events). Held in memory so that the cursor can go
//! back: going back rebuilds the monitor from the start, which takes a fraction of a second
//! for hours of recording. A recording larger than the budget is loaded up to the budget, and
//! the screen says so.

use crate::model::EventKind;
use crate::record::{Header, Recording};
use crate::sources::runner::SourceEvent;

/// Rough bytes held per loaded event and per allocator sample: what the budget counts.
const EVENT_COST: usize = 512;
const POINT_COST: usize = 64;
/// About a gigabyte of memory at most.
const BUDGET: usize = 1 << 30;

/// Why a moment is worth jumping to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MarkKind {
    /// The highest NVML used memory of any GPU in the recording.
    LargestPeak,
    Oom,
    /// Any other event a writer published (step ends excepted: there are too many).
    Event,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mark {
    pub at_ms: u64,
    pub kind: MarkKind,
    pub label: String,
}

pub struct Timeline {
    pub header: Header,
    /// `(wall ms, event)`, in the order recorded.
    pub events: Vec<(u64, SourceEvent)>,
    /// Where the cursor starts and can go back to: the first complete screen.
    pub first_ms: u64,
    pub last_ms: u64,
    /// Sorted by time.
    pub marks: Vec<Mark>,
    /// Why loading stopped early: damage, or the memory budget.
    pub cut_short: Option<String>,
}

impl Timeline {
    pub fn load(recording: Recording) -> Timeline {
        let header = recording.header().clone();
        let mut events = Vec::new();
        let mut cost = 0usize;
        let mut cut_short = None;
        let mut peak: Option<(u64, u64, u32)> = None;
        let mut marks = Vec::new();
        for item in recording.events() {
            let (at_ms, event) = match item {
                Ok(pair) => pair,
                Err(e) => {
                    cut_short = Some(format!("the recording is damaged: {e}"));
                    break;
                }
            };
            cost += event_cost(&event);
            if cost > BUDGET {
                cut_short = Some(format!(
                    "only the first {} of the recording fit in memory",
                    crate::model::time::duration_label(
                        at_ms.saturating_sub(events.first().map_or(at_ms, |(t, _)| *t))
                    )
                ));
                break;
            }
            note_marks(at_ms, &event, &mut peak, &mut marks);
            events.push((at_ms, event));
        }
        if let Some((value, at_ms, gpu)) = peak {
            marks.push(Mark {
                at_ms,
                kind: MarkKind::LargestPeak,
                label: format!(
                    "largest peak: GPU {gpu} at {}",
                    crate::model::units::bytes(value)
                ),
            });
        }
        marks.sort_by_key(|m| m.at_ms);
        // The cursor starts where the screen is first complete: at the first GPU sample
        // (or NVML's refusal), not at a host sample that came a moment earlier.
        let first_ms = events
            .iter()
            .find(|(_, e)| matches!(e, SourceEvent::Device(_) | SourceEvent::NvmlUnavailable(_)))
            .or(events.first())
            .map_or(header.started_ms, |(t, _)| *t);
        let last_ms = events.iter().map(|(t, _)| *t).max().unwrap_or(first_ms);
        Timeline {
            header,
            events,
            first_ms,
            last_ms,
            marks,
            cut_short,
        }
    }
}

fn event_cost(event: &SourceEvent) -> usize {
    match event {
        SourceEvent::Channels(batch) => {
            EVENT_COST
                + batch
                    .polls
                    .iter()
                    .map(|p| p.points.len() * POINT_COST + p.events.len() * EVENT_COST)
                    .sum::<usize>()
        }
        _ => EVENT_COST,
    }
}

/// `recorded_ms`: when the event reached the monitor. A writer's event comes with the poll
/// after it, so its mark is placed there: jumping to it shows it.
fn note_marks(
    recorded_ms: u64,
    event: &SourceEvent,
    peak: &mut Option<(u64, u64, u32)>,
    marks: &mut Vec<Mark>,
) {
    match event {
        SourceEvent::Device(sample) => {
            if let Ok(m) = &sample.memory
                && peak.is_none_or(|(value, _, _)| m.used > value)
            {
                // Where it reached the monitor, so that jumping there shows it.
                *peak = Some((m.used, sample.at_ms.max(recorded_ms), sample.index));
            }
        }
        SourceEvent::Channels(batch) => {
            for poll in &batch.polls {
                let pid = poll
                    .host_pid
                    .map_or_else(|| poll.identity.file.clone(), |p| format!("pid {p}"));
                for e in &poll.events {
                    let kind = match e.kind {
                        EventKind::Oom { .. } | EventKind::OomError { .. } => MarkKind::Oom,
                        EventKind::StepEnd { .. } => continue,
                        _ => MarkKind::Event,
                    };
                    // The status line says it to a person: `OOM (uncaught)`, not `oom_error`.
                    let what = if e.label.is_empty() {
                        e.kind.title()
                    } else {
                        format!("{} {}", e.kind.title(), e.label)
                    };
                    marks.push(Mark {
                        at_ms: e.at_ms.max(recorded_ms),
                        kind,
                        label: format!("{pid}: {what}"),
                    });
                }
            }
        }
        // A recording gives a batch's members one by one.
        _ => {}
    }
}
