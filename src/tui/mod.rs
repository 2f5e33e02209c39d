//! The interactive monitor: terminal handling, the event loop, key handling, and the panels
//! that draw a `View`.

mod attach_run;
mod cell_diff;
pub mod columns;
mod event_loop;
mod feed;
pub mod filter;
mod frame_writer;
pub(crate) mod input;
mod keys;
pub mod layout;
mod narrow;
pub mod options;
pub mod panels;
pub mod rows;
mod signal_send;
pub(crate) mod signals;
pub mod snapshot_ask;
pub mod terminal;
pub mod theme;
pub mod ui_state;
pub mod view;

pub use event_loop::{RunJob, replay, run};
pub use options::Options;
