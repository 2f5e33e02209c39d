//! The answer to "what held the memory": the live set at one moment, grouped by site.

use super::snapshot::Frame;

/// Which moment of a snapshot's history is asked about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Moment {
    /// The most allocated bytes the history shows (reconstructed by walking it backwards).
    Peak,
    /// The last failed request: the last `oom` trace entry, or the dump itself when the
    /// writer dumped from its OOM observer.
    Oom,
    /// The live set at the dump.
    End,
}

impl Moment {
    pub fn name(self) -> &'static str {
        match self {
            Moment::Peak => "peak",
            Moment::Oom => "oom",
            Moment::End => "end",
        }
    }

    pub fn parse(text: &str) -> Option<Moment> {
        match text {
            "peak" => Some(Moment::Peak),
            "oom" => Some(Moment::Oom),
            "end" => Some(Moment::End),
            _ => None,
        }
    }
}

/// Where memory was allocated: the first frame outside torch, the standard library and
/// vramscope's writer, and what the blocks allocated there held at the moment.
#[derive(Clone, Debug, PartialEq)]
pub struct Site {
    pub file: String,
    pub line: u32,
    pub function: String,
    /// Requested bytes (what the tensors asked for; the trace's unit).
    pub bytes: u64,
    pub blocks: u64,
    /// `bytes` over the moment's total, 0.0 to 1.0.
    pub share: f64,
}

impl Site {
    pub(crate) fn at(frame: &Frame) -> Site {
        Site {
            file: frame.filename.clone(),
            line: frame.line,
            function: frame.name.clone(),
            bytes: 0,
            blocks: 0,
            share: 0.0,
        }
    }

    /// `file:line function`, the file's last component only, as memory_viz shows it.
    pub fn label(&self) -> String {
        let file = self.file.rsplit('/').next().unwrap_or(&self.file);
        if file.is_empty() {
            return self.function.clone();
        }
        if self.line == 0 {
            return format!("{file} {}", self.function);
        }
        format!("{file}:{} {}", self.line, self.function)
    }
}

/// One live block at the moment.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockAt {
    pub address: u64,
    /// Requested bytes.
    pub bytes: u64,
    /// The site it was allocated at (`Site::bytes` and `blocks` are this block's).
    pub site: Site,
    /// Wall clock µs of its allocation, when the history holds it.
    pub allocated_us: Option<i64>,
}

/// Whether the reconstructed peak is the allocator's own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exactness {
    /// The live set is the allocator's: the dump's, an OOM's, or a peak equal to the
    /// allocator's recorded peak.
    Exact,
    /// The history does not reach back to the recorded peak.
    Short {
        recorded_peak: u64,
        reconstructed: u64,
        shortfall: u64,
        /// A `max_entries` that would have covered it (see `exact.rs` for how).
        suggested_max_entries: Option<u64>,
    },
    /// Nothing to compare with, or the comparison cannot decide; `why` says which.
    Unknown { why: String },
}

/// A figure the snapshot vouches for, or why it cannot (one line, never a made-up 0).
pub type Known<T> = Result<T, String>;

/// Why the failing request did not fit.
#[derive(Clone, Debug, PartialEq)]
pub struct OomWhy {
    /// The request that failed, bytes; `None` when the snapshot was dumped at an OOM that
    /// recorded no figures.
    pub requested: Option<u64>,
    /// Free device memory as CUDA reported it at the failure.
    pub device_free: Option<u64>,
    /// Bytes the allocator had reserved from the device at the failure; unknown when the
    /// history lacks the segment entries (`walk::State::reserved_known`).
    pub reserved: Known<u64>,
    /// Bytes allocated to tensors at the failure (block sizes).
    pub allocated: u64,
    /// Reserved but not allocated: the cache; unknown with `reserved`.
    pub cached_free: Known<u64>,
    /// The largest free block at the failure (see `oom::largest_free_block`); why not when
    /// the segments changed after it, or when the cache held no free block at all.
    pub largest_free_block: Known<u64>,
    /// One line: fragmentation, truly full, or a cap.
    pub verdict: String,
    /// Where the failed request was made: the `oom` entry's stack reduced by the live set's
    /// rule (`SiteFinder::key`: its first frame outside torch, the standard library and the
    /// writer), `bytes` the request's size and `blocks` 0 (it got none). Why not, when the
    /// entry recorded no stack or the dump was at an OOM the history has no entry for: a
    /// site is never made up.
    pub request_site: Known<Site>,
}

/// What held the memory at one moment on one device.
#[derive(Clone, Debug, PartialEq)]
pub struct Held {
    pub moment: Moment,
    pub device: Option<u32>,
    /// Requested bytes live at the moment.
    pub total_bytes: u64,
    pub blocks: u64,
    /// The top sites, largest first.
    pub sites: Vec<Site>,
    /// The largest single blocks, largest first.
    pub largest: Vec<BlockAt>,
    pub exactness: Exactness,
    pub oom: Option<OomWhy>,
    /// Trace entries the answer was reconstructed from, on this device.
    pub trace_entries: usize,
    /// When the moment was, wall clock µs, when the history says.
    pub time_us: Option<i64>,
    /// Every site's total, not only the top: what `diff` compares.
    pub all_sites: Vec<Site>,
    /// What the limits cut from the snapshot (trace entries, blocks, frames).
    pub cut: super::snapshot::Cut,
    /// Bytes reserved from the device (the segments) at the moment, or why the history
    /// cannot say (it lacks segment entries: a figure below the blocks held would be wrong).
    pub reserved: Known<u64>,
    /// The figure the exactness check compared with, and whether it counts requested
    /// bytes (else blocks' allocated bytes).
    pub recorded_peak: Option<u64>,
    pub recorded_is_requested: bool,
    /// Steps of the walk the history contradicted (passed over); 0 in a consistent file.
    pub mismatches: u64,
}
