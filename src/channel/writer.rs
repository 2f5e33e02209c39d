//! The Rust writer: publishes a program's allocator figures into its channel. Creation may
//! fail (an `io::Error` to warn about once); publishing into a created channel cannot fail and
//! never panics. Not `Sync`: one writer, as the protocol demands; share it behind a mutex.

use std::collections::HashMap;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{Ordering, fence};

use super::config::{DeviceFigures, DeviceIdentity, EventFields, Exit, SampleFields, WriterConfig};
use super::crc32::crc32;
use super::create::{Created, create};
use super::decode::u64_at;
use super::dir::DirHandle;
use super::fork::{self, Registration};
use super::kinds::EventKind;
use super::layout::{ABSENT, control, device, event, header, sample, spare, state, status, string};
use super::mapping::Mapping;
use super::sections::Sections;
use super::sys::monotonic_ns;
use super::text::fit;

/// A live channel of this process.
pub struct Writer {
    map: Mapping,
    fd: RawFd,
    registration: Registration,
    /// The fork generation we were made in; in a forked child the writer is inert (§1).
    generation: u64,
    dev_ino: (u64, u64),
    dir: DirHandle,
    name: CString,
    path: PathBuf,
    sections: Sections,
    samples: u64,
    events: u64,
    device_seqs: Vec<u64>,
    /// Per slot, the OOMs reported through `oom`: every later `publish_device` adds them to
    /// the program's own count, so the slot's OOMs figure never goes back down.
    status_seq: u64,
    /// The step and label of the last `status`: an `oom` happens at that step, in that phase.
    status_step: Option<u64>,
    status_label: String,
    phases: HashMap<String, u16>,
    finished: bool,
}

impl Writer {
    /// Creates and publishes the channel file (§1), state `RUNNING`.
    pub fn create(config: WriterConfig) -> io::Result<Writer> {
        let generation = fork::generation();
        let c: Created = create(&config)?;
        Ok(Writer {
            registration: Registration::new(c.fd),
            map: c.map,
            fd: c.fd,
            generation,
            dev_ino: c.dev_ino,
            dir: c.dir,
            name: c.name,
            path: c.path,
            sections: c.sections,
            samples: 0,
            events: 0,
            device_seqs: Vec::new(),
            status_seq: 0,
            status_step: None,
            status_label: String::new(),
            phases: HashMap::new(),
            finished: false,
        })
    }

    /// The channel file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Samples appended so far (the ring's head).
    pub fn samples_appended(&self) -> u64 {
        self.samples
    }

    /// Events appended so far.
    pub fn events_appended(&self) -> u64 {
        self.events
    }

    #[inline]
    fn live(&self) -> bool {
        !self.finished && fork::same_process(self.generation)
    }

    /// Starts a seqlocked update at `base` whose sequence is `*seq` and whose fields are the
    /// `copy` bytes after it. First the spare keeps the block as it stands (§3): a writer
    /// killed inside the update leaves its last complete values readable there.
    #[inline]
    fn seq_begin(map: &Mapping, base: usize, copy: usize, seq: &mut u64) {
        let r = Ordering::Relaxed;
        map.store(spare::BLOCK, base as u64, r);
        for w in (0..copy).step_by(8) {
            map.store(spare::COPY + w, map.load(base + 8 + w), r);
        }
        // The copy is complete before the spare names the sequence it stands in for, and the
        // spare names it before the block's sequence turns odd.
        map.store(spare::SEQ, *seq + 1, Ordering::Release);
        fence(Ordering::Release);
        *seq += 1;
        map.store(base, *seq, Ordering::Relaxed);
        // The odd sequence must be visible before any field changes.
        fence(Ordering::Release);
    }

    #[inline]
    fn seq_end(map: &Mapping, base: usize, seq: &mut u64) {
        *seq += 1;
        map.store(base, *seq, Ordering::Release);
    }

