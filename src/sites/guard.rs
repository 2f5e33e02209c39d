//! The pickle checked opcode by opcode before serde-pickle reads it. serde-pickle never runs
//! code, but it builds what a pickle asks for: `DUP` copies the stack's top and every memo
//! reference copies what it names, so a small crafted file can ask for more memory than
//! any machine has. This walk, which builds nothing, refuses:
//! - every opcode a snapshot never holds: globals (`GLOBAL`, `STACK_GLOBAL`, `INST`, `OBJ`,
//!   `NEWOBJ`, `REDUCE`, `BUILD`, the extension registry, persistent ids, out-of-band
//!   buffers: what would run code in Python), and `DUP` (which Python's pickler never
//!   writes);
//! - a pickle that would make the reader build more than `Limits::max_values` values,
//!   counting each value once where it is made and again every time a memo reference
//!   copies it;
//! - a truncated pickle, or bytes after its end.
//!
//! It only counts: the stack holds one weight per value, not the value.

use super::error::{ErrorKind, SitesError};
use std::collections::HashMap;
use std::time::Instant;

/// How an opcode's argument is written after it.
#[derive(Clone, Copy)]
enum Arg {
    None,
    Fixed(usize),
    /// Up to a newline.
    Line,
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
        b'c' => (Op::Refused(global), Line),
        b'i' => (Op::Refused(object), Line),
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

/// A value on the walk's stack: its weight, and the memo entry it stands for when it is a
/// memoized container (whose weight grows as items go into it).
#[derive(Clone, Copy)]
struct Slot {
    weight: u64,
    memo: Option<u32>,
}

/// What a checked pickle will cost to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Census {
    /// Values the reader will build, copies included.
    pub values: u64,
}

