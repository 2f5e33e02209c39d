//! The moment of the peak reconstructed: start from the blocks live at the dump and walk the
//! device's history backwards, undoing each allocation and restoring each free, tracking
//! the running total. The state before entry `i` is the state after it with entry `i`
//! undone, so the walk visits every state the history can vouch for: the dump's, and the
//! one before each kept entry.
//!
//! A block counts as allocated from its `alloc` to its `free_requested`: that is when the
//! allocator moves it out of `allocated_bytes` (CUDACachingAllocator's `free()` decreases
//! the statistic before the block may wait on other streams' events), and the snapshot's
//! `active_allocated` state is the same test. `free_completed` only makes the memory
//! reusable, so it changes nothing here.
//!
//! Sizes are the trace's: what each tensor requested (torch records `orig_size` for an
//! alloc and the block's `requested_size` for its frees). A block's real size is known
//! only for the blocks live at the dump; for a restored one it is estimated as the request
//! rounded up to 512 bytes, the allocator's smallest rounding.

use super::snapshot::{Action, BlockState, MemorySnapshot, Stack, TraceEntry};
use std::collections::HashMap;

/// A block live at some state of the walk.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Live {
    pub requested: u64,
    /// The block's size when the dump shows it.
    pub size: Option<u64>,
    pub stack: Stack,
    /// Whether its allocation is in the history (else it predates it, or the dump shows it
    /// with no stack).
    pub traced: bool,
    pub allocated_us: Option<i64>,
}

impl Live {
    /// The block's size, or the least the allocator could have given the request.
    pub fn size_at_least(&self) -> u64 {
        self.size.unwrap_or_else(|| round_up(self.requested))
    }
}

/// The allocator's smallest rounding (`kMinBlockSize`).
pub(crate) fn round_up(requested: u64) -> u64 {
    const MIN: u64 = 512;
    requested.max(1).div_ceil(MIN).saturating_mul(MIN)
}

/// A state of the walk: the live blocks by address and what they and the segments add up to.
#[derive(Clone, Debug, Default)]
pub(crate) struct State {
    pub live: HashMap<u64, Live>,
    pub requested: u64,
    pub reserved: u64,
    /// Steps of the walk the history contradicted (an alloc undone of a block not live, a
    /// free restored of one already live): each is passed over.
    pub mismatches: u64,
    /// Whether undoing a segment's allocation found less reserved than it gave back: the
    /// history lacks segment entries, so `reserved` is no longer the allocator's.
    pub segments_short: bool,
}

impl State {
    /// The bytes the live blocks occupy, at least (`Live::size_at_least`).
    pub fn allocated_at_least(&self) -> u64 {
        self.live
            .values()
            .fold(0u64, |sum, l| sum.saturating_add(l.size_at_least()))
    }

    /// The bytes reserved from the device at this state, or why the history cannot say. The
    /// walk follows the segments only through the history's segment entries: a history that
    /// lacks some (a framework that dropped them, a segment freed whose entry the ring lost)
    /// leaves `reserved` below the blocks it held. Reserved is never less than allocated, so
    /// such a figure is wrong and is not given.
    pub fn reserved_known(&self) -> Result<u64, String> {
        let allocated = self.allocated_at_least();
        if self.segments_short || self.reserved < allocated {
            return Err(format!(
                "the history lacks segment entries: the blocks live then need at least {}, the segments it traces hold {}",
                crate::model::units::bytes(allocated),
                crate::model::units::bytes(self.reserved)
            ));
        }
        Ok(self.reserved)
    }
}

/// The state at the dump on `device`.
pub(crate) fn at_dump(snap: &MemorySnapshot, device: u32) -> State {
    let mut state = State::default();
    for segment in snap.segments.iter().filter(|s| s.device == device) {
        state.reserved = state.reserved.saturating_add(segment.total_size);
        for block in &segment.blocks {
            if block.state != BlockState::ActiveAllocated {
                continue;
            }
            state.requested = state.requested.saturating_add(block.requested_size);
            state.live.insert(
                block.address,
                Live {
                    requested: block.requested_size,
                    size: Some(block.size),
                    stack: block.stack,
                    traced: !block.stack.is_empty(),
                    allocated_us: None,
                },
            );
        }
    }
    state
}

/// For each `free_requested` entry, the index of the `alloc` it frees, when the history
/// holds it: a restored block gets its allocation's stack.
pub(crate) fn pair_frees(entries: &[TraceEntry]) -> Vec<u32> {
    let mut last_alloc: super::fast_hash::WordMap<u64, u32> = Default::default();
    let mut paired = vec![u32::MAX; entries.len()];
    for (i, entry) in entries.iter().enumerate() {
        let i32_ = u32::try_from(i).unwrap_or(u32::MAX);
        match entry.action {
            Action::Alloc => {
                last_alloc.insert(entry.addr, i32_);
            }
            Action::FreeRequested => {
                if let Some(a) = last_alloc.remove(&entry.addr) {
                    paired[i] = a;
                }
            }
            _ => {}
        }
    }
    paired
}

