//! The one pass over a snapshot's pickle: each opcode decoded once, checked, and built
//! (`build.rs`, into `value.rs`'s values) before the next is read. The pass refuses:
//! - every opcode a snapshot never holds: globals (`GLOBAL`, `STACK_GLOBAL`, `INST`, `OBJ`,
//!   `NEWOBJ`, `REDUCE`, `BUILD`, the extension registry), persistent ids, out-of-band
//!   buffers, bytearrays and sets;
//! - a pickle that would make the reader build more than `Limits::max_values` values (a
//!   memo reference is one value: it shares what it names rather than copying it), more
//!   than `max_allocated` strings and containers, more than `max_memo` stored values, or
//!   that puts more than `bounds::SNAPSHOT_STACK` values on its stack at once. Each count
//!   is checked at the opcode that passes it, before that opcode builds anything, so a
//!   pickle over them costs what the limits allow and no more;
//! - a truncated pickle, a stack that underflows, a cycle, nesting deeper than 64, or bytes
//!   after the pickle's end;
//!
//! and says in one line what is wrong, at which byte.
//!
//! Why our own reader and not a crate: no maintained pickle crate reads PyTorch's
//! memo-shared snapshots fast. `pickled` 2.0.0-alpha9 (a serde-pickle fork, the one that
//! read them at all) took 1,638 ms of wall time and 593 MiB of peak RSS for a
//! 1,000,000-entry history (49.6 MB; `cargo bench --bench sites`, 2 cores, load average 3
//! to 5: its parse alone 1,264 ms of CPU, a third of it in a cycle-breaking pass it cannot
//! skip), after this guard had decoded every opcode once already; serde-pickle 1.2 fails
//! on every shared frame dict, and the others measured take 3 to 8 s. The subset a snapshot
//! uses is small and specified by Python's `pickletools`; one decoder that checks and builds
//! at once reads the same file in 358 ms of wall time (354 ms of CPU) and 154 MiB of peak
//! RSS, the file included (same benchmark, load average 3.5; docs/sites.md has the rest).

use super::build::Build;
use super::error::{ErrorKind, SitesError};
use super::limits::Limits;
use super::memo::{Memo, Slot, Stored, leaf};
use super::value::{NO_MEMO, Val};
use crate::safe_fs::bounds::SNAPSHOT_STACK;
use std::time::Instant;

/// How an opcode's argument is written after it.
#[derive(Clone, Copy)]
enum Arg {
    None,
    Fixed(usize),
    /// Up to a newline.
    Line,
    /// Two lines (a global's module and name).
    TwoLines,
    /// A little-endian length of this many bytes, then that many bytes.
    Counted(usize),
}

/// What an opcode does to the stack, as far as weights go.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Mark,
    Stop,
    Pop,
    PopMark,
    /// Pushes one scalar.
    Scalar,
    /// Pushes one string or bytes (weighted by length).
    Text,
    /// Pushes an empty container.
    Empty,
    /// Pops to the mark and pushes a container of those.
    FromMark,
    /// Pops `n` and pushes a tuple of them.
    Tuple(usize),
    /// Pops `n` values into the container under them.
    Into(usize),
    /// Pops to the mark, into the container under the mark.
    IntoFromMark,
    Memoize,
    /// PUT-style: memoizes the top under the id in the argument.
    Put,
    Get,
    /// No effect on the stack (PROTO, FRAME).
    Nothing,
    /// Never in a snapshot.
    Refused(&'static str),
}

