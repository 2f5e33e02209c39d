//! Reading a recording: the header first (what it is, which version), then its events in
//! order. A record cut short at the very end (the recorder was killed) ends the events
//! quietly; anything else wrong is one error naming the line or byte offset, after which the
//! events stop. Memory stays bounded whatever the file holds (see `lines`).

use super::channels::{BatchIn, WritersRead};
use super::header::{FORMAT, Header, MAX_HEADER_LINE, MAX_LINE, RecordingError, VERSION};
use super::lines::{Line, Lines, Problem};
use super::scope::Scope;
use super::skipped::Skipped;
use super::wire::{
    device_infos, device_sample, driver, host_sample, peak_holders, problem, take_skipped_processes,
};
use crate::model::ForeignText;
use crate::model::peak_owner::{NotAttributed, PeakHolders};
use crate::model::{DeviceSample, SourceEvent};
use serde::Deserialize;
use serde_json::Value;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

#[derive(Deserialize)]
struct HeaderWire {
    version: u32,
    vramscope_version: String,
    started_ms: u64,
    interval_ms: u64,
    #[serde(default)]
    host: Option<String>,
}

/// How reading a recording to its end went.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ending {
    /// The damage that stopped the reading, if any.
    pub damage: Option<String>,
    /// The line saying what was skipped, if anything was.
    pub skipped: Option<String>,
}

/// One record as read: `t` and one payload named by its kind. A kind this version does not
/// know (added by a later minor change) leaves every field empty and is skipped.
#[derive(Deserialize)]
struct RecordIn {
    t: u64,
    started: Option<StartedIn>,
    nvml_unavailable: Option<problem::Own>,
    device: Option<device_sample::Own>,
    /// Beside `device`: what was read of the processes at its peak.
    peak_holders: Option<peak_holders::In>,
    host: Option<host_sample::Own>,
    channels: Option<BatchIn>,
    interval: Option<IntervalIn>,
}

#[derive(Deserialize)]
struct IntervalIn {
    interval_ms: u64,
}

#[derive(Deserialize)]
struct StartedIn {
    driver: driver::Own,
    #[serde(deserialize_with = "device_infos::deserialize")]
    devices: Vec<crate::model::DeviceInfo>,
}

/// An open recording whose header has been read and checked.
pub struct Recording {
    name: String,
    header: Header,
    lines: Lines,
    scope: Option<Scope>,
}

impl Recording {
    /// Opens a file and reads its header; plain or zstd-compressed (by its magic number,
    /// whatever its name).
    pub fn open(path: &Path) -> Result<Recording, RecordingError> {
        let name = path.display().to_string();
        let file = File::open(path).map_err(|e| RecordingError::new(format!("{name}: {e}")))?;
        Self::from_reader(name, BufReader::with_capacity(64 * 1024, file))
    }

    /// A recording held in memory (the bundled demo); `name` stands for the file in errors.
    pub fn from_bytes(name: &str, bytes: &'static [u8]) -> Result<Recording, RecordingError> {
        Self::from_reader(name.to_string(), bytes)
    }

    fn from_reader<R: BufRead + Send + 'static>(
        name: String,
        raw: R,
    ) -> Result<Recording, RecordingError> {
        let mut lines = Lines::new(raw).map_err(|p| problem_error(&name, &p, 1))?;
        let header = read_header(&name, &mut lines)?;
        Ok(Recording {
            name,
            header,
            lines,
            scope: None,
        })
    }

    /// The same recording, its events passed through `scope` (see `recording::scope`).
    pub fn scoped(mut self, scope: Scope) -> Recording {
        self.scope = Some(scope);
        self
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Whether the file is zstd-compressed.
    pub fn compressed(&self) -> bool {
        self.lines.compressed()
    }

    /// The events in order, each with the wall time it was recorded (ms since the Unix
    /// epoch). A batch was recorded as its members, which come one by one. Stops quietly at
    /// a record cut short at the end of the file; stops after yielding an error.
    pub fn events(self) -> Events {
        Events {
            name: self.name,
            lines: self.lines,
            writers: WritersRead::default(),
            skipped_records: 0,
            skipped_processes: 0,
            done: false,
            scope: self.scope,
        }
    }

    /// The events after `at`, which an earlier reading of the same file gave: the lines
    /// before it are passed over unparsed. An error when the file no longer holds them.
    pub fn events_from(self, at: &Resume) -> Result<Events, RecordingError> {
        let mut events = self.events();
        events.skip_to(at)?;
        Ok(events)
    }

    /// Hands every event to `f` in order, as `events` gives them (never a `Batch`); the
    /// damage that stopped the reading and what was skipped, if anything.
    pub fn each_event(self, mut f: impl FnMut(u64, SourceEvent)) -> Ending {
        let mut events = self.events();
        let mut damage = None;
        for item in events.by_ref() {
            match item {
                Ok((at_ms, event)) => f(at_ms, event),
                Err(RecordingError { message }) => {
                    damage = Some(message);
                    break;
                }
            }
        }
        Ending {
            damage,
            skipped: events.skipped_notice(),
        }
    }
}

