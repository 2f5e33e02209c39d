//! From the values the one pass builds (`value.rs`) to `MemorySnapshot`: what the
//! snapshot's shape says, copied into our own owned types: the newest trace entries, at
//! most so many blocks and frames, every string cleaned, each distinct frame once and each
//! distinct stack once. A device's history is read as the pickle appends its entries
//! (`append_entries`, called by `build.rs`), and each entry's dict and frame list are let
//! go once read; the rest (segments, blocks, the `vramscope` key) is read from the root
//! once the pass ends (`finish`). A frame dict or frame list shared by many entries (torch
//! shares them: a block's frames are its alloc entry's list) is read once: its node, or its
//! memo entry, keeps what it was read as. A value of the wrong type is one line naming where
//! it is; keys this reader does not know are not looked into.

use super::build::Build;
use super::cost::{ReadCost, Watch};
use super::error::{ErrorKind, SitesError};
use super::guard::Memo;
use super::limits::Limits;
use super::snapshot::{
    Action, Block, BlockState, Cut, DeviceTrace, Frame, Frames, KeyOom, MemorySnapshot, Segment,
    Stack, TraceEntry, VramscopeKey,
};
use super::value::{NO_FRAME, NO_MEMO, Node, TraceData, Tree, Val, big_int_decimal};
use std::collections::HashMap;
use std::time::Instant;

/// Devices a snapshot may list traces for.
const MAX_DEVICES: usize = 1024;

/// A trace entry's position with this bit set names its copy in `TraceData::saved`.
const SAVED: u32 = 1 << 31;

/// The trace id of a history read from a plain list (no node holds its entries).
const NO_TRACE: u32 = u32::MAX;

type Failed = String;

/// Reads `bytes` in one pass and copies what it built into a `MemorySnapshot`; `cost` says
/// what the pass and the final walk took. `started` and the limits' deadline bound both.
pub(crate) fn read(
    bytes: &[u8],
    limits: &Limits,
    started: Instant,
    cost: &mut ReadCost,
) -> Result<MemorySnapshot, SitesError> {
    let mut watch = Watch::start();
    let mut build = Build::new(bytes, limits);
    build.reader.started = started;
    let decoded = super::guard::decode(bytes, limits, started, &mut build);
    cost.decode = watch.lap();
    let (root, _) = decoded?;
    let Build {
        mut tree,
        mut reader,
    } = build;
    let snap = reader.finish(&mut tree, root);
    cost.walk = watch.lap();
    snap
}

/// The reader's state: what it has interned and cut so far.
pub(crate) struct Reader {
    limits: Limits,
    pub(crate) started: Instant,
    frames: Frames,
    interned: HashMap<Frame, u32>,
    /// Each distinct stack once: torch gives every alloc entry a list of its own, and a
    /// training loop's stacks are a few hundred distinct ones.
    stacks: HashMap<Box<[u32]>, Stack>,
    scratch: Vec<u32>,
    cut: Cut,
    blocks: usize,
    seen: u64,
    late: bool,
}

/// What a value is once a node that was read is looked through.
fn resolve(tree: &Tree<'_>, v: Val) -> Val {
    match v {
        Val::Node(id) => match tree.node(id) {
            Some(Node::Read(read)) => *read,
            _ => v,
        },
        _ => v,
    }
}

fn want(tree: &Tree<'_>, what: &str, v: Val, at: &dyn Fn() -> String) -> Failed {
    format!("{} is {}, not {what}", at(), tree.kind(v))
}

/// An integer or None; a bool counts as 0 or 1.
fn int(tree: &Tree<'_>, v: Val, at: &dyn Fn() -> String) -> Result<Option<i64>, Failed> {
    match v {
        Val::Int(i) => Ok(Some(i)),
        Val::Bool(b) => Ok(Some(i64::from(b))),
        Val::None => Ok(None),
        Val::BigInt { .. } => Err(format!("{} is too large", at())),
        other => Err(want(tree, "an integer", other, at)),
    }
}

