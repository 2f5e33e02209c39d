//! What held the memory: the memory snapshots a writer announced (`SNAPSHOT_WRITTEN`), and
//! what reducing one said (the allocation sites live at the peak or at the OOM, whether that
//! answer is exact, why an OOM's request did not fit). Plain owned values: the fold keeps the
//! notes, a reduction done elsewhere (the monitor's worker thread, `--json`, the report) sets
//! their `sites`, and every output words them with the functions here, so they say the same.

use super::absent::Reading;
use super::units;
use serde::Serialize;

/// Why the writer dumped a snapshot (the event's `a2`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotReason {
    /// From the allocator's OOM observer, before the error unwound.
    Oom,
    /// At a new high-water mark.
    Peak,
    /// Someone asked: `vramscope.snapshot()`, or the monitor's key.
    Request,
    /// A code this version does not know, or none.
    Unknown,
}

impl SnapshotReason {
    pub fn from_code(code: &Reading<u64>) -> SnapshotReason {
        match code {
            Ok(0) => SnapshotReason::Oom,
            Ok(1) => SnapshotReason::Peak,
            Ok(2) => SnapshotReason::Request,
            _ => SnapshotReason::Unknown,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            SnapshotReason::Oom => "at the OOM",
            SnapshotReason::Peak => "at a new peak",
            SnapshotReason::Request => "on request",
            SnapshotReason::Unknown => "reason unknown",
        }
    }
}

/// One allocation site: the first frame outside torch and the standard library.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HeldSite {
    pub file: String,
    pub line: u32,
    pub function: String,
    pub bytes: u64,
    pub blocks: u64,
    /// Share of the moment's total, 0 to 1.
    pub share: f64,
}

/// One of the largest single blocks live at the moment, and where it was allocated.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HeldBlock {
    pub bytes: u64,
    pub file: String,
    pub line: u32,
    pub function: String,
}

/// Whether the reconstructed moment is the allocator's recorded peak.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "exactness")]
pub enum SitesExactness {
    Exact,
    /// The peak fell outside the history ring: the answer misses `shortfall` bytes.
    Short {
        recorded_peak: u64,
        reconstructed: u64,
        shortfall: u64,
        /// A ring size that would have covered it, when it can be told.
        suggested_max_entries: Option<u64>,
    },
    Unknown {
        why: String,
    },
}

/// Why an OOM's request did not fit.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OomFit {
    /// `None`: the snapshot was dumped at an OOM that recorded no figures.
    pub requested: Option<u64>,
    pub device_free: Option<u64>,
    /// `None` when the history lacks the segment entries to tell (see `unavailable`).
    pub reserved: Option<u64>,
    pub allocated: u64,
    /// Reserved but free: the allocator's cache; `None` with `reserved`.
    pub cached_free: Option<u64>,
    /// At the failure; `None` when there was none or it cannot be told (see `unavailable`).
    pub largest_free_block: Option<u64>,
    /// The reduction's own sentence.
    pub verdict: String,
    /// Where the failed request was made (the site of the `oom` entry's stack); `None` when
    /// the snapshot cannot say (see `unavailable`).
    pub request_site: Option<RequestSite>,
    /// Why each figure that is `None` above is: `reserved`, `cached_free`,
    /// `largest_free_block`, `request_site`.
    pub unavailable: std::collections::BTreeMap<String, String>,
}

/// Where a failed request was made: a site without bytes of its own.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RequestSite {
    pub file: String,
    pub line: u32,
    pub function: String,
}

impl OomFit {
    /// `figure` as words: its bytes, or `n/a (why)`.
    fn words(&self, figure: Option<u64>, name: &str) -> String {
        match (figure, self.unavailable.get(name)) {
            (Some(b), _) => units::bytes(b),
            (None, Some(why)) => format!("n/a ({why})"),
            (None, None) => "n/a".to_string(),
        }
    }
}

/// A snapshot reduced to the moment that matters.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HeldSites {
    /// `peak`, `oom` or `end`.
    pub moment: String,
    pub total_bytes: u64,
    pub blocks: u64,
    /// Biggest first.
    pub sites: Vec<HeldSite>,
    /// The largest single blocks, biggest first.
    pub largest: Vec<HeldBlock>,
    pub exactness: SitesExactness,
    pub oom: Option<OomFit>,
    pub trace_entries: usize,
}

