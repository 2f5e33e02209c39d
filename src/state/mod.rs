//! The one owner of everything sampled: latest values, history and peaks. Lives on the main
//! thread; samplers feed it through `ingest`, and the TUI, one-shot output, replay and the
//! exporter read its snapshots.

pub mod allocators;
mod monitor;
mod series_set;

pub use allocators::{Allocators, ChannelState, SlotSeries};
pub use monitor::{Monitor, StaleAfter};
pub use series_set::{DeviceSeries, ProcessKey, ProcessSeries};
