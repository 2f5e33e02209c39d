//! Writing a recording. Each event becomes one line (a batch one line per member), buffered
//! and flushed at least every `FLUSH_EVERY`: a plain file with a `write`, a `.zst` file by
//! ending a zstd block, so every second's records can be decoded without the rest of the
//! frame. `finish` ends the frame and syncs the file; dropping a `Recorder` unfinished
//! finishes it too, as well as it can.

use super::channels::WritersSent;
use super::header::{FORMAT, Header, MAX_LINE, VERSION};
use super::wire::{device_infos, device_sample, driver, host_sample, peak_holders, problem};
use crate::model::SourceEvent;
use crate::model::{DeviceInfo, DriverInfo};
use crate::safe_fs::{self, Trust};
use serde::Serialize;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Buffered records reach the file once they are this old: at the next record, or at the
/// owner's next `flush_if_due` (the monitor's loop wakes at least every second). A tick
/// brings one batch, so at a 1 s refresh every batch is flushed as it is recorded.
pub const FLUSH_EVERY: Duration = Duration::from_millis(500);
/// zstd's fastest level, which on recordings also compresses better than its default 3
/// (measured by benches/recording.rs: 10 B per allocator point against 11).
const ZSTD_LEVEL: i32 = 1;
/// 128 KiB back-references: a few seconds of a busy machine's records, which is where the
/// repeats are (the same GPUs, processes and channels second after second). A 2 MiB window
/// compressed no better and touches more memory that a second of other work has made cold
/// (benches/recording.rs --e2e: +18 to +27 % CPU per refresh with it, +4 to +20 % with this).
const ZSTD_WINDOW_LOG: u32 = 17;
const PLAIN_BUFFER: usize = 64 * 1024;

enum Sink {
    Plain(BufWriter<File>),
    Zstd(zstd::stream::write::Encoder<'static, File>),
}

impl Sink {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Sink::Plain(w) => w.write_all(bytes),
            Sink::Zstd(w) => w.write_all(bytes),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Plain(w) => w.flush(),
            Sink::Zstd(w) => w.flush(),
        }
    }

    /// The file written to, for its size on disk (by its descriptor, never by its path).
    fn file(&self) -> &File {
        match self {
            Sink::Plain(w) => w.get_ref(),
            Sink::Zstd(w) => w.get_ref(),
        }
    }

    fn finish(self) -> io::Result<()> {
        let file = match self {
            Sink::Plain(w) => w.into_inner().map_err(io::IntoInnerError::into_error)?,
            Sink::Zstd(w) => w.finish()?,
        };
        file.sync_all()
    }
}

#[derive(Serialize)]
struct HeaderOut<'a> {
    format: &'static str,
    version: u32,
    vramscope_version: &'a str,
    started_ms: u64,
    interval_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    host: Option<&'a str>,
}

#[derive(Serialize)]
struct IntervalOut {
    interval_ms: u64,
}

#[derive(Serialize)]
struct StartedOut<'a> {
    driver: driver::Ref<'a>,
    #[serde(serialize_with = "device_infos::serialize")]
    devices: &'a [DeviceInfo],
}

/// Writes one recording.
pub struct Recorder {
    path: PathBuf,
    /// `None` once finished.
    sink: Option<Sink>,
    line: Vec<u8>,
    writers: WritersSent,
    last_flush: Instant,
    /// Records written since the last flush.
    dirty: bool,
    records: u64,
}

impl Recorder {
    /// Creates `path` (refusing an existing file or a symlink) and writes the header;
    /// zstd-compressed when the name ends in `.zst`.
    pub fn create(path: &Path, header: Header) -> io::Result<Recorder> {
        Self::open(path, &header, false)
    }

    /// Like `create`, but replaces an existing file (never through a symlink).
    pub fn replace(path: &Path, header: Header) -> io::Result<Recorder> {
        Self::open(path, &header, true)
    }

