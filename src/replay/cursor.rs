//! Feeding a recording to the monitor up to a moment, from checkpoints laid when the file is
//! first read: while `timeline` reads it at open, the events are also fed to a monitor
//! (`Checkpoints`), whose state and the reader's place are kept every `spacing` events, and
//! at the end. A move to any moment, back or forward, starts from the nearest checkpoint
//! before it: the file is passed over unparsed up to its place and at most `spacing` events
//! are parsed and fed from there. At most `max_checkpoints` are kept, and at most `bytes` of
//! monitor history among them (past either, every other one goes and the spacing doubles,
//! so they stay evenly spread over the file), so memory stays bounded whatever the file's
//! length; the monitor's own history is bounded too.

use crate::model::SourceEvent;
use crate::recording::{Events, Recording, RecordingError, Resume};
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
    /// `None` when the events were all of the file's: nothing is left to read.
    resume: Option<Resume>,
}

/// Lays the checkpoints while the recording is first read: every event is fed to a
/// monitor, whose state is kept every `spacing` events and once at the end.
pub struct Checkpoints {
    limits: Limits,
    spacing: u64,
    kept: Vec<Checkpoint>,
    monitor: Monitor,
    fed: u64,
    latest_ms: u64,
}

impl Checkpoints {
    pub fn new(limits: Limits) -> Checkpoints {
        Checkpoints {
            limits,
            spacing: limits.min_spacing.max(1),
            kept: Vec::new(),
            monitor: Monitor::default(),
            fed: 0,
            latest_ms: 0,
        }
    }

    /// Feeds the next event of the file, which `reader` has just read.
    pub fn feed(&mut self, at_ms: u64, event: SourceEvent, reader: &Events) {
        self.monitor.ingest(event);
        self.fed += 1;
        self.latest_ms = self.latest_ms.max(at_ms);
        if self.fed >= self.due() {
            self.keep(Some(reader.resume_point()));
        }
    }

    /// The events are all fed: keeps the final state, so that End needs no reading, and
    /// gives the monitors the moment they count from (`first_ms`, known only now).
    fn finish(mut self, first_ms: u64) -> Vec<Checkpoint> {
        if self.kept.last().is_none_or(|c| c.fed < self.fed) {
            self.keep(None);
        } else if let Some(last) = self.kept.last_mut() {
            // Laid on the last event: there is nothing after it to read.
            last.resume = None;
        }
        for c in &mut self.kept {
            c.monitor.set_started_ms(first_ms);
        }
        self.kept
    }

    fn due(&self) -> u64 {
        self.kept.last().map_or(0, |c| c.fed) + self.spacing
    }

    /// Keeps the monitor's state, thinning the others first where the count or the bytes
    /// would pass the limits.
    fn keep(&mut self, resume: Option<Resume>) {
        let at_end = resume.is_none();
        let bytes = self.monitor.history_bytes();
        if self.limits.max_checkpoints == 0 || bytes > self.limits.bytes {
            // Too large to keep even alone: moves before the next one read from further back.
            return;
        }
        while !self.kept.is_empty()
            && (self.kept.len() as u64 >= self.limits.max_checkpoints
                || self.kept_bytes() + bytes > self.limits.bytes)
        {
            self.thin();
            // Thinned, the spacing doubled: this one may now be too near the last kept.
            if !at_end && self.fed < self.due() {
                return;
            }
        }
        self.kept.push(Checkpoint {
            fed: self.fed,
            latest_ms: self.latest_ms,
            monitor: self.monitor.clone(),
            bytes,
            resume,
        });
    }

    fn kept_bytes(&self) -> usize {
        self.kept.iter().map(|c| c.bytes).sum()
    }

    /// Drops every other checkpoint (the second, fourth, ...; the last when only one is
    /// left) and doubles the spacing, as if they had been kept that far apart.
    fn thin(&mut self) {
        if self.kept.len() == 1 {
            self.kept.clear();
        } else {
            let mut index = 0;
            self.kept.retain(|_| {
                index += 1;
                index % 2 == 1
            });
        }
        self.spacing = self.spacing.saturating_mul(2);
    }
}