/// Where reading a recording stopped: the line last read and what the reader remembered
/// there, so that a fresh open of the same file can go on from it (`Recording::events_from`)
/// without parsing the lines before it again.
#[derive(Clone)]
pub struct Resume {
    line: u64,
    writers: WritersRead,
    skipped_records: u64,
    skipped_processes: u64,
}

/// The events of a recording; see `Recording::events`.
pub struct Events {
    name: String,
    lines: Lines,
    writers: WritersRead,
    skipped_records: u64,
    skipped_processes: u64,
    done: bool,
    scope: Option<Scope>,
}

impl Events {
    /// What has been skipped so far, being of kinds this version does not know.
    pub fn skipped(&self) -> Skipped {
        Skipped {
            records: self.skipped_records,
            processes: self.skipped_processes,
            ..self.writers.skipped
        }
    }

    /// Where this reading stands, to go on from later (`Recording::events_from`).
    pub fn resume_point(&self) -> Resume {
        Resume {
            line: self.lines.number,
            writers: self.writers.clone(),
            skipped_records: self.skipped_records,
            skipped_processes: self.skipped_processes,
        }
    }

    /// Passes over the lines up to `at`, unparsed, and takes on what the reader remembered
    /// there: `at` is a place further on in an earlier reading of the same file. An error
    /// when the file no longer holds those lines.
    pub fn skip_to(&mut self, at: &Resume) -> Result<(), RecordingError> {
        while self.lines.number < at.line {
            match self.lines.next(MAX_LINE) {
                Ok(Line::Whole) => {}
                Ok(Line::Cut | Line::End) => {
                    self.done = true;
                    return Err(RecordingError::new(format!(
                        "{}: ends before line {}, which it held when first read",
                        self.name, at.line
                    )));
                }
                Err(problem) => {
                    self.done = true;
                    return Err(problem_error(&self.name, &problem, self.lines.number));
                }
            }
        }
        self.writers = at.writers.clone();
        self.skipped_records = at.skipped_records;
        self.skipped_processes = at.skipped_processes;
        Ok(())
    }

    /// `Skipped::notice` for this file.
    pub fn skipped_notice(&self) -> Option<String> {
        self.skipped().notice(&self.name)
    }

    /// The number of the line last read (the header is line 1).
    pub fn line(&self) -> u64 {
        self.lines.number
    }

    /// The record on the current line; its text cleaned (`ForeignText`), as the file is
    /// anyone's.
    fn decode(&mut self) -> Result<Option<(u64, SourceEvent)>, String> {
        // Counted by the process lists as they are read (see `take_skipped_processes`); what
        // a record that failed midway left is not this record's.
        take_skipped_processes();
        let record: RecordIn = serde_json::from_slice(&self.lines.buf).map_err(json_problem)?;
        self.skipped_processes += take_skipped_processes();
        let mut event = if let Some(started) = record.started {
            SourceEvent::Started {
                driver: started.driver.0,
                devices: started.devices,
            }
        } else if let Some(problem) = record.nvml_unavailable {
            SourceEvent::NvmlUnavailable(problem.0)
        } else if let Some(sample) = record.device {
            SourceEvent::Device(Box::new(holders_of(sample.0, record.peak_holders)))
        } else if let Some(sample) = record.host {
            SourceEvent::Host(Box::new(sample.0))
        } else if let Some(batch) = record.channels {
            SourceEvent::Channels(Box::new(
                self.writers.batch(batch).map_err(|e| format!(": {e}"))?,
            ))
        } else if let Some(interval) = record.interval {
            SourceEvent::Interval {
                ms: interval.interval_ms,
            }
        } else {
            self.skipped_records += 1;
            return Ok(None);
        };
        event.clean_text();
        Ok(Some((record.t, event)))
    }

    fn fail(&mut self, message: String) -> Option<Result<(u64, SourceEvent), RecordingError>> {
        self.done = true;
        Some(Err(RecordingError::new(message)))
    }
}

