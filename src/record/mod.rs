//! Recordings: the stream of `SourceEvent`s a monitor ingests, written as it arrives and read
//! back in order, so replaying one is feeding its events to a `Monitor` as live sampling
//! does, and reports iterate them. The format (docs/recording-v1.md) is JSON lines after a
//! header line, zstd-compressed when the file name ends in `.zst`; flushed at least every
//! second, so a killed recorder loses at most its last second and the file reads cleanly to
//! its last whole record.
//!
//! - `writer`: `Recorder`, which writes a file.
//! - `reader`: `Recording` and its `Events`, which read one with bounded memory and one clear
//!   error for a damaged or hostile file.
//! - `header`: the file's first line and the format's limits; `RecordingError`.
//! - `wire`, `wire_reading`, `wire_mig`, `channels`, `points`: how each event looks in the
//!   file.
//! - `scope`: what part of a recording `report`, `plot` and `export` read (ring history
//!   from before the start, a time window, some processes); `when`: the times it is given.
//! - `command`: `vramscope record`, recording without a screen; `live`: `--record` for the
//!   monitor.

mod channels;
pub mod command;
pub mod folds;
mod header;
mod lines;
pub mod live;
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

pub use command::RecordArgs;
pub use header::{FORMAT, Header, MAX_HEADER_LINE, MAX_LINE, RecordingError, VERSION};
pub use reader::{Ending, Events, Recording, Resume};
pub use skipped::Skipped;
pub use writer::{FLUSH_EVERY, Recorder};