fn opcode(code: u8) -> Option<(Op, Arg)> {
    use Arg::{Counted, Fixed, Line};
    let global = "names a Python global";
    let object = "builds a Python object";
    Some(match code {
        b'(' => (Op::Mark, Arg::None),
        b'.' => (Op::Stop, Arg::None),
        b'0' => (Op::Pop, Arg::None),
        b'1' => (Op::PopMark, Arg::None),
        b'2' => (Op::Refused("copies values with DUP"), Arg::None),
        b'F' | b'I' | b'L' => (Op::Scalar, Line),
        b'J' => (Op::Scalar, Fixed(4)),
        b'K' => (Op::Scalar, Fixed(1)),
        b'M' => (Op::Scalar, Fixed(2)),
        b'N' | 0x88 | 0x89 => (Op::Scalar, Arg::None),
        b'G' => (Op::Scalar, Fixed(8)),
        0x8a => (Op::Text, Counted(1)),
        0x8b => (Op::Text, Counted(4)),
        b'P' => (Op::Refused("uses persistent ids"), Line),
        b'Q' => (Op::Refused("uses persistent ids"), Arg::None),
        b'R' => (Op::Refused("calls a Python object (REDUCE)"), Arg::None),
        b'S' | b'V' => (Op::Text, Line),
        b'T' | b'X' | b'B' => (Op::Text, Counted(4)),
        b'U' | b'C' | 0x8c => (Op::Text, Counted(1)),
        0x8d | 0x8e => (Op::Text, Counted(8)),
        b'a' => (Op::Into(1), Arg::None),
        b's' => (Op::Into(2), Arg::None),
        b'e' | b'u' | 0x90 => (Op::IntoFromMark, Arg::None),
        b'b' => (Op::Refused(object), Arg::None),
        b'c' => (Op::Refused(global), Arg::TwoLines),
        b'i' => (Op::Refused(object), Arg::TwoLines),
        b'o' | 0x81 | 0x92 => (Op::Refused(object), Arg::None),
        0x93 => (Op::Refused(global), Arg::None),
        0x82 => (Op::Refused(global), Fixed(1)),
        0x83 => (Op::Refused(global), Fixed(2)),
        0x84 => (Op::Refused(global), Fixed(4)),
        0x96 => (Op::Refused("holds a bytearray"), Counted(8)),
        0x97 | 0x98 => (Op::Refused("uses out-of-band buffers"), Arg::None),
        b'd' | b'l' | b't' | 0x91 => (Op::FromMark, Arg::None),
        b'}' | b']' | b')' | 0x8f => (Op::Empty, Arg::None),
        0x85 => (Op::Tuple(1), Arg::None),
        0x86 => (Op::Tuple(2), Arg::None),
        0x87 => (Op::Tuple(3), Arg::None),
        0x94 => (Op::Memoize, Arg::None),
        b'p' => (Op::Put, Line),
        b'q' => (Op::Put, Fixed(1)),
        b'r' => (Op::Put, Fixed(4)),
        b'g' => (Op::Get, Line),
        b'h' => (Op::Get, Fixed(1)),
        b'j' => (Op::Get, Fixed(4)),
        0x80 => (Op::Nothing, Fixed(1)),
        0x95 => (Op::Nothing, Fixed(8)),
        _ => return None,
    })
}

/// What a pickle cost to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Census {
    /// Values built.
    pub values: u64,
    /// Of those, strings, bytes and containers.
    pub allocated: u64,
    /// Values stored in the memo.
    pub memo: u64,
}

/// Values nest no deeper than this: a snapshot nests seven deep (the root, the traces,
/// a device's trace, an entry, its frames, a frame, a value). The bound keeps every
/// recursive walk of the values far from the end of the stack.
pub const MAX_NESTING: u32 = 64;

