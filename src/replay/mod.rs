//! Replay: a recording fed to the monitor as if it were being sampled, with a time cursor
//! the person moves. It is just another source for the TUI: it ingests the recorded
//! `SourceEvent`s into the same `Monitor`, and the screen shows the cursor's moment as
//! "now". The file is read once at open for its span and marks (`timeline`), laying
//! checkpoints of the monitor's state over it as it goes, then again as the cursor moves:
//! every move starts from the nearest checkpoint before its moment (`cursor`).

mod cursor;
pub mod demo;
mod timeline;
pub mod usage;

pub use cursor::Limits;
pub use timeline::{Mark, MarkKind, Timeline};

use crate::recording::Recording;
use crate::state::Monitor;
use cursor::{Checkpoints, Cursor, Source};
use std::path::Path;
use std::time::Instant;

/// Play speeds `+` and `-` step through, as factors of real time.
const SPEEDS: [f64; 11] = [
    0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 256.0,
];
/// Left and Right move the cursor this far.
const STEP_MS: u64 = 10_000;

/// What the person asked the cursor to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    TogglePlay,
    Faster,
    Slower,
    Back,
    Forward,
    /// One recorded refresh back or forward.
    SampleBack,
    SampleForward,
    Start,
    End,
    LargestPeak,
    NextOom,
    NextEvent,
    PreviousEvent,
}

/// What the screen shows of the replay.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayView {
    /// The file's name, or what the demo is.
    pub label: String,
    pub playing: bool,
    pub speed: f64,
    pub first_ms: u64,
    pub last_ms: u64,
    /// Why not all of the recording is there.
    pub cut_short: Option<String>,
}

pub struct Replay {
    timeline: Timeline,
    label: String,
    cursor: Cursor,
    /// The moment the screen shows.
    at_ms: u64,
    playing: bool,
    speed_index: usize,
    /// When the cursor last moved with the wall clock.
    played_at: Option<Instant>,
}

impl Replay {
    pub fn open(path: &Path) -> Result<Replay, String> {
        Self::open_with(path, Limits::default())
    }

