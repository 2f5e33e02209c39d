//! From a checked pickle to `MemorySnapshot`: the pickle crate's serde deserializer driven
//! by visitors that know the snapshot's shape, keep what the limits allow, count what they
//! cut, intern frames, and clean every string. A value of the wrong type is one line naming
//! the field; keys this reader does not know are passed over without being looked into.

use super::error::{ErrorKind, SitesError};
use super::limits::Limits;
use super::snapshot::{
    Action, Block, BlockState, Cut, DeviceTrace, Frame, Frames, KeyOom, MemorySnapshot,
    Segment, Stack, TraceEntry, VramscopeKey,
};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use std::collections::HashMap;
use std::fmt;
use std::time::Instant;

/// Devices a snapshot may list traces for; more is not a snapshot of this world.
const MAX_DEVICES: usize = 1024;

/// What the visitors share while reading.
pub(crate) struct Ctx<'l> {
    limits: &'l Limits,
    started: Instant,
    frames: Frames,
    interned: HashMap<Frame, u32>,
    cut: Cut,
    blocks: usize,
    seen: u64,
    late: bool,
}

impl<'l> Ctx<'l> {
    fn new(limits: &'l Limits, started: Instant) -> Self {
        Ctx {
            limits,
            started,
            frames: Frames::default(),
            interned: HashMap::new(),
            cut: Cut::default(),
            blocks: 0,
            seen: 0,
            late: false,
        }
    }