impl Iterator for Events {
    type Item = Result<(u64, SourceEvent), RecordingError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            match self.lines.next(MAX_LINE) {
                Ok(Line::Whole) => match self.decode() {
                    Ok(Some((t, event))) => match &mut self.scope {
                        None => return Some(Ok((t, event))),
                        Some(scope) => {
                            if let Some(kept) = scope.apply(t, event) {
                                return Some(Ok(kept));
                            }
                        }
                    },
                    Ok(None) => {}
                    Err(message) => {
                        let message = format!("{}: line {}{message}", self.name, self.lines.number);
                        return self.fail(message);
                    }
                },
                // A record cut short by the end of the file: the recorder was killed mid-write.
                Ok(Line::Cut | Line::End) => self.done = true,
                Err(problem) => {
                    let message = problem_error(&self.name, &problem, self.lines.number).message;
                    return self.fail(message);
                }
            }
        }
        None
    }
}

/// Reads and checks line 1.
fn read_header(name: &str, lines: &mut Lines) -> Result<Header, RecordingError> {
    let not_ours =
        |why: &str| RecordingError::new(format!("{name}: not a vramscope recording{why}"));
    let start = lines.peek().map_err(|p| problem_error(name, &p, 1))?;
    if start.is_empty() {
        return Err(not_ours(if lines.compressed() {
            " (it ends before its first line)"
        } else {
            " (the file is empty)"
        }));
    }
    if start.starts_with(&GZIP_MAGIC) {
        return Err(not_ours(
            " (gzip-compressed: vramscope reads plain or zstd-compressed recordings)",
        ));
    }
    if start[0] != b'{' {
        return Err(not_ours(""));
    }
    match lines.next(MAX_HEADER_LINE) {
        Ok(Line::Whole | Line::Cut) => {}
        Ok(Line::End) => return Err(not_ours(" (the file is empty)")),
        Err(Problem::TooLong) => {
            return Err(not_ours(" (its first line is longer than 64 KiB)"));
        }
        Err(p) => return Err(problem_error(name, &p, 1)),
    }
    let value: Value = serde_json::from_slice(&lines.buf).map_err(|_| not_ours(""))?;
    if value.get("format").and_then(Value::as_str) != Some(FORMAT) {
        return Err(not_ours(""));
    }
    let version = value.get("version").and_then(Value::as_u64);
    match version {
        Some(v) if v == u64::from(VERSION) => {}
        Some(v) if v > u64::from(VERSION) => {
            let by = value
                .get("vramscope_version")
                .and_then(Value::as_str)
                .map(|v| format!(" by vramscope {v}"))
                .unwrap_or_default();
            return Err(RecordingError::new(format!(
                "{name}: recorded by a newer vramscope (format version {v}{by}); this one reads version {VERSION}"
            )));
        }
        Some(v) => {
            return Err(RecordingError::new(format!(
                "{name}: line 1: unknown format version {v}; this vramscope reads version {VERSION}"
            )));
        }
        None => {
            return Err(RecordingError::new(format!(
                "{name}: line 1: the header has no format version"
            )));
        }
    }
    let wire = HeaderWire::deserialize(value)
        .map_err(|e| RecordingError::new(format!("{name}: line 1: damaged header ({e})")))?;
    Ok(Header {
        version: wire.version,
        vramscope_version: crate::text::clean(&wire.vramscope_version).into_owned(),
        started_ms: wire.started_ms,
        interval_ms: wire.interval_ms,
        host: wire.host.map(|host| crate::text::clean(&host).into_owned()),
    })
}

/// `, column 40: damaged record (expected value)`, to follow `line N`.
fn json_problem(e: serde_json::Error) -> String {
    let text = e.to_string();
    // serde_json adds its own " at line 1 column N": the line is ours to name.
    let text = text
        .rsplit_once(" at line ")
        .map_or(text.as_str(), |(what, _)| what);
    let what = match e.classify() {
        serde_json::error::Category::Eof => "record cut short",
        serde_json::error::Category::Syntax => "not a JSON record",
        serde_json::error::Category::Data | serde_json::error::Category::Io => "damaged record",
    };
    format!(", column {}: {what} ({text})", e.column())
}

fn problem_error(name: &str, problem: &Problem, line: u64) -> RecordingError {
    RecordingError::new(match problem {
        Problem::TooLong => format!("{name}: line {line} is longer than {} MiB", MAX_LINE >> 20),
        Problem::Damaged(what, offset) => {
            format!("{name}: byte offset {offset}: {what}")
        }
    })
}

/// The peak's holders: those recorded beside the sample; without them, the sample's own
/// where the peak's moment is the sample's, and unknown at any other moment (a recording
/// made before holders were recorded).
fn holders_of(mut sample: DeviceSample, beside: Option<peak_holders::In>) -> DeviceSample {
    let at_ms = sample.at_ms;
    if let Some(peak) = &mut sample.memory_peak {
        peak.holders = match beside {
            Some(peak_holders::In(holders)) => holders,
            None if peak.at_ms == at_ms => PeakHolders::TheSample,
            None => PeakHolders::NotRead(NotAttributed::NotRecorded),
        };
    }
    sample
}
