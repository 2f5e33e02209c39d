//! The one pass's stack slots and memo: each value with how deeply it nests, the memo id
//! it was stored under and whether it is a reference, so that the pass can refuse cycles
//! and deep nesting, and the reader can tell a container nothing else refers to (which it
//! lets go once read).

use super::fast_hash::WordMap;
use super::value::Val;

/// A value on the pass's stack: the value, how deeply it nests, the memo id it was stored
/// under, and whether this slot is a reference to a value stored earlier (`GET`).
#[derive(Clone, Copy)]
pub(crate) struct Slot {
    pub(crate) val: Val,
    pub(super) nesting: u32,
    pub(super) memo: Option<u32>,
    pub(super) reference: bool,
}

pub(super) fn leaf(val: Val) -> Slot {
    Slot {
        val,
        nesting: 0,
        memo: None,
        reference: false,
    }
}

/// A stored value: what it is, how deeply it nests, and how often it has been referenced.
#[derive(Clone, Copy)]
pub(crate) struct Stored {
    pub(crate) val: Val,
    pub(super) nesting: u32,
    pub(crate) references: u32,
}

impl Stored {
    /// A reference to this value (a `GET` of memo `id`), counted as one.
    pub(super) fn referenced(&mut self, id: u32) -> Slot {
        self.references = self.references.saturating_add(1);
        Slot {
            val: self.val,
            nesting: self.nesting,
            memo: Some(id),
            reference: true,
        }
    }
}

/// Memo ids in Python's order (0, 1, 2, ... as `MEMOIZE` numbers them) go to chunks of this
/// many (6 MiB of address space each, resident only as far as they are filled): a million
/// stored values cost what they hold, not twice that as a doubling vector may.
const MEMO_CHUNK: usize = 1 << 18;

/// The stored values by memo id; an id out of Python's order (`PUT`) goes to a map.
#[derive(Default)]
pub(crate) struct Memo {
    seq: Vec<Vec<Stored>>,
    seq_len: usize,
    other: WordMap<u32, Stored>,
    /// Whether chunks are backed with 2 MiB pages (`Limits::huge_pages`).
    huge_pages: bool,
}

impl Memo {
    pub(super) fn new(huge_pages: bool) -> Self {
        Memo {
            huge_pages,
            ..Memo::default()
        }
    }

    pub(super) fn len(&self) -> usize {
        self.seq_len + self.other.len()
    }

    pub(super) fn contains(&self, id: u32) -> bool {
        (id as usize) < self.seq_len || self.other.contains_key(&id)
    }

    pub(crate) fn get_mut(&mut self, id: u32) -> Option<&mut Stored> {
        let i = id as usize;
        if i < self.seq_len {
            return self.seq.get_mut(i / MEMO_CHUNK)?.get_mut(i % MEMO_CHUNK);
        }
        self.other.get_mut(&id)
    }

    pub(super) fn insert(&mut self, id: u32, stored: Stored) {
        if id as usize == self.seq_len && !self.other.contains_key(&id) {
            if self.seq_len.is_multiple_of(MEMO_CHUNK) {
                let chunk = Vec::with_capacity(MEMO_CHUNK);
                if self.huge_pages {
                    super::huge_pages::advise(&chunk);
                }
                self.seq.push(chunk);
            }
            if let Some(chunk) = self.seq.last_mut() {
                chunk.push(stored);
                self.seq_len += 1;
            }
        } else {
            self.other.insert(id, stored);
        }
    }
}
