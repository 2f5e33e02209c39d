//! The reader: opens a channel file as hostile input and polls it. It never maps the file; it
//! copies only what it needs with `pread` (three copies of the live state, 1.25 KiB each with
//! one device, plus the ring records that are new), so a writer that truncates its file causes
//! a rejection, not a SIGBUS. Those copies are the reader's own, for one seqlock read; what
//! outlives a writer killed inside an update is the spare in the file (§3).

use std::ffi::OsStr;
use std::fmt;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::copies::{LiveCopy, read_exact_at};
use super::decode;
use super::kinds::WriterState;
use super::layout::{event, header, sample, string};
use super::liveness::{ProcessCheck, assess};
use super::model::{DeviceSlot, Identity, Status, Update};
use super::ring::Ring;
use super::sections::Sections;
use super::sys;
use super::validate;
use crate::safe_fs::Dir;

/// Who is reading, and from where in the rings to start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Files must belong to this uid unless it is 0 (root reads everyone's).
    pub euid: u32,
    /// Also take the ring records already in the file when opened.
    pub from_start: bool,
}

impl Policy {
    /// Our effective uid, new records only.
    pub fn current() -> Policy {
        Policy {
            euid: sys::euid(),
            from_start: false,
        }
    }
}

/// A file refused as a channel, with a one-line reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejected {
    pub path: PathBuf,
    pub reason: String,
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.path.file_name().map_or_else(
            || self.path.display().to_string(),
            |n| n.to_string_lossy().into(),
        );
        write!(f, "{name}: {}", self.reason)
    }
}

impl std::error::Error for Rejected {}

/// String records up to this size are read in one `pread`; larger ones (a later minor, or a
/// hostile file) one by one, only their v1 part.
const CONTIGUOUS_STRING_LIMIT: usize = 4096;

/// Seqlock rounds per poll before keeping the previous copy of a busy slot.
const SEQLOCK_ROUNDS: usize = 4;

/// `devices in use` and `strings in use`, checked against their capacities.
struct Counts {
    devices: usize,
    strings: usize,
}

/// An open channel.
pub struct Channel {
    path: PathBuf,
    file: File,
    identity: Identity,
    sections: Sections,
    process: ProcessCheck,
    samples: Ring,
    events: Ring,
    devices: Vec<Option<DeviceSlot>>,
    status: Option<Status>,
    phases: Vec<String>,
    snaps: [LiveCopy; 3],
    rejected: Option<Rejected>,
    owner: u32,
    dev_ino: (u64, u64),
}

impl Channel {
    /// Opens and validates `path` (every check of spec §7 that can be made at once).
    pub fn open(path: &Path, policy: &Policy) -> Result<Channel, Rejected> {
        let reject = |reason: String| Rejected {
            path: path.to_path_buf(),
            reason,
        };
        // Its directory by descriptor, the file relative to it: a FIFO or device is refused
        // before it is opened, and a swap of any path component meanwhile changes nothing.
        let file =
            super::dir::open_channel_file(path, policy.euid, false).map_err(|n| reject(n.why))?;
        Self::opened(path.to_path_buf(), file, policy)
    }

    /// Opens and validates the file `name` in `dir`, a directory opened and checked once: for
    /// work that must stay in that directory whatever its path names meanwhile (cleaning).
    pub fn open_at(dir: &Dir, name: &OsStr, policy: &Policy) -> Result<Channel, Rejected> {
        let path = dir.shown().join(name);
        let file = super::dir::open_channel_file_in(dir, name, false).map_err(|n| Rejected {
            path: path.clone(),
            reason: n.why,
        })?;
        Self::opened(path, file, policy)
    }

