//! The one owner of everything sampled: latest values, history and peaks. Lives on the main
//! thread; samplers feed it through `ingest`. Outputs read what it hands out: a `Snapshot`
//! of one moment, and its histories through a `HistoryView` capped at that moment.

pub mod allocators;
mod history_view;
mod monitor;
mod series_set;

pub use allocators::{Allocators, ChannelState, SlotSeries};
pub use history_view::{DeviceHistory, HistoryView, ProcessHistory, SlotHistory};
pub use monitor::{Monitor, StaleAfter};
pub use series_set::{DeviceSeries, ProcessKey, ProcessSeries};