fn uint(tree: &Tree<'_>, v: Val, at: &dyn Fn() -> String) -> Result<Option<u64>, Failed> {
    match int(tree, v, at)? {
        None => Ok(None),
        Some(i) => u64::try_from(i)
            .map(Some)
            .map_err(|_| format!("{} is negative ({i})", at())),
    }
}

/// A string (cleaned) or None.
fn text(tree: &Tree<'_>, v: Val, at: &dyn Fn() -> String) -> Result<Option<String>, Failed> {
    match v {
        Val::Str { .. } => Ok(tree.str(v).map(|s| crate::text::clean(s).into_owned())),
        Val::Bytes { at: start, len } => Ok(Some(crate::text::clean_bytes(tree.range(start, len)))),
        Val::OldText => Err(format!(
            "{} is a protocol 0 string, which no snapshot holds",
            at()
        )),
        Val::None => Ok(None),
        other => Err(want(tree, "a string", other, at)),
    }
}

/// The items of a list or tuple (a copy of the small values: the caller reads the tree
/// while it goes through them).
fn items(tree: &Tree<'_>, v: Val, at: &dyn Fn() -> String, what: &str) -> Result<Vec<Val>, Failed> {
    match v {
        Val::Node(id) => match tree.node(id) {
            Some(Node::List(l) | Node::DeviceTraces(l) | Node::Tuple(l)) => Ok(l.clone()),
            Some(Node::Trace(_)) => Err(format!(
                "{} is a list laid out as a device's history, not {what}",
                at()
            )),
            _ => Err(want(tree, what, v, at)),
        },
        _ => Err(want(tree, what, v, at)),
    }
}

fn dict(
    tree: &Tree<'_>,
    v: Val,
    at: &dyn Fn() -> String,
    what: &str,
) -> Result<Vec<(Val, Val)>, Failed> {
    match v {
        Val::Node(id) => match tree.node(id) {
            Some(Node::Dict(d)) => Ok(d.clone()),
            _ => Err(want(tree, what, v, at)),
        },
        _ => Err(want(tree, what, v, at)),
    }
}

/// Keeps what node `id` was read as: in the memo, and the node let go, when nothing else
/// refers to it; else in the node. Only while the pass runs (`memo` given): the final walk
/// keeps what it read in the node, as its holders are still read from.
fn keep_as(tree: &mut Tree<'_>, memo: Option<&mut Memo>, id: u32, read: Val) {
    let home = tree.memo_of(id);
    let alone = match memo {
        Some(_) if home == NO_MEMO => true,
        Some(memo) => match memo.get_mut(home) {
            Some(stored) if stored.references == 0 => {
                stored.val = read;
                true
            }
            _ => false,
        },
        None => false,
    };
    if alone {
        tree.release(id);
    } else if let Some(node) = tree.node_mut(id) {
        *node = Node::Read(read);
    }
}

impl Reader {
    pub(crate) fn new(limits: &Limits) -> Self {
        Reader {
            limits: limits.clone(),
            started: Instant::now(),
            frames: Frames::default(),
            interned: HashMap::new(),
            stacks: HashMap::new(),
            scratch: Vec::new(),
            cut: Cut::default(),
            blocks: 0,
            seen: 0,
            late: false,
        }
    }

    fn tick(&mut self) -> Result<(), Failed> {
        self.seen += 1;
        if self.seen.is_multiple_of(4096) && self.started.elapsed() > self.limits.deadline {
            self.late = true;
            return Err("the deadline passed".to_string());
        }
        Ok(())
    }

