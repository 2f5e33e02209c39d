//! Recordings: the stream of `SourceEvent`s a monitor ingests, written as it arrives and read
//! back in order, so replaying one is feeding its events to a `Monitor` as live sampling
//! does, and reports iterate them. The format (docs/recording-v1.md) is JSON lines after a
//! header line, zstd-compressed when the file name ends in `.zst`; flushed at least every
//! second, so a killed recorder loses at most its last second and the file reads cleanly to
//! its last whole record.
//!
//! - `writer`: `Recorder`, which writes a file.
//! - `reader`: `Recording` and its `Events`, which read one with bounded memory and one clear
//!   error for a damaged or hostile file; `lines`: its lines, plain or zstd; `skipped`: what
//!   a later 1.x wrote that this reader leaves out.
//! - `header`: the file's first line and the format's limits; `RecordingError`.
//! - `wire`, `wire_reading`, `wire_mig`, `channels`, `points`: how each event looks in the
//!   file.
//! - `scope`: what part of a recording `report`, `plot` and `export` read (ring history
//!   from before the start, a time window, some processes); `when`: the times it is given;
//!   `scoped`: a recording opened with its scope.
//! - `folds`: the writers' folds over a recording, which the offline modes share.
//!
//! The format and its readers only; the modes that write recordings (`vramscope record`,
//! `--record` for the monitor) are in `crate::record`.

mod channels;
pub mod folds;
mod header;
mod lines;
mod points;
mod reader;
pub mod scope;
pub mod scoped;
mod skipped;
pub mod when;
mod wire;
mod wire_mig;
mod wire_reading;
mod writer;

pub use header::{FORMAT, Header, MAX_HEADER_LINE, MAX_LINE, RecordingError, VERSION};
pub use reader::{Ending, Events, Recording, Resume};
pub use skipped::Skipped;
pub use writer::{FLUSH_EVERY, Recorder};
