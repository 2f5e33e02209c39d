//! A device's history read as the one pass builds it (`build.rs` hands over each batch the
//! pickle appends): each entry's dict read into a `TraceEntry` and let go, its frame list
//! and frame dicts read once, into the frame pool, each distinct frame and stack kept once.
//! What a container was read as stays in its node, or in its memo entry when nothing else
//! refers to it. A history holds at most one and a half times the entries kept while it is
//! read; an entry cut from it that a memo names is kept aside for the references that follow.

use super::error::SitesError;
use super::fast_hash::WordMap;
use super::field::{Failed, dict, int, resolve, text, uint, want};
use super::limits::Limits;
use super::memo::Memo;
use super::snapshot::{Action, Cut, Frame, Frames, Stack, TraceEntry};
use super::value::{NO_FRAME, NO_MEMO, Node, TraceData, Tree, Val};
use std::time::Instant;

/// A trace entry's position with this bit set names its copy in `TraceData::saved`.
const SAVED: u32 = 1 << 31;

/// The trace id of a history read from a plain list (no node holds its entries).
pub(super) const NO_TRACE: u32 = u32::MAX;

/// The reader's state: what it has interned and cut so far.
pub(crate) struct Reader {
    pub(super) limits: Limits,
    pub(crate) started: Instant,
    pub(super) frames: Frames,
    interned: WordMap<Frame, u32>,
    /// Each distinct stack once: torch gives every alloc entry a list of its own, and a
    /// training loop's stacks are a few hundred distinct ones.
    stacks: WordMap<Box<[u32]>, Stack>,
    scratch: Vec<u32>,
    pub(super) cut: Cut,
    pub(super) blocks: usize,
    seen: u64,
    pub(super) late: bool,
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
            interned: WordMap::default(),
            stacks: WordMap::default(),
            scratch: Vec::new(),
            cut: Cut::default(),
            blocks: 0,
            seen: 0,
            late: false,
        }
    }

    pub(super) fn tick(&mut self) -> Result<(), Failed> {
        self.seen += 1;
        if self.seen.is_multiple_of(4096) && self.started.elapsed() > self.limits.deadline {
            self.late = true;
            return Err("the deadline passed".to_string());
        }
        Ok(())
    }

    /// Reads `items`, appended by the pickle to trace node `trace`, as its entries.
    pub(crate) fn append_entries(
        &mut self,
        tree: &mut Tree<'_>,
        mut memo: Option<&mut Memo>,
        trace: u32,
        items: &[Val],
        room: usize,
    ) -> Result<(), SitesError> {
        let mut data = match tree.node_mut(trace) {
            Some(Node::Trace(data)) => std::mem::take(data),
            _ => return Ok(()),
        };
        if data.entries.capacity() == 0 {
            let most = self.limits.max_trace_entries;
            let room = room.min(most.saturating_add(most / 2).saturating_add(4096));
            data.entries.reserve(room);
            data.homes.reserve(room);
            if self.limits.huge_pages {
                super::huge_pages::advise(&data.entries);
                super::huge_pages::advise(&data.homes);
            }
        }
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

    pub(super) fn append_into(
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
                let entry = self.entry(tree, memo.as_deref_mut(), &pairs, pos);
                tree.recycle_pairs(pairs);
                let entry = entry?;
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
            let name = tree.str_bytes(k).unwrap_or_default();
            let at = || format!("[{pos}].{}", String::from_utf8_lossy(name));
            match name {
                b"action" => {
                    entry.action = match tree.str_bytes(v) {
                        Some(s) => Action::parse(s),
                        None => return Err(want(tree, "a string", v, &at)),
                    }
                }
                b"addr" => entry.addr = uint(tree, v, &at)?.unwrap_or(0),
                b"size" => entry.size = uint(tree, v, &at)?.unwrap_or(0),
                b"stream" => entry.stream = int(tree, v, &at)?.unwrap_or(0),
                b"time_us" => entry.time_us = int(tree, v, &at)?,
                b"device_free" => entry.device_free = uint(tree, v, &at)?,
                b"frames" => entry.stack = self.stack(tree, memo.as_deref_mut(), v, &at)?,
                _ => {}
            }
        }
        Ok(entry)
    }

    /// A list of frames, innermost first, at most `max_frames_per_entry` of them.
    pub(super) fn stack(
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
        tree.recycle_items(frames);
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
            match tree.str_bytes(k) {
                Some(b"filename") => filename = text(tree, v, at)?,
                Some(b"name") => name = text(tree, v, at)?,
                Some(b"line") => {
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
