//! What held the memory: PyTorch memory snapshots (`torch.cuda.memory._snapshot()`, the
//! pickle `_dump_snapshot` writes and memory_viz opens) read as hostile input, the live
//! set reconstructed at the peak, at an OOM or at the dump, grouped by allocation site, and
//! two answers compared.
//!
//! Reading (`read`): the pickle is checked opcode by opcode first (`guard`): a pickle that
//! names a Python global or builds objects (what could run code in Python) is refused, and
//! so is one that nests deeper than 64, refers to itself, or would make the reader build more
//! values than `Limits::max_values`. Then the `pickled` crate (a serde-pickle fork that
//! shares, as Python does, what a pickle refers to twice; serde-pickle 1.2 cannot read a real
//! snapshot) builds its values, and `read` copies them into our own owned types, keeping the
//! newest trace entries, at most so many blocks and frames, and counting what it cut.
//!
//! Deviations from the shared contract, for callers: `Limits` has one more field,
//! `max_values` (use `..Limits::default()`); `held_on` picks a device (`held` takes the
//! `vramscope` key's device, else the first); `Held` has more fields: `all_sites` (what
//! `diff` compares), `cut`, `reserved`, `recorded_peak` and `recorded_is_requested` (what
//! the exactness compared with), `mismatches`; `SitesError::kind` says whether the file was
//! unreadable or the question unanswerable. The `vramscope` key may carry one more field,
//! `peak_requested` (`requested_bytes.all.peak`), which makes the exactness check byte for
//! byte (`exact.rs`); `render` has the text and JSON the command prints (`held_json` for
//! embedding).

mod answer;
pub mod command;
mod cost;
mod diff;
mod error;
mod exact;
mod guard;
mod held;
mod limits;
mod oom;
mod read;
pub mod render;
mod site;
mod snapshot;
mod walk;
pub mod writer_json;

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

/// Reads a snapshot file within `limits`: a file over `max_file_bytes` is refused before
/// it is read.
pub fn read_file(path: &Path, limits: &Limits) -> Result<MemorySnapshot, SitesError> {
    use std::io::Read;
    let name = path.display().to_string();
    let io = |e: std::io::Error| SitesError::new(ErrorKind::Io, format!("cannot read {name}: {e}"));
    let file = std::fs::File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    if len > limits.max_file_bytes {
        return Err(too_big(len, limits));
    }
    // A file that grows while it is read is still read only up to the limit.
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(limits.max_file_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    read_bytes(&bytes, limits)
}

fn too_big(len: u64, limits: &Limits) -> SitesError {
    SitesError::new(
        ErrorKind::Limit,
        format!(
            "refused: the file is {len} bytes, over the {}-byte limit on a snapshot",
            limits.max_file_bytes
        ),
    )
}

/// Reads a snapshot from bytes within `limits`.
pub fn read_bytes(bytes: &[u8], limits: &Limits) -> Result<MemorySnapshot, SitesError> {
    read_bytes_costed(bytes, limits, &mut ReadCost::default())
}

/// `read_bytes`, saying in `cost` what each stage took (the benchmark's figures).
pub fn read_bytes_costed(
    bytes: &[u8],
    limits: &Limits,
    cost: &mut ReadCost,
) -> Result<MemorySnapshot, SitesError> {
    let started = std::time::Instant::now();
    let mut watch = cost::Watch::start();
    let len = bytes.len() as u64;
    if len > limits.max_file_bytes {
        return Err(too_big(len, limits));
    }
    if bytes.is_empty() {
        return Err(SitesError::new(
            ErrorKind::NotASnapshot,
            "not a memory snapshot: the file is empty",
        ));
    }
    guard::check(bytes, limits.max_values, started, limits.deadline)?;
    cost.guard = watch.lap();
    read::snapshot(bytes, limits, started, cost)
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
