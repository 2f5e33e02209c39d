//! Why a request failed: the request against free device memory, the cache, and the
//! largest free block. The allocator first looks for a cached free block that fits, then
//! asks the device for a new segment (`oom_explain::segment_for`), and frees the wholly free
//! cached segments and retries before it gives up. So a failure with device memory free for
//! the segment it needed is a cap (a memory fraction, another limit); one with enough free in
//! the cache, or in the cache and on the device together, but no block large enough is
//! fragmentation; otherwise the device is truly full. Which of them is `oom_explain`'s
//! verdict, the one the report's and the monitor's explanations give; the snapshot adds the
//! largest free block.

use super::held::{Known, OomWhy, Site};
use super::snapshot::{Action, BlockState, MemorySnapshot, TraceEntry};
use super::walk::State;
use crate::model::absent::Absent;
use crate::model::oom_explain::{self, Allocator, OomFigures, UsedBy, Verdict, segment_for};

/// Why there is no largest free block to give: absent is not a 0-byte block.
const NO_SEGMENT: &str = "the snapshot has no segment on the device";
const NO_FREE_BLOCK: &str = "no free block: the cache's segments were fully allocated";
const SEGMENTS_CHANGED: &str = "the segments changed after the failure";

/// The largest inactive block among `device`'s segments at the dump.
fn largest_free_at_dump(snap: &MemorySnapshot, device: u32) -> Known<u64> {
    let mut segments = snap
        .segments
        .iter()
        .filter(|s| s.device == device)
        .peekable();
    if segments.peek().is_none() {
        return Err(NO_SEGMENT.into());
    }
    segments
        .flat_map(|s| s.blocks.iter())
        .filter(|b| b.state == BlockState::Inactive && b.size > 0)
        .map(|b| b.size)
        .max()
        .ok_or_else(|| NO_FREE_BLOCK.into())
}

/// The largest free block at the failed request `entries[oom]` on `device`, when the
/// snapshot can tell. The dump's segments show the layout at the dump, not at the failure:
/// a run that recovered freed the blocks around its holes, and the dump's one large free
/// block says nothing of the pieces the request met. So the dump's figure stands only when
/// no block or segment changed after the failure; otherwise the free space is rebuilt as the
/// gaps between the blocks live at the failure inside the dump's segments (a restored
/// block's size is at least its rounded request, so the gap found is at most the real one's
/// size: an upper bound, still sound for "no block was large enough"). When segments were
/// mapped or freed after the failure the layout is unknown. Each case without a block says
/// why: no segment, no free block, or a layout that changed.
pub(crate) fn largest_free_block(
    snap: &MemorySnapshot,
    device: u32,
    entries: &[TraceEntry],
    oom: Option<usize>,
    at_oom: &State,
) -> Known<u64> {
    let after = oom.map_or(&[][..], |i| entries.get(i + 1..).unwrap_or(&[]));
    let changes = |a: &Action| {
        matches!(
            a,
            Action::Alloc
                | Action::FreeRequested
                | Action::SegmentAlloc
                | Action::SegmentFree
                | Action::SegmentMap
                | Action::SegmentUnmap
        )
    };
    if !after.iter().any(|e| changes(&e.action)) {
        return largest_free_at_dump(snap, device);
    }
    let segment_changed = after.iter().any(|e| {
        matches!(
            e.action,
            Action::SegmentAlloc | Action::SegmentFree | Action::SegmentMap | Action::SegmentUnmap
        )
    });
    if segment_changed {
        return Err(SEGMENTS_CHANGED.into());
    }
    let mut largest = 0u64;
    let mut any_segment = false;
    for segment in snap.segments.iter().filter(|s| s.device == device) {
        any_segment = true;
        let start = segment.address;
        let end = start.saturating_add(segment.total_size);
        let mut held: Vec<(u64, u64)> = at_oom
            .live
            .iter()
            .filter(|(a, _)| **a >= start && **a < end)
            .map(|(a, l)| (*a, a.saturating_add(l.size_at_least()).min(end)))
            .collect();
        held.sort_unstable();
        let mut cursor = start;
        for (from, to) in held {
            largest = largest.max(from.saturating_sub(cursor));
            cursor = cursor.max(to);
        }
        largest = largest.max(end.saturating_sub(cursor));
    }
    match (any_segment, largest) {
        (false, _) => Err(NO_SEGMENT.into()),
        (true, 0) => Err(NO_FREE_BLOCK.into()),
        (true, largest) => Ok(largest),
    }
}

/// Explains a failed request of `requested` bytes in `state`. `requested` is `None` when
/// the snapshot was dumped at an OOM that recorded no figures: then nothing can be said of
/// why it failed, and the verdict says so rather than judge a request of 0 bytes.
/// `request_site`: where the request was made (`answer::request_site`), or why not.
pub(crate) fn explain(
    state: &State,
    requested: Option<u64>,
    device_free: Option<u64>,
    largest_free_block: Known<u64>,
    request_site: Known<Site>,
) -> OomWhy {
    let allocated = state.allocated_at_least();
    let reserved = state.reserved_known();
    let cached_free = reserved
        .as_ref()
        .map(|r| r.saturating_sub(allocated))
        .map_err(Clone::clone);
    // Segments the history does not cover may have held free blocks too: the largest the
    // known segments show is no answer then.
    let largest_free_block = match &reserved {
        Ok(_) => largest_free_block,
        Err(why) => Err(why.clone()),
    };
    let gib = |b: u64| crate::model::units::bytes(b);
    let verdict = match requested {
        None => format!(
            "why it failed is unknown: the snapshot was dumped at an OOM but records neither an `oom` entry nor the failed request's size; {} free in the cache, tensors hold {}",
            cached_free
                .as_ref()
                .map_or_else(|_| "n/a".to_string(), |c| gib(*c)),
            gib(allocated)
        ),
        Some(requested) => verdict(
            requested,
            device_free,
            &largest_free_block,
            &cached_free,
            allocated,
        ),
    };
    OomWhy {
        requested,
        device_free,
        reserved,
        allocated,
        cached_free,
        largest_free_block,
        verdict,
        request_site,
    }
}

