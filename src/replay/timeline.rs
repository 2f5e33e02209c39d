//! What replay learns from reading a recording once, at open: its span, the moments worth
//! jumping to (the largest peak, OOMs, the writers' events) and how many events it holds.
//! The events themselves are not kept: they are fed to the monitor as they are read, to lay
//! the checkpoints (see `cursor`), and read from the file again as the cursor moves, so
//! memory does not grow with the recording.

use super::cursor::Checkpoints;
use crate::model::EventKind;
use crate::record::{Header, Recording};
use crate::sources::runner::SourceEvent;

/// Marks kept at most (about 100 bytes each); a recording with more events marks the first.
const MAX_MARKS: usize = 65_536;

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
    /// Events the recording holds, up to any damage.
    pub events: u64,
    /// Where the cursor starts and can go back to: the first complete screen.
    pub first_ms: u64,
    pub last_ms: u64,
    /// Sorted by time.
    pub marks: Vec<Mark>,
    /// Why not all of the recording is there: damage, or records skipped.
    pub cut_short: Option<String>,
}

impl Timeline {
    /// Reads the whole recording once, feeding each event to `checkpoints` as it goes.
    pub fn scan(recording: Recording, checkpoints: &mut Checkpoints) -> Timeline {
        let header = recording.header().clone();
        let mut cut_short = None;
        let mut peak: Option<(u64, u64, u32)> = None;
        let mut marks = Vec::new();
        let (mut events, mut first_any, mut first_screen, mut last_ms) = (0, None, None, None);
        let mut items = recording.events();
        // Not `for`: the checkpoints take the reader's place after each event.
        while let Some(item) = items.next() {
            let (at_ms, event) = match item {
                Ok(pair) => pair,
                Err(e) => {
                    cut_short = Some(format!("the recording is damaged: {e}"));
                    break;
                }
            };
            events += 1;
            first_any.get_or_insert(at_ms);
            // The cursor starts where the screen is first complete: at the first GPU sample
            // (or NVML's refusal), not at a host sample that came a moment earlier.
            if matches!(
                event,
                SourceEvent::Device(_) | SourceEvent::NvmlUnavailable(_)
            ) {
                first_screen.get_or_insert(at_ms);
            }
            last_ms = Some(last_ms.map_or(at_ms, |l: u64| l.max(at_ms)));
            if marks.len() < MAX_MARKS {
                note_marks(at_ms, &event, &mut peak, &mut marks);
            } else {
                note_marks(at_ms, &event, &mut peak, &mut Vec::new());
            }
            checkpoints.feed(at_ms, event, &items);
        }
        // Said with the rest of why the screen does not hold everything.
        if let Some(skipped) = items.skipped_notice() {
            cut_short = Some(match cut_short {
                Some(why) => format!("{why}; {skipped}"),
                None => skipped,
            });
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
        let first_ms = first_screen.or(first_any).unwrap_or(header.started_ms);
        let last_ms = last_ms.unwrap_or(first_ms);
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
            // The fast memory sampling's peak of the interval, this sample's reading included.
            let used = sample.memory_peak.map(|p| p.used).or(sample
                .memory
                .as_ref()
                .ok()
                .map(|m| m.used));
            if let Some(used) = used
                && peak.is_none_or(|(value, _, _)| used > value)
            {
                // Where it reached the monitor, so that jumping there shows it.
                *peak = Some((used, sample.at_ms.max(recorded_ms), sample.index));
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
