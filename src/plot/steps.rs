//! Where each training step began and ended, for the alternate shading behind a panel: from
//! the step writers stamp on every sample and from their STEP_END events (which name the
//! step that ended and how long it took).

use std::collections::BTreeMap;

/// Steps tracked per writer; a program logging more is far too dense to shade anyway.
const MAX_STEPS: usize = 100_000;

/// One step's extent in wall time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepSpan {
    pub step: u64,
    pub start_ms: u64,
    pub end_ms: u64,
}

#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    first_ms: Option<u64>,
    last_ms: Option<u64>,
    /// The STEP_END event's time and the duration it reported.
    end_ms: Option<u64>,
    duration_ms: Option<u64>,
}

/// The steps of one writer, collected while the recording is read.
#[derive(Clone, Debug, Default)]
pub struct StepTracker {
    steps: BTreeMap<u64, Seen>,
    overflow: bool,
}

impl StepTracker {
    /// A sample taken during `step`.
    pub fn point(&mut self, step: u64, at_ms: u64) {
        if let Some(seen) = self.entry(step) {
            seen.first_ms = Some(seen.first_ms.map_or(at_ms, |f| f.min(at_ms)));
            seen.last_ms = Some(seen.last_ms.map_or(at_ms, |l| l.max(at_ms)));
        }
    }

    /// A STEP_END event for `step`.
    pub fn ended(&mut self, step: u64, at_ms: u64, duration_ns: Option<u64>) {
        if let Some(seen) = self.entry(step) {
            seen.end_ms = Some(at_ms);
            seen.duration_ms = duration_ns.map(|ns| ns / 1_000_000);
        }
    }

    fn entry(&mut self, step: u64) -> Option<&mut Seen> {
        if self.steps.len() >= MAX_STEPS && !self.steps.contains_key(&step) {
            self.overflow = true;
            return None;
        }
        Some(self.steps.entry(step).or_default())
    }

    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// More steps than were tracked.
    pub fn overflowed(&self) -> bool {
        self.overflow
    }

    /// Each step from its start to its end. A step's start is its STEP_END time less its
    /// duration, else its first sample; its end is its STEP_END time, else where the next
    /// step starts (so consecutive steps share an edge), else its last sample.
    pub fn spans(&self) -> Vec<StepSpan> {
        let starts: Vec<(u64, Option<u64>)> = self
            .steps
            .iter()
            .map(|(&step, seen)| {
                let from_event = seen
                    .end_ms
                    .zip(seen.duration_ms)
                    .map(|(end, d)| end.saturating_sub(d));
                let start = match (from_event, seen.first_ms) {
                    (Some(e), Some(f)) => Some(e.min(f)),
                    (e, f) => e.or(f),
                };
                (step, start)
            })
            .collect();
        let mut spans = Vec::with_capacity(starts.len());
        for (i, &(step, start)) in starts.iter().enumerate() {
            let Some(seen) = self.steps.get(&step) else {
                continue;
            };
            let next_start = starts
                .get(i + 1)
                .filter(|(next, _)| *next == step.saturating_add(1))
                .and_then(|(_, s)| *s);
            let end = seen.end_ms.or(next_start).or(seen.last_ms);
            if let (Some(start), Some(end)) = (start.or(end), end.or(start)) {
                spans.push(StepSpan {
                    step,
                    start_ms: start.min(end),
                    end_ms: end.max(start),
                });
            }
        }
        spans
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_from_samples_share_edges_and_events_set_exact_ends() {
        let mut t = StepTracker::default();
        for (step, at) in [
            (0, 100),
            (0, 900),
            (1, 1000),
            (1, 1900),
            (2, 2000),
            (2, 2500),
        ] {
            t.point(step, at);
        }
        // Step 2 ended at 2600 after 700 ms: it began at 1900, before its first sample.
        t.ended(2, 2600, Some(700_000_000));
        let spans = t.spans();
        let ends: Vec<(u64, u64, u64)> = spans
            .iter()
            .map(|s| (s.step, s.start_ms, s.end_ms))
            .collect();
        assert_eq!(ends, vec![(0, 100, 1000), (1, 1000, 1900), (2, 1900, 2600)]);
    }

    #[test]
    fn an_event_alone_makes_a_span_and_too_many_steps_are_flagged() {
        let mut t = StepTracker::default();
        t.ended(5, 10_000, None);
        assert_eq!(
            t.spans(),
            vec![StepSpan {
                step: 5,
                start_ms: 10_000,
                end_ms: 10_000
            }]
        );
        for s in 0..(MAX_STEPS as u64 + 10) {
            t.point(s, s);
        }
        assert!(t.overflowed());
    }
}