    /// Adds a device slot and returns its index, or `None` when every slot is taken.
    pub fn add_device(&mut self, id: DeviceIdentity) -> Option<usize> {
        let slot = self.device_seqs.len();
        if !self.live() || slot >= self.sections.devices.capacity as usize {
            return None;
        }
        let base = self.sections.devices.record(slot as u64) as usize;
        let mut seq = 0;
        let map = &self.map;
        Self::seq_begin(map, base, spare::DEVICE_COPY, &mut seq);
        let mut flags = 0;
        let uuid = id.uuid.unwrap_or([0; 16]);
        if id.uuid.is_some() {
            flags |= device::FLAG_UUID_VALID;
        }
        let pci = id.pci_bus_id.as_deref().unwrap_or("");
        if !pci.is_empty() {
            flags |= device::FLAG_PCI_BUS_ID_VALID;
        }
        let r = Ordering::Relaxed;
        map.store(
            base + device::ORDINAL,
            u64::from(id.ordinal) | (u64::from(flags) << 32),
            r,
        );
        map.store_text(base + device::UUID, device::UUID_LEN, &uuid);
        map.store_text(
            base + device::PCI_BUS_ID,
            device::PCI_BUS_ID_LEN,
            fit(pci, device::PCI_BUS_ID_LEN),
        );
        map.store(base + device::TOTAL, id.total.unwrap_or(ABSENT), r);
        map.store(base + device::READ_AT, ABSENT, r);
        for i in 0..device::FIGURES {
            map.store(base + device::ALLOCATED + 8 * i, ABSENT, r);
        }
        Self::seq_end(map, base, &mut seq);
        // The slot is complete before the count makes it valid.
        map.store(control::DEVICES_IN_USE, slot as u64 + 1, Ordering::Release);
        self.device_seqs.push(seq);
        Some(slot)
    }

    /// Publishes one reading of a device's figures (a seqlocked update, §3).
    pub fn publish_device(&mut self, slot: usize, figures: &DeviceFigures) {
        if !self.live() || slot >= self.device_seqs.len() {
            return;
        }
        let base = self.sections.devices.record(slot as u64) as usize;
        let read_at = figures.read_at_ns.unwrap_or_else(monotonic_ns);
        let map = &self.map;
        let seq = &mut self.device_seqs[slot];
        let words = figures.words();
        Self::seq_begin(map, base, spare::DEVICE_COPY, seq);
        map.store(base + device::READ_AT, read_at, Ordering::Relaxed);
        for (i, w) in words.into_iter().enumerate() {
            map.store(base + device::ALLOCATED + 8 * i, w, Ordering::Relaxed);
        }
        Self::seq_end(map, base, seq);
        if figures.read_at_ns.is_none() {
            map.store(header::HEARTBEAT, read_at, Ordering::Relaxed);
        }
    }

    /// Reports an out-of-memory on `slot`: an allocation of `requested` bytes failed, with
    /// `free` bytes free on the device if known. For OOMs that no allocator observer reports
    /// (a program that catches one and skips the batch, a custom allocator).
    ///
    /// Appends an `OOM` event at the step and with the label last given to `status` (its
    /// phase when that label is one), carrying the slot's total and the allocated, reserved
    /// and retry figures last published for it. The slot's OOMs figure stays the program's
    /// own count: the monitor counts the events and takes the larger of the two, so an OOM
    /// the program counted and also reported here is one OOM, not two.
    pub fn oom(&mut self, slot: usize, requested: Option<u64>, free: Option<u64>) {
        if !self.live() || slot >= self.device_seqs.len() {
            return;
        }
        let base = self.sections.devices.record(slot as u64) as usize;
        let last = |off: usize| self.map.load(base + off);
        let args = [
            requested.unwrap_or(ABSENT),
            free.unwrap_or(ABSENT),
            last(device::TOTAL),
            last(device::ALLOCATED),
            last(device::RESERVED),
            last(device::ALLOC_RETRIES),
        ];
        let label = std::mem::take(&mut self.status_label);
        let mut ev = EventFields::new(EventKind::Oom);
        ev.slot = u16::try_from(slot).ok();
        ev.phase = self.phases.get(&label).copied().unwrap_or(0);
        ev.step = self.status_step;
        ev.args = args;
        ev.text = &label;
        self.event(&ev);
        self.status_label = label;
    }

