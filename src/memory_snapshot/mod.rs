//! What held the memory: PyTorch memory snapshots (`torch.cuda.memory._snapshot()`, the
//! pickle `_dump_snapshot` writes and memory_viz opens) read as hostile input, the live
//! set reconstructed at the peak, at an OOM or at the dump, grouped by allocation site, and
//! two answers compared.
//!
//! Reading: the pickle is checked opcode by opcode (`guard`): a pickle that names a Python
//! global or builds objects (what could run code in Python) is refused, and so is one that
//! nests deeper than 64, refers to itself, or would make the reader build more values,
//! strings and containers, or memo entries than `Limits` allows, or hold more on its stack
//! than `safe_fs::bounds::SNAPSHOT_STACK`. The same pass builds what each opcode it has
//! passed asks for (`build`, into `value`'s arena, sharing what the pickle refers to twice)
//! and `read` copies it into our own owned types, each device's history as it comes,
//! keeping the newest trace entries, at most so many blocks and frames, and counting what
//! it cut. The guard's module comment says why this is our own reader and not a crate.
//!
//! Answering: the peak reconstructed by walking the history back (`walk`), blocks grouped by
//! site (`site`), exactness (`exact`), OOM verdicts (`oom`), two answers compared (`diff`);
//! `answer` puts them together for one moment and device (`held`, `held_on`).
//!
//! Deviations from the shared contract, for callers: `Limits` has three more fields,
//! `max_values`, `max_allocated` and `max_memo` (use `..Limits::default()`); `held_on`
//! picks a device (`held` takes the `vramscope` key's device, else the first); `Held` has
//! more fields: `all_sites` (what `diff` compares), `cut`, `reserved`, `recorded_peak` and
//! `recorded_is_requested` (what the exactness compared with), `mismatches`; `SitesError::kind` says whether the file was
//! unreadable or the question unanswerable. The `vramscope` key may carry one more field,
//! `peak_requested` (`requested_bytes.all.peak`), which makes the exactness check byte for
//! byte (`exact.rs`).
//!
//! The library only: `vramscope sites` (the command and the text and JSON it prints) is
//! `crate::sites`; the monitor, `--json` and the report reach this through
//! `sources::sites`, and `vramscope diff` compares the sites at two runs' peaks with `diff`.

mod answer;
mod build;
mod cost;
mod diff;
mod error;
mod exact;
mod fast_hash;
mod field;
mod file;
mod guard;
mod held;
mod history;
mod huge_pages;
mod limits;
mod memo;
mod oom;
mod read;
mod site;
mod snapshot;
mod value;
mod walk;

pub use cost::{ReadCost, Spent};
pub use diff::{Change, SiteChange, SitesDiff, diff};
pub use error::{ErrorKind, SitesError};
pub use held::{BlockAt, Exactness, Held, Known, Moment, OomWhy, Site};
pub use limits::Limits;
pub use snapshot::{
    Action, Block, BlockState, Cut, DeviceTrace, Frame, Frames, KeyOom, MemorySnapshot, Segment,
    Stack, TraceEntry, VramscopeKey,
};

use std::path::Path;

/// Reads a snapshot file within `limits`: a FIFO or device, a file over `max_file_bytes`,
/// or one that does not start as a pickle is refused before it is read (`file.rs`).
pub fn read_file(path: &Path, limits: &Limits) -> Result<MemorySnapshot, SitesError> {
    let name = crate::text::clean(&path.display().to_string()).into_owned();
    let file = crate::safe_fs::open_for_reading(path)
        .map_err(|e| SitesError::new(ErrorKind::Io, format!("cannot read {name}: {e}")))?;
    read_owned(file::bytes_of(&file, limits)?, limits)
}

/// The bytes of an open snapshot file (the monitor's, opened without following links),
/// refused as `read_file` refuses them.
pub fn read_open_file(file: &std::fs::File, limits: &Limits) -> Result<Vec<u8>, SitesError> {
    file::bytes_of(file, limits)
}

/// Reads a snapshot from bytes within `limits`.
pub fn read_bytes(bytes: &[u8], limits: &Limits) -> Result<MemorySnapshot, SitesError> {
    read_bytes_costed(bytes, limits, &mut ReadCost::default())
}

/// `read_bytes`, saying in `cost` what each stage took.
pub fn read_bytes_costed(
    bytes: &[u8],
    limits: &Limits,
    cost: &mut ReadCost,
) -> Result<MemorySnapshot, SitesError> {
    if bytes.len() as u64 > limits.max_file_bytes {
        return Err(limits::too_big(bytes.len() as u64, limits));
    }
    read_slice(bytes, limits, cost)
}

/// Reads a snapshot from bytes the caller no longer needs.
pub fn read_owned(bytes: Vec<u8>, limits: &Limits) -> Result<MemorySnapshot, SitesError> {
    read_owned_costed(bytes, limits, &mut ReadCost::default())
}

/// `read_owned`, saying in `cost` what each stage took (the benchmark's figures).
pub fn read_owned_costed(
    bytes: Vec<u8>,
    limits: &Limits,
    cost: &mut ReadCost,
) -> Result<MemorySnapshot, SitesError> {
    read_slice(&bytes, limits, cost)
}

fn read_slice(
    bytes: &[u8],
    limits: &Limits,
    cost: &mut ReadCost,
) -> Result<MemorySnapshot, SitesError> {
    let started = std::time::Instant::now();
    let len = bytes.len() as u64;
    if len > limits.max_file_bytes {
        return Err(limits::too_big(len, limits));
    }
    if bytes.is_empty() {
        return Err(SitesError::new(
            ErrorKind::NotASnapshot,
            "not a memory snapshot: the file is empty",
        ));
    }
    read::read(bytes, limits, started, cost)
}

/// The value a pickle holds, in the canonical form the differential test compares with
/// Python's (see `read::canonical`): what the one pass built, within `limits`. For tests.
#[doc(hidden)]
pub fn canonical_pickle(bytes: &[u8], limits: &Limits) -> Result<String, SitesError> {
    read::canonical_of(bytes, limits)
}

/// What held the memory at `moment` on the snapshot's own device (the `vramscope` key's,
/// else the lowest). `recorded_peak`: the allocator's `allocated_bytes.all.peak` (the
/// channel's figure), else the key's; the key's `peak_requested`, when present, is
/// compared with first (see `exact.rs`). `top`: how many sites to list.
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
    snap: &MemorySnapshot,
    device: Option<u32>,
    moment: Moment,
    recorded_peak: Option<u64>,
    top: usize,
) -> Result<Held, SitesError> {
    answer::held_on(snap, device, moment, recorded_peak, top)
}
