//! `--record FILE` for the monitor: each sampler event is recorded just before the monitor
//! ingests it, so the file holds exactly what the screen was drawn from. A write that fails
//! (disk full) stops the recording, says so once, and leaves the monitor running.

use crate::model::SourceEvent;
use crate::model::{now_ms, units};
use crate::recording::{Header, Recorder};
use std::path::Path;

/// A recorded path longer than this shows by its file name alone in the header.
const LABEL_PATH_MAX: usize = 32;

/// The monitor's recording, or none.
#[derive(Default)]
pub struct LiveRecording {
    recorder: Option<Recorder>,
}

impl LiveRecording {
    /// Starts recording to `path` when one is given; the error is a line for stderr.
    pub fn start(path: Option<&Path>, interval_ms: u64) -> Result<LiveRecording, String> {
        let Some(path) = path else {
            return Ok(LiveRecording::default());
        };
        let recorder = Recorder::create(path, Header::new(interval_ms))
            .map_err(|e| format!("cannot record to {}: {}", path.display(), open_error(&e)))?;
        Ok(LiveRecording {
            recorder: Some(recorder),
        })
    }

    /// Records one event as received now. `Some` when recording has just stopped, saying why.
    pub fn record(&mut self, event: &SourceEvent) -> Option<String> {
        let error = self.recorder.as_mut()?.record(now_ms(), event).err()?;
        self.stop(&error)
    }

    /// Flushes records that have waited long enough; called on each turn of the monitor's
    /// loop, which turns at least once a second. `Some` when recording has just stopped.
    pub fn tick(&mut self) -> Option<String> {
        let error = self.recorder.as_mut()?.flush_if_due().err()?;
        self.stop(&error)
    }

    /// Drops the recorder after a failed write (finishing the file as well as it can).
    fn stop(&mut self, error: &std::io::Error) -> Option<String> {
        let recorder = self.recorder.take()?;
        Some(format!(
            "recording to {} stopped: {error}",
            recorder.path().display()
        ))
    }

    /// `REC run.jsonl.zst 1.20 MiB` for the header while recording: the file as given
    /// (its name alone when the path is long), cleaned for the terminal, and its size.
    pub fn label(&self) -> Option<String> {
        let recorder = self.recorder.as_ref()?;
        let path = recorder.path();
        let given = path.to_string_lossy();
        let shown = if given.chars().count() <= LABEL_PATH_MAX {
            given
        } else {
            path.file_name()
                .map_or(given.clone(), |n| n.to_string_lossy())
        };
        let size = recorder
            .bytes_on_disk()
            .map_or_else(|| crate::model::NA.to_string(), units::bytes);
        Some(format!("REC {} {size}", crate::text::clean(&shown)))
    }

    /// Ends the file; a line saying what was recorded, or why the end failed.
    pub fn finish(self) -> Option<String> {
        let recorder = self.recorder?;
        let path = recorder.path().to_path_buf();
        let records = recorder.records();
        Some(match recorder.finish() {
            Ok(()) => format!(
                "recorded {records} events to {} ({})",
                path.display(),
                std::fs::metadata(&path).map_or_else(|_| "?".into(), |m| units::bytes(m.len()))
            ),
            Err(e) => format!("the recording {} may be incomplete: {e}", path.display()),
        })
    }
}

/// Says what to do about an existing file.
pub(super) fn open_error(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::AlreadyExists => {
            "the file exists (choose another name, or remove it first)".into()
        }
        _ if e.raw_os_error() == Some(libc::ELOOP) => "it is a symbolic link".into(),
        _ => e.to_string(),
    }
}