/// Decodes, checks and builds `bytes`; see the module's comment. The root value, and what
/// it cost.
pub(crate) fn decode(
    bytes: &[u8],
    limits: &Limits,
    started: Instant,
    build: &mut Build<'_>,
) -> Result<(Val, Census), SitesError> {
    let deadline = limits.deadline;
    let not = |line: String| Err(SitesError::new(ErrorKind::NotASnapshot, line));
    let mut stack: Vec<Slot> = Vec::new();
    let mut marks: Vec<usize> = Vec::new();
    let mut memo = Memo::new(limits.huge_pages);
    let mut items: Vec<Val> = Vec::new();
    let mut values: u64 = 0;
    let mut allocated: u64 = 0;
    let mut pos = 0usize;
    let mut ops = 0u64;
    loop {
        if let Some(next) = quick_step(
            bytes,
            pos,
            &mut Counts {
                values: &mut values,
                allocated: &mut allocated,
                ops: &mut ops,
            },
            limits,
            &mut stack,
            &mut marks,
            &mut memo,
        ) {
            pos = next;
            continue;
        }
        let at = pos;
        let truncated = || {
            not(format!(
                "not a memory snapshot: the pickle is truncated at byte {at}"
            ))
        };
        let Some(&code) = bytes.get(pos) else {
            return truncated();
        };
        let Some((op, arg)) = opcode(code) else {
            return not(format!(
                "not a memory snapshot: byte {at} is not a pickle opcode (0x{code:02x})"
            ));
        };
        let Some((arg_bytes, next)) = take(bytes, pos + 1, arg) else {
            return truncated();
        };
        pos = next;
        ops += 1;
        if ops.is_multiple_of(1 << 20) && started.elapsed() > deadline {
            return Err(super::limits::past_deadline(deadline));
        }
        let floor = marks.last().copied().unwrap_or(0);
        let underflow = || {
            not(format!(
                "not a memory snapshot: the pickle's stack underflows at byte {at}"
            ))
        };
        // The counts this opcode adds, checked before it builds anything.
        let (adds, allocates) = match op {
            Op::Scalar | Op::Get => (1, 0),
            Op::Text | Op::Empty | Op::FromMark | Op::Tuple(_) => (1, 1),
            _ => (0, 0),
        };
        if let Some(over) = over_a_limit(
            limits,
            values + adds,
            allocated + allocates,
            memo.len() + usize::from(matches!(op, Op::Memoize | Op::Put)),
            stack.len() + usize::from(adds > 0),
            at,
        ) {
            return Err(SitesError::new(ErrorKind::Limit, over));
        }
        values += adds;
        allocated += allocates;
        match op {
            Op::Refused(what) => {
                let named = if code == b'c' || code == b'i' {
                    let name = String::from_utf8_lossy(arg_bytes).replace('\n', ".");
                    let name = crate::text::clean(&name);
                    format!(" (`{name}`)")
                } else {
                    String::new()
                };
                return Err(SitesError::new(
                    ErrorKind::Refused,
                    format!(
                        "refused: the pickle {what}{named} at byte {at}; a memory snapshot holds only plain values, and vramscope never runs code from a file"
                    ),
                ));
            }
            Op::Stop => {
                if stack.len() != 1 || !marks.is_empty() {
                    return not(format!(
                        "not a memory snapshot: the pickle ends at byte {at} with {} values on its stack",
                        stack.len()
                    ));
                }
                if pos != bytes.len() {
                    return not(format!(
                        "not a memory snapshot: {} bytes follow the pickle's end",
                        bytes.len() - pos
                    ));
                }
                let root = stack.first().map_or(Val::None, |s| s.val);
                return Ok((
                    root,
                    Census {
                        values,
                        allocated,
                        memo: memo.len() as u64,
                    },
                ));
            }
            Op::Nothing => {}
            Op::Mark => {
                // Marks nest no deeper than the values they build.
                if marks.len() >= MAX_NESTING as usize {
                    return not(format!(
                        "not a memory snapshot: marks nest deeper than {MAX_NESTING} at byte {at}"
                    ));
                }
                marks.push(stack.len());
            }
            Op::Pop => {
                if marks.last() == Some(&stack.len()) {
                    marks.pop();
                } else if stack.pop().is_none() {
                    return underflow();
                }
            }
            Op::PopMark => {
                let Some(mark) = marks.pop() else {
                    return underflow();
                };
                stack.truncate(mark);
            }
            Op::Scalar => stack.push(leaf(build.scalar(code, arg_bytes, at)?)),
            Op::Text => {
                let offset = next - arg_bytes.len();
                stack.push(leaf(build.text(code, arg_bytes, offset, at)?));
            }
            Op::Empty => {
                let val = build.empty(code, &stack, &marks, at)?;
                stack.push(Slot {
                    nesting: 1,
                    ..leaf(val)
                });
            }
            Op::Get => {
                let Some(id) = memo_id(arg_bytes, arg) else {
                    return not(format!("not a memory snapshot: a bad memo id at byte {at}"));
                };
                let Some(stored) = memo.get_mut(id) else {
                    return not(format!(
                        "not a memory snapshot: byte {at} refers to memo {id}, which was never stored"
                    ));
                };
                stack.push(stored.referenced(id));
            }
            Op::FromMark => {
                let Some(mark) = marks.pop() else {
                    return underflow();
                };
                items.clear();
                let nesting = 1 + deepest(stack.drain(mark..), &mut items);
                too_deep(nesting, at)?;
                let val = build.built_whole(code, &items, at)?;
                stack.push(Slot {
                    nesting,
                    ..leaf(val)
                });
            }
            Op::Tuple(n) => {
                if stack.len() < floor + n {
                    return underflow();
                }
                let from = stack.len() - n;
                items.clear();
                let nesting = 1 + deepest(stack.drain(from..), &mut items);
                too_deep(nesting, at)?;
                let val = build.built_whole(b't', &items, at)?;
                stack.push(Slot {
                    nesting,
                    ..leaf(val)
                });
            }
            Op::Into(n) => {
                if stack.len() < floor + n + 1 {
                    return underflow();
                }
                let from = stack.len() - n;
                items.clear();
                let child = deepest(stack.drain(from..), &mut items);
                let container = fill(&mut stack, &mut memo, child, at)?;
                build.fill(code, container, &items, &mut memo, at)?;
            }
            Op::IntoFromMark => {
                let Some(mark) = marks.pop() else {
                    return underflow();
                };
                // The container sits under the mark, above the mark before it.
                if mark <= marks.last().copied().unwrap_or(0) {
                    return underflow();
                }
                items.clear();
                let child = deepest(stack.drain(mark..), &mut items);
                let container = fill(&mut stack, &mut memo, child, at)?;
                build.fill(code, container, &items, &mut memo, at)?;
            }
            Op::Memoize | Op::Put => {
                let id = if op == Op::Memoize {
                    u32::try_from(memo.len()).unwrap_or(u32::MAX)
                } else {
                    match memo_id(arg_bytes, arg) {
                        Some(id) => id,
                        None => {
                            return not(format!(
                                "not a memory snapshot: a bad memo id at byte {at}"
                            ));
                        }
                    }
                };
                if stack.len() == floor {
                    return underflow();
                }
                // Python's pickler numbers stored values from 0, so an id is below the
                // values built; a larger one only makes a reader size its memo for it.
                if u64::from(id) > values {
                    return not(format!(
                        "not a memory snapshot: memo id {id} at byte {at} is larger than the values built so far"
                    ));
                }
                // Python's pickler never stores twice under one id; reusing one would let a
                // value be filled after a reference to it went unseen.
                if memo.contains(id) || id == NO_MEMO {
                    return not(format!(
                        "not a memory snapshot: memo {id} is stored twice (byte {at})"
                    ));
                }
                let Some(top) = stack.last_mut() else {
                    return underflow();
                };
                // Python's pickler stores a value once: a second id for the same slot would
                // leave the first naming a container after the reader let it go.
                if top.memo.is_some() && !top.reference {
                    return not(format!(
                        "not a memory snapshot: the value at byte {at} is stored in the memo twice"
                    ));
                }
                memo.insert(
                    id,
                    Stored {
                        val: top.val,
                        nesting: top.nesting,
                        references: 0,
                    },
                );
                if !top.reference {
                    top.memo = Some(id);
                    if let Val::Node(node) = top.val {
                        build.tree.set_memo_of(node, id);
                    }
                }
            }
        }
    }
}

