//! From a checked pickle to `MemorySnapshot`: the pickle crate builds its values (sharing,
//! as Python does, every dict and list the pickle refers to twice), and this walk copies
//! what the snapshot's shape says into our own owned types: the newest trace entries, at
//! most so many blocks and frames, every string cleaned, each distinct frame once. A frame
//! dict or frame list shared by many entries (torch shares them: a block's frames are its
//! alloc entry's list) is read once and remembered by identity. A value of the wrong type is
//! one line naming where it is; keys this reader does not know are not looked into.

use super::cost::{ReadCost, Watch};
use super::error::{ErrorKind, SitesError};
use super::limits::Limits;
use super::snapshot::{
    Action, Block, BlockState, Cut, DeviceTrace, Frame, Frames, KeyOom, MemorySnapshot, Segment,
    Stack, TraceEntry, VramscopeKey,
};
use pickled::{Dict, HashableValue, Value};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::time::Instant;

/// Hashes an address with one multiplication: the shared values' identities are looked up
/// millions of times, and an address needs no protection from collisions chosen by a file.
#[derive(Default)]
struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type ByAddress<K, V> = HashMap<K, V, BuildHasherDefault<AddressHasher>>;

/// Devices a snapshot may list traces for.
const MAX_DEVICES: usize = 1024;

type Failed = String;

/// Reads a checked pickle.
pub(crate) fn snapshot(
    bytes: &[u8],
    limits: &Limits,
    started: Instant,
    cost: &mut ReadCost,
) -> Result<MemorySnapshot, SitesError> {
    let mut watch = Watch::start();
    let value = pickled::value_from_slice(bytes, pickled::DeOptions::new().decode_strings())
        .map_err(|e| {
            SitesError::new(
                ErrorKind::NotASnapshot,
                format!("not a memory snapshot: {e}"),
            )
        })?;
    cost.parse = watch.lap();
    let mut walk = Walk {
        limits,
        started,
        frames: Frames::default(),
        interned: HashMap::new(),
        frame_at: ByAddress::default(),
        stack_at: ByAddress::default(),
        cut: Cut::default(),
        blocks: 0,
        seen: 0,
        late: false,
    };
    let read = walk.root(&value);
    cost.walk = watch.lap();
    drop(value);
    cost.drop = watch.lap();
    match read {
        Ok(mut snap) => {
            snap.frames = std::mem::take(&mut walk.frames);
            snap.cut = walk.cut;
            Ok(snap)
        }
        Err(_) if walk.late => Err(SitesError::new(
            ErrorKind::Limit,
            format!(
                "gave up reading after {} s (the deadline)",
                limits.deadline.as_secs()
            ),
        )),
        Err(e) => Err(SitesError::new(
            ErrorKind::NotASnapshot,
            format!("not a memory snapshot: {e}"),
        )),
    }
}

struct Walk<'l> {
    limits: &'l Limits,
    started: Instant,
    frames: Frames,
    interned: HashMap<Frame, u32>,
    /// Frame dicts and frame lists already read, by the identity of the shared value.
    frame_at: ByAddress<*const Dict, Option<u32>>,
    stack_at: ByAddress<*const Vec<Value>, Stack>,
    cut: Cut,
    blocks: usize,
    seen: u64,
    late: bool,
}

/// The type of a value, for errors.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::None => "None",
        Value::Bool(_) => "a bool",
        Value::I64(_) | Value::Int(_) => "an integer",
        Value::F64(_) => "a float",
        Value::Bytes(_) => "bytes",
        Value::String(_) => "a string",
        Value::List(_) => "a list",
        Value::Tuple(_) => "a tuple",
        Value::Set(_) | Value::FrozenSet(_) => "a set",
        Value::Dict(_) => "a dict",
        Value::Object(_) | Value::Weak(_) => "an object",
    }
}

fn want(what: &str, v: &Value, at: &dyn Fn() -> String) -> Failed {
    format!("{} is {}, not {what}", at(), kind(v))
}

/// An integer or None; a bool counts as 0 or 1.
fn int(v: &Value, at: &dyn Fn() -> String) -> Result<Option<i64>, Failed> {
    match v {
        Value::I64(i) => Ok(Some(*i)),
        Value::Bool(b) => Ok(Some(i64::from(*b))),
        Value::None => Ok(None),
        Value::Int(_) => Err(format!("{} is too large", at())),
        other => Err(want("an integer", other, at)),
    }
}