    /// The snapshot from the root the pass built.
    fn finish(&mut self, tree: &mut Tree<'_>, root: Val) -> Result<MemorySnapshot, SitesError> {
        match self.root(tree, root) {
            Ok(mut snap) => {
                snap.frames = std::mem::take(&mut self.frames);
                snap.cut = std::mem::take(&mut self.cut);
                Ok(snap)
            }
            Err(_) if self.late => Err(super::limits::past_deadline(self.limits.deadline)),
            Err(e) => Err(SitesError::new(
                ErrorKind::NotASnapshot,
                format!("not a memory snapshot: {e}"),
            )),
        }
    }

    fn root(&mut self, tree: &mut Tree<'_>, v: Val) -> Result<MemorySnapshot, Failed> {
        let at = || "the pickle".to_string();
        let d = dict(tree, v, &at, "a dict with `segments`")?;
        let mut segments = None;
        let mut traces = Vec::new();
        let mut vramscope = None;
        for (k, v) in d {
            match tree.str(k) {
                Some("segments") => segments = Some(self.segments(tree, v)?),
                Some("device_traces") => traces = self.traces(tree, v)?,
                Some("vramscope") => vramscope = vramscope_key(tree, v)?,
                _ => {}
            }
        }
        let segments = segments.ok_or("a dict without `segments`")?;
        Ok(MemorySnapshot {
            segments,
            traces,
            vramscope,
            frames: Frames::default(),
            cut: Cut::default(),
        })
    }

    fn segments(&mut self, tree: &mut Tree<'_>, v: Val) -> Result<Vec<Segment>, Failed> {
        let at = || "`segments`".to_string();
        let list = items(tree, v, &at, "a list of segments")?;
        let mut segments = Vec::with_capacity(list.len());
        for (i, s) in list.into_iter().enumerate() {
            segments.push(self.segment(tree, s, i)?);
        }
        Ok(segments)
    }

    fn segment(&mut self, tree: &mut Tree<'_>, v: Val, i: usize) -> Result<Segment, Failed> {
        self.tick()?;
        let here = || format!("segments[{i}]");
        let d = dict(tree, v, &here, "a dict")?;
        let mut segment = Segment {
            device: 0,
            address: 0,
            total_size: 0,
            stream: 0,
            blocks: Vec::new(),
        };
        let mut sized = false;
        let mut blocks = None;
        for (k, v) in d {
            let name = tree.str(k).unwrap_or("");
            let at = || format!("segments[{i}].{name}");
            match name {
                "device" => {
                    let device = uint(tree, v, &at)?.unwrap_or(0);
                    segment.device =
                        u32::try_from(device).map_err(|_| format!("{} is too large", at()))?;
                }
                "address" => segment.address = uint(tree, v, &at)?.unwrap_or(0),
                "total_size" => {
                    segment.total_size = uint(tree, v, &at)?.unwrap_or(0);
                    sized = true;
                }
                "stream" => segment.stream = int(tree, v, &at)?.unwrap_or(0),
                "blocks" => blocks = Some(v),
                _ => {}
            }
        }
        if !sized {
            return Err(format!("{} has no `total_size`", here()));
        }
        if let Some(blocks) = blocks {
            let at = || format!("segments[{i}].blocks");
            let list = items(tree, blocks, &at, "a list of blocks")?;
            let mut kept = Vec::with_capacity(list.len());
            for (j, b) in list.into_iter().enumerate() {
                if let Some(block) = self.block(tree, b, i, j)? {
                    kept.push(block);
                }
            }
            segment.blocks = kept;
        }
        // Blocks written without their address (older PyTorch) lie one after another.
        let mut next = segment.address;
        for block in &mut segment.blocks {
            if block.address == u64::MAX {
                block.address = next;
            }
            next = block.address.saturating_add(block.size);
        }
        Ok(segment)
    }

