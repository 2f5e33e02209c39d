//! What part of a recording `report`, `plot` and `export` read: by default what happened
//! while it recorded, optionally narrowed to a time window (`--since`, `--until`) and to
//! some processes (`--pid`, `--job`). One `Scope` filters the stream of `SourceEvent`s a
//! recording yields, before any of the three folds it, so they agree on what they cover.
//!
//! Ring history: a recorder's first poll of a channel reads everything still in its rings,
//! including samples and events from long before the recording began, even of writers that
//! ended long ago. The file keeps them as read (no format change): a point or writer event
//! whose `at_ms` is before the header's `started_ms` is history. It is left out unless
//! `--history` asks for it, and what was left out is said in one line (`Told::notes`).

use super::when::When;
use crate::model::SourceEvent;
use crate::model::{ChannelPoll, EventKind};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

/// The scope options as given on the command line (`cli::ScopeArgs` parses them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Asked {
    pub history: bool,
    pub since: Option<When>,
    pub until: Option<When>,
    pub pids: Vec<u32>,
    pub job: Option<String>,
}

impl Asked {
    pub(super) fn selects_processes(&self) -> bool {
        !self.pids.is_empty() || self.job.is_some()
    }
}

/// What a scope left out as ring history, or kept of it under `--history`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct History {
    /// Allocator samples.
    pub points: u64,
    /// Writer events, of which `ooms` OOMs.
    pub events: u64,
    pub ooms: u64,
    /// The oldest of them.
    pub earliest_ms: Option<u64>,
}

impl History {
    fn count(&mut self, at_ms: u64, event: Option<&EventKind>) {
        match event {
            None => self.points += 1,
            Some(kind) => {
                self.events += 1;
                if matches!(kind, EventKind::Oom { .. } | EventKind::OomError { .. }) {
                    self.ooms += 1;
                }
            }
        }
        self.earliest_ms = Some(self.earliest_ms.map_or(at_ms, |e| e.min(at_ms)));
    }

    fn is_empty(&self) -> bool {
        self.points == 0 && self.events == 0
    }

    /// `1520 allocator samples and 3 writer events (1 OOM), from up to 15m 02s before it`
    fn describe(&self, started_ms: u64) -> String {
        let plural = |n: u64, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        let ooms = match self.ooms {
            0 => String::new(),
            n => format!(" ({})", plural(n, "OOM")),
        };
        let before = self.earliest_ms.map_or(String::new(), |e| {
            format!(
                ", from up to {} before it",
                crate::model::time::duration_label(started_ms.saturating_sub(e))
            )
        });
        format!(
            "{} and {}{ooms}{before}",
            plural(self.points, "allocator sample"),
            plural(self.events, "writer event")
        )
    }
}

/// Which processes the scope keeps: those with one of `pids` (host pids: NVML's, or the
/// writer's own where NVML never listed it), every writer of `job`, and on the GPUs they
/// used, the GPU's own figures.
#[derive(Clone, Debug, Default)]
pub(super) struct Selection {
    pub(super) pids: BTreeSet<u32>,
    pub(super) job: Option<String>,
    pub(super) gpus: BTreeSet<u32>,
}

impl Selection {
    pub(super) fn poll(&self, poll: &ChannelPoll) -> bool {
        self.pids.contains(&pid_of(poll))
            || self
                .job
                .as_deref()
                .is_some_and(|j| poll.identity.job_id == j)
    }
}

/// The pid a writer is known by: NVML's for it, else its own.
pub(super) fn pid_of(poll: &ChannelPoll) -> u32 {
    poll.host_pid.unwrap_or(poll.identity.pid)
}

/// The filter a recording's events pass through (`Recording::scoped`).
pub struct Scope {
    /// When the recording began: what came before is ring history.
    pub(super) started_ms: u64,
    /// The first and last moment kept.
    pub(super) from_ms: u64,
    pub(super) until_ms: u64,
    /// The first moment asked for (`--since`), before ring history is left out: the
    /// history from then on is what the note counts.
    pub(super) asked_from_ms: u64,
    pub(super) selection: Option<Selection>,
    pub(super) tally: Arc<Mutex<History>>,
    /// Each channel seen, and what of it the window holds (`poll`).
    pub(super) channels: HashMap<String, Seen>,
}

/// What the window has held of one channel so far.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Seen {
    /// Some point or event of it was inside the window.
    inside: bool,
    /// Some poll of it was kept (inside the window, if only by its moment).
    passed: bool,
    /// Its writer had ended with nothing of it ever inside and no poll of it kept: wholly
    /// outside, for good (until its file is gone and made again).
    outside: bool,
}

