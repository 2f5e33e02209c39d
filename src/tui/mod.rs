//! The interactive monitor: terminal handling, the event loop, key handling, and the panels
//! that draw a `View`.

mod attach_run;
pub mod columns;
mod event_loop;
mod feed;
mod keys;
pub mod layout;
pub mod options;
pub mod panels;
pub mod rows;
mod signal_send;
pub mod snapshot_ask;
pub mod ui_state;
pub mod view;

pub use event_loop::{RunJob, replay, run};
pub use options::Options;