    fn open(path: &Path, header: &Header, replace: bool) -> io::Result<Recorder> {
        if header.version != VERSION {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("this vramscope writes format version {VERSION} only"),
            ));
        }
        // Private: a recording holds every user's command lines and job ids. As root the
        // folder is walked from / and checked, the file opened relative to it (never through
        // a symlink) and checked on its descriptor before a replaced one is emptied: a user's
        // folder, symlink or hard link is refused, never written (`safe_fs`).
        let trust = Trust::for_euid(crate::channel::sys::euid());
        let (dir, name) = safe_fs::place(path, trust)?;
        let how = if replace {
            libc::O_CREAT | libc::O_TRUNC
        } else {
            libc::O_CREAT | libc::O_EXCL
        };
        let file = safe_fs::open_checked(&dir, &name, libc::O_WRONLY | how, 0o600, trust)?;
        // A replaced file keeps its old mode through O_TRUNC.
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        let sink = if path.extension().is_some_and(|e| e == "zst") {
            let mut encoder = zstd::stream::write::Encoder::new(file, ZSTD_LEVEL)?;
            encoder.window_log(ZSTD_WINDOW_LOG)?;
            encoder.include_checksum(true)?;
            Sink::Zstd(encoder)
        } else {
            Sink::Plain(BufWriter::with_capacity(PLAIN_BUFFER, file))
        };
        let mut recorder = Recorder {
            path: path.to_path_buf(),
            sink: Some(sink),
            line: Vec::with_capacity(16 * 1024),
            writers: WritersSent::default(),
            last_flush: Instant::now(),
            dirty: false,
            records: 0,
        };
        let mut line = serde_json::to_vec(&HeaderOut {
            format: FORMAT,
            version: VERSION,
            vramscope_version: &header.vramscope_version,
            started_ms: header.started_ms,
            interval_ms: header.interval_ms,
            host: header.host.as_deref(),
        })?;
        line.push(b'\n');
        unfinished(&mut recorder.sink)?.write_all(&line)?;
        recorder.flush()?;
        Ok(recorder)
    }

    /// Writes `event` as received at `at_ms` (wall ms); buffered, and flushed when the last
    /// flush is `FLUSH_EVERY` old.
    pub fn record(&mut self, at_ms: u64, event: &SourceEvent) -> io::Result<()> {
        self.write_event(at_ms, event)?;
        self.flush_if_due()
    }

    /// Flushes when records are waiting and the last flush is `FLUSH_EVERY` old. An owner
    /// that may receive no event for a while calls this at least every `FLUSH_EVERY`, so
    /// the last records do not wait for the next event.
    pub fn flush_if_due(&mut self) -> io::Result<()> {
        if self.dirty && self.last_flush.elapsed() >= FLUSH_EVERY {
            self.flush()?;
        }
        Ok(())
    }

    /// How long until the records waiting in the buffer are due a flush; `None` when none
    /// wait. An owner blocking for events waits at most this long before `flush_if_due`.
    pub fn flush_due_in(&self) -> Option<Duration> {
        self.dirty
            .then(|| FLUSH_EVERY.saturating_sub(self.last_flush.elapsed()))
    }

    /// Hands everything recorded so far to the file: complete lines, readable at once.
    pub fn flush(&mut self) -> io::Result<()> {
        unfinished(&mut self.sink)?.flush()?;
        self.last_flush = Instant::now();
        self.dirty = false;
        Ok(())
    }

    /// Ends the file (the zstd frame) and syncs it to disk.
    pub fn finish(mut self) -> io::Result<()> {
        match self.sink.take() {
            Some(sink) => sink.finish(),
            None => Ok(()),
        }
    }

    /// The file's size on disk: what has been flushed to it so far (by its descriptor).
    pub fn bytes_on_disk(&self) -> Option<u64> {
        Some(self.sink.as_ref()?.file().metadata().ok()?.len())
    }

    /// Records written so far (a batch counts its members), not counting the header.
    pub fn records(&self) -> u64 {
        self.records
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn write_event(&mut self, t: u64, event: &SourceEvent) -> io::Result<()> {
        match event {
            SourceEvent::Batch(events) => {
                for event in events {
                    self.write_event(t, event)?;
                }
                Ok(())
            }
            SourceEvent::Started { driver, devices } => self.write_line(
                t,
                "started",
                &StartedOut {
                    driver: driver::Ref(driver as &DriverInfo),
                    devices,
                },
            ),
            SourceEvent::NvmlUnavailable(why) => {
                self.write_line(t, "nvml_unavailable", &problem::Ref(why))
            }
            SourceEvent::Device(sample) => {
                let beside = peak_holders::of(sample);
                self.write_line_with(
                    t,
                    "device",
                    &device_sample::Ref(sample),
                    beside.as_ref().map(|h| ("peak_holders", h)),
                )
            }
            SourceEvent::Host(sample) => self.write_line(t, "host", &host_sample::Ref(sample)),
            SourceEvent::Interval { ms } => {
                self.write_line(t, "interval", &IntervalOut { interval_ms: *ms })
            }
            SourceEvent::Channels(batch) => {
                for record in self.writers.records(batch) {
                    self.write_line(t, "channels", &record)?;
                }
                Ok(())
            }
        }
    }

    /// `{"t":T,"KIND":PAYLOAD}` and a newline.
    fn write_line<P: Serialize>(&mut self, t: u64, kind: &str, payload: &P) -> io::Result<()> {
        self.write_line_with::<P, P>(t, kind, payload, None)
    }

    /// [`Self::write_line`] with one more key beside the payload, which readers that do not
    /// know it skip.
    fn write_line_with<P: Serialize, B: Serialize>(
        &mut self,
        t: u64,
        kind: &str,
        payload: &P,
        beside: Option<(&str, &B)>,
    ) -> io::Result<()> {
        self.line.clear();
        write!(self.line, "{{\"t\":{t},\"{kind}\":")?;
        serde_json::to_writer(&mut self.line, payload)?;
        if let Some((key, value)) = beside {
            write!(self.line, ",\"{key}\":")?;
            serde_json::to_writer(&mut self.line, value)?;
        }
        self.line.extend_from_slice(b"}\n");
        if self.line.len() > MAX_LINE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "a {kind} record of {} MiB is over the {} MiB a reader accepts",
                    self.line.len() >> 20,
                    MAX_LINE >> 20
                ),
            ));
        }
        unfinished(&mut self.sink)?.write_all(&self.line)?;
        self.dirty = true;
        self.records += 1;
        Ok(())
    }
}

/// The sink, unless the recording is finished.
fn unfinished(sink: &mut Option<Sink>) -> io::Result<&mut Sink> {
    sink.as_mut()
        .ok_or_else(|| io::Error::other("the recording is finished"))
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if let Some(sink) = self.sink.take() {
            let _ = sink.finish();
        }
    }
}
