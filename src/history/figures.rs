//! What a series answers with: its peak, and one column of a drawn chart. Below `series`,
//! which makes them, and the rest of the crate, which reads them.

/// The highest reading seen and when it was taken.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Peak {
    pub value: f64,
    pub at_ms: u64,
}

/// What one chart column shows: the range of readings in its time slice and
/// the latest of them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Column {
    pub min: f64,
    pub max: f64,
    pub last: f64,
}
