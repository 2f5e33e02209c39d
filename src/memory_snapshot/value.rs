//! The values a snapshot's pickle builds, as the one pass over its bytes (`guard.rs`) builds
//! them: small copyable `Val`s on the stack and in the memo, and the containers in an arena
//! (`Tree`) by index, so that a container the pickle stores once and refers to many times
//! (torch shares every frame dict among all the stacks that hold it) is one node, shared,
//! never a copy. Strings and big integers stay where they are in the file's bytes, as
//! ranges: a snapshot's millions of memo references to a few thousand strings cost nothing.
//!
//! A container the reader has already turned into its own type (a frame, a stack, a trace
//! entry: `read.rs` does that as they arrive) is replaced by that form, in its node or, when
//! nothing but the memo held it, in the memo's `Val`, and its items are let go: what was
//! read is not kept twice.

use super::snapshot::{Stack, TraceEntry};

/// A value on the stack, in the memo or in a container.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Val {
    None,
    Bool(bool),
    Int(i64),
    /// An integer wider than 64 bits: its little-endian two's-complement bytes in the file.
    BigInt {
        at: u32,
        len: u32,
    },
    Float(f64),
    /// UTF-8, checked when it was read.
    Str {
        at: u32,
        len: u32,
    },
    Bytes {
        at: u32,
        len: u32,
    },
    /// A protocol 0 or 1 text string (`STRING`, `UNICODE`), quoted and escaped as Python
    /// writes them: no snapshot holds one (every snapshot is protocol 2 or later), so the
    /// reader keeps only that it is there.
    OldText,
    Node(u32),
    /// A list of frames already read into the frame pool.
    Stack(Stack),
    /// A frame dict already read: its interned id, or `NO_FRAME` for one without a file.
    Frame(u32),
    /// A trace entry already read into trace node `trace`, at position `pos` of its history.
    Entry {
        trace: u32,
        pos: u32,
    },
}

pub(crate) const NO_FRAME: u32 = u32::MAX;
pub(crate) const NO_MEMO: u32 = u32::MAX;

/// A container.
#[derive(Debug)]
pub(crate) enum Node {
    List(Vec<Val>),
    /// The list under the root's `device_traces` (see `Tree::role_of_new_list`).
    DeviceTraces(Vec<Val>),
    /// A device's history, its entries read as they were appended.
    Trace(Box<TraceData>),
    Tuple(Vec<Val>),
    Dict(Vec<(Val, Val)>),
    /// Read already, and shared: what it was read as.
    Read(Val),
    /// Let go.
    Free,
}

/// A device's history as it is read: the newest entries, and those cut before them.
#[derive(Debug, Default)]
pub(crate) struct TraceData {
    /// The entries at positions `base..base + entries.len()`.
    pub(crate) entries: Vec<TraceEntry>,
    /// Per entry, the memo id of the dict it was read from (or `NO_MEMO`): when an entry is
    /// cut, a memo that names it gets a copy (`saved`), so that a later reference reads it.
    pub(crate) homes: Vec<u32>,
    pub(crate) base: u32,
    pub(crate) saved: Vec<TraceEntry>,
    /// The first entry that could not be read: its position and what is wrong, said from
    /// the entry on (`[3].size is negative (-5)`); the device's index comes when the trace
    /// is read as one (`read.rs`), since it is known only once the list is placed.
    pub(crate) failed: Option<String>,
}

impl TraceData {
    /// Positions appended so far.
    pub(crate) fn placed(&self) -> u32 {
        self.base
            .saturating_add(u32::try_from(self.entries.len()).unwrap_or(u32::MAX))
    }

    /// The entry at absolute position `pos`, if it is still held.
    pub(crate) fn at(&self, pos: u32) -> Option<&TraceEntry> {
        let i = pos.checked_sub(self.base)?;
        self.entries.get(i as usize)
    }
}

/// The arena, and the file's bytes the ranges point into.
pub(crate) struct Tree<'b> {
    pub(crate) bytes: &'b [u8],
    nodes: Vec<Node>,
    /// Per node, the memo id it was stored under (or `NO_MEMO`).
    memo_of: Vec<u32>,
    free: Vec<u32>,
    /// The emptied item vectors of entry dicts and frame lists read already, for the next
    /// dict or list: a history builds one of each per entry, and allocating each afresh was
    /// a tenth of reading one.
    spare_pairs: Vec<Vec<(Val, Val)>>,
    spare_items: Vec<Vec<Val>>,
}

/// Spare item vectors kept, and the most items one may hold to be kept. Python's pickler
/// appends a list's items in batches of 1,000, so a history's entry dicts are all built
/// before the batch that reads them; an entry or a stack holds a few dozen items at most,
/// and a bigger container's memory is not kept after it (at most 1.5 MiB in all).
const SPARES: usize = 1024;
const SPARE_ITEMS: usize = 32;

impl<'b> Tree<'b> {
    pub(crate) fn new(bytes: &'b [u8]) -> Self {
        Tree {
            bytes,
            nodes: Vec::new(),
            memo_of: Vec::new(),
            free: Vec::new(),
            spare_pairs: Vec::new(),
            spare_items: Vec::new(),
        }
    }

    /// A new empty dict's items, from the spares when there is one.
    pub(crate) fn empty_pairs(&mut self) -> Vec<(Val, Val)> {
        self.spare_pairs.pop().unwrap_or_default()
    }

    /// A new empty list's items, from the spares when there is one.
    pub(crate) fn empty_items(&mut self) -> Vec<Val> {
        self.spare_items.pop().unwrap_or_default()
    }

    /// Keeps a dict's items, read and no longer needed, for the next dict.
    pub(crate) fn recycle_pairs(&mut self, mut pairs: Vec<(Val, Val)>) {
        if self.spare_pairs.len() < SPARES && pairs.capacity() <= SPARE_ITEMS {
            pairs.clear();
            self.spare_pairs.push(pairs);
        }
    }

