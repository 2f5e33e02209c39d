//! Fork safety for writers. A forked child shares the parent's open file description, and so
//! its flock: if the child kept it, a crashed parent would still look alive. The spec asks the
//! child to close its inherited descriptor and stop publishing; a `pthread_atfork` child
//! handler does the first, and a generation counter tells every `Writer` to do the second.

use std::os::fd::RawFd;
use std::sync::Once;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

/// Bumped in every forked child; a writer made in another generation is inert.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Descriptors of live writers, closed in a forked child. A fixed array of atomics, because
/// the child handler may only use async-signal-safe operations (no locks, no allocation).
const SLOTS: usize = 64;
static FDS: [AtomicI32; SLOTS] = [const { AtomicI32::new(-1) }; SLOTS];

static INSTALL: Once = Once::new();

extern "C" fn in_child() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
    for slot in &FDS {
        let fd = slot.swap(-1, Ordering::Relaxed);
        if fd >= 0 {
            // SAFETY: close is async-signal-safe; the descriptor was inherited from the parent
            // and nothing else in the child owns it (the Writer knows it was closed here).
            unsafe { libc::close(fd) };
        }
    }
}

/// The current generation, installing the child handler on first use.
pub fn generation() -> u64 {
    INSTALL.call_once(|| {
        // SAFETY: registers a plain function with no captured state. Should it fail (ENOMEM),
        // children keep the descriptor until their writer is dropped, which then closes it.
        unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
    });
    GENERATION.load(Ordering::Relaxed)
}

/// Whether we are still in the process (generation) that `generation` was taken in.
#[inline]
pub fn same_process(generation: u64) -> bool {
    GENERATION.load(Ordering::Relaxed) == generation
}

/// A writer's descriptor, registered so a forked child closes it.
pub struct Registration {
    slot: Option<usize>,
}

impl Registration {
    /// Registers `fd`; with every slot taken the child cannot close it early, and the writer
    /// closes it itself when dropped in the child.
    pub fn new(fd: RawFd) -> Registration {
        for (i, slot) in FDS.iter().enumerate() {
            if slot
                .compare_exchange(-1, fd, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                return Registration { slot: Some(i) };
            }
        }
        Registration { slot: None }
    }

    /// Closes the writer's descriptor, or leaves it to the child handler that already did.
    pub fn close(&mut self, fd: RawFd, generation: u64) {
        let ours = same_process(generation);
        if ours && let Some(i) = self.slot.take() {
            FDS[i].store(-1, Ordering::Relaxed);
        }
        // In a forked child a registered descriptor is already closed, and its slot may now
        // belong to a writer of the child's own.
        if ours || self.slot.is_none() {
            // SAFETY: `fd` is the writer's descriptor, still open in this process (see above),
            // and the writer never uses it after this.
            unsafe { libc::close(fd) };
        }
    }
}