/// What a scope covered, to tell the reader once the recording has been read.
pub struct Told {
    pub(super) started_ms: u64,
    pub(super) history: bool,
    pub(super) since_ms: Option<u64>,
    pub(super) until_ms: Option<u64>,
    pub(super) asked: Asked,
    pub(super) tally: Arc<Mutex<History>>,
}

/// `--pid 4242 --pid 4243 --job slurm-991`, as asked.
pub(super) fn selection_words(asked: &Asked) -> String {
    let mut words: Vec<String> = asked.pids.iter().map(|p| format!("--pid {p}")).collect();
    if let Some(job) = &asked.job {
        words.push(format!("--job {}", crate::text::clean(job)));
    }
    words.join(" ")
}

impl Scope {
    /// What a recording itself covers: everything from `started_ms` on, no ring history
    /// from before it, every process. The scope `report`, `plot` and `export` apply when
    /// asked for nothing, for readers that ask nothing (replay's marks).
    pub fn recording_only(started_ms: u64) -> Scope {
        Scope {
            started_ms,
            from_ms: started_ms,
            until_ms: u64::MAX,
            asked_from_ms: started_ms,
            selection: None,
            tally: Arc::default(),
            channels: HashMap::new(),
        }
    }

    /// The event as the scope keeps it, with `t` kept within the scope's window; `None`
    /// when nothing of it is kept.
    pub fn apply(&mut self, t: u64, event: SourceEvent) -> Option<(u64, SourceEvent)> {
        let t = t.clamp(self.from_ms, self.until_ms.max(self.from_ms));
        let kept = match event {
            SourceEvent::Started {
                driver,
                mut devices,
            } => {
                if let Some(s) = &self.selection {
                    devices.retain(|d| s.gpus.contains(&d.index));
                }
                SourceEvent::Started { driver, devices }
            }
            SourceEvent::NvmlUnavailable(problem) => SourceEvent::NvmlUnavailable(problem),
            // In force from its moment on: one before the window holds from the window's start.
            SourceEvent::Interval { ms } => SourceEvent::Interval { ms },
            SourceEvent::Device(mut sample) => {
                if !self.within(sample.at_ms) {
                    return None;
                }
                // The highest reading since the GPU's previous sample may have been read
                // before the window (the interval straddles its start): what the window holds
                // of the interval is the sample's own reading.
                if sample
                    .memory_peak
                    .as_ref()
                    .is_some_and(|p| p.at_ms < self.from_ms)
                {
                    sample.memory_peak = None;
                }
                if let Some(s) = &self.selection {
                    if !s.gpus.contains(&sample.index) {
                        return None;
                    }
                    if let Ok(processes) = &mut sample.processes {
                        processes.retain(|p| s.pids.contains(&p.pid));
                    }
                }
                SourceEvent::Device(sample)
            }
            SourceEvent::Host(mut sample) => {
                if !self.within(sample.at_ms) {
                    return None;
                }
                if let Some(s) = &self.selection {
                    sample.processes.retain(|p| s.pids.contains(&p.pid));
                }
                SourceEvent::Host(sample)
            }
            SourceEvent::Channels(mut batch) => {
                let at_ms = batch.at_ms;
                let polls = std::mem::take(&mut batch.polls);
                batch.polls = polls
                    .into_iter()
                    .filter_map(|poll| self.poll(at_ms, poll))
                    .collect();
                // A file made again at a path gone (the same process stopped and started its
                // writer) is a channel seen afresh.
                for (path, _) in &batch.gone {
                    self.channels.remove(path);
                }
                if batch.polls.is_empty() && !self.within(at_ms) {
                    return None;
                }
                SourceEvent::Channels(batch)
            }
            SourceEvent::Batch(events) => SourceEvent::Batch(
                events
                    .into_iter()
                    .filter_map(|e| self.apply(t, e).map(|(_, e)| e))
                    .collect(),
            ),
        };
        Some((t, kept))
    }

    fn within(&self, at_ms: u64) -> bool {
        (self.from_ms..=self.until_ms).contains(&at_ms)
    }