    /// Appends a sample record to the ring (§4).
    #[inline]
    pub fn sample(&mut self, f: &SampleFields) {
        if !self.live() {
            return;
        }
        let t = f.t_ns.unwrap_or_else(monotonic_ns);
        let mut payload = [0u8; sample::CRC - sample::CRC_START];
        let figures = [
            t,
            f.allocated.unwrap_or(ABSENT),
            f.reserved.unwrap_or(ABSENT),
            f.peak.unwrap_or(ABSENT),
            f.active.unwrap_or(ABSENT),
            f.step.unwrap_or(ABSENT),
        ];
        for (i, w) in figures.iter().enumerate() {
            payload[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
        }
        let tail_lo = u32::from(f.slot) | (u32::from(f.flags) << 8) | (u32::from(f.phase) << 16);
        let tail = sample::SLOT - sample::CRC_START;
        payload[tail..tail + 4].copy_from_slice(&tail_lo.to_le_bytes());
        let crc = crc32(&payload);
        let mut record = [0u64; 7];
        record[..6].copy_from_slice(&figures);
        record[6] = u64::from(tail_lo) | (u64::from(crc) << 32);
        let idx = self.samples;
        self.append(false, idx, &record);
        self.samples = idx + 1;
        if f.t_ns.is_none() {
            self.map.store(header::HEARTBEAT, t, Ordering::Relaxed);
        }
    }

    /// Appends an event record (§2.8).
    pub fn event(&mut self, f: &EventFields<'_>) {
        if !self.live() {
            return;
        }
        let text = fit(f.text, event::TEXT_CAP);
        let mut rec = [0u8; event::RECORD_SIZE];
        let put = |rec: &mut [u8], off: usize, bytes: &[u8]| {
            rec[off..off + bytes.len()].copy_from_slice(bytes);
        };
        put(
            &mut rec,
            event::T,
            &f.t_ns.unwrap_or_else(monotonic_ns).to_le_bytes(),
        );
        put(&mut rec, event::KIND, &f.kind.code().to_le_bytes());
        let slot = f.slot.unwrap_or(event::NO_SLOT);
        put(&mut rec, event::SLOT, &slot.to_le_bytes());
        put(&mut rec, event::PHASE, &f.phase.to_le_bytes());
        put(
            &mut rec,
            event::TEXT_LEN,
            &(text.len() as u16).to_le_bytes(),
        );
        put(
            &mut rec,
            event::STEP,
            &f.step.unwrap_or(ABSENT).to_le_bytes(),
        );
        for (i, a) in f.args.iter().enumerate() {
            put(&mut rec, event::ARGS + 8 * i, &a.to_le_bytes());
        }
        put(&mut rec, event::TEXT, text);
        let crc = crc32(&rec[event::CRC_START..event::CRC]);
        put(&mut rec, event::CRC, &crc.to_le_bytes());
        let mut words = [0u64; event::RECORD_SIZE / 8 - 1];
        for (i, w) in words.iter_mut().enumerate() {
            *w = u64_at(&rec, 8 + 8 * i);
        }
        let idx = self.events;
        self.append(true, idx, &words);
        self.events = idx + 1;
    }

    /// Stores record `idx` of a ring: `seq = 2·idx + 1`, the payload words (everything after
    /// `seq`, CRC included), `seq = 2·idx + 2`, then `head = idx + 1` (§4).
    #[inline]
    fn append(&self, events: bool, idx: u64, payload: &[u64]) {
        let (section, head) = if events {
            (&self.sections.events, control::EVENTS_HEAD)
        } else {
            (&self.sections.samples, control::SAMPLES_HEAD)
        };
        let slot = idx & (u64::from(section.capacity) - 1);
        let base = section.record(slot) as usize;
        let map = &self.map;
        map.store(base, 2 * idx + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        for (i, w) in payload.iter().enumerate() {
            map.store(base + 8 + 8 * i, *w, Ordering::Relaxed);
        }
        map.store(base, 2 * idx + 2, Ordering::Release);
        map.store(head, idx + 1, Ordering::Release);
    }

    /// Sets the status (§2.4): the current step and a label such as a phase or module path.
    pub fn status(&mut self, step: Option<u64>, label: &str) {
        if !self.live() {
            return;
        }
        let base = status::OFFSET;
        let label = fit(label, status::LABEL_CAP);
        self.status_step = step;
        self.status_label.clear();
        // `fit` cuts at a character boundary, so this cannot fail.
        self.status_label
            .push_str(std::str::from_utf8(label).unwrap_or_default());
        let now = monotonic_ns();
        let map = &self.map;
        Self::seq_begin(map, base, spare::STATUS_COPY, &mut self.status_seq);
        let r = Ordering::Relaxed;
        map.store(base + status::STEP, step.unwrap_or(ABSENT), r);
        map.store(base + status::SET_AT, now, r);
        map.store(base + status::LABEL_LEN, label.len() as u64, r);
        map.store_text(base + status::LABEL, status::LABEL_CAP, label);
        Self::seq_end(map, base, &mut self.status_seq);
    }

    /// The phase number of `name` for samples and events, adding it to the strings section on
    /// first use. 0 (no phase) for an empty name or when the section is full.
    pub fn intern(&mut self, name: &str) -> u16 {
        let bytes = fit(name, string::MAX_LEN);
        // `fit` cuts at a character boundary, so this cannot fail.
        let Ok(key) = std::str::from_utf8(bytes) else {
            return 0;
        };
        if key.is_empty() || !self.live() {
            return 0;
        }
        if let Some(&phase) = self.phases.get(key) {
            return phase;
        }
        let n = self.phases.len();
        let Ok(phase) = u16::try_from(n + 1) else {
            return 0;
        };
        if n >= self.sections.strings.capacity as usize {
            return 0;
        }
        let mut rec = [0u8; string::RECORD_SIZE];
        rec[string::LEN] = bytes.len() as u8;
        rec[string::TEXT..string::TEXT + bytes.len()].copy_from_slice(bytes);
        let base = self.sections.strings.record(n as u64) as usize;
        self.map.store_text(base, string::RECORD_SIZE, &rec);
        // Written once, before the count makes it visible.
        self.map
            .store(control::STRINGS_IN_USE, n as u64 + 1, Ordering::Release);
        self.phases.insert(key.to_string(), phase);
        phase
    }

    /// Marks the writer alive now. Sampling with `t_ns: None` or publishing with
    /// `read_at_ns: None` does this too; otherwise call it at least once per sample period.
    pub fn heartbeat(&mut self) {
        if self.live() {
            self.map
                .store(header::HEARTBEAT, monotonic_ns(), Ordering::Relaxed);
        }
    }

    /// Ends the channel (§1). Clean: an `EXIT` event, `EXITED_CLEAN`, and the file removed.
    /// Error: an `EXIT` event with the message, `EXITED_ERROR`, and the file kept for the
    /// reader. The only error is failing to remove the file.
    pub fn finish(mut self, exit: Exit) -> io::Result<()> {
        self.end(&exit)
    }

    fn end(&mut self, exit: &Exit) -> io::Result<()> {
        if !self.live() {
            return Ok(());
        }
        let (code, text, st) = match exit {
            Exit::Clean => (0, "", state::EXITED_CLEAN),
            Exit::Error(msg) => (1, msg.as_str(), state::EXITED_ERROR),
        };
        let mut ev = EventFields::new(EventKind::Exit);
        ev.args[0] = code;
        ev.text = text;
        self.event(&ev);
        self.map.store(header::STATE, st, Ordering::Release);
        self.finished = true;
        if *exit == Exit::Clean {
            return self.unlink();
        }
        Ok(())
    }

    /// Removes our name, unless it no longer refers to our file.
    fn unlink(&self) -> io::Result<()> {
        let dirfd = self.dir.fd.as_raw_fd();
        // SAFETY: zeroed is a valid bit pattern for the plain C struct `stat`.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid directory descriptor, C string and writable `st`.
        let rc = unsafe {
            libc::fstatat(
                dirfd,
                self.name.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        if (st.st_dev, st.st_ino) != self.dev_ino {
            return Ok(());
        }
        // SAFETY: as above; removes only the name, our mapping stays valid.
        super::sys::check(unsafe { libc::unlinkat(dirfd, self.name.as_ptr(), 0) }).map(|_| ())
    }
}

impl Drop for Writer {
    /// A writer dropped without `finish` ends as if finished: with an error when dropped
    /// during a panic, cleanly otherwise. In a forked child it only lets go of the mapping.
    fn drop(&mut self) {
        let exit = if std::thread::panicking() {
            Exit::Error("panicked".into())
        } else {
            Exit::Clean
        };
        // Nothing to report to from a destructor; the reader sees the state either way.
        let _ = self.end(&exit);
        self.registration.close(self.fd, self.generation);
    }
}