    /// Every so many values, whether the deadline has passed.
    fn tick<E: de::Error>(&mut self) -> Result<(), E> {
        self.seen += 1;
        if self.seen % 4096 == 0 && self.started.elapsed() > self.limits.deadline {
            self.late = true;
            return Err(E::custom("the deadline passed"));
        }
        Ok(())
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

/// Reads a checked pickle.
pub(crate) fn snapshot(
    bytes: &[u8],
    limits: &Limits,
    started: Instant,
) -> Result<MemorySnapshot, SitesError> {
    let mut ctx = Ctx::new(limits, started);
    let options = pickled::DeOptions::new().decode_strings();
    let mut de = pickled::Deserializer::new(std::io::Cursor::new(bytes), options);
    let read = RootSeed(&mut ctx).deserialize(&mut de);
    match read {
        Ok(mut snap) => {
            snap.frames = std::mem::take(&mut ctx.frames);
            snap.cut = ctx.cut;
            Ok(snap)
        }
        Err(_) if ctx.late => Err(SitesError::new(
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

/// Passes over a value without looking into it: the deserializer hands over the value as an
/// `Option`'s content, which is dropped unvisited (a shared list is neither copied nor walked).
struct Skip;

impl<'de> de::Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_option(SkipVisitor)
    }
}

struct SkipVisitor;

impl<'de> Visitor<'de> for SkipVisitor {
    type Value = Skip;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any value")
    }
    fn visit_none<E: de::Error>(self) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_some<D: Deserializer<'de>>(self, _d: D) -> Result<Skip, D::Error> {
        Ok(Skip)
    }
}

/// A dict key: its text when it is a string, else nothing (and passed over).
struct Key(Option<String>);

impl<'de> de::Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
                Ok(Key(Some(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key, E> {
                Ok(Key(Some(v)))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Key, E> {
                Ok(Key(None))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Key, E> {
                Ok(Key(None))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Key, E> {
                Ok(Key(None))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Key, E> {
                Ok(Key(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Key, E> {
                Ok(Key(None))
            }
            fn visit_byte_buf<E: de::Error>(self, _: Vec<u8>) -> Result<Key, E> {
                Ok(Key(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Key, A::Error> {
                Ok(Key(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// An integer field, or None (Python's None); anything else is an error naming `field`.
fn int<'de, A: MapAccess<'de>>(map: &mut A, field: &'static str) -> Result<Option<i64>, A::Error> {
    map.next_value_seed(IntSeed(field))
}

struct IntSeed(&'static str);

impl<'de> DeserializeSeed<'de> for IntSeed {
    type Value = Option<i64>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<i64>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for IntSeed {
    type Value = Option<i64>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "an integer for `{}`", self.0)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        i64::try_from(v)
            .map(Some)
            .map_err(|_| E::custom(format!("`{}` is too large", self.0)))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Some(i64::from(v)))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// A non-negative integer field.
fn uint<'de, A: MapAccess<'de>>(map: &mut A, field: &'static str) -> Result<Option<u64>, A::Error> {
    match int(map, field)? {
        None => Ok(None),
        Some(v) => u64::try_from(v)
            .map(Some)
            .map_err(|_| de::Error::custom(format!("`{field}` is negative ({v})"))),
    }
}

/// A string field (cleaned), or None.
fn text<'de, A: MapAccess<'de>>(map: &mut A, field: &'static str) -> Result<Option<String>, A::Error> {
    map.next_value_seed(TextSeed(field))
}

struct TextSeed(&'static str);

impl<'de> DeserializeSeed<'de> for TextSeed {
    type Value = Option<String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<String>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TextSeed {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a string for `{}`", self.0)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(crate::text::clean(v).into_owned()))
    }
    fn visit_string<E: de::Error>(self, mut v: String) -> Result<Self::Value, E> {
        crate::text::clean_in_place(&mut v);
        Ok(Some(v))
    }
    fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Self::Value, E> {
        Ok(Some(crate::text::clean_bytes(&v)))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

struct RootSeed<'c, 'l>(&'c mut Ctx<'l>);

impl<'de> DeserializeSeed<'de> for RootSeed<'_, '_> {
    type Value = MemorySnapshot;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<MemorySnapshot, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RootSeed<'_, '_> {
    type Value = MemorySnapshot;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a dict with `segments`")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<MemorySnapshot, A::Error> {
        let ctx = self.0;
        let mut segments = None;
        let mut traces = Vec::new();
        let mut key = None;
        while let Some(Key(name)) = map.next_key::<Key>()? {
            match name.as_deref() {
                Some("segments") => segments = Some(map.next_value_seed(SegmentsSeed(ctx))?),
                Some("device_traces") => traces = map.next_value_seed(TracesSeed(ctx))?,
                Some("vramscope") => key = map.next_value_seed(KeySeed)?,
                _ => {
                    map.next_value::<Skip>()?;
                }
            }
        }
        let Some(segments) = segments else {
            return Err(de::Error::custom("a dict without `segments`"));
        };
        Ok(MemorySnapshot {
            segments,
            traces,
            vramscope: key,
            frames: Frames::default(),
            cut: Cut::default(),
        })
    }
}

/// A list whose items a seed made from the context reads; `what` names it in errors.
macro_rules! list_seed {
    ($seed:ident, $item:ty, $what:literal, |$ctx:ident, $seq:ident| $body:block) => {
        struct $seed<'c, 'l>(&'c mut Ctx<'l>);

        impl<'de> DeserializeSeed<'de> for $seed<'_, '_> {
            type Value = $item;
            fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<$item, D::Error> {
                d.deserialize_seq(self)
            }
        }

        impl<'de> Visitor<'de> for $seed<'_, '_> {
            type Value = $item;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str($what)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut $seq: A) -> Result<$item, A::Error> {
                let $ctx = self.0;
                $body
            }
        }
    };
}

list_seed!(SegmentsSeed, Vec<Segment>, "a list of segments", |ctx, seq| {
    let mut segments = Vec::new();
    while let Some(segment) = seq.next_element_seed(SegmentSeed(ctx))? {
        segments.push(segment);
    }
    Ok(segments)
});

list_seed!(TracesSeed, Vec<DeviceTrace>, "a list of device traces", |ctx, seq| {
    let mut traces = Vec::new();
    while let Some(trace) = seq.next_element_seed(DeviceTraceSeed(ctx))? {
        if traces.len() == MAX_DEVICES {
            return Err(de::Error::custom(format!(
                "traces for more than {MAX_DEVICES} devices"
            )));
        }
        traces.push(trace);
    }
    Ok(traces)
});

list_seed!(DeviceTraceSeed, DeviceTrace, "a list of trace entries", |ctx, seq| {
    // The newest entries are what the backward walk needs: the oldest go first.
    let len = seq.size_hint().unwrap_or(0);
    let skip = len.saturating_sub(ctx.limits.max_trace_entries);
    for _ in 0..skip {
        seq.next_element::<Skip>()?;
    }
    let mut entries = Vec::with_capacity(len - skip);
    while let Some(entry) = seq.next_element_seed(EntrySeed(ctx))? {
        if entries.len() == ctx.limits.max_trace_entries {
            entries.remove(0);
            ctx.cut.trace_entries += 1;
        }
        entries.push(entry);
    }
    ctx.cut.trace_entries += skip;
    Ok(DeviceTrace { entries, cut: skip })
});

list_seed!(BlocksSeed, Vec<Block>, "a list of blocks", |ctx, seq| {
    let mut blocks = Vec::new();
    while let Some(block) = seq.next_element_seed(BlockSeed(ctx))? {
        if let Some(block) = block {
            blocks.push(block);
        }
    }
    Ok(blocks)
});

list_seed!(StackSeed, Stack, "a list of frames", |ctx, seq| {
    let start = u32::try_from(ctx.frames.pool.len()).unwrap_or(u32::MAX);
    let mut kept = 0usize;
    while kept < ctx.limits.max_frames_per_entry {
        match seq.next_element_seed(FrameSeed(ctx))? {
            Some(Some(id)) => {
                ctx.frames.pool.push(id);
                kept += 1;
            }
            Some(None) => {}
            None => break,
        }
    }
    // The outer frames past the limit are dropped unread.
    ctx.cut.frames += seq.size_hint().unwrap_or(0);
    Ok(Stack {
        start,
        len: u32::try_from(kept).unwrap_or(0),
    })
});

/// A dict read field by field; `$ctx` and `$map` are in scope in the body.
macro_rules! map_seed {
    ($seed:ident, $item:ty, $what:literal, |$ctx:ident, $map:ident| $body:block) => {
        struct $seed<'c, 'l>(&'c mut Ctx<'l>);

        impl<'de> DeserializeSeed<'de> for $seed<'_, '_> {
            type Value = $item;
            fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<$item, D::Error> {
                d.deserialize_map(self)
            }
        }

        impl<'de> Visitor<'de> for $seed<'_, '_> {
            type Value = $item;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str($what)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut $map: A) -> Result<$item, A::Error> {
                let $ctx = self.0;
                $body
            }
        }
    };
}

map_seed!(SegmentSeed, Segment, "a segment (a dict)", |ctx, map| {
    ctx.tick()?;
    let mut segment = Segment {
        device: 0,
        address: 0,
        total_size: 0,
        stream: 0,
        blocks: Vec::new(),
    };
    let mut sized = false;
    while let Some(Key(name)) = map.next_key::<Key>()? {
        match name.as_deref() {
            Some("device") => {
                let device = uint(&mut map, "device")?.unwrap_or(0);
                segment.device = u32::try_from(device)
                    .map_err(|_| de::Error::custom("a segment's `device` is too large"))?;
            }
            Some("address") => segment.address = uint(&mut map, "address")?.unwrap_or(0),
            Some("total_size") => {
                segment.total_size = uint(&mut map, "total_size")?.unwrap_or(0);
                sized = true;
            }
            Some("stream") => segment.stream = int(&mut map, "stream")?.unwrap_or(0),
            Some("blocks") => segment.blocks = map.next_value_seed(BlocksSeed(ctx))?,
            _ => {
                map.next_value::<Skip>()?;
            }
        }
    }
    if !sized {
        return Err(de::Error::custom("a segment without `total_size`"));
    }
    // Blocks written without their address (older PyTorch) lie one after another.
    let mut at = segment.address;
    for block in &mut segment.blocks {
        if block.address == u64::MAX {
            block.address = at;
        }
        at = block.address.saturating_add(block.size);
    }
    Ok(segment)
});

map_seed!(BlockSeed, Option<Block>, "a block (a dict)", |ctx, map| {
    ctx.tick()?;
    if ctx.blocks == ctx.limits.max_blocks {
        ctx.cut.blocks += 1;
        return Ok(None);
    }
    ctx.blocks += 1;
    let mut block = Block {
        address: u64::MAX,
        size: 0,
        requested_size: 0,
        state: BlockState::Other,
        stack: Stack::default(),
    };
    let mut requested = None;
    let mut sized = false;
    while let Some(Key(name)) = map.next_key::<Key>()? {
        match name.as_deref() {
            Some("address") => block.address = uint(&mut map, "address")?.unwrap_or(u64::MAX),
            Some("size") => {
                block.size = uint(&mut map, "size")?.unwrap_or(0);
                sized = true;
            }
            Some("requested_size") => requested = uint(&mut map, "requested_size")?,
            Some("state") => {
                block.state = match text(&mut map, "state")?.as_deref() {
                    Some("active_allocated") => BlockState::ActiveAllocated,
                    Some("active_awaiting_free" | "active_pending_free") => BlockState::PendingFree,
                    Some("inactive") => BlockState::Inactive,
                    _ => BlockState::Other,
                }
            }
            Some("frames") => block.stack = map.next_value_seed(StackSeed(ctx))?,
            _ => {
                map.next_value::<Skip>()?;
            }
        }
    }
    if !sized {
        return Err(de::Error::custom("a block without `size`"));
    }
    block.requested_size = requested.unwrap_or(block.size);
    Ok(Some(block))
});

map_seed!(EntrySeed, TraceEntry, "a trace entry (a dict)", |ctx, map| {
    ctx.tick()?;
    let mut entry = TraceEntry {
        action: Action::Other,
        addr: 0,
        size: 0,
        stream: 0,
        time_us: None,
        stack: Stack::default(),
        device_free: None,
    };
    while let Some(Key(name)) = map.next_key::<Key>()? {
        match name.as_deref() {
            Some("action") => {
                entry.action = text(&mut map, "action")?
                    .as_deref()
                    .map_or(Action::Other, Action::parse);
            }
            Some("addr") => entry.addr = uint(&mut map, "addr")?.unwrap_or(0),
            Some("size") => entry.size = uint(&mut map, "size")?.unwrap_or(0),
            Some("stream") => entry.stream = int(&mut map, "stream")?.unwrap_or(0),
            Some("time_us") => entry.time_us = int(&mut map, "time_us")?,
            Some("device_free") => entry.device_free = uint(&mut map, "device_free")?,
            Some("frames") => entry.stack = map.next_value_seed(StackSeed(ctx))?,
            _ => {
                map.next_value::<Skip>()?;
            }
        }
    }
    Ok(entry)
});

/// A frame dict, interned; `None` for one without a file name (left out of the stack).
struct FrameSeed<'c, 'l>(&'c mut Ctx<'l>);

impl<'de> DeserializeSeed<'de> for FrameSeed<'_, '_> {
    type Value = Option<u32>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<u32>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for FrameSeed<'_, '_> {
    type Value = Option<u32>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a frame (a dict)")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<u32>, A::Error> {
        let mut filename = None;
        let mut name = None;
        let mut line = 0u32;
        while let Some(Key(key)) = map.next_key::<Key>()? {
            match key.as_deref() {
                Some("filename") => filename = text(&mut map, "filename")?,
                Some("name") => name = text(&mut map, "name")?,
                Some("line") => {
                    line = int(&mut map, "line")?
                        .and_then(|l| u32::try_from(l).ok())
                        .unwrap_or(0);
                }
                _ => {
                    map.next_value::<Skip>()?;
                }
            }
        }
        let Some(filename) = filename else {
            return Ok(None);
        };
        Ok(Some(self.0.intern(Frame {
            filename,
            line,
            name: name.unwrap_or_default(),
        })))
    }
}

/// The `vramscope` key; a key of the wrong shape is read as absent fields, not refused:
/// the snapshot itself is PyTorch's and stays readable.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Option<VramscopeKey>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Option<VramscopeKey>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("the `vramscope` dict")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut key = VramscopeKey::default();
        let small = |v: Option<u64>| v.and_then(|v| u32::try_from(v).ok());
        while let Some(Key(name)) = map.next_key::<Key>()? {
            match name.as_deref() {
                Some("version") => key.version = int(&mut map, "version")?,
                Some("pid") => key.pid = small(uint(&mut map, "pid")?),
                Some("device") => key.device = small(uint(&mut map, "device")?),
                Some("reason") => key.reason = text(&mut map, "reason")?,
                Some("peak_allocated") => key.peak_allocated = uint(&mut map, "peak_allocated")?,
                Some("peak_requested") => key.peak_requested = uint(&mut map, "peak_requested")?,
                Some("peak_time_us") => key.peak_time_us = int(&mut map, "peak_time_us")?,
                Some("allocated") => key.allocated = uint(&mut map, "allocated")?,
                Some("reserved") => key.reserved = uint(&mut map, "reserved")?,
                Some("step") => key.step = int(&mut map, "step")?,
                Some("phase") => key.phase = text(&mut map, "phase")?,
                Some("max_entries") => key.max_entries = uint(&mut map, "max_entries")?,
                Some("history_owner") => key.history_owner = text(&mut map, "history_owner")?,
                Some("oom") => key.oom = map.next_value_seed(OomKeySeed)?,
                _ => {
                    map.next_value::<Skip>()?;
                }
            }
        }
        Ok(Some(key))
    }
}

struct OomKeySeed;

impl<'de> DeserializeSeed<'de> for OomKeySeed {
    type Value = Option<KeyOom>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for OomKeySeed {
    type Value = Option<KeyOom>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("the `vramscope` key's `oom` dict or None")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut oom = KeyOom {
            requested: None,
            device_free: None,
            device_total: None,
        };
        while let Some(Key(name)) = map.next_key::<Key>()? {
            match name.as_deref() {
                Some("requested") => oom.requested = uint(&mut map, "requested")?,
                Some("device_free") => oom.device_free = uint(&mut map, "device_free")?,
                Some("device_total") => oom.device_total = uint(&mut map, "device_total")?,
                _ => {
                    map.next_value::<Skip>()?;
                }
            }
        }
        Ok(Some(oom))
    }
}