    /// The poll with only the points and events inside the scope; `None` when it is not a
    /// process asked for, when nothing of it is inside (its status was read outside), or
    /// when its channel's writer is wholly outside (ended before the window, every poll of
    /// the channel).
    fn poll(&mut self, at_ms: u64, mut poll: ChannelPoll) -> Option<ChannelPoll> {
        if self.selection.as_ref().is_some_and(|s| !s.poll(&poll)) {
            return None;
        }
        let mut tally = self.tally.lock().unwrap_or_else(PoisonError::into_inner);
        let started = self.started_ms;
        let (from, until, asked_from) = (self.from_ms, self.until_ms, self.asked_from_ms);
        let mut keep = |at: u64, event: Option<&EventKind>| {
            // The history within the window asked for: kept under --history, else left out;
            // either way told.
            if at < started && (asked_from..=until).contains(&at) {
                tally.count(at, event);
            }
            (from..=until).contains(&at)
        };
        poll.points.retain(|p| keep(p.at_ms, None));
        poll.events.retain(|e| keep(e.at_ms, Some(&e.kind)));
        let inside = poll.points.len() + poll.events.len() > 0;
        // A writer that had ended with nothing of it inside the window and no poll of it
        // kept (dead before the recording with its ring still there, or with an empty ring;
        // or seen live before a `--since` and ended before it) is outside too: its status
        // (the peak and OOM counters) tells of that history, and would otherwise reach
        // `export` and replay as figures of no GPU and no pid. Every later poll of its
        // channel goes with it. One whose polls were kept keeps its end (a crash, a kill)
        // however little it wrote inside.
        let seen = self.channels.entry(poll.path.clone()).or_default();
        seen.inside |= inside;
        if poll.liveness.is_ended() && !seen.inside && !seen.passed {
            seen.outside = true;
        }
        if seen.outside {
            return None;
        }
        let kept = inside || (from..=until).contains(&at_ms);
        seen.passed |= kept;
        kept.then_some(poll)
    }
}

impl Told {
    /// The lines saying what the scope covered, for the top of a report or standard error:
    /// the window and processes asked for, and the ring history left out (and how to
    /// include it) or included.
    pub fn notes(&self) -> Vec<String> {
        let label = crate::model::time::utc_label;
        let mut notes = Vec::new();
        let mut scope = Vec::new();
        if let Some(since) = self.since_ms {
            scope.push(format!("from {}", label(since)));
        }
        if let Some(until) = self.until_ms {
            scope.push(format!("until {}", label(until)));
        }
        if self.asked.selects_processes() {
            scope.push(format!("only {}", selection_words(&self.asked)));
        }
        if !scope.is_empty() {
            notes.push(format!("scope: {}", scope.join(", ")));
        }
        let history = *self.tally.lock().unwrap_or_else(PoisonError::into_inner);
        if !history.is_empty() {
            notes.push(if self.history {
                format!(
                    "includes the channels' ring history from before the recording began: {}",
                    history.describe(self.started_ms)
                )
            } else {
                format!(
                    "left out the channels' ring history from before the recording began: {}; --history includes it",
                    history.describe(self.started_ms)
                )
            });
        }
        notes
    }

