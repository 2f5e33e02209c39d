//! Copies of the live part of a channel (state, control, status and device slots) taken with
//! `pread`, never through a mapping, so a file that shrinks meanwhile gives a short read and
//! not a SIGBUS. Three copies in a row make a seqlock read (§3): the sequence numbers of the
//! first and the last bracket the fields of the middle one.

use std::fs::File;
use std::os::unix::fs::FileExt;

use super::decode::u64_at;
use super::layout::{control, device, header, status};
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

/// Bytes `0..FIXED` hold state, heartbeat, control and status.
const FIXED: usize = status::OFFSET + status::SIZE;
/// A device section ending within this many bytes of the file's start is read with the fixed
/// part in a single `pread`, up to the last slot in use (the default layout with one device:
/// 1.25 KiB). Anything else is read slot by slot.
const ONE_READ_LIMIT: u64 = 64 * 1024;

/// One copy of the live part.
#[derive(Default)]
pub struct Snapshot {
    buf: Vec<u8>,
    slot_base: usize,
    slot_stride: usize,
}

impl Snapshot {
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
        self.buf.get(status::OFFSET..FIXED).unwrap_or(&[])
    }

    /// Device slot `i` (its v1 part), empty if this copy does not hold it.
    pub fn slot(&self, i: usize) -> &[u8] {
        let start = self.slot_base + i * self.slot_stride;
        self.buf
            .get(start..start + device::RECORD_SIZE)
            .unwrap_or(&[])
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