fn uint(v: &Value, at: &dyn Fn() -> String) -> Result<Option<u64>, Failed> {
    match int(v, at)? {
        None => Ok(None),
        Some(i) => u64::try_from(i)
            .map(Some)
            .map_err(|_| format!("{} is negative ({i})", at())),
    }
}

/// A string (cleaned) or None.
fn text(v: &Value, at: &dyn Fn() -> String) -> Result<Option<String>, Failed> {
    match v {
        Value::String(s) => Ok(Some(crate::text::clean(s.inner()).into_owned())),
        Value::Bytes(b) => Ok(Some(crate::text::clean_bytes(b.inner()))),
        Value::None => Ok(None),
        other => Err(want("a string", other, at)),
    }
}

/// The string key of a dict entry, if it has one.
fn key(k: &HashableValue) -> Option<&str> {
    match k {
        HashableValue::String(s) => Some(s.inner().as_str()),
        _ => None,
    }
}

/// Calls `f` with the items of a list or tuple.
fn items<T>(
    v: &Value,
    at: &dyn Fn() -> String,
    what: &str,
    f: impl FnOnce(&[Value]) -> Result<T, Failed>,
) -> Result<T, Failed> {
    match v {
        Value::List(l) => f(&l.inner()),
        Value::Tuple(t) => f(t.inner()),
        other => Err(want(what, other, at)),
    }
}

fn dict<T>(
    v: &Value,
    at: &dyn Fn() -> String,
    what: &str,
    f: impl FnOnce(&Dict) -> Result<T, Failed>,
) -> Result<T, Failed> {
    match v {
        Value::Dict(d) => f(&d.inner()),
        other => Err(want(what, other, at)),
    }
}