/// Where reducing a snapshot stands.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum SitesState {
    /// Not asked for (only the newest relevant snapshot is reduced).
    NotRead,
    /// Handed to the worker; the answer is on its way.
    Reading,
    Reduced(Box<HeldSites>),
    /// The file could not be read or is not a snapshot: one line.
    Failed {
        why: String,
    },
}

/// A memory snapshot a writer announced, as the fold keeps it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SnapshotNote {
    pub at_ms: u64,
    pub slot: Option<u16>,
    /// The announced file name, as sanitised text.
    pub name: String,
    /// The file beside the channel's, or why the name was refused.
    pub path: Reading<String>,
    pub size: Reading<u64>,
    pub reason: SnapshotReason,
    /// The allocator's lifetime peak allocated at the dump.
    pub peak: Reading<u64>,
    pub allocated: Reading<u64>,
    pub step: Option<u64>,
    pub phase: String,
    /// The history ring's size.
    pub max_entries: Reading<u64>,
    /// Older snapshots the writer deleted to keep its bound, in total so far.
    pub deleted: Reading<u64>,
    pub sites: SitesState,
}

impl SnapshotNote {
    /// Whether reducing it should look at the failing request rather than the peak.
    pub fn at_oom(&self) -> bool {
        self.reason == SnapshotReason::Oom
    }
}

/// A writer's snapshot file name taken apart: `<channel>.snap-<seq>-<reason>.pickle`
/// (docs/channel-v1.md §8), e.g. `4242-123456.vsc.snap-3-peak.pickle`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotName<'a> {
    /// The channel file's name, `<pid>-<starttime>.vsc`.
    pub channel: &'a str,
    pub seq: u64,
    pub reason: &'a str,
}