    fn block(
        &mut self,
        tree: &mut Tree<'_>,
        v: Val,
        i: usize,
        j: usize,
    ) -> Result<Option<Block>, Failed> {
        self.tick()?;
        if self.blocks == self.limits.max_blocks {
            self.cut.blocks += 1;
            return Ok(None);
        }
        self.blocks += 1;
        let here = || format!("segments[{i}].blocks[{j}]");
        let d = dict(tree, v, &here, "a dict")?;
        let mut block = Block {
            address: u64::MAX,
            size: 0,
            requested_size: 0,
            state: BlockState::Other,
            stack: Stack::default(),
        };
        let mut requested = None;
        let mut sized = false;
        for (k, v) in d {
            let name = tree.str(k).unwrap_or("");
            let at = || format!("segments[{i}].blocks[{j}].{name}");
            match name {
                "address" => block.address = uint(tree, v, &at)?.unwrap_or(u64::MAX),
                "size" => {
                    block.size = uint(tree, v, &at)?.unwrap_or(0);
                    sized = true;
                }
                "requested_size" => requested = uint(tree, v, &at)?,
                "state" => {
                    block.state = match text(tree, v, &at)?.as_deref() {
                        Some("active_allocated") => BlockState::ActiveAllocated,
                        Some("active_awaiting_free" | "active_pending_free") => {
                            BlockState::PendingFree
                        }
                        Some("inactive") => BlockState::Inactive,
                        _ => BlockState::Other,
                    }
                }
                "frames" => block.stack = self.stack(tree, None, v, &at)?,
                _ => {}
            }
        }
        if !sized {
            return Err(format!("{} has no `size`", here()));
        }
        block.requested_size = requested.unwrap_or(block.size);
        Ok(Some(block))
    }

    fn traces(&mut self, tree: &mut Tree<'_>, v: Val) -> Result<Vec<DeviceTrace>, Failed> {
        let at = || "`device_traces`".to_string();
        let devices = items(tree, v, &at, "a list of device traces")?;
        if devices.len() > MAX_DEVICES {
            return Err(format!(
                "`device_traces` lists more than {MAX_DEVICES} devices"
            ));
        }
        let mut traces: Vec<DeviceTrace> = Vec::with_capacity(devices.len());
        // A history listed twice (the pickle refers to it again) is read once, then copied.
        let mut first_at: HashMap<u32, usize> = HashMap::new();
        for (d, trace) in devices.into_iter().enumerate() {
            if let Val::Node(id) = trace {
                if let Some(copy) = first_at.get(&id).and_then(|&f| traces.get(f)).cloned() {
                    self.cut.trace_entries += copy.cut;
                    traces.push(copy);
                    continue;
                }
                first_at.insert(id, d);
            }
            traces.push(self.trace(tree, trace, d)?);
        }
        Ok(traces)
    }

    /// One device's history: the entries read as they came, or a plain list read now.
    fn trace(&mut self, tree: &mut Tree<'_>, v: Val, d: usize) -> Result<DeviceTrace, Failed> {
        let at = || format!("device_traces[{d}]");
        let mut data = match v {
            Val::Node(id) => match tree.node_mut(id) {
                Some(Node::Trace(data)) => *std::mem::take(data),
                _ => {
                    let list = items(tree, v, &at, "a list of trace entries")?;
                    let mut data = TraceData::default();
                    self.append_into(tree, None, NO_TRACE, &mut data, &list);
                    data
                }
            },
            other => return Err(want(tree, "a list of trace entries", other, &at)),
        };
        if let Some(failed) = data.failed {
            return Err(format!("device_traces[{d}]{failed}"));
        }
        // The newest entries are what the backward walk needs: the oldest go.
        let skip = data
            .entries
            .len()
            .saturating_sub(self.limits.max_trace_entries);
        data.entries.drain(..skip);
        let cut = data.base as usize + skip;
        self.cut.trace_entries += cut;
        Ok(DeviceTrace {
            entries: data.entries,
            cut,
        })
    }