/// The pass's running counts, for `quick_step`.
struct Counts<'a> {
    values: &'a mut u64,
    allocated: &'a mut u64,
    ops: &'a mut u64,
}

/// The opcodes that make up most of a snapshot, done without the general path's table and
/// argument decoding: a memo reference (`BINGET`, half of a 100,000-entry history's 1.9
/// million opcodes: every key, frame and shared string), `MARK`, and the small integers
/// (`BININT1`, `BININT`, `LONG1` up to 8 bytes). Each does what the general path does,
/// counts included. Anything it would have to refuse (a limit reached, a truncated
/// argument, an unknown memo id), and every opcode on which the deadline is checked, it
/// leaves to the general path, which says what is wrong: `None`. Else where the next
/// opcode starts.
#[inline(always)]
fn quick_step(
    bytes: &[u8],
    pos: usize,
    counts: &mut Counts<'_>,
    limits: &Limits,
    stack: &mut Vec<Slot>,
    marks: &mut Vec<usize>,
    memo: &mut Memo,
) -> Option<usize> {
    let code = *bytes.get(pos)?;
    if (*counts.ops + 1).is_multiple_of(1 << 20) {
        return None;
    }
    // Whether one more value fits: the other counts only grow where they are checked.
    let room = *counts.values < limits.max_values && stack.len() < SNAPSHOT_STACK;
    let next = match code {
        b'h' if room => {
            let id = u32::from(*bytes.get(pos + 1)?);
            let stored = memo.get_mut(id)?;
            stack.push(stored.referenced(id));
            *counts.values += 1;
            pos + 2
        }
        b'(' if marks.len() < MAX_NESTING as usize => {
            marks.push(stack.len());
            pos + 1
        }
        b'K' if room => {
            let v = *bytes.get(pos + 1)?;
            stack.push(leaf(Val::Int(i64::from(v))));
            *counts.values += 1;
            pos + 2
        }
        b'J' if room => {
            let le: [u8; 4] = bytes.get(pos + 1..pos + 5)?.try_into().ok()?;
            stack.push(leaf(Val::Int(i64::from(i32::from_le_bytes(le)))));
            *counts.values += 1;
            pos + 5
        }
        // A LONG1 is counted as the general path counts text: one value, one allocation.
        0x8a if room && *counts.allocated < limits.max_allocated => {
            let n = usize::from(*bytes.get(pos + 1)?);
            if n > 8 {
                return None;
            }
            let digits = bytes.get(pos + 2..pos + 2 + n)?;
            stack.push(leaf(Val::Int(super::build::sign_extended(digits))));
            *counts.values += 1;
            *counts.allocated += 1;
            pos + 2 + n
        }
        _ => return None,
    };
    *counts.ops += 1;
    Some(next)
}