impl Walk<'_> {
    fn tick(&mut self) -> Result<(), Failed> {
        self.seen += 1;
        if self.seen.is_multiple_of(4096) && self.started.elapsed() > self.limits.deadline {
            self.late = true;
            return Err("the deadline passed".to_string());
        }
        Ok(())
    }

    fn root(&mut self, v: &Value) -> Result<MemorySnapshot, Failed> {
        let at = || "the pickle".to_string();
        dict(v, &at, "a dict with `segments`", |d| {
            let mut segments = None;
            let mut traces = Vec::new();
            let mut vramscope = None;
            for (k, v) in d.iter() {
                match key(k) {
                    Some("segments") => segments = Some(self.segments(v)?),
                    Some("device_traces") => traces = self.traces(v)?,
                    Some("vramscope") => vramscope = vramscope_key(v)?,
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
        })
    }

    fn segments(&mut self, v: &Value) -> Result<Vec<Segment>, Failed> {
        let at = || "`segments`".to_string();
        items(v, &at, "a list of segments", |list| {
            let mut segments = Vec::with_capacity(list.len());
            for (i, s) in list.iter().enumerate() {
                segments.push(self.segment(s, i)?);
            }
            Ok(segments)
        })
    }

    fn segment(&mut self, v: &Value, i: usize) -> Result<Segment, Failed> {
        self.tick()?;
        let here = || format!("segments[{i}]");
        dict(v, &here, "a dict", |d| {
            let mut segment = Segment {
                device: 0,
                address: 0,
                total_size: 0,
                stream: 0,
                blocks: Vec::new(),
            };
            let mut sized = false;
            let mut blocks = None;
            for (k, v) in d.iter() {
                let name = key(k).unwrap_or("");
                let at = || format!("segments[{i}].{name}");
                match name {
                    "device" => {
                        let device = uint(v, &at)?.unwrap_or(0);
                        segment.device =
                            u32::try_from(device).map_err(|_| format!("{} is too large", at()))?;
                    }
                    "address" => segment.address = uint(v, &at)?.unwrap_or(0),
                    "total_size" => {
                        segment.total_size = uint(v, &at)?.unwrap_or(0);
                        sized = true;
                    }
                    "stream" => segment.stream = int(v, &at)?.unwrap_or(0),
                    "blocks" => blocks = Some(v),
                    _ => {}
                }
            }
            if !sized {
                return Err(format!("{} has no `total_size`", here()));
            }
            if let Some(blocks) = blocks {
                let at = || format!("segments[{i}].blocks");
                segment.blocks = items(blocks, &at, "a list of blocks", |list| {
                    let mut kept = Vec::with_capacity(list.len());
                    for (j, b) in list.iter().enumerate() {
                        if let Some(block) = self.block(b, i, j)? {
                            kept.push(block);
                        }
                    }
                    Ok(kept)
                })?;
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
        })
    }

    fn block(&mut self, v: &Value, i: usize, j: usize) -> Result<Option<Block>, Failed> {
        self.tick()?;
        if self.blocks == self.limits.max_blocks {
            self.cut.blocks += 1;
            return Ok(None);
        }
        self.blocks += 1;
        let here = || format!("segments[{i}].blocks[{j}]");
        dict(v, &here, "a dict", |d| {
            let mut block = Block {
                address: u64::MAX,
                size: 0,
                requested_size: 0,
                state: BlockState::Other,
                stack: Stack::default(),
            };
            let mut requested = None;
            let mut sized = false;
            for (k, v) in d.iter() {
                let name = key(k).unwrap_or("");
                let at = || format!("segments[{i}].blocks[{j}].{name}");
                match name {
                    "address" => block.address = uint(v, &at)?.unwrap_or(u64::MAX),
                    "size" => {
                        block.size = uint(v, &at)?.unwrap_or(0);
                        sized = true;
                    }
                    "requested_size" => requested = uint(v, &at)?,
                    "state" => {
                        block.state = match text(v, &at)?.as_deref() {
                            Some("active_allocated") => BlockState::ActiveAllocated,
                            Some("active_awaiting_free" | "active_pending_free") => {
                                BlockState::PendingFree
                            }
                            Some("inactive") => BlockState::Inactive,
                            _ => BlockState::Other,
                        }
                    }
                    "frames" => block.stack = self.stack(v, &at)?,
                    _ => {}
                }
            }
            if !sized {
                return Err(format!("{} has no `size`", here()));
            }
            block.requested_size = requested.unwrap_or(block.size);
            Ok(Some(block))
        })
    }

    fn traces(&mut self, v: &Value) -> Result<Vec<DeviceTrace>, Failed> {
        let at = || "`device_traces`".to_string();
        items(v, &at, "a list of device traces", |devices| {
            if devices.len() > MAX_DEVICES {
                return Err(format!(
                    "`device_traces` lists more than {MAX_DEVICES} devices"
                ));
            }
            let mut traces = Vec::with_capacity(devices.len());
            for (d, trace) in devices.iter().enumerate() {
                traces.push(self.trace(trace, d)?);
            }
            Ok(traces)
        })
    }

    fn trace(&mut self, v: &Value, d: usize) -> Result<DeviceTrace, Failed> {
        let at = || format!("device_traces[{d}]");
        items(v, &at, "a list of trace entries", |list| {
            // The newest entries are what the backward walk needs: the oldest go.
            let skip = list.len().saturating_sub(self.limits.max_trace_entries);
            self.cut.trace_entries += skip;
            let mut entries = Vec::with_capacity(list.len() - skip);
            for (e, entry) in list.iter().enumerate().skip(skip) {
                entries.push(self.entry(entry, d, e)?);
            }
            Ok(DeviceTrace { entries, cut: skip })
        })
    }

    fn entry(&mut self, v: &Value, d: usize, e: usize) -> Result<TraceEntry, Failed> {
        self.tick()?;
        let here = || format!("device_traces[{d}][{e}]");
        dict(v, &here, "a dict", |map| {
            let mut entry = TraceEntry {
                action: Action::Other,
                addr: 0,
                size: 0,
                stream: 0,
                time_us: None,
                stack: Stack::default(),
                device_free: None,
            };
            for (k, v) in map.iter() {
                let name = key(k).unwrap_or("");
                let at = || format!("device_traces[{d}][{e}].{name}");
                match name {
                    "action" => {
                        entry.action = match v {
                            Value::String(s) => Action::parse(s.inner()),
                            other => return Err(want("a string", other, &at)),
                        }
                    }
                    "addr" => entry.addr = uint(v, &at)?.unwrap_or(0),
                    "size" => entry.size = uint(v, &at)?.unwrap_or(0),
                    "stream" => entry.stream = int(v, &at)?.unwrap_or(0),
                    "time_us" => entry.time_us = int(v, &at)?,
                    "device_free" => entry.device_free = uint(v, &at)?,
                    "frames" => entry.stack = self.stack(v, &at)?,
                    _ => {}
                }
            }
            Ok(entry)
        })
    }

    /// A list of frames, innermost first, at most `max_frames_per_entry` of them.
    fn stack(&mut self, v: &Value, at: &dyn Fn() -> String) -> Result<Stack, Failed> {
        let list = match v {
            Value::List(l) => l,
            Value::None => return Ok(Stack::default()),
            other => return Err(want("a list of frames", other, at)),
        };
        let id = list.rc_ptr();
        if let Some(&stack) = self.stack_at.get(&id) {
            return Ok(stack);
        }
        let frames = list.inner();
        let start = u32::try_from(self.frames.pool.len()).unwrap_or(u32::MAX);
        let mut kept = 0usize;
        for (n, f) in frames.iter().enumerate() {
            if kept == self.limits.max_frames_per_entry {
                self.cut.frames += frames.len() - n;
                break;
            }
            if let Some(frame) = self.frame(f, at)? {
                self.frames.pool.push(frame);
                kept += 1;
            }
        }
        let stack = Stack {
            start,
            len: u32::try_from(kept).unwrap_or(0),
        };
        self.stack_at.insert(id, stack);
        Ok(stack)
    }

    /// A frame dict, interned; `None` for one without a file name (left out of the stack).
    fn frame(&mut self, v: &Value, at: &dyn Fn() -> String) -> Result<Option<u32>, Failed> {
        let d = match v {
            Value::Dict(d) => d,
            other => return Err(want("a frame dict", other, at)),
        };
        let id = d.rc_ptr();
        if let Some(&known) = self.frame_at.get(&id) {
            return Ok(known);
        }
        let mut filename = None;
        let mut name = None;
        let mut line = 0u32;
        for (k, v) in d.inner().iter() {
            match key(k) {
                Some("filename") => filename = text(v, at)?,
                Some("name") => name = text(v, at)?,
                Some("line") => {
                    line = int(v, at)?.and_then(|l| u32::try_from(l).ok()).unwrap_or(0);
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
        self.frame_at.insert(id, found);
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
fn vramscope_key(v: &Value) -> Result<Option<VramscopeKey>, Failed> {
    if matches!(v, Value::None) {
        return Ok(None);
    }
    let here = || "`vramscope`".to_string();
    dict(v, &here, "a dict", |d| {
        let mut k = VramscopeKey::default();
        let small = |v: Option<u64>| v.and_then(|v| u32::try_from(v).ok());
        for (name, v) in d.iter() {
            let name = key(name).unwrap_or("");
            let at = || format!("vramscope.{name}");
            match name {
                "version" => k.version = int(v, &at)?,
                "pid" => k.pid = small(uint(v, &at)?),
                "device" => k.device = small(uint(v, &at)?),
                "reason" => k.reason = text(v, &at)?,
                "peak_allocated" => k.peak_allocated = uint(v, &at)?,
                "peak_requested" => k.peak_requested = uint(v, &at)?,
                "peak_time_us" => k.peak_time_us = int(v, &at)?,
                "allocated" => k.allocated = uint(v, &at)?,
                "reserved" => k.reserved = uint(v, &at)?,
                "step" => k.step = int(v, &at)?,
                "phase" => k.phase = text(v, &at)?,
                "max_entries" => k.max_entries = uint(v, &at)?,
                "history_owner" => k.history_owner = text(v, &at)?,
                "oom" => k.oom = oom_key(v)?,
                "rank" => k.rank = Some(int(v, &at)?),
                "local_rank" => k.local_rank = Some(int(v, &at)?),
                "world_size" => k.world_size = Some(int(v, &at)?),
                "job_id" => k.job_id = Some(text(v, &at)?),
                "channel" => k.channel = Some(text(v, &at)?),
                _ => {}
            }
        }
        Ok(Some(k))
    })
}

fn oom_key(v: &Value) -> Result<Option<KeyOom>, Failed> {
    if matches!(v, Value::None) {
        return Ok(None);
    }
    let here = || "vramscope.oom".to_string();
    dict(v, &here, "a dict", |d| {
        let mut oom = KeyOom {
            requested: None,
            device_free: None,
            device_total: None,
        };
        for (name, v) in d.iter() {
            let name = key(name).unwrap_or("");
            let at = || format!("vramscope.oom.{name}");
            match name {
                "requested" => oom.requested = uint(v, &at)?,
                "device_free" => oom.device_free = uint(v, &at)?,
                "device_total" => oom.device_total = uint(v, &at)?,
                _ => {}
            }
        }
        Ok(Some(oom))
    })
}
