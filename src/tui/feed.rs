//! Where the monitor's data comes from: the samplers, live, or a recording replayed with a
//! time cursor. The event loop and the panels see one `Monitor` and one "now" either way.

use crate::model::{SourceEvent, now_ms};
use crate::replay::{Command, Replay, speed_label};
use crate::sources::runner::Sampling;
use crate::state::Monitor;
use std::time::Duration;

/// While a replay plays, the cursor moves and the screen redraws this often.
const PLAY_FRAME: Duration = Duration::from_millis(100);

pub enum Feed {
    Live(Sampling),
    Replay(Box<Replay>),
}

impl Feed {
    /// `replay` from its start: the feed, and a monitor holding the recording's first moment.
    pub fn replay(mut replay: Replay) -> (Feed, Monitor) {
        let monitor = replay.fresh_monitor();
        (Feed::Replay(Box::new(replay)), monitor)
    }

    /// The moment the screen shows.
    pub fn now_ms(&self) -> u64 {
        match self {
            Feed::Live(_) => now_ms(),
            Feed::Replay(replay) => replay.now_ms(),
        }
    }

    /// The machine the data comes from: this one, or the one the recording was made on.
    pub fn host(&self) -> Option<String> {
        match self {
            Feed::Live(_) => crate::model::host::host_name(),
            Feed::Replay(replay) => replay.host().map(str::to_owned),
        }
    }

    pub fn is_live(&self) -> bool {
        matches!(self, Feed::Live(_))
    }

    /// The refresh period: the samplers', or the recording's at the cursor.
    pub fn interval_ms(&self) -> u64 {
        match self {
            Feed::Live(sampling) => sampling.interval_ms(),
            Feed::Replay(replay) => replay.interval_ms(),
        }
    }

    /// A new refresh period for the samplers, and the event saying so (to record and
    /// ingest); a replay keeps the recording's.
    pub fn set_interval(&self, interval: Duration) -> Option<SourceEvent> {
        match self {
            Feed::Live(sampling) => Some(sampling.set_interval(interval)),
            Feed::Replay(_) => None,
        }
    }

    /// How soon the loop must wake to move a playing replay.
    pub fn wake_in(&self) -> Option<Duration> {
        match self {
            Feed::Replay(replay) if replay.playing() => Some(PLAY_FRAME),
            _ => None,
        }
    }

    /// Moves a playing replay with the wall clock; true when the screen changed.
    pub fn tick(&mut self, monitor: &mut Monitor) -> bool {
        match self {
            Feed::Replay(replay) => replay.tick(monitor),
            Feed::Live(_) => false,
        }
    }

    /// Carries out a cursor command; a message for the status line, if any.
    pub fn command(&mut self, command: Command, monitor: &mut Monitor) -> Option<String> {
        match self {
            Feed::Replay(replay) => replay.command(command, monitor),
            Feed::Live(_) => Some("only a replay has a time cursor".into()),
        }
    }

    /// The header's words for a replay: `replay run.jsonl ▶ ×4, 41% of 1h 00m`.
    pub fn banner(&self) -> Option<String> {
        let Feed::Replay(replay) = self else {
            return None;
        };
        let v = replay.view();
        let span = v.last_ms.saturating_sub(v.first_ms);
        let done = replay.now_ms().saturating_sub(v.first_ms);
        let percent = done.saturating_mul(100).checked_div(span).unwrap_or(100);
        let state = if v.playing { "▶" } else { "⏸" };
        let mut text = format!(
            "{} {state} ×{}, {percent}% of {}",
            v.label,
            speed_label(v.speed),
            crate::model::time::duration_label(span)
        );
        if let Some(why) = v.cut_short {
            text.push_str(&format!(" ({why})"));
        }
        Some(text)
    }
}