    /// The same as JSON, for `report --json`.
    pub fn json(&self) -> serde_json::Value {
        let history = *self.tally.lock().unwrap_or_else(PoisonError::into_inner);
        serde_json::json!({
            "since_ms": self.since_ms,
            "until_ms": self.until_ms,
            "pids": self.asked.pids,
            "job": self.asked.job,
            "ring_history": {
                "included": self.history,
                "samples": history.points,
                "events": history.events,
                "ooms": history.ooms,
                "earliest_ms": history.earliest_ms,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AllocatorPoint, ChannelBatch, WriterIdentity, WriterLiveness};

    const START: u64 = 1_700_000_000_000;

    fn poll(pid: u32, job: &str, times: &[u64]) -> ChannelPoll {
        ChannelPoll {
            path: format!("/dev/shm/x/{pid}-1.vsc"),
            identity: Arc::new(WriterIdentity {
                file: format!("{pid}-1.vsc"),
                pid,
                kind: "Rust".into(),
                framework: String::new(),
                rank: None,
                local_rank: None,
                world_size: None,
                job_id: job.into(),
                command: String::new(),
                allocator_config: String::new(),
                exact_peaks: false,
                attached: false,
                sample_period_us: 20_000,
                sites: false,
            }),
            host_pid: Some(pid),
            liveness: WriterLiveness::Live,
            devices: Vec::new(),
            step: None,
            label: String::new(),
            points: times
                .iter()
                .map(|&at_ms| AllocatorPoint {
                    at_ms,
                    slot: 0,
                    allocated: Some(1),
                    reserved: None,
                    peak: None,
                    step: None,
                    new_high_water: false,
                    steps_since_attach: false,
                })
                .collect(),
            events: Vec::new(),
            lost_samples: 0,
            lost_events: 0,
        }
    }

    fn scope(history: bool, until_ms: u64, selection: Option<Selection>) -> Scope {
        Scope {
            started_ms: START,
            from_ms: if history { 0 } else { START },
            until_ms,
            asked_from_ms: 0,
            selection,
            tally: Arc::default(),
            channels: HashMap::new(),
        }
    }

    /// The times of the points kept of a batch at `at_ms` holding `polls`.
    fn kept(scope: &mut Scope, at_ms: u64, polls: Vec<ChannelPoll>) -> Option<Vec<Vec<u64>>> {
        let batch = ChannelBatch {
            at_ms,
            polls,
            ..ChannelBatch::default()
        };
        match scope.apply(at_ms + 3, SourceEvent::Channels(Box::new(batch)))? {
            (t, SourceEvent::Channels(batch)) => {
                assert!(t <= scope.until_ms, "{t}");
                Some(
                    batch
                        .polls
                        .iter()
                        .map(|p| p.points.iter().map(|p| p.at_ms).collect())
                        .collect(),
                )
            }
            _ => None,
        }
    }

    #[test]
    fn a_writer_that_ended_before_the_recording_stays_out_of_it_with_its_channel() {
        let ended = |times: &[u64]| ChannelPoll {
            liveness: WriterLiveness::Ended {
                crashed: false,
                error: false,
            },
            host_pid: None,
            ..poll(9, "", times)
        };
        let mut s = scope(false, u64::MAX, None);
        let live = poll(7, "", &[START + 5]);
        // Only the running writer's poll stays; the dead one's history is counted.
        assert_eq!(
            kept(
                &mut s,
                START + 10,
                vec![live, ended(&[START - 5000, START - 4000])]
            ),
            Some(vec![vec![START + 5]])
        );
        assert_eq!(s.tally.lock().unwrap().points, 2);
        // A later poll of its channel, with nothing new, is as much its history: the batch
        // stays (it is inside), without the poll.
        assert_eq!(kept(&mut s, START + 1010, vec![ended(&[])]), Some(vec![]));
        // A writer that ended during the recording keeps its polls.
        let mut s = scope(false, u64::MAX, None);
        assert_eq!(
            kept(&mut s, START + 10, vec![ended(&[START + 5])]),
            Some(vec![vec![START + 5]])
        );
        assert_eq!(
            kept(&mut s, START + 1010, vec![ended(&[])]),
            Some(vec![vec![]])
        );
        // Under --history the dead writer is kept, history and all.
        let mut s = scope(true, u64::MAX, None);
        assert_eq!(
            kept(&mut s, START + 10, vec![ended(&[START - 5000])]),
            Some(vec![vec![START - 5000]])
        );
        // A dead writer whose ring is empty: nothing of it is inside, its status neither.
        let mut s = scope(false, u64::MAX, None);
        assert_eq!(kept(&mut s, START + 10, vec![ended(&[])]), Some(vec![]));
        assert_eq!(kept(&mut s, START + 1010, vec![ended(&[])]), Some(vec![]));
    }

    #[test]
    fn a_writer_seen_live_that_ended_before_since_stays_out_of_the_window() {
        let ended = |times: &[u64]| ChannelPoll {
            liveness: WriterLiveness::Ended {
                crashed: false,
                error: false,
            },
            ..poll(9, "", times)
        };
        // `--since START+60s`: the writer ran from the start and ended at START+30s.
        let since = START + 60_000;
        let mut s = Scope {
            from_ms: since,
            asked_from_ms: since,
            ..scope(false, u64::MAX, None)
        };
        assert_eq!(
            kept(&mut s, START + 10, vec![poll(9, "", &[START + 5])]),
            None
        );
        assert_eq!(
            kept(&mut s, START + 30_010, vec![ended(&[START + 30_000])]),
            None
        );
        // Its channel's polls inside the window bring only its status: left out, every one.
        assert_eq!(kept(&mut s, since + 10, vec![ended(&[])]), Some(vec![]));
        assert_eq!(kept(&mut s, since + 1010, vec![ended(&[])]), Some(vec![]));
        // Its file gone and made again (the process stopped and started its writer): the new
        // writer's channel is seen afresh.
        let gone = ChannelBatch {
            at_ms: since + 2000,
            gone: vec![(ended(&[]).path, crate::model::Gone::Removed)],
            ..ChannelBatch::default()
        };
        s.apply(since + 2000, SourceEvent::Channels(Box::new(gone)));
        assert_eq!(
            kept(&mut s, since + 3010, vec![poll(9, "", &[since + 3000])]),
            Some(vec![vec![since + 3000]])
        );
        // One kept inside the window with nothing new in its ring (a hung job, a writer
        // that writes seldom) keeps its end: killed, it writes nothing more.
        let mut s = Scope {
            from_ms: since,
            asked_from_ms: since,
            ..scope(false, u64::MAX, None)
        };
        assert_eq!(
            kept(&mut s, since + 10, vec![poll(9, "", &[START + 5])]),
            Some(vec![vec![]])
        );
        assert_eq!(
            kept(&mut s, since + 1010, vec![ended(&[])]),
            Some(vec![vec![]])
        );
        // One that was still running inside the window keeps its polls after its end.
        let mut s = Scope {
            from_ms: since,
            asked_from_ms: since,
            ..scope(false, u64::MAX, None)
        };
        assert_eq!(
            kept(&mut s, since + 10, vec![poll(9, "", &[since + 5])]),
            Some(vec![vec![since + 5]])
        );
        assert_eq!(
            kept(&mut s, since + 1010, vec![ended(&[])]),
            Some(vec![vec![]])
        );
    }

    #[test]
    fn a_peak_read_before_the_window_stays_out_with_the_sample_kept() {
        use crate::model::peak_holders::PeakHolders;
        use crate::model::{Absent, DeviceSample, MemoryPeak};
        let since = START + 60_000;
        let mut s = Scope {
            from_ms: since,
            asked_from_ms: since,
            ..scope(false, u64::MAX, None)
        };
        let sample = |peak_at: u64| {
            let mut d = DeviceSample::unreadable(0, since + 100, Absent::NotSupported);
            d.memory_peak = Some(MemoryPeak {
                used: 9 << 30,
                at_ms: peak_at,
                holders: PeakHolders::TheSample,
            });
            SourceEvent::Device(Box::new(d))
        };
        let peak_of = |kept: Option<(u64, SourceEvent)>| match kept {
            Some((_, SourceEvent::Device(d))) => d.memory_peak.map(|p| p.at_ms),
            other => panic!("{other:?}"),
        };
        // Read 50 ms before `--since`: not the window's; the sample itself is.
        assert_eq!(peak_of(s.apply(since + 100, sample(since - 50))), None);
        // Read inside it: kept.
        assert_eq!(
            peak_of(s.apply(since + 100, sample(since + 20))),
            Some(since + 20)
        );
    }

    #[test]
    fn a_first_poll_keeps_what_came_after_the_start_and_counts_the_rest() {
        let mut s = scope(false, u64::MAX, None);
        let first = poll(7, "", &[START - 900_000, START - 47_000, START + 5]);
        assert_eq!(
            kept(&mut s, START + 10, vec![first]),
            Some(vec![vec![START + 5]])
        );
        let history = *s.tally.lock().unwrap();
        assert_eq!(
            (history.points, history.earliest_ms),
            (2, Some(START - 900_000))
        );
        // Under --history everything is kept, and counted as history kept.
        let mut s = scope(true, u64::MAX, None);
        let first = poll(7, "", &[START - 47_000, START + 5]);
        assert_eq!(
            kept(&mut s, START + 10, vec![first]),
            Some(vec![vec![START - 47_000, START + 5]])
        );
        assert_eq!(s.tally.lock().unwrap().points, 1);
    }

    #[test]
    fn until_cuts_inside_a_poll_and_drops_polls_read_after_it_with_nothing_inside() {
        let until = START + 1_000;
        let mut s = scope(false, until, None);
        let straddling = poll(7, "", &[START + 900, START + 1_000, START + 1_100]);
        assert_eq!(
            kept(&mut s, START + 1_200, vec![straddling]),
            Some(vec![vec![START + 900, START + 1_000]])
        );
        assert_eq!(
            kept(&mut s, START + 2_000, vec![poll(7, "", &[START + 1_500])]),
            None
        );
    }

    #[test]
    fn a_selection_keeps_the_processes_asked_for_by_pid_or_job() {
        let selection = Selection {
            pids: BTreeSet::from([7]),
            job: Some("j".into()),
            gpus: BTreeSet::from([0]),
        };
        let mut s = scope(false, u64::MAX, Some(selection));
        let polls = vec![
            poll(7, "", &[START + 1]),
            poll(8, "j", &[START + 2]),
            poll(9, "other", &[START + 3]),
        ];
        assert_eq!(
            kept(&mut s, START + 10, polls),
            Some(vec![vec![START + 1], vec![START + 2]])
        );
    }
}