/// Undoes `entries[i]` on `state`, making it the state before that entry.
pub(crate) fn undo(state: &mut State, entries: &[TraceEntry], paired: &[u32], i: usize) {
    let Some(entry) = entries.get(i) else {
        return;
    };
    match entry.action {
        Action::Alloc => match state.live.remove(&entry.addr) {
            Some(live) => state.requested = state.requested.saturating_sub(live.requested),
            None => state.mismatches += 1,
        },
        Action::FreeRequested => {
            if state.live.contains_key(&entry.addr) {
                state.mismatches += 1;
                return;
            }
            let alloc = paired
                .get(i)
                .and_then(|&a| entries.get(a as usize))
                .filter(|_| paired.get(i) != Some(&u32::MAX));
            let live = Live {
                requested: entry.size,
                size: None,
                stack: alloc.map(|a| a.stack).unwrap_or_default(),
                traced: alloc.is_some(),
                allocated_us: alloc.and_then(|a| a.time_us),
            };
            state.requested = state.requested.saturating_add(entry.size);
            state.live.insert(entry.addr, live);
        }
        Action::SegmentAlloc | Action::SegmentMap => match state.reserved.checked_sub(entry.size) {
            Some(reserved) => state.reserved = reserved,
            None => {
                state.reserved = 0;
                state.segments_short = true;
            }
        },
        Action::SegmentFree | Action::SegmentUnmap => {
            state.reserved = state.reserved.saturating_add(entry.size);
        }
        Action::FreeCompleted
        | Action::Snapshot
        | Action::Oom
        | Action::Annotate
        | Action::Other => {}
    }
}

/// What a full walk found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Walked {
    /// The most requested bytes of any state, and the latest state that had it: the number
    /// of entries applied (`entries.len()` is the dump).
    pub max: u64,
    pub at: usize,
    /// Whether the oldest state is an empty allocator: no live block, no segment.
    pub starts_empty: bool,
    pub mismatches: u64,
}

/// Walks the whole history back from the dump.
pub(crate) fn find_peak(dump: &State, entries: &[TraceEntry], paired: &[u32]) -> Walked {
    let mut state = dump.clone();
    let mut max = state.requested;
    let mut at = entries.len();
    for i in (0..entries.len()).rev() {
        undo(&mut state, entries, paired, i);
        if state.requested > max {
            max = state.requested;
            at = i;
        }
    }
    Walked {
        max,
        at,
        // A reserved that ran out because segment entries are missing proves no empty start.
        starts_empty: state.live.is_empty() && state.reserved == 0 && !state.segments_short,
        mismatches: state.mismatches,
    }
}

/// The state after the first `at` entries (`at == entries.len()`: the dump).
pub(crate) fn state_at(dump: &State, entries: &[TraceEntry], paired: &[u32], at: usize) -> State {
    let mut state = dump.clone();
    for i in (at..entries.len()).rev() {
        undo(&mut state, entries, paired, i);
    }
    state
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory_snapshot::snapshot::{Block, Segment};

    fn entry(action: Action, addr: u64, size: u64) -> TraceEntry {
        TraceEntry {
            action,
            addr,
            size,
            stream: 0,
            time_us: None,
            stack: Stack::default(),
            device_free: None,
        }
    }

    fn live_block(address: u64, size: u64) -> Block {
        Block {
            address,
            size: round_up(size),
            requested_size: size,
            state: BlockState::ActiveAllocated,
            stack: Stack::default(),
        }
    }

    #[test]
    fn a_block_counts_until_its_free_is_requested_not_completed() {
        let entries = [
            entry(Action::SegmentAlloc, 0, 4096),
            entry(Action::Alloc, 0, 100),
            entry(Action::Alloc, 1024, 50),
            entry(Action::FreeRequested, 0, 100),
            entry(Action::Alloc, 2048, 70),
            entry(Action::FreeCompleted, 0, 100),
        ];
        let snap = MemorySnapshot {
            segments: vec![Segment {
                device: 0,
                address: 0,
                total_size: 4096,
                stream: 0,
                blocks: vec![live_block(1024, 50), live_block(2048, 70)],
            }],
            ..MemorySnapshot::default()
        };
        let dump = at_dump(&snap, 0);
        assert_eq!((dump.requested, dump.reserved), (120, 4096));
        let paired = pair_frees(&entries);
        assert_eq!(paired[3], 1);
        let walked = find_peak(&dump, &entries, &paired);
        // A and B together, after the third entry: A's free was requested after that.
        assert_eq!((walked.max, walked.at), (150, 3));
        assert!(walked.starts_empty);
        assert_eq!(walked.mismatches, 0);
        let peak = state_at(&dump, &entries, &paired, walked.at);
        let mut live: Vec<u64> = peak.live.keys().copied().collect();
        live.sort_unstable();
        assert_eq!(live, [0, 1024]);
        assert!(peak.live[&0].traced && peak.live[&0].size.is_none());
        assert_eq!(peak.live[&0].size_at_least(), 512);
        assert_eq!(peak.reserved, 4096);
    }
}
