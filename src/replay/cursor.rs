//! Feeding a recording to the monitor up to a moment, forward as the file is read, and back
//! from checkpoints: every `spacing` events read, the monitor and the reader's place are
//! kept, so going back re-reads the file from its start unparsed up to the nearest
//! checkpoint before the moment and feeds at most `spacing` events from there. At most
//! `max_checkpoints` are kept, and at most `bytes` of monitor history among them
//! (past it every other one goes and the spacing doubles), so memory stays bounded whatever
//! the file's length; the monitor's own history is bounded too.

use crate::record::{Events, Recording, RecordingError, Resume};
use crate::sources::runner::SourceEvent;
use crate::state::Monitor;
use std::path::PathBuf;

/// How many checkpoints are kept, how far apart and how large together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Checkpoints kept at most.
    pub max_checkpoints: u64,
    /// Fewest events between two checkpoints: a short recording is replayed from its start.
    pub min_spacing: u64,
    /// Monitor history the checkpoints may hold together (`Monitor::history_bytes`).
    pub bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_checkpoints: 32,
            min_spacing: 2048,
            bytes: 256 << 20,
        }
    }
}

/// Where the recording is, to be read again.
pub enum Source {
    File(PathBuf),
    /// The bundled demo, with the name its errors give.
    Bytes(String, &'static [u8]),
}

impl Source {
    fn open(&self) -> Result<Recording, RecordingError> {
        match self {
            Source::File(path) => Recording::open(path),
            Source::Bytes(name, bytes) => Recording::from_bytes(name, bytes),
        }
    }
}

/// The monitor's state after the first `fed` events, and where the reader stood.
struct Checkpoint {
    fed: u64,
    /// The latest time among those events: the checkpoint serves any moment from it on.
    latest_ms: u64,
    monitor: Monitor,
    /// `monitor.history_bytes()`.
    bytes: usize,
    resume: Resume,
}

pub struct Cursor {
    source: Source,
    limits: Limits,
    spacing: u64,
    checkpoints: Vec<Checkpoint>,
    /// Reads the events after the first `fed`; `None` once the file is read to its end.
    reader: Option<Events>,
    /// The next event, read but not yet due.
    pending: Option<(u64, SourceEvent)>,
    fed: u64,
    latest_ms: u64,
    /// Whether the file has been opened for feeding yet.
    opened: bool,
    /// The file could not be read again (removed or changed since it was opened).
    pub trouble: Option<String>,
}

impl Cursor {
    /// A cursor on `source`, which holds `events` events.
    pub fn new(source: Source, events: u64, limits: Limits) -> Cursor {
        Cursor {
            source,
            limits,
            spacing: events
                .div_ceil(limits.max_checkpoints.max(1))
                .max(limits.min_spacing.max(1)),
            checkpoints: Vec::new(),
            reader: None,
            pending: None,
            fed: 0,
            latest_ms: 0,
            opened: false,
            trouble: None,
        }
    }

    /// A monitor holding every event up to `to_ms` (those before the first later one, in the
    /// order recorded), rebuilt from the nearest checkpoint.
    pub fn rebuild(&mut self, first_ms: u64, to_ms: u64) -> Monitor {
        self.pending = None;
        self.opened = true;
        let from = self.checkpoints.iter().rposition(|c| c.latest_ms <= to_ms);
        let (mut monitor, reader) = match from {
            Some(i) => {
                let c = &self.checkpoints[i];
                self.fed = c.fed;
                self.latest_ms = c.latest_ms;
                let reader = self.source.open().and_then(|r| r.events_from(&c.resume));
                (c.monitor.clone(), reader)
            }
            None => {
                self.fed = 0;
                self.latest_ms = 0;
                (
                    Monitor::new(first_ms),
                    self.source.open().map(Recording::events),
                )
            }
        };
        self.reader = self.readable(reader);
        self.feed_until(&mut monitor, to_ms);
        monitor
    }

    fn open_from_start(&mut self) -> Option<Events> {
        let reader = self.source.open().map(Recording::events);
        self.readable(reader)
    }

    /// The reader, or `None` with the trouble noted.
    fn readable(&mut self, reader: Result<Events, RecordingError>) -> Option<Events> {
        match reader {
            Ok(reader) => Some(reader),
            Err(e) => {
                self.trouble = Some(format!("cannot read the recording again: {e}"));
                None
            }
        }
    }

    /// Feeds `monitor` the events up to `to_ms` not yet in it.
    pub fn feed_until(&mut self, monitor: &mut Monitor, to_ms: u64) {
        if !self.opened {
            // Fed from the start: `monitor` is taken to hold nothing of the recording yet.
            self.opened = true;
            self.reader = self.open_from_start();
        }
        loop {
            if self.pending.is_none() {
                self.checkpoint(monitor);
                self.pending = self.read();
            }
            match self.pending.take() {
                Some((at_ms, event)) if at_ms <= to_ms => {
                    monitor.ingest(event);
                    self.fed += 1;
                    self.latest_ms = self.latest_ms.max(at_ms);
                }
                later => {
                    self.pending = later;
                    return;
                }
            }
        }
    }

    fn read(&mut self) -> Option<(u64, SourceEvent)> {
        match self.reader.as_mut()?.next() {
            Some(Ok(pair)) => Some(pair),
            // The damage was found and said when the file was first read: it ends here.
            Some(Err(_)) | None => {
                self.reader = None;
                None
            }
        }
    }

    /// Keeps the monitor's state when `spacing` more events have been fed since the last.
    fn checkpoint(&mut self, monitor: &Monitor) {
        let due = self.checkpoints.last().map_or(0, |c| c.fed) + self.spacing;
        if self.fed < due {
            return;
        }
        let Some(resume) = self.reader.as_ref().map(Events::resume_point) else {
            return;
        };
        let bytes = monitor.history_bytes();
        while !self.checkpoints.is_empty() && self.checkpoints_bytes() + bytes > self.limits.bytes {
            self.thin();
        }
        if bytes > self.limits.bytes {
            // Too large to keep even alone: going back starts from the file's start.
            return;
        }
        self.checkpoints.push(Checkpoint {
            fed: self.fed,
            latest_ms: self.latest_ms,
            monitor: monitor.clone(),
            bytes,
            resume,
        });
    }

    /// How many checkpoints are kept, and their monitors' history bytes together.
    pub fn checkpoints(&self) -> (usize, usize) {
        (self.checkpoints.len(), self.checkpoints_bytes())
    }

    fn checkpoints_bytes(&self) -> usize {
        self.checkpoints.iter().map(|c| c.bytes).sum()
    }

    /// Drops every other checkpoint (the second, fourth, ...; the last when only one is
    /// left) and doubles the spacing, as if they had been kept that far apart.
    fn thin(&mut self) {
        if self.checkpoints.len() == 1 {
            self.checkpoints.clear();
        } else {
            let mut index = 0;
            self.checkpoints.retain(|_| {
                index += 1;
                index % 2 == 1
            });
        }
        self.spacing = self.spacing.saturating_mul(2);
    }
}