    /// Keeps a list's items, read and no longer needed, for the next list.
    pub(crate) fn recycle_items(&mut self, mut items: Vec<Val>) {
        if self.spare_items.len() < SPARES && items.capacity() <= SPARE_ITEMS {
            items.clear();
            self.spare_items.push(items);
        }
    }

    pub(crate) fn add(&mut self, node: Node) -> Val {
        if let Some(id) = self.free.pop() {
            if let Some(slot) = self.nodes.get_mut(id as usize) {
                *slot = node;
            }
            if let Some(memo) = self.memo_of.get_mut(id as usize) {
                *memo = NO_MEMO;
            }
            return Val::Node(id);
        }
        let id = u32::try_from(self.nodes.len()).unwrap_or(u32::MAX);
        self.nodes.push(node);
        self.memo_of.push(NO_MEMO);
        Val::Node(id)
    }

    pub(crate) fn node(&self, id: u32) -> Option<&Node> {
        self.nodes.get(id as usize)
    }

    pub(crate) fn node_mut(&mut self, id: u32) -> Option<&mut Node> {
        self.nodes.get_mut(id as usize)
    }

    pub(crate) fn memo_of(&self, id: u32) -> u32 {
        self.memo_of.get(id as usize).copied().unwrap_or(NO_MEMO)
    }

    pub(crate) fn set_memo_of(&mut self, id: u32, memo: u32) {
        if let Some(m) = self.memo_of.get_mut(id as usize) {
            *m = memo;
        }
    }

    /// Lets node `id` go: nothing refers to it any more.
    pub(crate) fn release(&mut self, id: u32) {
        if let Some(node) = self.nodes.get_mut(id as usize) {
            *node = Node::Free;
            self.free.push(id);
        }
    }

    /// The bytes of a string, bytes or big-integer range.
    pub(crate) fn range(&self, at: u32, len: u32) -> &'b [u8] {
        let start = at as usize;
        self.bytes
            .get(start..start + len as usize)
            .unwrap_or_default()
    }

    /// A `Str` as text. Its bytes were checked as UTF-8 when it was read.
    pub(crate) fn str(&self, v: Val) -> Option<&'b str> {
        match v {
            Val::Str { at, len } => std::str::from_utf8(self.range(at, len)).ok(),
            _ => None,
        }
    }

    /// A `Str`'s bytes, for comparing with a known key: already checked as UTF-8, and
    /// compared as bytes because a history asks six keys of each of its entries (checking
    /// them again was a tenth of reading a 100,000-entry snapshot).
    pub(crate) fn str_bytes(&self, v: Val) -> Option<&'b [u8]> {
        match v {
            Val::Str { at, len } => Some(self.range(at, len)),
            _ => None,
        }
    }

    /// The type of a value, for errors.
    pub(crate) fn kind(&self, v: Val) -> &'static str {
        match v {
            Val::None => "None",
            Val::Bool(_) => "a bool",
            Val::Int(_) | Val::BigInt { .. } => "an integer",
            Val::Float(_) => "a float",
            Val::Str { .. } | Val::OldText => "a string",
            Val::Bytes { .. } => "bytes",
            Val::Stack(_) => "a list",
            Val::Frame(_) | Val::Entry { .. } => "a dict",
            Val::Node(id) => match self.node(id) {
                Some(Node::List(_) | Node::DeviceTraces(_) | Node::Trace(_)) => "a list",
                Some(Node::Tuple(_)) => "a tuple",
                Some(Node::Dict(_)) => "a dict",
                Some(Node::Read(v)) => self.kind(*v),
                Some(Node::Free) | None => "a value already let go",
            },
        }
    }
}

/// The decimal digits of a little-endian two's-complement integer of any width.
pub(crate) fn big_int_decimal(le: &[u8]) -> String {
    let negative = le.last().is_some_and(|b| b & 0x80 != 0);
    // The magnitude, little-endian bytes: two's complement negated for a negative number.
    let mut magnitude: Vec<u8> = le.to_vec();
    if negative {
        let mut carry = true;
        for b in &mut magnitude {
            *b = !*b;
            if carry {
                let (sum, over) = b.overflowing_add(1);
                *b = sum;
                carry = over;
            }
        }
    }
    // Base 10^9 limbs, most significant last, by repeated doubling-in of the bytes.
    let mut limbs: Vec<u64> = vec![0];
    for &byte in magnitude.iter().rev() {
        let mut carry = u64::from(byte);
        for limb in &mut limbs {
            let v = *limb * 256 + carry;
            *limb = v % 1_000_000_000;
            carry = v / 1_000_000_000;
        }
        while carry > 0 {
            limbs.push(carry % 1_000_000_000);
            carry /= 1_000_000_000;
        }
    }
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    let mut rest = limbs.iter().rev();
    if let Some(top) = rest.next() {
        out.push_str(&top.to_string());
    }
    for limb in rest {
        out.push_str(&format!("{limb:09}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn big_integers_are_written_in_decimal() {
        assert_eq!(big_int_decimal(&[]), "0");
        assert_eq!(big_int_decimal(&[0xff]), "-1");
        assert_eq!(big_int_decimal(&[0x00, 0x80]), "-32768");
        // 2**64: nine bytes, the last a zero sign byte.
        assert_eq!(
            big_int_decimal(&[0, 0, 0, 0, 0, 0, 0, 0, 1]),
            "18446744073709551616"
        );
        // -(2**64)
        assert_eq!(
            big_int_decimal(&[0, 0, 0, 0, 0, 0, 0, 0, 0xff]),
            "-18446744073709551616"
        );
    }
}