/// Walks `bytes` as a pickle without building it; see the module's comment.
pub fn check(
    bytes: &[u8],
    max_values: u64,
    started: Instant,
    deadline: std::time::Duration,
) -> Result<Census, SitesError> {
    let not = |line: String| Err(SitesError::new(ErrorKind::NotASnapshot, line));
    let mut stack: Vec<Slot> = Vec::new();
    let mut marks: Vec<usize> = Vec::new();
    let mut memo: HashMap<u32, u64> = HashMap::new();
    let mut gets: HashMap<u32, u64> = HashMap::new();
    let mut made: u64 = 0;
    let mut pos = 0usize;
    let mut ops = 0u64;
    loop {
        let at = pos;
        let Some(&code) = bytes.get(pos) else {
            return not(format!(
                "not a memory snapshot: the pickle is truncated at byte {at}"
            ));
        };
        pos += 1;
        let Some((op, arg)) = opcode(code) else {
            return not(format!(
                "not a memory snapshot: byte {at} is not a pickle opcode (0x{code:02x})"
            ));
        };
        let (arg_bytes, next) = match take(bytes, pos, arg) {
            Some(taken) => taken,
            None => {
                return not(format!(
                    "not a memory snapshot: the pickle is truncated at byte {at}"
                ));
            }
        };
        pos = next;
        ops += 1;
        if ops % (1 << 20) == 0 && started.elapsed() > deadline {
            return Err(SitesError::new(
                ErrorKind::Limit,
                format!(
                    "gave up reading after {} s (the deadline)",
                    deadline.as_secs()
                ),
            ));
        }
        let underflow = || {
            not(format!(
                "not a memory snapshot: the pickle's stack underflows at byte {at}"
            ))
        };
        match op {
            Op::Refused(what) => {
                let named = if code == b'c' || code == b'i' {
                    let name = String::from_utf8_lossy(arg_bytes).replace('\n', ".");
                    format!(" (`{}`)", name.trim_end_matches('.'))
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
                break;
            }
            Op::Nothing => {}
            Op::Mark => marks.push(stack.len()),
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
            Op::Scalar | Op::Empty => {
                made += 1;
                stack.push(Slot {
                    weight: 1,
                    memo: None,
                });
            }
            Op::Text => {
                let weight = 1 + text_len(arg_bytes, arg) / 64;
                made += weight;
                stack.push(Slot { weight, memo: None });
            }
            Op::FromMark => {
                let Some(mark) = marks.pop() else {
                    return underflow();
                };
                if mark > stack.len() {
                    return underflow();
                }
                let weight = 1 + stack.drain(mark..).map(|s| s.weight).sum::<u64>();
                made += 1;
                stack.push(Slot { weight, memo: None });
            }
            Op::Tuple(n) => {
                if stack.len() < n + marks.last().copied().unwrap_or(0) {
                    return underflow();
                }
                let from = stack.len() - n;
                let weight = 1 + stack.drain(from..).map(|s| s.weight).sum::<u64>();
                made += 1;
                stack.push(Slot { weight, memo: None });
            }
            Op::Into(n) => {
                if stack.len() < n + 1 + marks.last().copied().unwrap_or(0) {
                    return underflow();
                }
                let from = stack.len() - n;
                let added: u64 = stack.drain(from..).map(|s| s.weight).sum();
                grow(&mut stack, &mut memo, added);
            }
            Op::IntoFromMark => {
                let Some(mark) = marks.pop() else {
                    return underflow();
                };
                if mark == 0 || mark > stack.len() {
                    return underflow();
                }
                let added: u64 = stack.drain(mark..).map(|s| s.weight).sum();
                grow(&mut stack, &mut memo, added);
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
                let Some(top) = stack.last_mut() else {
                    return underflow();
                };
                let weight = match top.memo {
                    Some(other) => memo.get(&other).copied().unwrap_or(1),
                    None => top.weight,
                };
                memo.insert(id, weight);
                *top = Slot {
                    weight: 1,
                    memo: Some(id),
                };
            }
            Op::Get => {
                let Some(id) = memo_id(arg_bytes, arg) else {
                    return not(format!("not a memory snapshot: a bad memo id at byte {at}"));
                };
                if !memo.contains_key(&id) {
                    return not(format!(
                        "not a memory snapshot: byte {at} refers to memo {id}, which was never stored"
                    ));
                }
                *gets.entry(id).or_insert(0) += 1;
                made += 1;
                stack.push(Slot {
                    weight: 1,
                    memo: Some(id),
                });
            }
        }
        if made > max_values {
            return too_many(max_values);
        }
    }
    // Each reference may make the reader copy what it names (serde-pickle resolves a memo
    // reference by cloning its value while other references to it remain).
    let mut values = made;
    for (id, count) in gets {
        let weight = memo.get(&id).copied().unwrap_or(1);
        values = values.saturating_add(count.saturating_mul(weight));
        if values > max_values {
            return too_many(max_values);
        }
    }
    Ok(Census { values })
}

fn too_many<T>(max_values: u64) -> Result<T, SitesError> {
    Err(SitesError::new(
        ErrorKind::Limit,
        format!(
            "refused: reading this pickle would build more than {max_values} values (the limit on a snapshot's size in memory)"
        ),
    ))
}

/// Adds `added` to the container now on top of the stack (or to its memo entry).
fn grow(stack: &mut [Slot], memo: &mut HashMap<u32, u64>, added: u64) {
    if let Some(top) = stack.last_mut() {
        match top.memo {
            Some(id) => {
                if let Some(weight) = memo.get_mut(&id) {
                    *weight = weight.saturating_add(added);
                }
            }
            None => top.weight = top.weight.saturating_add(added),
        }
    }
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

fn text_len(arg_bytes: &[u8], _arg: Arg) -> u64 {
    u64::try_from(arg_bytes.len()).unwrap_or(u64::MAX)
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
        check(bytes, 1_000, Instant::now(), Duration::from_secs(5))
    }

    #[test]
    fn a_plain_dict_passes_and_counts_its_values() {
        // pickle.dumps({'a': [1, 2]}, protocol=4)
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
    fn memo_copies_count_against_the_limit() {
        // A list of 100 ints memoized, then referenced 20 times: 2,000 copied values.
        let mut p = b"\x80\x04](".to_vec();
        p.extend(std::iter::repeat_n(*b"K\x01", 100).flatten());
        p.extend_from_slice(b"e\x94](");
        for _ in 0..20 {
            p.extend_from_slice(b"h\x00");
        }
        p.extend_from_slice(b"e.");
        let e = run(&p).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Limit, "{e}");
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
