//! What replay learns from reading a recording once, at open: its span, the moments worth
//! jumping to (the largest peak: the allocator's true peak when a writer gave one, NVML's
//! otherwise; each OOM once, as the one fold merged it, with its figures; the writers'
//! other events) and how many events it holds.
//! The events themselves are not kept: they are fed to the monitor as they are read, to lay
//! the checkpoints (see `cursor`), and read from the file again as the cursor moves, so
//! memory does not grow with the recording.

use super::cursor::Checkpoints;
use crate::model::EventKind;
use crate::model::SourceEvent;
use crate::model::units::bytes;
use crate::model::writer_fold::{Oom, PeakAt, WriterFold};
use crate::model::{NA, Periods, Reading, StepOrigin};
use crate::recording::folds::RecordedFolds;
use crate::recording::scope::Scope;
use crate::recording::{Header, Recording};
use std::collections::HashMap;

/// Marks kept at most (about 100 bytes each); a recording with more events marks the first.
const MAX_MARKS: usize = 65_536;

/// Why a moment is worth jumping to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MarkKind {
    /// The highest true peak of any writer, or without writers the highest NVML used memory
    /// of any GPU.
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
    /// The refresh period: the header's, then each change recorded.
    pub periods: Periods,
}

impl Timeline {
    /// Reads the whole recording once, feeding each event to `checkpoints` as it goes.
    pub fn scan(recording: Recording, checkpoints: &mut Checkpoints) -> Timeline {
        let header = recording.header().clone();
        let mut cut_short = None;
        let mut peak: Option<(u64, u64, u32)> = None;
        // The marks are of what happened while it recorded: a writer's ring history from
        // before (its peak, its OOMs) is no moment of the file to jump to.
        let mut writers = Writers {
            scope: Scope::recording_only(header.started_ms),
            folds: RecordedFolds::default(),
            oom_seen: HashMap::new(),
            peak: None,
            peak_value: 0,
        };
        let mut marks = Vec::new();
        let mut periods = Periods::constant(header.interval_ms);
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
            if let SourceEvent::Interval { ms } = event {
                periods.change(at_ms, ms);
            }
            if marks.len() < MAX_MARKS {
                note_marks(at_ms, &event, &mut peak, &mut marks);
            } else {
                note_marks(at_ms, &event, &mut peak, &mut Vec::new());
            }
            writers.feed(at_ms, &event);
            checkpoints.feed(at_ms, event, &items);
        }
        // Said with the rest of why the screen does not hold everything.
        if let Some(skipped) = items.skipped_notice() {
            cut_short = Some(match cut_short {
                Some(why) => format!("{why}; {skipped}"),
                None => skipped,
            });
        }
        let allocator_peak = writers.peak.take();
        writers.oom_marks(&mut marks);
        if let Some(mark) = allocator_peak {
            marks.push(mark);
        } else if let Some((value, at_ms, gpu)) = peak {
            marks.push(Mark {
                at_ms,
                kind: MarkKind::LargestPeak,
                label: format!(
                    "largest peak (NVML, no allocator figures): GPU {gpu} at {}",
                    bytes(value)
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
            periods,
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
            let used = sample.memory_peak.as_ref().map(|p| p.used).or(sample
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
                        // One mark per failure, from the fold (`Writers::oom_marks`).
                        EventKind::Oom { .. } | EventKind::OomError { .. } => continue,
                        // Step-level bookkeeping, not moments to jump to.
                        EventKind::StepEnd { .. } | EventKind::MemoryKinds { .. } => continue,
                        _ => MarkKind::Event,
                    };
                    // The status line says it to a person: `new peak`, not `new_high_water`.
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

/// The writers of the recording, folded as the monitor folds them, and when each OOM and
/// each new true peak first reached the monitor (where jumping to it shows it).
struct Writers {
    /// What of the channels' batches the marks cover (`Scope::recording_only`).
    scope: Scope,
    folds: RecordedFolds,
    /// (channel path, OOM time, slot) -> when the poll that brought it was recorded.
    oom_seen: HashMap<(String, u64, Option<u16>), u64>,
    /// The highest true peak so far, as its mark.
    peak: Option<Mark>,
    peak_value: u64,
}

impl Writers {
    fn feed(&mut self, recorded_ms: u64, event: &SourceEvent) {
        match event {
            SourceEvent::Started { devices, .. } => self.folds.started(devices),
            SourceEvent::Device(sample) => self.folds.device(sample),
            SourceEvent::Channels(batch) => {
                let scoped = self
                    .scope
                    .apply(recorded_ms, SourceEvent::Channels(batch.clone()));
                if let Some((_, SourceEvent::Channels(batch))) = scoped {
                    self.folds.batch(*batch);
                    self.note(recorded_ms);
                }
            }
            _ => {}
        }
    }

    fn note(&mut self, recorded_ms: u64) {
        for (path, fold) in &self.folds.writers {
            for oom in &fold.ooms {
                self.oom_seen
                    .entry((path.clone(), oom.at_ms, oom.slot))
                    .or_insert(recorded_ms.max(oom.at_ms));
            }
            for slot in &fold.slots {
                if let Some(peak) = slot.true_peak()
                    && peak.value > self.peak_value
                {
                    self.peak_value = peak.value;
                    self.peak = Some(Mark {
                        at_ms: recorded_ms.max(peak.at_ms),
                        kind: MarkKind::LargestPeak,
                        label: peak_label(fold, slot.gpu, peak),
                    });
                }
            }
        }
    }

    /// One mark per OOM, labelled with its figures and outcome as finally known.
    fn oom_marks(&self, marks: &mut Vec<Mark>) {
        for (path, fold) in &self.folds.writers {
            for oom in &fold.ooms {
                let key = (path.clone(), oom.at_ms, oom.slot);
                let Some(&at_ms) = self.oom_seen.get(&key) else {
                    continue;
                };
                if marks.len() < MAX_MARKS {
                    marks.push(Mark {
                        at_ms,
                        kind: MarkKind::Oom,
                        label: format!(
                            "{}: {}",
                            who(fold, fold.gpu_of_oom(oom)),
                            oom_label(oom, fold.steps_from)
                        ),
                    });
                }
            }
        }
    }
}

/// `pid 4242 on GPU 0`, or the channel's file where the pid is not mapped.
fn who(fold: &WriterFold, gpu: Option<u32>) -> String {
    let writer = match (fold.host_pid, &fold.identity) {
        (Some(pid), _) => format!("pid {pid}"),
        (None, Some(identity)) => identity.file.clone(),
        (None, None) => "a writer".into(),
    };
    match gpu {
        Some(gpu) => format!("{writer} on GPU {gpu}"),
        None => writer,
    }
}

/// `allocator's true peak: pid 4242 on GPU 0 at 12.0 GiB, step 40, backward`.
fn peak_label(fold: &WriterFold, gpu: Option<u32>, peak: &PeakAt) -> String {
    let mut label = format!(
        "allocator's true peak: {} at {}",
        who(fold, gpu),
        bytes(peak.value)
    );
    place(&mut label, peak.step, fold.steps_from, &peak.phase);
    label
}

/// `OOM: asked 6.00 GiB, 3.00 GiB free, allocated 10.2 GiB, step 80, forward (fatal)`: short
/// enough for the status line of a 140-column terminal.
fn oom_label(oom: &Oom, steps: StepOrigin) -> String {
    let figure = |r: &Reading<u64>| r.as_ref().map_or(NA.into(), |b| bytes(*b));
    let mut label = format!(
        "OOM: asked {}, {} free, allocated {}",
        figure(&oom.requested),
        figure(&oom.device_free),
        figure(&oom.allocated)
    );
    place(&mut label, oom.step, steps, &oom.phase);
    label + &format!(" ({})", oom.outcome.label())
}

fn place(label: &mut String, step: Option<u64>, steps: StepOrigin, phase: &str) {
    if let Some(step) = step {
        label.push_str(&format!(", {}", steps.words(step)));
    }
    if !phase.is_empty() {
        label.push_str(&format!(", {phase}"));
    }
}
