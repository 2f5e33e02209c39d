//! Tells the call path that a scenario file may have changed, so that a call looks at the
//! file (a `stat`) only then, not every 50 ms.
//!
//! Why: the fake runs inside the program being benchmarked, and a `stat` per refresh was
//! about 2% of that program's measured CPU, spent on a file that never changes during a
//! benchmark. A thread of ours blocks on inotify on the file's directory and raises a flag
//! for events that name the file (other files there, a counts file or a recording, do not
//! count); the call path reads the flag. Where inotify or the thread is unavailable, `watch`
//! says so and the caller keeps polling.

use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Mutex, PoisonError};

/// Raised by the thread on an event naming a watched file (or one about a watched directory
/// itself, or lost events); lowered by `take_changed`.
static CHANGED: AtomicBool = AtomicBool::new(false);
/// The inotify descriptor the thread reads; -1 until the first `watch`, -2 once it failed.
static FD: AtomicI32 = AtomicI32::new(-1);
/// The names of the watched files; serialises the first `watch` calls too (descriptor and
/// thread are made once).
static NAMES: Mutex<Vec<OsString>> = Mutex::new(Vec::new());

const EVENTS: u32 = libc::IN_CLOSE_WRITE
    | libc::IN_MODIFY
    | libc::IN_ATTRIB
    | libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF;

/// Watches the directory holding `file`; false where that is not possible (the caller
/// must then poll the file itself).
pub fn watch(file: &Path) -> bool {
    let (Some(dir), Some(name)) = (file.parent(), file.file_name()) else {
        return false;
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let Ok(dir) = CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    let mut names = NAMES.lock().unwrap_or_else(PoisonError::into_inner);
    let fd = match FD.load(Ordering::Acquire) {
        -1 => {
            let fd = start();
            FD.store(fd, Ordering::Release);
            fd
        }
        fd => fd,
    };
    if !names.iter().any(|n| n == name) {
        names.push(name.to_owned());
    }
    // SAFETY: a NUL-terminated path that outlives the call.
    fd >= 0 && unsafe { libc::inotify_add_watch(fd, dir.as_ptr(), EVENTS) } >= 0
}

/// Whether anything happened in a watched directory since the last call.
pub fn take_changed() -> bool {
    CHANGED.swap(false, Ordering::AcqRel)
}

/// The descriptor and the thread that reads it; -2 where either cannot be made.
fn start() -> i32 {
    // SAFETY: no pointers.
    let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
    if fd < 0 {
        return -2;
    }
    let spawned = std::thread::Builder::new()
        .name("fake-nvml-watch".into())
        .spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                // SAFETY: reads into a buffer we own, at most its length.
                let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
                let interrupted =
                    n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR);
                if n <= 0 && !interrupted {
                    // The descriptor broke: the call path can no longer trust the flag.
                    FD.store(-2, Ordering::Release);
                    CHANGED.store(true, Ordering::Release);
                    return;
                }
                if interrupted {
                    continue;
                }
                let read = usize::try_from(n).unwrap_or(0).min(buf.len());
                if names_a_watched_file(&buf[..read]) {
                    CHANGED.store(true, Ordering::Release);
                }
            }
        });
    if spawned.is_err() {
        // SAFETY: our own descriptor, closed once.
        unsafe { libc::close(fd) };
        return -2;
    }
    fd
}

/// Whether one of the `inotify_event`s in `bytes` names a watched file, or is about a
/// watched directory itself (its name is then empty), or says events were lost.
fn names_a_watched_file(mut bytes: &[u8]) -> bool {
    const HEADER: usize = std::mem::size_of::<libc::inotify_event>();
    let names = NAMES.lock().unwrap_or_else(PoisonError::into_inner);
    let mut found = false;
    while bytes.len() >= HEADER {
        let mut word = [0u8; 4];
        word.copy_from_slice(&bytes[4..8]);
        let mask = u32::from_ne_bytes(word);
        word.copy_from_slice(&bytes[12..16]);
        let len = u32::from_ne_bytes(word) as usize;
        let raw = bytes.get(HEADER..HEADER + len).unwrap_or_default();
        // NUL-padded.
        let name = OsStr::from_bytes(raw.split(|&b| b == 0).next().unwrap_or_default());
        found |=
            mask & libc::IN_Q_OVERFLOW != 0 || name.is_empty() || names.iter().any(|n| n == name);
        bytes = bytes.get(HEADER + len..).unwrap_or_default();
    }
    found
}

/// Whether the flag can still be trusted (the thread is alive and reading).
pub fn working() -> bool {
    FD.load(Ordering::Acquire) >= 0
}