/// Which count passed its limit, as the line that says so.
fn over_a_limit(
    limits: &Limits,
    values: u64,
    allocated: u64,
    memo: usize,
    stack: usize,
    at: usize,
) -> Option<String> {
    let memo = memo as u64;
    if values > limits.max_values {
        let max = limits.max_values;
        Some(format!(
            "refused: reading this pickle would build more than {max} values (the limit on a snapshot's size in memory)"
        ))
    } else if allocated > limits.max_allocated {
        let max = limits.max_allocated;
        Some(format!(
            "refused: reading this pickle would build more than {max} strings and containers (the limit on a snapshot's size in memory)"
        ))
    } else if memo > limits.max_memo {
        let max = limits.max_memo;
        Some(format!(
            "refused: the pickle stores more than {max} values in its memo (the limit on a snapshot's size in memory)"
        ))
    } else if stack > SNAPSHOT_STACK {
        Some(format!(
            "refused: the pickle holds more than {SNAPSHOT_STACK} values on its stack at byte {at} (Python's pickler puts at most 1,000 between a mark and the opcode that takes them)"
        ))
    } else {
        None
    }
}

/// A container built whole (a tuple, or protocol 0's `LIST` and `DICT`) nests within the
/// bound as one filled item by item does (`fill`).
fn too_deep(nesting: u32, at: usize) -> Result<(), SitesError> {
    if nesting > MAX_NESTING {
        return Err(SitesError::new(
            ErrorKind::NotASnapshot,
            format!("not a memory snapshot: values nest deeper than {MAX_NESTING} at byte {at}"),
        ));
    }
    Ok(())
}