    /// Reads `items`, appended by the pickle to trace node `trace`, as its entries.
    pub(crate) fn append_entries(
        &mut self,
        tree: &mut Tree<'_>,
        mut memo: Option<&mut Memo>,
        trace: u32,
        items: &[Val],
    ) -> Result<(), SitesError> {
        let mut data = match tree.node_mut(trace) {
            Some(Node::Trace(data)) => std::mem::take(data),
            _ => return Ok(()),
        };
        self.append_into(tree, memo.as_deref_mut(), trace, &mut data, items);
        if let Some(memo) = memo {
            self.trim(tree, memo, trace, &mut data);
        }
        if let Some(node) = tree.node_mut(trace) {
            *node = Node::Trace(data);
        }
        if self.late {
            return Err(super::limits::past_deadline(self.limits.deadline));
        }
        Ok(())
    }

    fn append_into(
        &mut self,
        tree: &mut Tree<'_>,
        mut memo: Option<&mut Memo>,
        trace: u32,
        data: &mut TraceData,
        items: &[Val],
    ) {
        for &item in items {
            if data.failed.is_some() {
                return;
            }
            let pos = data.placed();
            match self.entry_val(tree, memo.as_deref_mut(), trace, data, item, pos) {
                Ok((entry, home)) => {
                    data.entries.push(entry);
                    data.homes.push(home);
                }
                Err(e) => data.failed = Some(e),
            }
        }
    }

    /// A history holds at most one and a half times `max_trace_entries` entries (and 4,096
    /// more) while it is read: past that, the oldest go (they would be cut at the end), and an entry that a memo names
    /// is kept aside for the references that may follow.
    fn trim(&mut self, tree: &mut Tree<'_>, memo: &mut Memo, trace: u32, data: &mut TraceData) {
        let max = self.limits.max_trace_entries;
        if data.entries.len() < max.saturating_add(max / 2).saturating_add(4096) {
            return;
        }
        let evicted = data.entries.len() - max;
        for i in 0..evicted {
            let home = data.homes.get(i).copied().unwrap_or(NO_MEMO);
            let Some(entry) = data.entries.get(i) else {
                break;
            };
            if home == NO_MEMO {
                continue;
            }
            let k = u32::try_from(data.saved.len()).unwrap_or(u32::MAX) & !SAVED;
            data.saved.push(entry.clone());
            let read = Val::Entry {
                trace,
                pos: SAVED | k,
            };
            if let Some(stored) = memo.get_mut(home) {
                match stored.val {
                    Val::Node(id) => {
                        if let Some(node) = tree.node_mut(id) {
                            *node = Node::Read(read);
                        }
                    }
                    _ => stored.val = read,
                }
            }
        }
        data.entries.drain(..evicted);
        data.homes.drain(..evicted);
        data.base = data
            .base
            .saturating_add(u32::try_from(evicted).unwrap_or(u32::MAX));
    }

    /// One item of a history as a trace entry, and the memo id of the dict it was read from.
    fn entry_val(
        &mut self,
        tree: &mut Tree<'_>,
        memo: Option<&mut Memo>,
        trace: u32,
        data: &TraceData,
        item: Val,
        pos: u32,
    ) -> Result<(TraceEntry, u32), Failed> {
        self.tick()?;
        let here = || format!("[{pos}]");
        let copy = |t: u32, p: u32| -> Result<(TraceEntry, u32), Failed> {
            let from = if t == trace {
                Some(data)
            } else {
                match tree.node(t) {
                    Some(Node::Trace(d)) => Some(&**d),
                    _ => None,
                }
            };
            let entry = from.and_then(|d| {
                if p & SAVED != 0 {
                    d.saved.get((p & !SAVED) as usize)
                } else {
                    d.at(p)
                }
            });
            entry
                .cloned()
                .map(|e| (e, NO_MEMO))
                .ok_or_else(|| format!("{} refers to a trace entry no longer held", here()))
        };
        match resolve(tree, item) {
            Val::Entry { trace: t, pos: p } => copy(t, p),
            Val::Node(id) => {
                let pairs = match tree.node_mut(id) {
                    // While the pass runs the dict's items go: what they said is read now.
                    Some(Node::Dict(d)) if memo.is_some() => std::mem::take(d),
                    Some(Node::Dict(d)) => d.clone(),
                    _ => return Err(want(tree, "a dict", item, &here)),
                };
                let home = tree.memo_of(id);
                let mut memo = memo;
                let entry = self.entry(tree, memo.as_deref_mut(), &pairs, pos)?;
                if memo.is_some() {
                    keep_as(tree, memo, id, Val::Entry { trace, pos });
                }
                Ok((entry, home))
            }
            other => Err(want(tree, "a dict", other, &here)),
        }
    }

