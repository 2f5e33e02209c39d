//! Bounded, peak-preserving metric history for a monitor that stays open for
//! days. Owns the storage types only; sampling and drawing live elsewhere.
//!
//! Each [`Series`] keeps a raw ring of recent samples and coarser bucket
//! tiers behind it (by default 15 min raw, 6 h of 10 s buckets, 7 days of
//! 1 min buckets). Every ring has a fixed capacity, so memory is bounded no
//! matter how long the program runs; buckets keep min and max (and when the
//! max happened), so decimation never hides a spike. [`Lingering`] holds
//! per-entity state (per-process series) that lingers after the entity goes. [`Capped`]
//! reads a series as it stood at one moment (a snapshot's).
//!
//! Time is milliseconds since the Unix epoch; values are `f64`.

mod capped;
mod config;
mod figures;
mod held;
mod lingering;
mod series;
#[cfg(test)]
mod series_edge_tests;
#[cfg(test)]
mod series_tests;
mod tier;

pub use capped::Capped;
pub use config::{SeriesConfig, TierSpec};
pub use figures::{Column, Peak};
pub use lingering::Lingering;
pub use series::{Series, column_of};
pub use tier::Bucket;
