//! The bounds a snapshot file is read within. A snapshot is foreign input like a channel
//! file: whoever wrote it, it gets a size cap before it is read, a cap on the values the
//! pickle may build, caps on what is kept, and a deadline.

use super::error::{ErrorKind, SitesError};
use std::time::Duration;

/// What reading one snapshot may cost. The defaults take a real snapshot of a
/// 2,000,000-entry history ring (torchtitan's default is 1,000,000) and refuse what would
/// not fit a monitor's memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// A larger file is refused before a byte of it is read. Default 1 GiB: PyTorch's own
    /// docs put "several KB per entry" on a snapshot with deep stacks.
    pub max_file_bytes: u64,
    /// Per device, the newest this many trace entries are kept and the older ones counted
    /// as cut: the backward walk needs the newest. Default 2,000,000.
    pub max_trace_entries: usize,
    /// Blocks kept over all segments; the rest are counted as cut. Default 2,000,000.
    pub max_blocks: usize,
    /// Frames kept per block or trace entry, innermost first: the site is nearly always
    /// within the first few. Default 64.
    pub max_frames_per_entry: usize,
    /// Reading and reducing stop with an error past this. Default 30 s.
    pub deadline: Duration,
    /// The most values (ints, strings, containers, memo references) the pickle may make the
    /// reader build, counted before any is built: a bound on memory no pickle can pass.
    /// Default 64,000,000: about 36 bytes each when built (the benchmark's 1,000,000-entry
    /// history is 15.3 million values and 557 MiB at its peak), so about 2.3 GB at most;
    /// a history like the benchmark's of `max_trace_entries` (2,000,000) entries fits.
    pub max_values: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_file_bytes: 1 << 30,
            max_trace_entries: 2_000_000,
            max_blocks: 2_000_000,
            max_frames_per_entry: 64,
            deadline: Duration::from_secs(30),
            max_values: 64_000_000,
        }
    }
}

/// The one line for a read that ran out of time, at whichever stage.
pub(crate) fn past_deadline(deadline: Duration) -> SitesError {
    let took = if deadline.subsec_nanos() == 0 {
        format!("{} s", deadline.as_secs())
    } else {
        format!("{} ms", deadline.as_millis())
    };
    SitesError::new(
        ErrorKind::Limit,
        format!("gave up reading after {took} (the deadline)"),
    )
}
