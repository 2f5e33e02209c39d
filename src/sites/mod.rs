//! What held the memory: PyTorch memory snapshots (`torch.cuda.memory._snapshot()`, the
//! pickle `_dump_snapshot` writes and memory_viz opens) read as hostile input, the live
//! set reconstructed at the peak, at an OOM or at the dump, grouped by allocation site, and
//! two answers compared.
//!
//! Reading (`read`): the pickle is checked opcode by opcode first (`guard`): a pickle that
//! names a Python global or builds objects (what could run code in Python) is refused, and
//! so is one that would make the reader build more values than `Limits::max_values`. Then
//! the serde-pickle crate decodes it into our own owned types, keeping the newest trace
//! entries, at most so many blocks and frames, and counting what it cut.
//!
//! Deviations from the shared contract, for callers: `Limits` has one more field,
//! `max_values` (use `..Limits::default()`); `held_on` picks a device (`held` takes the
//! `vramscope` key's device, else the first); `Held` has two more fields, `all_sites`
//! (what `diff` compares) and `cut`; `SitesError::kind` says whether the file was
//! unreadable or the question unanswerable.

mod diff;
mod error;
mod guard;
mod held;
mod limits;
mod snapshot;

pub use diff::{Change, SiteChange, SitesDiff, diff};
pub use error::{ErrorKind, SitesError};
pub use held::{BlockAt, Exactness, Held, Moment, OomWhy, Site};
pub use limits::Limits;
pub use snapshot::{
    Action, Block, BlockState, Cut, DeviceTrace, Frame, Frames, KeyOom, MemorySnapshot, Segment,
    Stack, TraceEntry, VramscopeKey,
};

use std::path::Path;

/// Reads a snapshot file within `limits`.
pub fn read_file(_path: &Path, _limits: &Limits) -> Result<MemorySnapshot, SitesError> {
    Err(SitesError::new(ErrorKind::Io, "not yet"))
}

/// Reads a snapshot from bytes within `limits`.
pub fn read_bytes(_bytes: &[u8], _limits: &Limits) -> Result<MemorySnapshot, SitesError> {
    Err(SitesError::new(ErrorKind::NotASnapshot, "not yet"))
}

/// What held the memory at `moment` on the snapshot's own device (the `vramscope` key's,
/// else the lowest). `recorded_peak`: the allocator's `allocated_bytes.all.peak` (the
/// channel's figure), else the key's.
pub fn held(
    snap: &MemorySnapshot,
    moment: Moment,
    recorded_peak: Option<u64>,
    top: usize,
) -> Result<Held, SitesError> {
    held_on(snap, None, moment, recorded_peak, top)
}

/// `held` on `device` (a CUDA ordinal); `None`: the snapshot's own.
pub fn held_on(
    _snap: &MemorySnapshot,
    _device: Option<u32>,
    _moment: Moment,
    _recorded_peak: Option<u64>,
    _top: usize,
) -> Result<Held, SitesError> {
    Err(SitesError::new(ErrorKind::NotInSnapshot, "not yet"))
}