/// The verdict in words, with what the snapshot adds to the figures (the largest free
/// block). Which verdict is `oom_explain::verdict`'s, the one rule every output uses for an
/// OOM's figures: the snapshot gives the same figures (requested, free, allocated, cached).
fn verdict(
    requested: u64,
    device_free: Option<u64>,
    largest_free_block: &Known<u64>,
    cached_free: &Known<u64>,
    allocated: u64,
) -> String {
    let gib = |b: u64| crate::model::units::bytes(b);
    let cached_free = match cached_free {
        Ok(c) => *c,
        // The reason is the reserved figure's, given beside it.
        Err(_) => {
            let free = device_free.map_or_else(
                || "the device's free memory was not recorded".to_string(),
                |f| format!("{} free on the device", gib(f)),
            );
            return format!(
                "the cache's free memory at the failure is unknown, so whether it was fragmentation cannot be told: {} asked for, {free}; tensors hold {}",
                gib(requested),
                gib(allocated)
            );
        }
    };
    let figures = OomFigures {
        requested: Ok(requested),
        // Without the device's figure only the cache is judged: free counted as none.
        device_free: Ok(device_free.unwrap_or(0)),
        device_total: Err(Absent::NotAvailable),
        limit: None,
        allocated: Ok(allocated),
        reserved: Ok(allocated.saturating_add(cached_free)),
        used: Err(Absent::NotAvailable),
        used_by: UsedBy::Process,
        allocator: Allocator::Torch { config: "" },
    };
    let largest = match largest_free_block {
        Ok(largest) => format!("the largest free block is {}", gib(*largest)),
        Err(why) => format!("the largest free block then is unknown ({why})"),
    };
    match (oom_explain::verdict(&figures), device_free) {
        (Ok(Verdict::FreeWasEnough), Some(free)) if free >= segment_for(requested) => format!(
            "a cap: the device had {} free, enough for the {} segment the request needed, yet the allocator refused (a memory fraction or another limit)",
            gib(free),
            gib(segment_for(requested))
        ),
        (Ok(Verdict::FreeWasEnough), Some(free)) => format!(
            "too little for a segment: the device had {} free, as much as the {} asked for but less than the {} segment the allocator rounds it to",
            gib(free),
            gib(requested),
            gib(segment_for(requested))
        ),
        (Ok(Verdict::FragmentedCache), _) => format!(
            "fragmentation: {} of the cache is free, more than the {} asked for, but in pieces; {largest} (try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)",
            gib(cached_free),
            gib(requested)
        ),
        (Ok(Verdict::FragmentedCacheAndFree), Some(free)) => format!(
            "fragmentation: {} free in the cache and {} on the device held the {} asked for together, but not as one block; {largest} (try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)",
            gib(cached_free),
            gib(free),
            gib(requested)
        ),
        (Ok(Verdict::TooLarge { short }), Some(free)) => format!(
            "truly full: {} asked for, {} free on the device and {} free in the cache, {} short even together; tensors hold {}",
            gib(requested),
            gib(free),
            gib(cached_free),
            gib(short),
            gib(allocated)
        ),
        // Without the device's free memory only the cache can be judged.
        _ => format!(
            "truly full, as far as the snapshot says: {} asked for, {} free in the cache (the device's free memory was not recorded); tensors hold {}",
            gib(requested),
            gib(cached_free),
            gib(allocated)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    #[test]
    fn the_verdict_is_the_oom_explanation_s_with_the_snapshot_s_largest_block() {
        let largest = Ok(3 * GIB);
        // The cache and the free memory together held it: fragmentation, as the report's
        // explanation says ("with expandable_segments:True it would likely have fit").
        let v = verdict(7 * GIB, Some(4 * GIB), &largest, &Ok(5 * GIB), 6 * GIB);
        assert!(
            v.starts_with("fragmentation: 5.00 GiB free in the cache and 4.00 GiB on the device"),
            "{v}"
        );
        // Not even together: truly full, by how much.
        let v = verdict(10 * GIB, Some(3 * GIB), &largest, &Ok(5 * GIB), 6 * GIB);
        assert!(v.contains("2.00 GiB short even together"), "{v}");
        // The device's free memory unknown: the cache alone is judged, not called full.
        let v = verdict(4 * GIB, None, &largest, &Ok(5 * GIB), 6 * GIB);
        assert!(v.starts_with("fragmentation: 5.00 GiB of the cache"), "{v}");
        let v = verdict(8 * GIB, None, &largest, &Ok(5 * GIB), 6 * GIB);
        assert!(
            v.starts_with("truly full, as far as the snapshot says"),
            "{v}"
        );
        // Free memory the size of the request but under the segment it is rounded to.
        let v = verdict(3 * MIB, Some(4 * MIB), &Err("none".into()), &Ok(0), GIB);
        assert!(v.starts_with("too little for a segment"), "{v}");
        let v = verdict(3 * MIB, Some(40 * MIB), &Err("none".into()), &Ok(0), GIB);
        assert!(v.starts_with("a cap: the device had 40.0 MiB free"), "{v}");
    }
}
