//! The bounds a snapshot file is read within. A snapshot is foreign input like a channel
//! file: whoever wrote it, it gets a size cap before it is read, a cap on the values the
//! pickle may build, caps on what is kept, and a deadline.

use super::error::{ErrorKind, SitesError};
use crate::safe_fs::bounds;
use std::time::Duration;

/// What reading one snapshot may cost. The defaults take a real snapshot of a
/// 2,000,000-entry history ring (torchtitan's default is 1,000,000) and refuse what would
/// not fit a monitor's memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// A larger file is refused before a byte of it is read (`bounds::SNAPSHOT`, 1 GiB).
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
    /// reader build, counted by the guard before any is built (`bounds::SNAPSHOT_VALUES`).
    pub max_values: u64,
    /// Of those, the most that are an allocation of their own (strings, bytes, containers):
    /// each costs the crate two to three times a plain value (`bounds::SNAPSHOT_ALLOCATED`).
    pub max_allocated: u64,
    /// The most values the pickle may store in its memo (`bounds::SNAPSHOT_MEMO`).
    pub max_memo: u64,
    /// Back the file's bytes and each history with 2 MiB pages (`huge_pages.rs`): for a
    /// command that reads one snapshot and exits. Default false: a long-running process
    /// would keep its allocator's freed memory in them.
    pub huge_pages: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_file_bytes: bounds::SNAPSHOT.max_bytes,
            max_trace_entries: 2_000_000,
            max_blocks: 2_000_000,
            max_frames_per_entry: 64,
            deadline: Duration::from_secs(30),
            max_values: bounds::SNAPSHOT_VALUES,
            max_allocated: bounds::SNAPSHOT_ALLOCATED,
            max_memo: bounds::SNAPSHOT_MEMO,
            huge_pages: false,
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

/// The one line for a file or bytes over `max_file_bytes`.
pub(crate) fn too_big(len: u64, limits: &Limits) -> SitesError {
    SitesError::new(
        ErrorKind::Limit,
        format!(
            "refused: the file is {len} bytes, over the {}-byte limit on a snapshot",
            limits.max_file_bytes
        ),
    )
}