/// How deeply the drained `slots` nest, their values put in `items`.
fn deepest(slots: impl Iterator<Item = Slot>, items: &mut Vec<Val>) -> u32 {
    let mut deepest = 0;
    for slot in slots {
        deepest = deepest.max(slot.nesting);
        items.push(slot.val);
    }
    deepest
}

/// Puts values nesting `child` deep into the container on top of the stack. Python's
/// pickler fills a container through the slot that made it, before anything refers to it;
/// filling one through a reference, or after a reference to it, is how a pickle makes a
/// cycle or hides how deep it nests, so it is refused.
/// The container's value.
fn fill(stack: &mut [Slot], memo: &mut Memo, child: u32, at: usize) -> Result<Val, SitesError> {
    let Some(top) = stack.last_mut() else {
        return Err(SitesError::new(
            ErrorKind::NotASnapshot,
            format!("not a memory snapshot: the pickle's stack underflows at byte {at}"),
        ));
    };
    let stored = top.memo.and_then(|id| memo.get_mut(id));
    if top.reference || stored.as_ref().is_some_and(|s| s.references > 0) {
        return Err(SitesError::new(
            ErrorKind::NotASnapshot,
            format!(
                "not a memory snapshot: the pickle fills a value it already refers to at byte {at} (a cycle)"
            ),
        ));
    }
    top.nesting = top.nesting.max(child.saturating_add(1));
    if top.nesting > MAX_NESTING {
        return Err(SitesError::new(
            ErrorKind::NotASnapshot,
            format!("not a memory snapshot: values nest deeper than {MAX_NESTING} at byte {at}"),
        ));
    }
    if let Some(stored) = stored {
        stored.nesting = top.nesting;
    }
    Ok(top.val)
}

/// The argument of an opcode at `pos`, and where the next opcode starts.
fn take(bytes: &[u8], pos: usize, arg: Arg) -> Option<(&[u8], usize)> {
    match arg {
        Arg::None => Some((&[], pos)),
        Arg::Fixed(n) => {
            let end = pos.checked_add(n)?;
            Some((bytes.get(pos..end)?, end))
        }
        Arg::Line => {
            let rest = bytes.get(pos..)?;
            let nl = rest.iter().position(|&b| b == b'\n')?;
            Some((&rest[..nl], pos + nl + 1))
        }
        Arg::TwoLines => {
            let (_, next) = take(bytes, pos, Arg::Line)?;
            let (_, end) = take(bytes, next, Arg::Line)?;
            Some((bytes.get(pos..end - 1)?, end))
        }
        Arg::Counted(width) => {
            let len_end = pos.checked_add(width)?;
            let len_bytes = bytes.get(pos..len_end)?;
            let mut len = 0u64;
            for (i, b) in len_bytes.iter().enumerate() {
                len |= u64::from(*b) << (8 * i);
            }
            let len = usize::try_from(len).ok()?;
            let end = len_end.checked_add(len)?;
            Some((bytes.get(len_end..end)?, end))
        }
    }
}

