//! The writer's shared mapping of its channel file. Every store is one aligned 8-byte atomic
//! store: readers in other processes read these bytes at any moment, and a single store is
//! what the spec promises for [M] fields. Text is packed into words the same way.

use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is owned by one Mapping and only reached through it; moving it to
// another thread moves that ownership. Stores are atomics, so no data race arises in-process.
unsafe impl Send for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` shared and writable.
    pub fn new(fd: RawFd, len: usize) -> io::Result<Mapping> {
        // SAFETY: a fresh mapping chosen by the kernel (null hint), of a file we opened
        // read-write and already extended to `len` bytes with posix_fallocate.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave null"))?;
        Ok(Mapping { ptr, len })
    }

    /// Stores `value` at byte offset `off`. Misaligned or out-of-range offsets are ignored:
    /// they cannot come from the writer's own layout, and publishing must never fault.
    #[inline]
    pub fn store(&self, off: usize, value: u64, order: Ordering) {
        if !off.is_multiple_of(8) || off.checked_add(8).is_none_or(|end| end > self.len) {
            return;
        }
        // SAFETY: in bounds and 8-aligned (the mapping is page-aligned), checked above. The
        // memory is shared with other processes, which is why the store is atomic.
        let word = unsafe { AtomicU64::from_ptr(self.ptr.as_ptr().add(off).cast::<u64>()) };
        word.store(value, order);
    }

    /// Loads the word at byte offset `off`, as `store` stores it (0 where `store` would ignore
    /// the offset): the writer reading back what it published.
    #[inline]
    pub fn load(&self, off: usize) -> u64 {
        if !off.is_multiple_of(8) || off.checked_add(8).is_none_or(|end| end > self.len) {
            return 0;
        }
        // SAFETY: in bounds and 8-aligned, checked above; atomic for the same reason as `store`.
        let word = unsafe { AtomicU64::from_ptr(self.ptr.as_ptr().add(off).cast::<u64>()) };
        word.load(Ordering::Relaxed)
    }

    /// Writes `bytes` into the field `[off, off + field_len)` (a multiple of 8), padding with
    /// NUL, as relaxed word stores; bytes beyond `field_len` are dropped.
    pub fn store_text(&self, off: usize, field_len: usize, bytes: &[u8]) {
        for w in 0..field_len / 8 {
            let mut word = [0u8; 8];
            let start = w * 8;
            if start < bytes.len() {
                let end = (start + 8).min(bytes.len());
                word[..end - start].copy_from_slice(&bytes[start..end]);
            }
            self.store(off + start, u64::from_le_bytes(word), Ordering::Relaxed);
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the region mmap gave us; nothing refers to it after drop.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}
