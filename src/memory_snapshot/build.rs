//! What each opcode builds, called by the one pass (`guard.rs`) once it has checked the
//! opcode: scalars and strings decoded from their argument bytes, containers made and
//! filled in the arena (`value.rs`). A device's history is read entry by entry as the
//! pickle appends them (`read.rs`), so a million-entry history is never held twice; which
//! list is a history is told from where the pickle builds it (`list_role`).

use super::error::{ErrorKind, SitesError};
use super::history::Reader;
use super::limits::Limits;
use super::memo::{Memo, Slot};
use super::value::{Node, Tree, Val};

/// The builder: the arena and the reader that turns histories into trace entries.
pub(crate) struct Build<'b> {
    pub(crate) tree: Tree<'b>,
    pub(crate) reader: Reader,
}

fn not(line: String) -> SitesError {
    SitesError::new(ErrorKind::NotASnapshot, line)
}

/// Whether the value in a slot is a container of this shape.
fn is(tree: &Tree<'_>, slot: Option<&Slot>, shape: fn(&Node) -> bool) -> bool {
    match slot.map(|s| s.val) {
        Some(Val::Node(id)) => tree.node(id).is_some_and(shape),
        _ => false,
    }
}

impl<'b> Build<'b> {
    pub(crate) fn new(bytes: &'b [u8], limits: &Limits) -> Self {
        Build {
            tree: Tree::new(bytes),
            reader: Reader::new(limits),
        }
    }

    /// `NONE`, the bools, the fixed-width ints, `BINFLOAT`, and protocol 0's text numbers.
    pub(crate) fn scalar(&self, code: u8, arg: &[u8], at: usize) -> Result<Val, SitesError> {
        let le = |n: usize| {
            let mut v = 0u64;
            for (i, b) in arg.iter().take(n).enumerate() {
                v |= u64::from(*b) << (8 * i);
            }
            v
        };
        let bad = || not(format!("not a memory snapshot: a bad number at byte {at}"));
        Ok(match code {
            b'N' => Val::None,
            0x88 => Val::Bool(true),
            0x89 => Val::Bool(false),
            b'K' | b'M' => Val::Int(le(2) as i64),
            b'J' => Val::Int(i64::from(le(4) as u32 as i32)),
            b'G' => {
                let mut be = [0u8; 8];
                be.copy_from_slice(arg.get(..8).ok_or_else(bad)?);
                Val::Float(f64::from_be_bytes(be))
            }
            _ => {
                let text = std::str::from_utf8(arg).map_err(|_| bad())?.trim();
                match (code, text) {
                    (b'I', "01") => Val::Bool(true),
                    (b'I', "00") => Val::Bool(false),
                    (b'F', _) => Val::Float(text.parse().map_err(|_| bad())?),
                    _ => Val::Int(text.trim_end_matches('L').parse().map_err(|_| bad())?),
                }
            }
        })
    }

    /// The strings, bytes and `LONG1`/`LONG4`, left where they are in the file (`offset`:
    /// where `arg` starts in it).
    pub(crate) fn text(
        &self,
        code: u8,
        arg: &[u8],
        offset: usize,
        at: usize,
    ) -> Result<Val, SitesError> {
        let far = || not(format!("not a memory snapshot: byte {at} lies past 4 GiB"));
        let at32 = u32::try_from(offset).map_err(|_| far())?;
        let len = u32::try_from(arg.len()).map_err(|_| far())?;
        Ok(match code {
            0x8a | 0x8b if arg.len() <= 8 => Val::Int(sign_extended(arg)),
            0x8a | 0x8b => Val::BigInt { at: at32, len },
            0x8c | b'X' | 0x8d => {
                if std::str::from_utf8(arg).is_err() {
                    return Err(not(format!(
                        "not a memory snapshot: the string at byte {at} is not UTF-8"
                    )));
                }
                Val::Str { at: at32, len }
            }
            b'C' | b'B' | 0x8e | b'T' | b'U' => Val::Bytes { at: at32, len },
            _ => Val::OldText,
        })
    }

    /// `EMPTY_LIST`, `EMPTY_DICT`, `EMPTY_TUPLE`.
    pub(crate) fn empty(
        &mut self,
        code: u8,
        stack: &[Slot],
        marks: &[usize],
        at: usize,
    ) -> Result<Val, SitesError> {
        Ok(match code {
            b']' => {
                let node = match self.list_role(stack, marks) {
                    Node::List(_) => Node::List(self.tree.empty_items()),
                    other => other,
                };
                self.tree.add(node)
            }
            b'}' => {
                let pairs = self.tree.empty_pairs();
                self.tree.add(Node::Dict(pairs))
            }
            b')' => self.tree.add(Node::Tuple(Vec::new())),
            _ => return Err(set_at(at)),
        })
    }

