//! Reading and reducing one memory snapshot a writer announced, into the model's owned
//! `HeldSites`: used by the monitor's worker thread (`sites_worker`), by `--json` and by the
//! report, so all three say the same. The file is hostile input like a channel: opened
//! without following links, a regular file of ours (root reads anyone's) and no bigger than
//! the reader's bound, then parsed and reduced by `crate::memory_snapshot` within its
//! limits.

use crate::memory_snapshot::{self, Exactness, Held, Limits, Moment};
use crate::model::held_sites::{
    HeldBlock, HeldSite, HeldSites, OomFit, RequestSite, SitesExactness, SitesJob, SitesState,
};
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Sites kept per reduction: the screen shows a few, `--json` and the report all of these.
pub const TOP_SITES: usize = 10;
/// The largest single blocks kept per reduction.
const LARGEST_BLOCKS: usize = 5;

/// Reads and reduces `job`'s file: the answer, or why not in one line. A file that no
/// longer exists (the writer keeps only its newest few) is said so.
pub fn reduce(job: &SitesJob) -> SitesState {
    match held_of(job, TOP_SITES) {
        Ok(held) => SitesState::Reduced(Box::new(convert(&held))),
        Err(why) => SitesState::Failed { why },
    }
}

/// `job`'s file read as `reduce` reads it, and the library's whole answer at its moment
/// (`top` sites listed; `all_sites` holds every one, for `memory_snapshot::diff`).
pub fn held_of(job: &SitesJob, top: usize) -> Result<Held, String> {
    let limits = Limits::default();
    let bytes = read_bounded(Path::new(&job.path), &limits)?;
    let snap = memory_snapshot::read_owned(bytes, &limits)
        .map_err(|e| crate::text::clean(&e.to_string()).into_owned())?;
    let moment = if job.at_oom {
        Moment::Oom
    } else {
        Moment::Peak
    };
    memory_snapshot::held(&snap, moment, job.recorded_peak, top)
        .map_err(|e| crate::text::clean(&e.to_string()).into_owned())
}

/// The file's bytes, if it is a regular file of ours within the snapshot's bound (size on
/// the descriptor, then its first bytes: `memory_snapshot::read_open_file`), before the
/// whole is read.
fn read_bounded(path: &Path, limits: &Limits) -> Result<Vec<u8>, String> {
    let me = crate::channel::euid();
    // Beside its channel, in the writer's directory: opened as the channel is (the folder by
    // descriptor, never through a symlink; a FIFO or device refused before it is opened).
    let file: File = crate::channel::open_channel_file(path, me, false).map_err(|n| {
        if n.missing {
            "the file no longer exists (the writer keeps only its newest few)".to_string()
        } else if n.why.ends_with("a symlink") {
            "refused: the snapshot is a symlink".to_string()
        } else {
            format!("cannot open the snapshot: {}", n.why)
        }
    })?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot stat the snapshot: {e}"))?;
    if me != 0 && meta.uid() != me {
        return Err(format!(
            "refused: the snapshot is owned by uid {}, not by us ({me})",
            meta.uid()
        ));
    }
    memory_snapshot::read_open_file(&file, limits)
        .map_err(|e| crate::text::clean(&e.to_string()).into_owned())
}

/// The library's answer in the model's owned terms.
pub fn convert(held: &Held) -> HeldSites {
    HeldSites {
        moment: match held.moment {
            Moment::Peak => "peak",
            Moment::Oom => "oom",
            Moment::End => "end",
        }
        .into(),
        total_bytes: held.total_bytes,
        blocks: held.blocks,
        sites: held
            .sites
            .iter()
            .map(|s| HeldSite {
                file: s.file.clone(),
                line: s.line,
                function: s.function.clone(),
                bytes: s.bytes,
                blocks: s.blocks,
                share: s.share,
            })
            .collect(),
        largest: held
            .largest
            .iter()
            .take(LARGEST_BLOCKS)
            .map(|b| HeldBlock {
                bytes: b.bytes,
                file: b.site.file.clone(),
                line: b.site.line,
                function: b.site.function.clone(),
            })
            .collect(),
        exactness: match &held.exactness {
            Exactness::Exact => SitesExactness::Exact,
            Exactness::Short {
                recorded_peak,
                reconstructed,
                shortfall,
                suggested_max_entries,
            } => SitesExactness::Short {
                recorded_peak: *recorded_peak,
                reconstructed: *reconstructed,
                shortfall: *shortfall,
                suggested_max_entries: *suggested_max_entries,
            },
            Exactness::Unknown { why } => SitesExactness::Unknown { why: why.clone() },
        },
        oom: held.oom.as_ref().map(|o| {
            let mut unavailable = std::collections::BTreeMap::new();
            let mut figure = |value: &memory_snapshot::Known<u64>, name: &str| match value {
                Ok(b) => Some(*b),
                Err(why) => {
                    unavailable.insert(name.to_string(), why.clone());
                    None
                }
            };
            let reserved = figure(&o.reserved, "reserved");
            let cached_free = figure(&o.cached_free, "cached_free");
            let largest_free_block = figure(&o.largest_free_block, "largest_free_block");
            let request_site = match &o.request_site {
                Ok(site) => Some(RequestSite {
                    file: site.file.clone(),
                    line: site.line,
                    function: site.function.clone(),
                }),
                Err(why) => {
                    unavailable.insert("request_site".to_string(), why.clone());
                    None
                }
            };
            OomFit {
                requested: o.requested,
                device_free: o.device_free,
                reserved,
                allocated: o.allocated,
                cached_free,
                largest_free_block,
                verdict: o.verdict.clone(),
                request_site,
                unavailable,
            }
        }),
        trace_entries: held.trace_entries,
    }
}
