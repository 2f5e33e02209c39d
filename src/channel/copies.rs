//! Copies of the live part of a channel (state, control, status, spare and device slots) taken
//! with `pread`, never through a mapping, so a file that shrinks meanwhile gives a short read
//! and not a SIGBUS. Three copies in a row make a seqlock read (§3): the sequence numbers of
//! the first and the last bracket the fields, or the spare, of the middle one.

use std::borrow::Cow;
use std::fs::File;
use std::os::unix::fs::FileExt;

use super::decode::u64_at;
use super::layout::{control, device, header, spare, status};
use super::sections::Section;

/// Fills `buf` from offset `off`; a short read means the file shrank while we read it.
pub fn read_exact_at(file: &File, buf: &mut [u8], off: u64) -> Result<(), String> {
    let mut done = 0;
    while done < buf.len() {
        let at = off + done as u64;
        match file.read_at(&mut buf[done..], at) {
            Ok(0) => return Err(format!("short read at {at:#x}: the file shrank while read")),
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("read at {at:#x} failed: {e}")),
        }
    }
    Ok(())
}

/// Bytes `0..FIXED` hold state, heartbeat, control, status and the spare.
const FIXED: usize = spare::OFFSET + spare::SIZE;
/// A device section ending within this many bytes of the file's start is read with the fixed
/// part in a single `pread`, up to the last slot in use (the default layout with one device:
/// 1.25 KiB). Anything else is read slot by slot.
const ONE_READ_LIMIT: u64 = 64 * 1024;

/// One copy of the live part.
#[derive(Default)]
pub struct LiveCopy {
    buf: Vec<u8>,
    slot_base: usize,
    slot_stride: usize,
}

impl LiveCopy {
    /// Takes a copy of `file` whose device section is `devices`, covering at least `slots`
    /// device slots and every slot in use when the copy was taken.
    pub fn take(&mut self, file: &File, devices: &Section, slots: u64) -> Result<(), String> {
        let cap = u64::from(devices.capacity);
        if devices.end() <= ONE_READ_LIMIT {
            self.slot_base = devices.offset as usize;
            self.slot_stride = devices.record_size as usize;
            let mut covered = slots.min(cap);
            loop {
                let len = devices.record(covered).max(FIXED as u64) as usize;
                self.buf.resize(len, 0);
                read_exact_at(file, &mut self.buf, 0)?;
                // More slots in use than we guessed (rarely: a device was just added).
                let in_use = self.devices_in_use().min(cap);
                if in_use <= covered {
                    return Ok(());
                }
                covered = in_use;
            }
        }
        // Only exotic layouts get here; read the slots in use, each only up to its v1 size.
        self.buf.resize(FIXED, 0);
        read_exact_at(file, &mut self.buf, 0)?;
        let n = self.devices_in_use().min(cap);
        self.slot_base = FIXED;
        self.slot_stride = device::RECORD_SIZE;
        for i in 0..n {
            let at = self.buf.len();
            self.buf.resize(at + device::RECORD_SIZE, 0);
            read_exact_at(file, &mut self.buf[at..], devices.record(i))?;
        }
        Ok(())
    }

    fn word(&self, off: usize) -> u64 {
        u64_at(&self.buf, off)
    }

    pub fn state(&self) -> u64 {
        self.word(header::STATE)
    }

    pub fn heartbeat(&self) -> u64 {
        self.word(header::HEARTBEAT)
    }

    pub fn devices_in_use(&self) -> u64 {
        self.word(control::DEVICES_IN_USE)
    }

    pub fn strings_in_use(&self) -> u64 {
        self.word(control::STRINGS_IN_USE)
    }

    pub fn samples_head(&self) -> u64 {
        self.word(control::SAMPLES_HEAD)
    }

    pub fn events_head(&self) -> u64 {
        self.word(control::EVENTS_HEAD)
    }

    /// The status block, sequence number first.
    pub fn status(&self) -> &[u8] {
        self.buf
            .get(status::OFFSET..status::OFFSET + status::SIZE)
            .unwrap_or(&[])
    }