fn memo_id(arg_bytes: &[u8], arg: Arg) -> Option<u32> {
    match arg {
        Arg::Line => std::str::from_utf8(arg_bytes).ok()?.trim().parse().ok(),
        _ => {
            let mut id = 0u32;
            for (i, b) in arg_bytes.iter().enumerate() {
                id |= u32::from(*b) << (8 * i);
            }
            Some(id)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn run(bytes: &[u8]) -> Result<Census, SitesError> {
        let limits = Limits {
            max_values: 1_000,
            max_allocated: 500,
            max_memo: 100,
            deadline: Duration::from_secs(5),
            ..Limits::default()
        };
        decode_with(bytes, &limits)
    }

    fn decode_with(bytes: &[u8], limits: &Limits) -> Result<Census, SitesError> {
        let mut build = Build::new(bytes, limits);
        decode(bytes, limits, Instant::now(), &mut build).map(|(_, census)| census)
    }

    #[test]
    fn a_plain_dict_passes_and_counts_its_values() {
        // pickle.dumps({'a': [1, 2]}, protocol=4): a dict, a key, a list, two ints.
        let bytes =
            b"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x01a\x94]\x94(K\x01K\x02es.";
        assert_eq!(run(bytes).unwrap().values, 5);
    }

    #[test]
    fn globals_are_refused_with_their_name() {
        // pickle.dumps(os.system) at protocol 0 names `posix system`.
        let e = run(b"cposix\nsystem\n(S'touch x'\ntR.").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Refused);
        assert!(e.to_string().contains("`posix.system`"), "{e}");
        let e = run(b"\x80\x04\x8c\x05posix\x8c\x06system\x93.").unwrap_err();
        assert!(e.to_string().contains("names a Python global"), "{e}");
    }

    #[test]
    fn more_values_than_the_limit_are_refused_before_any_is_built() {
        let mut p = b"\x80\x04](".to_vec();
        p.extend(std::iter::repeat_n(*b"K\x01", 2_000).flatten());
        p.extend_from_slice(b"e.");
        let e = run(&p).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Limit, "{e}");
        assert!(e.to_string().contains("more than 1000 values"), "{e}");
    }

    #[test]
    fn strings_containers_memo_entries_and_a_deep_stack_have_their_own_limits() {
        let batched = |item: &[u8], n: usize| {
            let mut p = b"\x80\x04]".to_vec();
            for chunk in 0..n.div_ceil(100) {
                p.push(b'(');
                for _ in 0..(n - chunk * 100).min(100) {
                    p.extend_from_slice(item);
                }
                p.push(b'e');
            }
            p.push(b'.');
            p
        };
        // 499 empty lists and the list holding them: within 500 allocations.
        let census = run(&batched(b"]", 499)).unwrap();
        assert_eq!(
            (census.values, census.allocated, census.memo),
            (500, 500, 0)
        );
        let e = run(&batched(b"]", 500)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Limit, "{e}");
        assert!(
            e.to_string()
                .contains("more than 500 strings and containers"),
            "{e}"
        );
        let e = run(&batched(b"\x8c\x00", 600)).unwrap_err();
        assert!(e.to_string().contains("strings and containers"), "{e}");
        // Each int stored in the memo.
        assert_eq!(run(&batched(b"K\x01\x94", 100)).unwrap().memo, 100);
        let e = run(&batched(b"K\x01\x94", 101)).unwrap_err();
        assert!(
            e.to_string().contains("more than 100 values in its memo"),
            "{e}"
        );
    }

    #[test]
    fn a_stack_deeper_than_python_ever_makes_is_refused_as_it_grows() {
        // One mark, then ints without end: refused once the stack passes its bound, not at
        // the values' limit or the file's end.
        let mut p = b"\x80\x04](".to_vec();
        p.extend(std::iter::repeat_n(b'N', SNAPSHOT_STACK + 10));
        p.extend_from_slice(b"e.");
        let limits = Limits::default();
        let e = decode_with(&p, &limits).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Limit, "{e}");
        let at = 3 + SNAPSHOT_STACK;
        assert!(
            e.to_string().contains(&format!(
                "more than {SNAPSHOT_STACK} values on its stack at byte {at}"
            )),
            "{e}"
        );
    }

    #[test]
    fn the_quick_opcodes_are_refused_where_the_general_path_refuses_them() {
        // Memo references past the stack's bound: refused at the reference that passes it.
        let mut p = b"\x80\x04]\x94(".to_vec();
        p.extend(std::iter::repeat_n(*b"h\x00", SNAPSHOT_STACK + 10).flatten());
        p.extend_from_slice(b"e.");
        let e = decode_with(&p, &Limits::default()).unwrap_err();
        let at = 5 + 2 * (SNAPSHOT_STACK - 1);
        assert!(
            e.to_string().contains(&format!(
                "more than {SNAPSHOT_STACK} values on its stack at byte {at}"
            )),
            "{e}"
        );
        // LONG1 counts as a string does, and a truncated one is named.
        let mut p = b"\x80\x04](".to_vec();
        p.extend(std::iter::repeat_n(*b"\x8a\x01\x05", 600).flatten());
        p.extend_from_slice(b"e.");
        let e = run(&p).unwrap_err();
        assert!(e.to_string().contains("strings and containers"), "{e}");
        let e = run(b"\x80\x04]\x8a\x02\x05").unwrap_err();
        assert!(e.to_string().contains("truncated at byte 3"), "{e}");
        // What the quick path built is what the values are: [-1, 300, -129, 7, ref].
        let bytes = b"\x80\x04](J\xff\xff\xff\xffK\xff\x8a\x02\x7f\xff\x8a\x01\x07\x94h\x00e.";
        let limits = Limits::default();
        let mut build = Build::new(bytes, &limits);
        let (root, census) = decode(bytes, &limits, Instant::now(), &mut build).unwrap();
        assert_eq!(census.values, 6);
        let Val::Node(id) = root else {
            panic!("{root:?}")
        };
        match build.tree.node(id) {
            Some(super::super::value::Node::List(items)) => assert_eq!(
                items,
                &[
                    Val::Int(-1),
                    Val::Int(255),
                    Val::Int(-129),
                    Val::Int(7),
                    Val::Int(7)
                ]
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn cycles_and_deep_nesting_are_refused() {
        // l = []; l.append(l): a list filled with a reference to itself.
        let e = run(b"\x80\x04]\x94h\x00a.").unwrap_err();
        assert!(e.to_string().contains("(a cycle)"), "{e}");
        // 100 lists, each in the one before.
        let mut p = b"\x80\x04".to_vec();
        p.extend(std::iter::repeat_n(b']', 100));
        p.extend(std::iter::repeat_n(b'a', 99));
        p.push(b'.');
        let e = run(&p).unwrap_err();
        assert!(e.to_string().contains("nest deeper than 64"), "{e}");
        // A shared frame, as torch writes them, is fine: [f, f] with f memoized.
        assert!(run(b"\x80\x04](}\x94h\x00e.").is_ok());
    }

    #[test]
    fn memo_ids_and_marks_that_would_make_the_crate_allocate_without_bound_are_refused() {
        // LONG_BINPUT 0xffffffff: the crate would size its memo for four billion values.
        let e = run(b"\x80\x04}r\xff\xff\xff\xff.").unwrap_err();
        assert!(e.to_string().contains("memo id 4294967295"), "{e}");
        // Python's own numbering passes: pickle.dumps([{}], protocol=2) puts 0 and 1.
        assert!(run(b"\x80\x02]q\x00}q\x01a.").is_ok());
        // 100 marks open at once.
        let mut p = b"\x80\x04".to_vec();
        p.extend(std::iter::repeat_n(b'(', 100));
        let e = run(&p).unwrap_err();
        assert!(e.to_string().contains("marks nest deeper than 64"), "{e}");
    }

    #[test]
    fn memo_references_must_name_a_stored_value() {
        let e = run(b"\x80\x04]h\x07.").unwrap_err();
        assert!(e.to_string().contains("memo 7"), "{e}");
    }

    #[test]
    fn truncation_and_trailing_bytes_are_named() {
        let e = run(b"\x80\x04}\x94").unwrap_err();
        assert!(e.to_string().contains("truncated"), "{e}");
        let e = run(b"\x80\x04}.x").unwrap_err();
        assert!(e.to_string().contains("follow the pickle's end"), "{e}");
        let e = run(b"\x80\x04\x8c\xff").unwrap_err();
        assert!(e.to_string().contains("truncated"), "{e}");
    }
}