impl<'a> SnapshotName<'a> {
    /// `None` for a name the writer did not make (a program's own dump, any other file).
    pub fn parse(name: &'a str) -> Option<SnapshotName<'a>> {
        let (channel, rest) = name.rsplit_once(".snap-")?;
        let (seq, reason) = rest.strip_suffix(".pickle")?.split_once('-')?;
        let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
        if !digits(seq) || reason.is_empty() || channel.is_empty() {
            return None;
        }
        Some(SnapshotName {
            channel,
            seq: seq.parse().ok()?,
            reason,
        })
    }

    /// The pid and start time the channel's name carries (`<pid>-<starttime>.vsc`).
    pub fn channel_pid_starttime(&self) -> Option<(u32, u64)> {
        let (pid, start) = self.channel.strip_suffix(".vsc")?.split_once('-')?;
        Some((pid.parse().ok()?, start.parse().ok()?))
    }
}

/// `held at the peak (exact): 41% model.py:123 attention 5.00 GiB, 22% ...` for the `top`
/// biggest sites.
pub fn headline(held: &HeldSites, top: usize) -> String {
    let sites: Vec<String> = held.sites.iter().take(top).map(site_words).collect();
    let list = if sites.is_empty() {
        "nothing held".to_string()
    } else {
        sites.join(", ")
    };
    format!("{}: {list}; {}", moment_words(held), totals(held))
}

/// `held at the peak (exact): 6.00 GiB in 3 blocks`, for a list of the sites to follow.
pub fn summary(held: &HeldSites) -> String {
    format!("{}: {}", moment_words(held), totals(held))
}

/// `held at the peak (exact)`, `held at the OOM (not exact: 1.00 GiB short)`.
fn moment_words(held: &HeldSites) -> String {
    let moment = match held.moment.as_str() {
        "oom" => "at the OOM",
        "end" => "at the dump",
        _ => "at the peak",
    };
    let exact = match &held.exactness {
        SitesExactness::Exact => "exact".to_string(),
        SitesExactness::Short { shortfall, .. } => {
            format!("not exact: {} short", units::bytes(*shortfall))
        }
        SitesExactness::Unknown { .. } => "exactness unknown".to_string(),
    };
    format!("held {moment} ({exact})")
}

/// `6.00 GiB in 3 blocks`.
fn totals(held: &HeldSites) -> String {
    format!(
        "{} in {}",
        units::bytes(held.total_bytes),
        blocks(held.blocks)
    )
}

/// `1 block`, `3 blocks`.
pub fn blocks(n: u64) -> String {
    if n == 1 {
        "1 block".into()
    } else {
        format!("{n} blocks")
    }
}

/// `proj/model.py:123 attention`; a stand-in without a file (`<allocated before the
/// history>`) is its words alone, and a line of 0 is not written, as a site's label does.
fn place(file: &str, line: u32, function: &str) -> String {
    if file.is_empty() {
        return function.to_string();
    }
    let line = if line == 0 {
        String::new()
    } else {
        format!(":{line}")
    };
    let function = if function.is_empty() {
        String::new()
    } else {
        format!(" {function}")
    };
    format!("{}{line}{function}", short_file(file))
}

/// `41% model.py:123 attention 5.00 GiB`.
pub fn site_words(site: &HeldSite) -> String {
    format!(
        "{:.0}% {} {}",
        site.share * 100.0,
        place(&site.file, site.line, &site.function),
        units::bytes(site.bytes)
    )
}

/// `4.00 GiB at proj/model.py:123 attention`.
pub fn block_words(block: &HeldBlock) -> String {
    format!(
        "{} at {}",
        units::bytes(block.bytes),
        place(&block.file, block.line, &block.function)
    )
}

/// The file's last two path components: where a reader recognises it.
fn short_file(file: &str) -> &str {
    let mut cut = file.len();
    for _ in 0..2 {
        match file[..cut].rfind('/') {
            Some(at) => cut = at,
            None => return file,
        }
    }
    &file[cut + 1..]
}

/// What is missing when the answer is not exact, and how to cover it; `None` when exact.
pub fn exactness_note(held: &HeldSites) -> Option<String> {
    match &held.exactness {
        SitesExactness::Exact => None,
        SitesExactness::Short {
            recorded_peak,
            reconstructed,
            shortfall,
            suggested_max_entries,
        } => {
            let mut text = format!(
                "the peak fell outside the history ring: reconstructed {} of the recorded {} ({} short)",
                units::bytes(*reconstructed),
                units::bytes(*recorded_peak),
                units::bytes(*shortfall)
            );
            if let Some(n) = suggested_max_entries {
                text.push_str(&format!("; max_entries {n} would have covered it"));
            }
            Some(text)
        }
        SitesExactness::Unknown { why } => Some(format!("exactness unknown: {why}")),
    }
}

/// `the request, 2.00 GiB at proj/model.py:123 attention, 1.00 GiB free on the device, ...:
/// <verdict>`: `request_words`, then `fit_words`.
pub fn oom_words(fit: &OomFit) -> String {
    format!("{}, {}", request_words(fit), fit_words(fit))
}

/// `the request, 2.00 GiB at proj/model.py:123 attention`, or with `where n/a (why)` when
/// the snapshot cannot place it.
pub fn request_words(fit: &OomFit) -> String {
    let size = fit
        .requested
        .map_or_else(|| "n/a".to_string(), units::bytes);
    match &fit.request_site {
        Some(site) => format!(
            "the request, {size} at {}",
            place(&site.file, site.line, &site.function)
        ),
        None => format!(
            "the request, {size}, where {}",
            fit.words(None, "request_site")
        ),
    }
}

/// `1.00 GiB free on the device, 2.00 GiB allocated of ..., cache 3.00 GiB free (largest
/// free block 512 MiB): <verdict>`.
pub fn fit_words(fit: &OomFit) -> String {
    let free = fit
        .device_free
        .map_or_else(|| "n/a".to_string(), units::bytes);
    // A cache whose size is unknown says so once, not for each of its figures.
    let cache = if fit.reserved.is_none() {
        format!(
            "{} allocated, reserved {}",
            units::bytes(fit.allocated),
            fit.words(fit.reserved, "reserved")
        )
    } else {
        format!(
            "{} allocated of {} reserved, cache {} free (largest free block {})",
            units::bytes(fit.allocated),
            fit.words(fit.reserved, "reserved"),
            fit.words(fit.cached_free, "cached_free"),
            fit.words(fit.largest_free_block, "largest_free_block")
        )
    };
    format!("{free} free on the device, {cache}: {}", fit.verdict)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(exactness: SitesExactness) -> HeldSites {
        HeldSites {
            moment: "peak".into(),
            total_bytes: 10 << 30,
            blocks: 7,
            sites: vec![
                HeldSite {
                    file: "/home/u/proj/model.py".into(),
                    line: 123,
                    function: "attention".into(),
                    bytes: 5 << 30,
                    blocks: 2,
                    share: 0.5,
                },
                HeldSite {
                    file: "train.py".into(),
                    line: 9,
                    function: String::new(),
                    bytes: 3 << 30,
                    blocks: 5,
                    share: 0.3,
                },
            ],
            largest: vec![HeldBlock {
                bytes: 5 << 30,
                file: "/home/u/proj/model.py".into(),
                line: 123,
                function: "attention".into(),
            }],
            exactness,
            oom: None,
            trace_entries: 100,
        }
    }

    #[test]
    fn the_headline_names_the_top_sites_and_says_whether_it_is_exact() {
        let text = headline(&held(SitesExactness::Exact), 5);
        assert!(
            text.starts_with(
                "held at the peak (exact): 50% proj/model.py:123 attention 5.00 GiB, 30% train.py:9 3.00 GiB"
            ),
            "{text}"
        );
        let short = held(SitesExactness::Short {
            recorded_peak: 12 << 30,
            reconstructed: 10 << 30,
            shortfall: 2 << 30,
            suggested_max_entries: Some(400_000),
        });
        assert!(headline(&short, 1).contains("(not exact: 2.00 GiB short)"));
        let note = exactness_note(&short).unwrap();
        assert!(
            note.contains("max_entries 400000 would have covered it"),
            "{note}"
        );
        assert_eq!(exactness_note(&held(SitesExactness::Exact)), None);
        let exact = held(SitesExactness::Exact);
        assert_eq!(
            block_words(&exact.largest[0]),
            "5.00 GiB at proj/model.py:123 attention"
        );
    }

    fn fit(site: Option<RequestSite>, why: Option<&str>) -> OomFit {
        OomFit {
            requested: Some(512 << 30),
            device_free: Some(84 << 30),
            reserved: Some(54 << 30),
            allocated: 54 << 30,
            cached_free: Some(0),
            largest_free_block: None,
            verdict: "truly full".into(),
            request_site: site,
            unavailable: why
                .map(|w| [("request_site".to_string(), w.to_string())].into())
                .unwrap_or_default(),
        }
    }

    #[test]
    fn the_oom_words_lead_with_where_the_request_was_made_or_why_not() {
        let site = |line: u32, function: &str| RequestSite {
            file: "/work/main/python/bench/gpu_sites_transformer.py".into(),
            line,
            function: function.into(),
        };
        let words = oom_words(&fit(Some(site(52, "forward")), None));
        assert!(
            words.starts_with(
                "the request, 512 GiB at bench/gpu_sites_transformer.py:52 forward, 84.0 GiB free on the device, "
            ),
            "{words}"
        );
        assert!(words.ends_with(": truly full"), "{words}");
        // No line, no function: nothing made up for them.
        assert_eq!(
            request_words(&fit(Some(site(0, "")), None)),
            "the request, 512 GiB at bench/gpu_sites_transformer.py"
        );
        assert_eq!(
            request_words(&fit(None, Some("the `oom` entry recorded no stack frames"))),
            "the request, 512 GiB, where n/a (the `oom` entry recorded no stack frames)"
        );
        assert_eq!(
            request_words(&fit(None, None)),
            "the request, 512 GiB, where n/a"
        );
    }

    #[test]
    fn a_stand_in_site_is_its_words_alone() {
        // The report once wrote `:0 <allocated before the history>` for it.
        let site = HeldSite {
            file: String::new(),
            line: 0,
            function: "<allocated before the history>".into(),
            bytes: 32 << 20,
            blocks: 1,
            share: 0.003,
        };
        assert_eq!(
            site_words(&site),
            "0% <allocated before the history> 32.0 MiB"
        );
        let block = HeldBlock {
            bytes: 4 << 30,
            file: "/srv/proj/model.py".into(),
            line: 52,
            function: "forward".into(),
        };
        assert_eq!(block_words(&block), "4.00 GiB at proj/model.py:52 forward");
    }
}

/// One snapshot to reduce.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SitesJob {
    /// The channel's path (the state's key for it).
    pub channel: String,
    /// The snapshot file.
    pub path: String,
    /// Look at the failing request rather than the peak.
    pub at_oom: bool,
    /// The allocator's lifetime peak as the writer published it at the dump: what makes an
    /// answer exact or says by how much it is not.
    pub recorded_peak: Option<u64>,
}

impl SitesJob {
    /// The job for a note whose name was accepted; `None` for a refused one.
    pub fn of(channel: &str, note: &SnapshotNote) -> Option<SitesJob> {
        Some(SitesJob {
            channel: channel.to_string(),
            path: note.path.as_ref().ok()?.clone(),
            at_oom: note.at_oom(),
            recorded_peak: note.peak.as_ref().ok().copied(),
        })
    }
}
