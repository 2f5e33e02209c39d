//! A recording's first line (`Header`), the format's name, version and line limits, and the
//! one error type of reading one. Below every other file of `recording`, which all read these.

use crate::model::now_ms;
use std::fmt;

/// The header's `format`.
pub const FORMAT: &str = "vramscope.recording";
/// The format version this vramscope writes and reads.
pub const VERSION: u32 = 1;
/// Longest line a reader accepts (the bound is stated in `safe_fs::bounds`). vramscope's own
/// lines stay far below it: a poll with many points is split over several records.
pub const MAX_LINE: usize = crate::safe_fs::bounds::RECORDING_LINE;
/// Longest header line a reader accepts.
pub const MAX_HEADER_LINE: usize = crate::safe_fs::bounds::RECORDING_HEADER_LINE;

/// The first line of a recording.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The format version: `VERSION` for a file this vramscope writes.
    pub version: u32,
    /// The vramscope that recorded it.
    pub vramscope_version: String,
    /// Wall time the recording began, ms since the Unix epoch.
    pub started_ms: u64,
    /// The refresh period when it began.
    pub interval_ms: u64,
    /// The machine's host name, when it could be read.
    pub host: Option<String>,
}

impl Header {
    /// A header for a recording beginning now, at this refresh period.
    pub fn new(interval_ms: u64) -> Header {
        Header {
            version: VERSION,
            vramscope_version: env!("CARGO_PKG_VERSION").into(),
            started_ms: now_ms(),
            interval_ms,
            host: crate::model::host::host_name(),
        }
    }
}

/// Why a recording cannot be read (further): one line naming the file and the line or byte
/// offset, e.g. `run.jsonl: line 12, column 40: damaged record (expected value)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordingError {
    pub message: String,
}

impl RecordingError {
    /// Cleaned (`crate::text`): serde quotes what it could not read, and that is the file's.
    pub(super) fn new(message: String) -> Self {
        let message = crate::text::clean(&message).into_owned();
        RecordingError { message }
    }
}

impl fmt::Display for RecordingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RecordingError {}
