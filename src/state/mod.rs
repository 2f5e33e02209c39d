//! The one owner of everything sampled: latest values, history and peaks. Lives on the main
//! thread; samplers feed it through `ingest`, and views, one-shot output and (later) the
//! recorder and exporter read it.

mod monitor;
mod series_set;

pub use monitor::{Monitor, StaleAfter};
pub use series_set::{DeviceSeries, ProcessKey, ProcessSeries};
