//! From the values the one pass builds (`value.rs`) to `MemorySnapshot`: what the
//! snapshot's shape says, copied into our own owned types: the newest trace entries, at
//! most so many blocks and frames, every string cleaned. Each device's history was read as
//! the pickle appended it (`history.rs`); the rest (segments, blocks, the `vramscope` key)
//! is read from the root once the pass ends (`finish`). A value of the wrong type is one
//! line naming where it is; keys this reader does not know are not looked into.

use super::build::Build;
use super::cost::{ReadCost, Watch};
use super::error::{ErrorKind, SitesError};
use super::field::{Failed, dict, int, items, text, uint, want};
use super::history::{NO_TRACE, Reader};
use super::limits::Limits;
use super::snapshot::{
    Block, BlockState, Cut, DeviceTrace, Frames, KeyOom, MemorySnapshot, Segment, Stack,
    VramscopeKey,
};
use super::value::{Node, TraceData, Tree, Val, big_int_decimal};
use std::collections::HashMap;
use std::time::Instant;

/// Devices a snapshot may list traces for.
const MAX_DEVICES: usize = 1024;

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

impl Reader {
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
                "steps_since_attach" => k.steps_since_attach = matches!(v, Val::Bool(true)),
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
