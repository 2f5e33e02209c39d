//! Why a request failed: the request against free device memory, the cache, and the
//! largest free block. The allocator first looks for a cached free block that fits, then
//! asks the device for a new segment (2 MiB for a request under 1 MiB, 20 MiB under
//! 10 MiB, else the request rounded up to 2 MiB), and frees the cache and retries before
//! it gives up. So a failure with enough cached free memory but no block large enough is
//! fragmentation; with device memory free for the segment it needed, a cap (a memory
//! fraction, another limit); otherwise the device is truly full.

use super::held::OomWhy;
use super::snapshot::{BlockState, MemorySnapshot};
use super::walk::State;

/// What the device had to give for `requested`.
fn segment_for(requested: u64) -> u64 {
    const MIB: u64 = 1 << 20;
    if requested <= MIB {
        2 * MIB
    } else if requested < 10 * MIB {
        20 * MIB
    } else {
        requested.div_ceil(2 * MIB).saturating_mul(2 * MIB)
    }
}

/// The largest inactive block among `device`'s segments at the dump.
pub(crate) fn largest_free_block(snap: &MemorySnapshot, device: u32) -> u64 {
    snap.segments
        .iter()
        .filter(|s| s.device == device)
        .flat_map(|s| s.blocks.iter())
        .filter(|b| b.state == BlockState::Inactive)
        .map(|b| b.size)
        .max()
        .unwrap_or(0)
}

/// Explains a failed request of `requested` bytes in `state`.
pub(crate) fn explain(
    state: &State,
    requested: u64,
    device_free: Option<u64>,
    largest_free_block: u64,
) -> OomWhy {
    let allocated: u64 = state.live.values().map(|l| l.size_at_least()).sum();
    let cached_free = state.reserved.saturating_sub(allocated);
    let segment = segment_for(requested);
    let gib = |b: u64| crate::model::units::bytes(b);
    let verdict = match device_free {
        Some(free) if free >= segment => format!(
            "a cap: the device had {} free, enough for the {} segment the request needed, yet the allocator refused (a memory fraction or another limit)",
            gib(free),
            gib(segment)
        ),
        _ if cached_free >= requested && largest_free_block < requested => format!(
            "fragmentation: {} of the cache is free, more than the {} asked for, but in pieces; the largest free block is {} (try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)",
            gib(cached_free),
            gib(requested),
            gib(largest_free_block)
        ),
        Some(free) => format!(
            "truly full: {} asked for, {} free on the device and {} free in the cache; tensors hold {}",
            gib(requested),
            gib(free),
            gib(cached_free),
            gib(allocated)
        ),
        None => format!(
            "truly full, as far as the snapshot says: {} asked for, {} free in the cache (the device's free memory was not recorded); tensors hold {}",
            gib(requested),
            gib(cached_free),
            gib(allocated)
        ),
    };
    OomWhy {
        requested,
        device_free,
        reserved: state.reserved,
        allocated,
        cached_free,
        largest_free_block,
        verdict,
    }
}