    fn entry(
        &mut self,
        tree: &mut Tree<'_>,
        mut memo: Option<&mut Memo>,
        pairs: &[(Val, Val)],
        pos: u32,
    ) -> Result<TraceEntry, Failed> {
        let mut entry = TraceEntry {
            action: Action::Other,
            addr: 0,
            size: 0,
            stream: 0,
            time_us: None,
            stack: Stack::default(),
            device_free: None,
        };
        for &(k, v) in pairs {
            let name = tree.str(k).unwrap_or("");
            let at = || format!("[{pos}].{name}");
            match name {
                "action" => {
                    entry.action = match tree.str(v) {
                        Some(s) => Action::parse(s),
                        None => return Err(want(tree, "a string", v, &at)),
                    }
                }
                "addr" => entry.addr = uint(tree, v, &at)?.unwrap_or(0),
                "size" => entry.size = uint(tree, v, &at)?.unwrap_or(0),
                "stream" => entry.stream = int(tree, v, &at)?.unwrap_or(0),
                "time_us" => entry.time_us = int(tree, v, &at)?,
                "device_free" => entry.device_free = uint(tree, v, &at)?,
                "frames" => entry.stack = self.stack(tree, memo.as_deref_mut(), v, &at)?,
                _ => {}
            }
        }
        Ok(entry)
    }

    /// A list of frames, innermost first, at most `max_frames_per_entry` of them.
    fn stack(
        &mut self,
        tree: &mut Tree<'_>,
        mut memo: Option<&mut Memo>,
        v: Val,
        at: &dyn Fn() -> String,
    ) -> Result<Stack, Failed> {
        let id = match resolve(tree, v) {
            Val::None => return Ok(Stack::default()),
            Val::Stack(stack) => return Ok(stack),
            Val::Node(id) if matches!(tree.node(id), Some(Node::List(_))) => id,
            other => return Err(want(tree, "a list of frames", other, at)),
        };
        let frames = match tree.node_mut(id) {
            Some(Node::List(l)) if memo.is_some() => std::mem::take(l),
            Some(Node::List(l)) => l.clone(),
            _ => Vec::new(),
        };
        let mut ids = std::mem::take(&mut self.scratch);
        ids.clear();
        for (n, &f) in frames.iter().enumerate() {
            if ids.len() == self.limits.max_frames_per_entry {
                self.cut.frames += frames.len() - n;
                break;
            }
            if let Some(frame) = self.frame(tree, memo.as_deref_mut(), f, at)? {
                ids.push(frame);
            }
        }
        let stack = match self.stacks.get(ids.as_slice()) {
            Some(&stack) => stack,
            None => {
                let stack = Stack {
                    start: u32::try_from(self.frames.pool.len()).unwrap_or(u32::MAX),
                    len: u32::try_from(ids.len()).unwrap_or(0),
                };
                self.frames.pool.extend_from_slice(&ids);
                self.stacks.insert(ids.as_slice().into(), stack);
                stack
            }
        };
        self.scratch = ids;
        keep_as(tree, memo, id, Val::Stack(stack));
        Ok(stack)
    }