    /// Validates `file`, opened at `path` (by `open_channel_file_in`: what was opened is what
    /// was looked at).
    fn opened(path: PathBuf, file: File, policy: &Policy) -> Result<Channel, Rejected> {
        let reject = |reason: String| Rejected {
            path: path.clone(),
            reason,
        };
        let meta = file
            .metadata()
            .map_err(|e| reject(format!("cannot stat: {e}")))?;
        validate::file(&meta, policy.euid).map_err(reject)?;
        let mut head = [0u8; header::SIZE];
        read_exact_at(&file, &mut head, 0).map_err(reject)?;
        let sections = validate::header(&head, meta.len()).map_err(reject)?;
        let identity = decode::identity(&head);
        let mut snap = LiveCopy::default();
        snap.take(&file, &sections.devices, 1).map_err(reject)?;
        let (samples_at, events_at) = if policy.from_start {
            (0, 0)
        } else {
            (snap.samples_head(), snap.events_head())
        };
        let samples = Ring::new(
            "samples",
            sections.samples,
            sample::RECORD_SIZE,
            (sample::CRC_START, sample::CRC),
            samples_at,
        );
        let events = Ring::new(
            "events",
            sections.events,
            event::RECORD_SIZE,
            (event::CRC_START, event::CRC),
            events_at,
        );
        let channel = Channel {
            path: path.clone(),
            file,
            process: ProcessCheck::new(&identity, sys::monotonic_ns()),
            identity,
            sections,
            samples,
            events,
            devices: Vec::new(),
            status: None,
            phases: Vec::new(),
            snaps: [snap, LiveCopy::default(), LiveCopy::default()],
            rejected: None,
            owner: meta.uid(),
            dev_ino: (meta.dev(), meta.ino()),
        };
        channel.check_counts().map_err(reject)?;
        Ok(channel)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// The file's owner and `(device, inode)`, as checked when opened.
    pub fn file_id(&self) -> (u32, (u64, u64)) {
        (self.owner, self.dev_ino)
    }

    /// Reads what changed since the last poll. Once rejected, a channel stays rejected.
    pub fn poll(&mut self) -> Result<Update, Rejected> {
        if let Some(r) = &self.rejected {
            return Err(r.clone());
        }
        self.poll_inner().map_err(|reason| {
            let r = Rejected {
                path: self.path.clone(),
                reason,
            };
            self.rejected = Some(r.clone());
            r
        })
    }

    fn poll_inner(&mut self) -> Result<Update, String> {
        let size = self
            .file
            .metadata()
            .map_err(|e| format!("cannot stat: {e}"))?
            .len();
        if size != self.identity.file_size {
            return Err(validate::size_changed(self.identity.file_size, size));
        }
        // The lock first: if it is free the writer has stored its last state before we read.
        let probe = sys::probe_lock(self.file.as_raw_fd());
        let counts = self.read_seqlocked()?;
        let [pre, mid, post] = &self.snaps;
        // Heads only grow; of two copies, the lower is safe from a torn 8-byte copy.
        let samples_head = pre.samples_head().min(mid.samples_head());
        let events_head = pre.events_head().min(mid.events_head());
        let state = WriterState::from_code(post.state());
        let heartbeat_ns = decode::figure(post.heartbeat());
        self.read_phases(counts.strings)?;
        let samples = self
            .samples
            .take(&self.file, samples_head, decode::sample)?;
        let events = self.events.take(&self.file, events_head, decode::event)?;
        let now = sys::monotonic_ns();
        let gone = probe == sys::LockProbe::Held && self.process.gone(now);
        let liveness = assess(
            probe,
            state,
            heartbeat_ns,
            now,
            self.identity.sample_period_us,
            gone,
        );
        Ok(Update {
            state,
            liveness,
            heartbeat_ns,
            devices: self
                .devices
                .iter()
                .take(counts.devices)
                .flatten()
                .cloned()
                .collect(),
            status: self.status.clone(),
            phases: self.phases.clone(),
            samples,
            events,
            lost_samples: self.samples.lost,
            lost_events: self.events.lost,
        })
    }

    /// The counts of the first snapshot, or a rejection if above their capacities (§7).
    fn check_counts(&self) -> Result<Counts, String> {
        let s = &self.snaps[0];
        let dev_cap = u64::from(self.sections.devices.capacity);
        if s.devices_in_use() > dev_cap {
            return Err(format!(
                "devices in use {} above the capacity {dev_cap}",
                s.devices_in_use()
            ));
        }
        let str_cap = u64::from(self.sections.strings.capacity);
        if s.strings_in_use() > str_cap {
            return Err(format!(
                "strings in use {} above the capacity {str_cap}",
                s.strings_in_use()
            ));
        }
        Ok(Counts {
            devices: s.devices_in_use() as usize,
            strings: s.strings_in_use() as usize,
        })
    }

    /// Seqlock reads of the status and device slots: up to `SEQLOCK_ROUNDS` rounds of
    /// (before, fields, after) copies, the after-copy of a round serving as the next before.
    /// A block whose writer is inside an update, or was killed there, reads from the spare
    /// (§3), which holds it as it was before that update. Returns the counts the copies were
    /// checked against.
    fn read_seqlocked(&mut self) -> Result<Counts, String> {
        let devices = self.sections.devices;
        let known = self.devices.len() as u64;
        self.snaps[0].take(&self.file, &devices, known)?;
        let counts = self.check_counts()?;
        let n = counts.devices;
        self.devices.resize(n.max(self.devices.len()), None);
        let mut todo_status = true;
        let mut todo: Vec<usize> = (0..n).collect();
        for round in 0..SEQLOCK_ROUNDS {
            if round > 0 {
                self.snaps.swap(0, 2);
            }
            self.snaps[1].take(&self.file, &devices, n as u64)?;
            self.snaps[2].take(&self.file, &devices, n as u64)?;
            let [pre, mid, post] = &self.snaps;
            if todo_status && let Some(block) = mid.settled_status(pre, post) {
                self.status = decode::status(&block);
                todo_status = false;
            }
            todo.retain(|&i| {
                let at = devices.record(i as u64);
                match mid.settled_slot(i, at, pre, post) {
                    Some(block) => {
                        self.devices[i] = Some(decode::device_slot(i, &block));
                        false
                    }
                    None => true,
                }
            });
            if !todo_status && todo.is_empty() {
                break;
            }
        }
        Ok(counts)
    }

    /// Reads phase names added since the last poll, up to `n` (a checked count); each is
    /// written once, before it is counted.
    fn read_phases(&mut self, n: usize) -> Result<(), String> {
        let known = self.phases.len();
        if n <= known {
            return Ok(());
        }
        let sec = self.sections.strings;
        let rs = sec.record_size as usize;
        if rs <= CONTIGUOUS_STRING_LIMIT {
            let mut buf = vec![0u8; (n - known) * rs];
            read_exact_at(&self.file, &mut buf, sec.record(known as u64))?;
            self.phases.extend(buf.chunks_exact(rs).map(decode::phase));
            return Ok(());
        }
        let mut buf = [0u8; string::RECORD_SIZE];
        for i in known..n {
            read_exact_at(&self.file, &mut buf, sec.record(i as u64))?;
            self.phases.push(decode::phase(&buf));
        }
        Ok(())
    }
}
