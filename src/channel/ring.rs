//! Taking new records from a ring (§4) with exact loss accounting: every record appended up to
//! the last one taken is either accepted (stable seq and a good CRC) or counted lost, and a
//! torn or overwritten record is never accepted.

use std::fs::File;

use super::copies::read_exact_at;
use super::decode::{crc_ok, u64_at};
use super::sections::Section;

/// Records taken in one poll at most; the rest wait for the next poll (and are only lost if
/// overwritten meanwhile), so a hostile head cannot make one poll read gigabytes.
const MAX_RECORDS_PER_POLL: u64 = 1 << 16;
/// Bytes read per poll at most; records above this size are read one by one.
const MAX_BYTES_PER_POLL: u64 = 8 << 20;
const CONTIGUOUS_RECORD_LIMIT: u64 = 4096;

/// One ring of a channel and the reader's place in it.
pub struct Ring {
    name: &'static str,
    section: Section,
    /// The v1 record size: the bytes we read and check of each record.
    v1_size: usize,
    crc_start: usize,
    crc_at: usize,
    /// The first record not yet taken.
    pub next: u64,
    /// Records lost since open.
    pub lost: u64,
    first: Vec<u8>,
    second: Vec<u8>,
}

impl Ring {
    pub fn new(
        name: &'static str,
        section: Section,
        v1_size: usize,
        crc: (usize, usize),
        next: u64,
    ) -> Ring {
        Ring {
            name,
            section,
            v1_size,
            crc_start: crc.0,
            crc_at: crc.1,
            next,
            lost: 0,
            first: Vec::new(),
            second: Vec::new(),
        }
    }

    /// Takes the records up to `head` (read from the control block before calling) and decodes
    /// the accepted ones. An error is a reason to reject the channel.
    pub fn take<T>(
        &mut self,
        file: &File,
        head: u64,
        decode: impl Fn(&[u8]) -> T,
    ) -> Result<Vec<T>, String> {
        if head < self.next {
            return Err(format!(
                "{} head went backwards from {} to {head}",
                self.name, self.next
            ));
        }
        let cap = u64::from(self.section.capacity);
        if head - self.next > cap {
            self.lost += head - cap - self.next;
            self.next = head - cap;
        }
        let per_poll = (MAX_BYTES_PER_POLL / u64::from(self.section.record_size).max(1))
            .clamp(1, MAX_RECORDS_PER_POLL);
        let end = head.min(self.next.saturating_add(per_poll));
        let count = (end - self.next) as usize;
        if count == 0 {
            return Ok(Vec::new());
        }
        // Two full copies: the seq inside the first is the one read with the payload (`s1`),
        // the seq inside the second was read after the payload was copied (`s2`).
        let stride = self.read(file, count, true)?;
        self.read(file, count, false)?;
        let mut out = Vec::new();
        let mut idx = self.next;
        while idx < end {
            let i = (idx - self.next) as usize;
            let rec = self.first.get(i * stride..i * stride + self.v1_size);
            let rec = rec.unwrap_or(&[]);
            let s1 = u128::from(u64_at(rec, 0));
            let done = 2 * u128::from(idx) + 2;
            if s1 < done {
                // Not finished yet (or never written): retry from here next poll.
                break;
            }
            if s1 > done {
                self.lost += 1;
            } else {
                let s2 = u128::from(u64_at(&self.second, i * stride));
                if s2 != s1 || !crc_ok(rec, self.crc_start, self.crc_at) {
                    self.lost += 1;
                } else {
                    out.push(decode(rec));
                }
            }
            idx += 1;
        }
        self.next = idx;
        Ok(out)
    }

    /// Copies records `next..next + count` into the first or second buffer and returns the
    /// stride between them there.
    fn read(&mut self, file: &File, count: usize, first: bool) -> Result<usize, String> {
        let cap = u64::from(self.section.capacity);
        let rs = u64::from(self.section.record_size);
        let buf = if first {
            &mut self.first
        } else {
            &mut self.second
        };
        let start = self.next & (cap - 1);
        if rs <= CONTIGUOUS_RECORD_LIMIT {
            // At most two spans: up to the end of the ring, then from its start.
            buf.resize(count * rs as usize, 0);
            let first_len = (count as u64).min(cap - start);
            let (a, b) = buf.split_at_mut((first_len * rs) as usize);
            read_exact_at(file, a, self.section.record(start))?;
            if !b.is_empty() {
                read_exact_at(file, b, self.section.offset)?;
            }
            return Ok(rs as usize);
        }
        buf.resize(count * self.v1_size, 0);
        for (i, rec) in buf.chunks_exact_mut(self.v1_size).enumerate() {
            let slot = (start + i as u64) & (cap - 1);
            read_exact_at(file, rec, self.section.record(slot))?;
        }
        Ok(self.v1_size)
    }
}