    /// Device slot `i` (its v1 part), empty if this copy does not hold it.
    pub fn slot(&self, i: usize) -> &[u8] {
        let start = self.slot_base + i * self.slot_stride;
        self.buf
            .get(start..start + device::RECORD_SIZE)
            .unwrap_or(&[])
    }

    /// The status as of the writer's last complete update, if this copy, taken between
    /// `before` and `after`, shows it (see `settled`).
    pub fn settled_status<'a>(
        &'a self,
        before: &LiveCopy,
        after: &LiveCopy,
    ) -> Option<Cow<'a, [u8]>> {
        let at = status::OFFSET as u64;
        self.settled(
            at,
            spare::STATUS_COPY,
            before.status(),
            self.status(),
            after.status(),
        )
    }

    /// Device slot `i`, at file offset `at`, as of the writer's last complete update, if this
    /// copy, taken between `before` and `after`, shows it (see `settled`).
    pub fn settled_slot<'a>(
        &'a self,
        i: usize,
        at: u64,
        before: &LiveCopy,
        after: &LiveCopy,
    ) -> Option<Cow<'a, [u8]>> {
        let copy = spare::DEVICE_COPY;
        self.settled(at, copy, before.slot(i), self.slot(i), after.slot(i))
    }

    /// A seqlocked block (§3) at file offset `at`, `block` being this copy of it and `before`
    /// and `after` the copies taken around this one, as of its writer's last complete update.
    /// The same even sequence in both: this copy's fields. The same odd one (the writer is
    /// inside an update, or was killed there): the `copy` bytes after the sequence as the
    /// spare kept them from before that update, if the spare names this block and this
    /// sequence. `None` otherwise: the writer moved on meanwhile, try again. The result reads
    /// like the block, sequence first; from the spare it carries the even sequence of the
    /// update the copy holds.
    fn settled<'a>(
        &'a self,
        at: u64,
        copy: usize,
        before: &[u8],
        block: &'a [u8],
        after: &[u8],
    ) -> Option<Cow<'a, [u8]>> {
        if block.len() < 8 {
            return None;
        }
        if stable(before, after) {
            return Some(Cow::Borrowed(block));
        }
        let seq = u64_at(before, 0);
        let inside = !before.is_empty() && !after.is_empty() && u64_at(after, 0) == seq;
        if !inside || seq.is_multiple_of(2) {
            return None;
        }
        if self.word(spare::SEQ) != seq || self.word(spare::BLOCK) != at {
            return None;
        }
        let kept = self
            .buf
            .get(spare::COPY..spare::COPY + copy.min(block.len() - 8))?;
        let mut image = Vec::with_capacity(block.len());
        image.extend_from_slice(&(seq - 1).to_le_bytes());
        image.extend_from_slice(kept);
        image.extend_from_slice(&block[image.len()..]);
        Some(Cow::Owned(image))
    }
}

/// Whether a seqlocked block is consistent between the copies before and after: present in
/// both, with equal and even sequence numbers.
pub fn stable(before: &[u8], after: &[u8]) -> bool {
    let (a, b) = (u64_at(before, 0), u64_at(after, 0));
    !before.is_empty() && !after.is_empty() && a == b && a.is_multiple_of(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_read_is_an_error_naming_where() {
        let path = std::env::temp_dir().join(format!("vsc-short-{}", std::process::id()));
        std::fs::write(&path, [7u8; 100]).expect("write");
        let file = File::open(&path).expect("open");
        let mut buf = [0u8; 64];
        assert_eq!(read_exact_at(&file, &mut buf, 36), Ok(()));
        assert_eq!(buf, [7; 64]);
        let err = read_exact_at(&file, &mut buf, 40);
        assert_eq!(
            err,
            Err("short read at 0x64: the file shrank while read".into())
        );
        std::fs::remove_file(&path).expect("remove");
    }

    #[test]
    fn stable_needs_equal_even_sequences_in_both_copies() {
        let block = |seq: u64| seq.to_le_bytes().to_vec();
        assert!(stable(&block(4), &block(4)));
        assert!(!stable(&block(5), &block(5)));
        assert!(!stable(&block(4), &block(6)));
        assert!(!stable(&[], &[]));
    }
}