pub struct Cursor {
    source: Source,
    checkpoints: Vec<Checkpoint>,
    /// Reads the events after the first `fed`; `None` once the file is read to its end.
    reader: Option<Events>,
    /// The next event, read but not yet due.
    pending: Option<(u64, SourceEvent)>,
    fed: u64,
    latest_ms: u64,
    /// Events parsed from the file and fed since the cursor was made.
    parsed: u64,
    /// Whether the file has been opened for feeding yet.
    opened: bool,
    /// The file could not be read again (removed or changed since it was opened).
    pub trouble: Option<String>,
}

impl Cursor {
    /// A cursor on `source`, with the checkpoints laid when it was first read (`first_ms`:
    /// where the replay starts).
    pub fn new(source: Source, checkpoints: Checkpoints, first_ms: u64) -> Cursor {
        Cursor {
            source,
            checkpoints: checkpoints.finish(first_ms),
            reader: None,
            pending: None,
            fed: 0,
            latest_ms: 0,
            parsed: 0,
            opened: false,
            trouble: None,
        }
    }

    /// A monitor holding every event up to `to_ms` (those before the first later one, in the
    /// order recorded), rebuilt from the nearest checkpoint.
    pub fn rebuild(&mut self, first_ms: u64, to_ms: u64) -> Monitor {
        self.pending = None;
        self.opened = true;
        let mut monitor = match self.nearest(to_ms) {
            Some(i) => {
                let monitor = self.checkpoints[i].monitor.clone();
                self.reader = self.reader_at(i, None);
                monitor
            }
            None => {
                self.fed = 0;
                self.latest_ms = 0;
                self.reader = self.open_from_start();
                Monitor::new(first_ms)
            }
        };
        self.feed_until(&mut monitor, to_ms);
        monitor
    }

    /// The last checkpoint that serves `to_ms`.
    fn nearest(&self, to_ms: u64) -> Option<usize> {
        self.checkpoints.iter().rposition(|c| c.latest_ms <= to_ms)
    }

    /// A reader placed after checkpoint `i`'s events: `current` passed on to it where given
    /// (it stands before that place), else the file opened again. The cursor's place is
    /// the checkpoint's.
    fn reader_at(&mut self, i: usize, current: Option<Events>) -> Option<Events> {
        let c = &self.checkpoints[i];
        self.fed = c.fed;
        self.latest_ms = c.latest_ms;
        let resume = c.resume.clone()?;
        let reader = match current {
            Some(mut reader) => reader.skip_to(&resume).map(|()| reader),
            None => self.source.open().and_then(|r| r.events_from(&resume)),
        };
        self.readable(reader)
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

    /// Feeds `monitor` the events up to `to_ms` not yet in it, from the nearest checkpoint
    /// on where one lies between (`monitor` is then replaced by its state).
    pub fn feed_until(&mut self, monitor: &mut Monitor, to_ms: u64) {
        if !self.opened {
            // Fed from the start: `monitor` is taken to hold nothing of the recording yet.
            self.opened = true;
            self.reader = self.open_from_start();
        }
        if let Some(i) = self.nearest(to_ms)
            && self.checkpoints[i].fed > self.fed
        {
            // The lines up to it are passed over unparsed by the reader already open.
            self.pending = None;
            *monitor = self.checkpoints[i].monitor.clone();
            let current = self.reader.take();
            self.reader = self.reader_at(i, current);
        }
        loop {
            if self.pending.is_none() {
                self.pending = self.read();
            }
            match self.pending.take() {
                Some((at_ms, event)) if at_ms <= to_ms => {
                    monitor.ingest(event);
                    self.fed += 1;
                    self.parsed += 1;
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

    /// How many checkpoints are kept, and their monitors' history bytes together.
    pub fn checkpoints(&self) -> (usize, usize) {
        (
            self.checkpoints.len(),
            self.checkpoints.iter().map(|c| c.bytes).sum(),
        )
    }

    /// Events parsed from the file and fed since the cursor was made: what the moves cost.
    pub fn parsed(&self) -> u64 {
        self.parsed
    }
}