    /// What a new empty list is, from where it is built: the value of `device_traces` in the
    /// dict at the bottom of the stack (the root, as Python's pickler writes it) is the list
    /// of histories, and a list built as an item of that one is a history. Python's pickler
    /// fills a container right after making it: its items follow it, after a `MARK` when
    /// there are several, so a new list is the value for the key just under it, or an item
    /// of the list under the last mark or just under it. A pickle laid out otherwise is read
    /// all the same (a history left as a plain list is read when the root is, `read.rs`).
    fn list_role(&self, stack: &[Slot], marks: &[usize]) -> Node {
        let tree = &self.tree;
        let top = stack.len();
        let mark = marks.last().copied();
        let keyed_in_root = top >= 2
            && is(tree, stack.first(), |n| matches!(n, Node::Dict(_)))
            && stack
                .get(top - 1)
                .and_then(|s| tree.str_bytes(s.val))
                .is_some_and(|k| k == b"device_traces")
            && match mark {
                None => top == 2,
                Some(m) => marks.len() == 1 && m == 1 && (top - 1 - m).is_multiple_of(2),
            };
        if keyed_in_root {
            return Node::DeviceTraces(Vec::new());
        }
        let device_traces = |n: &Node| matches!(n, Node::DeviceTraces(_));
        let under_mark = mark.is_some_and(|m| m >= 1 && is(tree, stack.get(m - 1), device_traces));
        let just_under =
            top >= 1 && mark.is_none_or(|m| top > m) && is(tree, stack.get(top - 1), device_traces);
        if under_mark || just_under {
            Node::Trace(Box::default())
        } else {
            Node::List(Vec::new())
        }
    }

    /// `LIST`, `DICT`, `TUPLE` and `TUPLE1`-`TUPLE3` (`code` `t` for all tuples).
    pub(crate) fn built_whole(
        &mut self,
        code: u8,
        items: &[Val],
        at: usize,
    ) -> Result<Val, SitesError> {
        Ok(match code {
            b'l' => self.tree.add(Node::List(items.to_vec())),
            b't' => self.tree.add(Node::Tuple(items.to_vec())),
            b'd' => self.tree.add(Node::Dict(pairs(items, at)?)),
            _ => return Err(set_at(at)),
        })
    }

    /// `APPEND(S)` and `SETITEM(S)`: `items` into `container`.
    pub(crate) fn fill(
        &mut self,
        code: u8,
        container: Val,
        items: &[Val],
        memo: &mut Memo,
        at: usize,
    ) -> Result<(), SitesError> {
        let appends = matches!(code, b'a' | b'e');
        if !appends && !matches!(code, b's' | b'u') {
            return Err(set_at(at));
        }
        let Val::Node(id) = container else {
            return Err(wrong_fill(self.tree.kind(container), appends, at));
        };
        if appends && matches!(self.tree.node(id), Some(Node::Trace(_))) {
            // The bytes left bound the entries still to come (each takes at least 16 of
            // them unless it is a reference): a history reserved for them at its first
            // batch is never copied to grow, and the pages it does not fill cost no memory.
            let room = self.tree.bytes.len().saturating_sub(at) / 16;
            return self
                .reader
                .append_entries(&mut self.tree, Some(memo), id, items, room);
        }
        match (self.tree.node_mut(id), appends) {
            (Some(Node::List(list) | Node::DeviceTraces(list)), true) => {
                list.extend_from_slice(items);
                Ok(())
            }
            (Some(Node::Dict(dict)), false) => {
                even(items, at)?;
                dict.extend(items.chunks_exact(2).map(|kv| (kv[0], kv[1])));
                Ok(())
            }
            _ => Err(wrong_fill(self.tree.kind(container), appends, at)),
        }
    }
}

/// Refuses a dict's items that end with a key without its value.
fn even(items: &[Val], at: usize) -> Result<(), SitesError> {
    if !items.len().is_multiple_of(2) {
        return Err(not(format!(
            "not a memory snapshot: a dict at byte {at} has a key without a value"
        )));
    }
    Ok(())
}

fn pairs(items: &[Val], at: usize) -> Result<Vec<(Val, Val)>, SitesError> {
    even(items, at)?;
    Ok(items.chunks_exact(2).map(|kv| (kv[0], kv[1])).collect())
}

fn wrong_fill(kind: &str, appends: bool, at: usize) -> SitesError {
    let what = if appends {
        "appends to"
    } else {
        "sets an item of"
    };
    not(format!(
        "not a memory snapshot: byte {at} {what} {kind}, which cannot take it"
    ))
}

fn set_at(at: usize) -> SitesError {
    not(format!(
        "not a memory snapshot: the pickle holds a set at byte {at} (a snapshot holds dicts, lists and tuples)"
    ))
}

/// A little-endian two's-complement integer of at most 8 bytes, sign-extended from its
/// width (`LONG1`'s encoding; no bytes is 0).
pub(super) fn sign_extended(le: &[u8]) -> i64 {
    let mut v = 0u64;
    for (i, b) in le.iter().enumerate() {
        v |= u64::from(*b) << (8 * i);
    }
    let unused = 64 - 8 * le.len() as u32;
    if unused == 64 {
        0
    } else {
        ((v << unused) as i64) >> unused
    }
}
