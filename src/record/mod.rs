//! Writing recordings, the modes: `command` is `vramscope record`, recording without a
//! screen; `live` is `--record` for the monitor (the TUI's event loop holds one). The
//! format they write, and its readers, are `crate::recording`.

pub mod command;
pub mod live;

pub use command::RecordArgs;