    /// A frame dict, interned; `None` for one without a file name (left out of the stack).
    fn frame(
        &mut self,
        tree: &mut Tree<'_>,
        memo: Option<&mut Memo>,
        v: Val,
        at: &dyn Fn() -> String,
    ) -> Result<Option<u32>, Failed> {
        let id = match resolve(tree, v) {
            Val::Frame(NO_FRAME) => return Ok(None),
            Val::Frame(known) => return Ok(Some(known)),
            Val::Node(id) if matches!(tree.node(id), Some(Node::Dict(_))) => id,
            other => return Err(want(tree, "a frame dict", other, at)),
        };
        let d = dict(tree, Val::Node(id), at, "a frame dict")?;
        let mut filename = None;
        let mut name = None;
        let mut line = 0u32;
        for (k, v) in d {
            match tree.str(k) {
                Some("filename") => filename = text(tree, v, at)?,
                Some("name") => name = text(tree, v, at)?,
                Some("line") => {
                    line = int(tree, v, at)?
                        .and_then(|l| u32::try_from(l).ok())
                        .unwrap_or(0);
                }
                _ => {}
            }
        }
        let found = filename.map(|filename| {
            self.intern(Frame {
                filename,
                line,
                name: name.unwrap_or_default(),
            })
        });
        keep_as(tree, memo, id, Val::Frame(found.unwrap_or(NO_FRAME)));
        Ok(found)
    }

    fn intern(&mut self, frame: Frame) -> u32 {
        if let Some(&id) = self.interned.get(&frame) {
            return id;
        }
        let id = u32::try_from(self.frames.table.len()).unwrap_or(u32::MAX);
        self.frames.table.push(frame.clone());
        self.interned.insert(frame, id);
        id
    }
}
/// The `vramscope` key. Its fields are plain values; one of the wrong type is an error like
/// any other field's.
fn vramscope_key(tree: &Tree<'_>, v: Val) -> Result<Option<VramscopeKey>, Failed> {
    if matches!(v, Val::None) {
        return Ok(None);
    }
    let here = || "`vramscope`".to_string();
    let d = dict(tree, v, &here, "a dict")?;
    {
        let mut k = VramscopeKey::default();
        let small = |v: Option<u64>| v.and_then(|v| u32::try_from(v).ok());
        for (name, v) in d {
            let name = tree.str(name).unwrap_or("");
            let at = || format!("vramscope.{name}");
            match name {
                "version" => k.version = int(tree, v, &at)?,
                "pid" => k.pid = small(uint(tree, v, &at)?),
                "device" => k.device = small(uint(tree, v, &at)?),
                "reason" => k.reason = text(tree, v, &at)?,
                "peak_allocated" => k.peak_allocated = uint(tree, v, &at)?,
                "peak_requested" => k.peak_requested = uint(tree, v, &at)?,
                "peak_time_us" => k.peak_time_us = int(tree, v, &at)?,
                "allocated" => k.allocated = uint(tree, v, &at)?,
                "reserved" => k.reserved = uint(tree, v, &at)?,
                "step" => k.step = int(tree, v, &at)?,
                "phase" => k.phase = text(tree, v, &at)?,
                "max_entries" => k.max_entries = uint(tree, v, &at)?,
                "history_owner" => k.history_owner = text(tree, v, &at)?,
                "oom" => k.oom = oom_key(tree, v)?,
                "rank" => k.rank = Some(int(tree, v, &at)?),
                "local_rank" => k.local_rank = Some(int(tree, v, &at)?),
                "world_size" => k.world_size = Some(int(tree, v, &at)?),
                "job_id" => k.job_id = Some(text(tree, v, &at)?),
                "channel" => k.channel = Some(text(tree, v, &at)?),
                _ => {}
            }
        }
        Ok(Some(k))
    }
}