    /// `open` with other checkpoint limits (tests and benchmarks).
    pub fn open_with(path: &Path, limits: Limits) -> Result<Replay, String> {
        let recording = Recording::open(path).map_err(|e| e.to_string())?;
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into(),
        );
        let label = format!("replay {name}");
        let source = Source::File(path.to_path_buf());
        Ok(Replay::new(recording, source, label, limits))
    }

    pub fn from_bytes(name: &str, bytes: &'static [u8], label: &str) -> Result<Replay, String> {
        let recording = Recording::from_bytes(name, bytes).map_err(|e| e.to_string())?;
        let source = Source::Bytes(name.to_string(), bytes);
        Ok(Replay::new(
            recording,
            source,
            label.to_string(),
            Limits::default(),
        ))
    }

    fn new(recording: Recording, source: Source, label: String, limits: Limits) -> Replay {
        let mut checkpoints = Checkpoints::new(limits);
        let timeline = Timeline::scan(recording, &mut checkpoints);
        Replay {
            at_ms: timeline.first_ms,
            cursor: Cursor::new(source, checkpoints, timeline.first_ms),
            timeline,
            label,
            playing: true,
            speed_index: SPEEDS.iter().position(|s| *s == 1.0).unwrap_or(0),
            played_at: None,
        }
    }

    /// The recorded machine's host name, already cleaned when the file was read.
    pub fn host(&self) -> Option<&str> {
        self.timeline.header.host.as_deref()
    }

    /// The refresh period in force at the cursor (the header's, or the last change
    /// recorded before it): the charts' time axis, a sample step, the stale mark.
    pub fn interval_ms(&self) -> u64 {
        self.timeline.periods.at(self.at_ms).max(1)
    }

    /// How many checkpoints are kept to seek back from, and their monitors' history bytes.
    pub fn checkpoints(&self) -> (usize, usize) {
        self.cursor.checkpoints()
    }

    /// Events parsed from the file by the moves so far (those read at open aside).
    pub fn events_parsed(&self) -> u64 {
        self.cursor.parsed()
    }

    /// The moment the screen shows.
    pub fn now_ms(&self) -> u64 {
        self.at_ms
    }

    /// A monitor holding the recording up to the cursor's moment.
    pub fn fresh_monitor(&mut self) -> Monitor {
        self.cursor.rebuild(self.timeline.first_ms, self.at_ms)
    }

    pub fn view(&self) -> ReplayView {
        ReplayView {
            label: self.label.clone(),
            playing: self.playing,
            speed: SPEEDS[self.speed_index],
            first_ms: self.timeline.first_ms,
            last_ms: self.timeline.last_ms,
            cut_short: match (&self.timeline.cut_short, &self.cursor.trouble) {
                (Some(why), Some(trouble)) => Some(format!("{why}; {trouble}")),
                (why, trouble) => why.clone().or_else(|| trouble.clone()),
            },
        }
    }

    pub fn playing(&self) -> bool {
        self.playing
    }

    /// Moves the cursor with the wall clock while playing; true when the screen changed.
    pub fn tick(&mut self, monitor: &mut Monitor) -> bool {
        if !self.playing {
            self.played_at = None;
            return false;
        }
        let now = Instant::now();
        let elapsed = self
            .played_at
            .map_or(0, |at| now.duration_since(at).as_millis() as u64);
        self.played_at = Some(now);
        if elapsed == 0 {
            return false;
        }
        let target = self
            .at_ms
            .saturating_add((elapsed as f64 * SPEEDS[self.speed_index]) as u64);
        if target >= self.timeline.last_ms {
            self.playing = false;
        }
        self.seek(monitor, target);
        true
    }

    /// Carries out a command; returns a message for the status line.
    pub fn command(&mut self, command: Command, monitor: &mut Monitor) -> Option<String> {
        let first = self.timeline.first_ms;
        let last = self.timeline.last_ms;
        let interval = self.interval_ms();
        let target = match command {
            Command::TogglePlay => {
                if !self.playing && self.at_ms >= last {
                    // Play from the start again, as a player does at the end.
                    self.seek(monitor, first);
                }
                self.playing = !self.playing;
                self.played_at = None;
                return None;
            }
            Command::Faster | Command::Slower => {
                self.speed_index = if command == Command::Faster {
                    (self.speed_index + 1).min(SPEEDS.len() - 1)
                } else {
                    self.speed_index.saturating_sub(1)
                };
                return Some(format!("speed ×{}", speed_label(SPEEDS[self.speed_index])));
            }
            Command::Back => self.at_ms.saturating_sub(STEP_MS),
            Command::Forward => self.at_ms.saturating_add(STEP_MS),
            Command::SampleBack => self.at_ms.saturating_sub(interval),
            Command::SampleForward => self.at_ms.saturating_add(interval),
            Command::Start => first,
            Command::End => last,
            Command::LargestPeak => {
                let mark = self.mark(|m| m.kind == MarkKind::LargestPeak, true);
                return self.jump(monitor, mark, "no peak in the recording");
            }
            Command::NextOom => {
                let mark = self.mark(|m| m.kind == MarkKind::Oom && m.at_ms > self.at_ms, true);
                return self.jump(monitor, mark, "no OOM after this moment");
            }
            Command::NextEvent => {
                let mark = self.mark(|m| m.at_ms > self.at_ms, true);
                return self.jump(monitor, mark, "no event after this moment");
            }
            Command::PreviousEvent => {
                let mark = self.mark(|m| m.at_ms < self.at_ms, false);
                return self.jump(monitor, mark, "no event before this moment");
            }
        };
        // Moving by hand pauses, so the moment stays on screen.
        self.playing = false;
        self.seek(monitor, target);
        None
    }

    /// The first matching mark (`forward`) or the last one.
    fn mark(&self, wanted: impl Fn(&Mark) -> bool, forward: bool) -> Option<Mark> {
        let mut found = self.timeline.marks.iter().filter(|m| wanted(m));
        if forward {
            found.next().cloned()
        } else {
            found.last().cloned()
        }
    }

    /// Moves to `mark` and names it; `none` when there is no such mark.
    fn jump(&mut self, monitor: &mut Monitor, mark: Option<Mark>, none: &str) -> Option<String> {
        let Some(mark) = mark else {
            return Some(none.into());
        };
        self.playing = false;
        self.seek(monitor, mark.at_ms);
        Some(mark.label)
    }

    /// Puts the cursor at `to_ms` (within the recording), rebuilding the monitor from the
    /// nearest checkpoint when going back, and taking it on when going forward past one.
    pub fn seek(&mut self, monitor: &mut Monitor, to_ms: u64) {
        let to_ms = to_ms.clamp(self.timeline.first_ms, self.timeline.last_ms);
        if to_ms < self.at_ms {
            self.at_ms = to_ms;
            *monitor = self.fresh_monitor();
            return;
        }
        self.at_ms = to_ms;
        self.cursor.feed_until(monitor, to_ms);
    }
}

/// `4`, `0.5`, `0.125`.
pub fn speed_label(speed: f64) -> String {
    if speed >= 1.0 {
        format!("{speed:.0}")
    } else {
        format!("{speed}")
    }
}
