//! What the fast memory sampling read of the processes at a peak (`MemoryPeak::holders`):
//! data only, below `device`, so a sample can carry it; who made the peak is
//! `peak_owner`'s rule, above both.

use super::absent::Absent;
use serde::Serialize;

/// The rise since the last refresh above which a peek reads the compute list: a spike worth
/// naming its owner. Below it the refreshes' own figures tell the story, and a peek costs one
/// call (the memory read) and nothing else.
pub const ATTRIBUTE_RISE: u64 = 256 * 1024 * 1024;

/// What was read of the processes at a peak.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum PeakHolders {
    /// The peak is the refresh's own reading: its process lists are the sample's.
    TheSample,
    /// The compute list read right after the peek that found the rise: each process's used
    /// memory then (processes whose figure NVML did not give are left out).
    Read(Vec<HeldBy>),
    /// No list was read at the peak, and why.
    NotRead(NotAttributed),
}

/// One process's used memory at a peak.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct HeldBy {
    pub pid: u32,
    pub used: u64,
}

/// Why a peak has no owner.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum NotAttributed {
    /// The rise since the last refresh was under [`ATTRIBUTE_RISE`], so no list was read.
    SmallRise { rise: u64 },
    /// The compute list could not be read right after the peek.
    ListUnread(Absent),
    /// A recording made before peaks carried their holders.
    NotRecorded,
}
