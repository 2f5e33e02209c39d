//! A memory snapshot as vramscope keeps it: owned, bounded, every string cleaned, each
//! distinct frame stored once. The shape is PyTorch's `torch.cuda.memory._snapshot()`
//! (torch/cuda/memory.py documents it; torch/csrc/cuda/memory_snapshot.cpp writes it):
//! `segments[]` of blocks, `device_traces[device][]` of allocator actions, plus the
//! optional `vramscope` key the Python writer adds (docs/channel-v1.md).

/// One stack frame, as the allocator's history recorded it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    pub filename: String,
    pub line: u32,
    pub name: String,
}

/// A stack: a range of `Frames::pool`, innermost frame first (PyTorch's order).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stack {
    pub(crate) start: u32,
    pub(crate) len: u32,
}

impl Stack {
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Every distinct frame once, and the stacks as lists of frame ids.
#[derive(Clone, Debug, Default)]
pub struct Frames {
    pub(crate) table: Vec<Frame>,
    pub(crate) pool: Vec<u32>,
}

impl Frames {
    /// The frames of `stack`, innermost first.
    pub fn of(&self, stack: Stack) -> impl Iterator<Item = &Frame> {
        let start = stack.start as usize;
        let end = start + stack.len as usize;
        self.pool
            .get(start..end)
            .unwrap_or(&[])
            .iter()
            .filter_map(|&id| self.table.get(id as usize))
    }

    pub(crate) fn ids(&self, stack: Stack) -> &[u32] {
        let start = stack.start as usize;
        self.pool
            .get(start..start + stack.len as usize)
            .unwrap_or(&[])
    }

    pub fn frame(&self, id: u32) -> Option<&Frame> {
        self.table.get(id as usize)
    }

    /// How many distinct frames the snapshot holds.
    pub fn distinct(&self) -> usize {
        self.table.len()
    }
}

/// A block's state in a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockState {
    /// Held by a tensor: counted in the allocator's allocated bytes.
    ActiveAllocated,
    /// Freed by its tensor, waiting for another stream's work (`active_awaiting_free`, older
    /// PyTorch `active_pending_free`): no longer allocated, not yet reusable.
    PendingFree,
    /// Cached and free for reuse.
    Inactive,
    /// A state this reader does not know: treated as not allocated.
    Other,
}

/// A block of a segment.
#[derive(Clone, Debug)]
pub struct Block {
    pub address: u64,
    /// The block's size: what the allocator counts in allocated bytes.
    pub size: u64,
    /// What the tensor asked for: what the history's trace entries count.
    pub requested_size: u64,
    pub state: BlockState,
    pub stack: Stack,
}

/// A segment: one cudaMalloc (or an expandable segment's mapped part).
#[derive(Clone, Debug)]
pub struct Segment {
    pub device: u32,
    pub address: u64,
    pub total_size: u64,
    pub stream: i64,
    pub blocks: Vec<Block>,
}

/// What the allocator did, per trace entry (torch's `TraceEntry::Action`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Alloc,
    FreeRequested,
    FreeCompleted,
    SegmentAlloc,
    SegmentFree,
    SegmentMap,
    SegmentUnmap,
    Snapshot,
    Oom,
    Annotate,
    /// An action this reader does not know: skipped by the walk.
    Other,
}

impl Action {
    pub(crate) fn parse(name: &[u8]) -> Action {
        match name {
            b"alloc" => Action::Alloc,
            b"free_requested" => Action::FreeRequested,
            b"free_completed" => Action::FreeCompleted,
            b"segment_alloc" => Action::SegmentAlloc,
            b"segment_free" => Action::SegmentFree,
            b"segment_map" => Action::SegmentMap,
            b"segment_unmap" => Action::SegmentUnmap,
            b"snapshot" => Action::Snapshot,
            b"oom" => Action::Oom,
            b"annotate" => Action::Annotate,
            _ => Action::Other,
        }
    }
}

/// One entry of a device's history ring.
#[derive(Clone, Debug)]
pub struct TraceEntry {
    pub action: Action,
    /// The block's or segment's address; 0 for an OOM (which has none).
    pub addr: u64,
    /// Bytes: the tensor's requested size for alloc and free entries, the segment's size
    /// for segment entries, the failed request for an OOM.
    pub size: u64,
    pub stream: i64,
    /// Wall clock, microseconds since the Unix epoch.
    pub time_us: Option<i64>,
    pub stack: Stack,
    /// An OOM entry's free device memory as CUDA reported it.
    pub device_free: Option<u64>,
}

/// One device's history, oldest first.
#[derive(Clone, Debug, Default)]
pub struct DeviceTrace {
    pub entries: Vec<TraceEntry>,
    /// Older entries not kept (`Limits::max_trace_entries`).
    pub cut: usize,
}

/// The OOM the writer saw, from the `vramscope` key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyOom {
    pub requested: Option<u64>,
    pub device_free: Option<u64>,
    pub device_total: Option<u64>,
}

/// The `vramscope` key (docs/channel-v1.md, "Snapshots"); every field optional, as a
/// writer of another version may leave one out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VramscopeKey {
    pub version: Option<i64>,
    pub pid: Option<u32>,
    pub device: Option<u32>,
    pub reason: Option<String>,
    pub peak_allocated: Option<u64>,
    /// The allocator's lifetime peak of requested bytes (`requested_bytes.all.peak`): the
    /// figure the trace's sizes add up to, so the exactness check is byte for byte.
    pub peak_requested: Option<u64>,
    pub peak_time_us: Option<i64>,
    pub allocated: Option<u64>,
    pub reserved: Option<u64>,
    pub step: Option<i64>,
    /// `step` counts the steps since an attach, not the job's own (absent: the job's).
    pub steps_since_attach: bool,
    pub phase: Option<String>,
    pub max_entries: Option<u64>,
    pub history_owner: Option<String>,
    pub oom: Option<KeyOom>,
    /// Who wrote it, from the writer's identity (keys added after version 1's first
    /// writers): outer `None` when the key lacks the field, inner `None` when the writer
    /// said there is none (a process that is not one of several ranks, no job id).
    pub rank: Option<Option<i64>>,
    pub local_rank: Option<Option<i64>>,
    pub world_size: Option<Option<i64>>,
    pub job_id: Option<Option<String>>,
    /// The writer's channel file name (`<pid>-<starttime>.vsc`).
    pub channel: Option<Option<String>>,
}

/// What the limits cut from a snapshot, so that an answer can say it is partial.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cut {
    pub trace_entries: usize,
    pub blocks: usize,
    pub frames: usize,
}

impl Cut {
    pub fn any(&self) -> bool {
        self.trace_entries + self.blocks + self.frames > 0
    }
}

/// A snapshot, parsed, bounded and owned.
#[derive(Clone, Debug, Default)]
pub struct MemorySnapshot {
    pub segments: Vec<Segment>,
    /// `device_traces`, indexed by CUDA ordinal.
    pub traces: Vec<DeviceTrace>,
    pub vramscope: Option<VramscopeKey>,
    pub frames: Frames,
    pub cut: Cut,
}

impl MemorySnapshot {
    /// The devices the snapshot has segments or history for, ascending.
    pub fn devices(&self) -> Vec<u32> {
        let mut devices: Vec<u32> = self.segments.iter().map(|s| s.device).collect();
        for (i, trace) in self.traces.iter().enumerate() {
            if !trace.entries.is_empty() {
                devices.push(u32::try_from(i).unwrap_or(u32::MAX));
            }
        }
        devices.sort_unstable();
        devices.dedup();
        devices
    }
}