fn oom_key(tree: &Tree<'_>, v: Val) -> Result<Option<KeyOom>, Failed> {
    if matches!(v, Val::None) {
        return Ok(None);
    }
    let here = || "vramscope.oom".to_string();
    let d = dict(tree, v, &here, "a dict")?;
    {
        let mut oom = KeyOom {
            requested: None,
            device_free: None,
            device_total: None,
        };
        for (name, v) in d {
            let name = tree.str(name).unwrap_or("");
            let at = || format!("vramscope.oom.{name}");
            match name {
                "requested" => oom.requested = uint(tree, v, &at)?,
                "device_free" => oom.device_free = uint(tree, v, &at)?,
                "device_total" => oom.device_total = uint(tree, v, &at)?,
                _ => {}
            }
        }
        Ok(Some(oom))
    }
}

/// A value as one line of a canonical form that Python's side of the differential test
/// (tests/pickle_reader.rs) writes the same way: `N`, `T`, `F`, decimal integers, `f` and
/// the float's 16 hex digits, `s`/`b` and the hex of a string's UTF-8 or of bytes, `[..]`,
/// `(..)` and `{k:v,..}` with items comma-separated in order, and for a container seen
/// before `@` and the number it had when first written (`#n` before it, numbered in order
/// of first appearance): sharing shows, so a copy where the pickle shared is a difference.
pub(crate) fn canonical(tree: &Tree<'_>, v: Val) -> String {
    fn hex(out: &mut String, bytes: &[u8]) {
        for b in bytes {
            out.push_str(&format!("{b:02x}"));
        }
    }
    fn go(tree: &Tree<'_>, v: Val, seen: &mut HashMap<u32, usize>, out: &mut String) {
        match v {
            Val::None => out.push('N'),
            Val::Bool(true) => out.push('T'),
            Val::Bool(false) => out.push('F'),
            Val::Int(i) => out.push_str(&i.to_string()),
            Val::BigInt { at, len } => out.push_str(&big_int_decimal(tree.range(at, len))),
            Val::Float(f) => out.push_str(&format!("f{:016x}", f.to_bits())),
            Val::Str { at, len } => {
                out.push('s');
                hex(out, tree.range(at, len));
            }
            Val::Bytes { at, len } => {
                out.push('b');
                hex(out, tree.range(at, len));
            }
            Val::Node(id) => {
                if let Some(n) = seen.get(&id) {
                    out.push_str(&format!("@{n}"));
                    return;
                }
                let n = seen.len();
                seen.insert(id, n);
                out.push_str(&format!("#{n}"));
                let (open, close, items): (char, char, Vec<Val>) = match tree.node(id) {
                    Some(Node::List(l) | Node::DeviceTraces(l)) => ('[', ']', l.clone()),
                    Some(Node::Tuple(t)) => ('(', ')', t.clone()),
                    Some(Node::Dict(d)) => {
                        ('{', '}', d.iter().flat_map(|&(k, v)| [k, v]).collect())
                    }
                    _ => ('<', '>', Vec::new()),
                };
                out.push(open);
                let dict = open == '{';
                for (i, item) in items.into_iter().enumerate() {
                    if i > 0 {
                        out.push(if dict && i % 2 == 1 { ':' } else { ',' });
                    }
                    go(tree, item, seen, out);
                }
                out.push(close);
            }
            Val::OldText | Val::Stack(_) | Val::Frame(_) | Val::Entry { .. } => out.push('?'),
        }
    }
    let mut out = String::new();
    go(tree, v, &mut HashMap::new(), &mut out);
    out
}

/// `canonical` of the value a pickle holds, read within `limits` (for the differential
/// test: what the one pass built, before any of it is read as a snapshot). A root dict
/// whose `device_traces` the pass reads as it comes is not for this.
pub(crate) fn canonical_of(bytes: &[u8], limits: &Limits) -> Result<String, SitesError> {
    let mut build = Build::new(bytes, limits);
    let (root, _) = super::guard::decode(bytes, limits, Instant::now(), &mut build)?;
    Ok(canonical(&build.tree, root))
}
