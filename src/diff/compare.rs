//! Two runs compared: the peaks, phase by phase and step by step, the sites held at each
//! run's peak (from the snapshots `vramscope run --sites` dumped, read with
//! `memory_snapshot`), the categories (a slot no recording fills yet), the OOMs, and the
//! settings that change memory; then every difference as a cause with its bytes, ranked
//! (`rank`).

use super::facts::Run;
use super::knobs::{self, Knob, OptionChange};
use super::rank::{Cause, CauseKind, rank};
use crate::memory_snapshot::{self, SitesDiff};
use crate::model::StepOrigin;
use crate::model::held_sites::SitesJob;
use crate::report::OomSummary;

/// Why the categories are `n/a`: no writer publishes them yet. When one does, the runs'
/// category peaks go through `merge_named` as the phases do, and each becomes a
/// `CauseKind::Category`.
pub const NO_CATEGORIES: &str = "the recordings carry no categories";

/// B minus A, bytes, where both are known.
pub fn delta(a: Option<u64>, b: Option<u64>) -> Option<i64> {
    Some(signed(b?) - signed(a?))
}

fn signed(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// One named figure in both runs (a phase; a category, later).
#[derive(Clone, Debug, PartialEq)]
pub struct NamedDelta {
    pub name: String,
    pub a: Option<u64>,
    pub b: Option<u64>,
    /// When the name was first seen, B's else A's: the order the phases run in.
    pub first_ms: u64,
}

impl NamedDelta {
    pub fn delta(&self) -> Option<i64> {
        delta(self.a, self.b)
    }
}

/// The steps both runs have, compared.
#[derive(Clone, Debug, PartialEq)]
pub struct Steps {
    /// `(step, A's peak, B's peak)` of every step both have, by step.
    pub rows: Vec<(u64, u64, u64)>,
    /// How much more B's step peaks grow per step than A's (least squares over the rows).
    pub slope: f64,
    /// `slope` over the steps compared: what B gained on A from the first to the last.
    pub growth: i64,
}

impl Steps {
    /// The step where B exceeds A most (the largest delta), if any row.
    pub fn largest(&self) -> Option<(u64, i64)> {
        self.rows
            .iter()
            .map(|&(s, a, b)| (s, signed(b) - signed(a)))
            .max_by_key(|&(s, d)| (d, std::cmp::Reverse(s)))
    }
}

/// A setting that changes memory, in both runs; `None`: not recorded (the reason beside).
#[derive(Clone, Debug, PartialEq)]
pub struct Setting {
    pub name: &'static str,
    pub a: Result<String, &'static str>,
    pub b: Result<String, &'static str>,
}

impl Setting {
    pub fn changed(&self) -> bool {
        matches!((&self.a, &self.b), (Ok(a), Ok(b)) if a != b)
    }
}

/// Everything the diff says.
pub struct Comparison<'r> {
    pub a: &'r Run,
    pub b: &'r Run,
    pub peak_allocated: (Option<u64>, Option<u64>),
    pub peak_reserved: (Option<u64>, Option<u64>),
    pub cache_at_peak: (Option<u64>, Option<u64>),
    pub gpu_peak_used: (Option<u64>, Option<u64>),
    pub phases: Result<Vec<NamedDelta>, String>,
    pub steps: Result<Steps, String>,
    pub sites: Result<SitesDiff, String>,
    pub categories: Result<Vec<NamedDelta>, String>,
    pub ooms: (&'r [OomSummary], &'r [OomSummary]),
    pub settings: Vec<Setting>,
    pub allocator_changes: Vec<OptionChange>,
    /// Every difference with its bytes, largest first.
    pub causes: Vec<Cause>,
}

/// Compares run `a` with run `b`; `top`: how many sites that changed to keep.
pub fn compare<'r>(a: &'r Run, b: &'r Run, top: usize) -> Comparison<'r> {
    let both = |f: fn(&Run) -> Option<u64>| (f(a), f(b));
    let peak_allocated = both(Run::peak_allocated);
    let phases = phases(a, b);
    let steps = steps(a, b);
    let sites = held_sites(a, b, top);
    let settings = settings(a, b);
    let allocator_changes = knobs::allocator_changes(
        a.allocator().map_or("", |x| x.allocator_config.as_str()),
        b.allocator().map_or("", |x| x.allocator_config.as_str()),
    );
    let cache_at_peak = both(Run::cache_at_peak);
    let mut comparison = Comparison {
        a,
        b,
        peak_allocated,
        peak_reserved: both(Run::peak_reserved),
        cache_at_peak,
        gpu_peak_used: both(Run::gpu_peak_used),
        phases,
        steps,
        sites,
        categories: Err(NO_CATEGORIES.to_string()),
        ooms: (&a.report.ooms, &b.report.ooms),
        settings,
        allocator_changes,
        causes: Vec::new(),
    };
    comparison.causes = rank(causes(&comparison));
    comparison
}

fn phases(a: &Run, b: &Run) -> Result<Vec<NamedDelta>, String> {
    let (Some(pa), Some(pb)) = (a.allocator(), b.allocator()) else {
        return Err(no_allocator(a, b));
    };
    if pa.phase_peaks.is_empty() && pb.phase_peaks.is_empty() {
        return Err("neither run marked phases (`with vramscope.mark(...)`)".into());
    }
    let of = |p: &crate::model::phase_peaks::PhasePeaks| {
        p.iter()
            .map(|(name, peak)| (name.to_string(), peak.peak, peak.first_ms))
            .collect::<Vec<_>>()
    };
    Ok(merge_named(of(&pa.phase_peaks), of(&pb.phase_peaks)))
}

/// Every name of either run, by name, with each run's figure; the first moment is B's where
/// B has the name (the run whose growth is explained), else A's.
pub fn merge_named(a: Vec<(String, u64, u64)>, b: Vec<(String, u64, u64)>) -> Vec<NamedDelta> {
    let mut rows: std::collections::BTreeMap<String, NamedDelta> = Default::default();
    for (name, value, first_ms) in a {
        rows.insert(
            name.clone(),
            NamedDelta {
                name,
                a: Some(value),
                b: None,
                first_ms,
            },
        );
    }
    for (name, value, first_ms) in b {
        let row = rows.entry(name.clone()).or_insert(NamedDelta {
            name,
            a: None,
            b: None,
            first_ms,
        });
        row.b = Some(value);
        row.first_ms = first_ms;
    }
    rows.into_values().collect()
}

/// Why there is nothing to compare per process.
fn no_allocator(a: &Run, b: &Run) -> String {
    match (a.allocator(), b.allocator()) {
        (None, None) => "neither run has an instrumented process (`vramscope run`)".into(),
        (None, _) => "A has no instrumented process (`vramscope run`)".into(),
        _ => "B has no instrumented process (`vramscope run`)".into(),
    }
}

fn steps(a: &Run, b: &Run) -> Result<Steps, String> {
    let (Some(pa), Some(pb)) = (a.allocator(), b.allocator()) else {
        return Err(no_allocator(a, b));
    };
    // Step N of a run counted from its attach is not step N of the job: pairing it with the
    // other run's step N would call the offset a change.
    match (pa.steps_from, pb.steps_from) {
        (StepOrigin::Attach, StepOrigin::Attach) => {
            return Err("both runs count their steps from an attach, not the job's".into());
        }
        (StepOrigin::Attach, _) => {
            return Err("A counts its steps from an attach, not the job's".into());
        }
        (_, StepOrigin::Attach) => {
            return Err("B counts its steps from an attach, not the job's".into());
        }
        _ => {}
    }
    let rows: Vec<(u64, u64, u64)> = pa
        .step_peaks
        .iter()
        .filter_map(|(step, peak_a)| Some((step, peak_a, pb.step_peaks.get(step)?)))
        .collect();
    if rows.is_empty() {
        return Err(match (pa.step_peaks.is_empty(), pb.step_peaks.is_empty()) {
            (true, true) => "neither run ended a step (`vramscope.step()`)".into(),
            (true, false) => "A ended no step".into(),
            (false, true) => "B ended no step".into(),
            (false, false) => "the runs have no step number in common".into(),
        });
    }
    let (slope, growth) = trend(&rows);
    Ok(Steps {
        rows,
        slope,
        growth,
    })
}

/// The least-squares slope of B's step peak minus A's over the step number, and that slope
/// times the steps' span: what B gained on A from step to step, beyond a constant offset.
fn trend(rows: &[(u64, u64, u64)]) -> (f64, i64) {
    if rows.len() < 3 {
        return (0.0, 0);
    }
    let n = rows.len() as f64;
    let points: Vec<(f64, f64)> = rows
        .iter()
        .map(|&(s, a, b)| (s as f64, b as f64 - a as f64))
        .collect();
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    if sxx <= 0.0 {
        return (0.0, 0);
    }
    let slope = sxy / sxx;
    let span = points[points.len() - 1].0 - points[0].0;
    (slope, (slope * span).round() as i64)
}

/// The sites held at each run's peak, from the snapshot of its peak the writer announced.
fn held_sites(a: &Run, b: &Run, top: usize) -> Result<SitesDiff, String> {
    let held = |run: &Run, which: &str| -> Result<memory_snapshot::Held, String> {
        let allocator = run.allocator().ok_or_else(|| {
            format!("{which} has no instrumented process, so no snapshot of its peak")
        })?;
        let note = allocator.held.as_ref().ok_or_else(|| {
            format!("{which} has no snapshot of its peak (`vramscope run --sites` dumps them)")
        })?;
        let job = SitesJob::of(&run.name, note)
            .ok_or_else(|| format!("{which}'s snapshot name was refused when recorded"))?;
        crate::sources::sites::held_of(&job, top)
            .map_err(|why| format!("{which}'s snapshot {}: {why}", note.name))
    };
    let before = held(a, "A")?;
    let after = held(b, "B")?;
    Ok(memory_snapshot::diff(&before, &after, top))
}

fn knob_text(k: Option<Knob>) -> Result<String, &'static str> {
    k.map(|k| k.value.to_string())
        .ok_or("not in the command line")
}

fn settings(a: &Run, b: &Run) -> Vec<Setting> {
    let alloc_conf = |run: &Run| -> Result<String, &'static str> {
        let allocator = run.allocator().ok_or("no instrumented process")?;
        if allocator.kind != "PyTorch" {
            return Err("not a PyTorch process");
        }
        Ok(allocator.allocator_config.clone())
    };
    let world = |run: &Run| -> Result<String, &'static str> {
        let allocator = run.allocator().ok_or("no instrumented process")?;
        allocator
            .world_size
            .map(|w| w.to_string())
            .ok_or("the writer saw no WORLD_SIZE")
    };
    let framework = |run: &Run| -> Result<String, &'static str> {
        let allocator = run.allocator().ok_or("no instrumented process")?;
        Some(allocator.framework.clone())
            .filter(|f| !f.is_empty())
            .ok_or("the writer gave none")
    };
    let gpu = |run: &Run| run.gpu_model().ok_or("no GPU recorded");
    let pair = |name, f: &dyn Fn(&Run) -> Result<String, &'static str>| Setting {
        name,
        a: f(a),
        b: f(b),
    };
    vec![
        pair("PYTORCH_CUDA_ALLOC_CONF", &alloc_conf),
        pair("world size", &world),
        pair("batch size", &|r: &Run| knob_text(r.batch_size())),
        pair("sequence length", &|r: &Run| knob_text(r.sequence_length())),
        pair("framework", &framework),
        pair("GPU model", &gpu),
    ]
}

/// Every difference as a cause with its bytes: a setting that changed carries the figure it
/// moves (the allocator's configuration: the cache at the peak; the others: the peak), a
/// site its growth at the peak, the steps B's gain over them, a phase its peak's change.
fn causes(c: &Comparison) -> Vec<Cause> {
    let mut out = Vec::new();
    let peak = delta(c.peak_allocated.0, c.peak_allocated.1);
    for setting in c.settings.iter().filter(|s| s.changed()) {
        let (Ok(before), Ok(after)) = (&setting.a, &setting.b) else {
            continue;
        };
        let kind = match setting.name {
            "PYTORCH_CUDA_ALLOC_CONF" => CauseKind::AllocatorConfig,
            "framework" | "GPU model" => CauseKind::Environment,
            _ => CauseKind::Setting,
        };
        let (what, bytes, figure) = if kind == CauseKind::AllocatorConfig {
            let options: Vec<String> = c
                .allocator_changes
                .iter()
                .map(|o| {
                    format!(
                        "{} {} -> {}",
                        o.option,
                        o.before.as_deref().unwrap_or("unset"),
                        o.after.as_deref().unwrap_or("unset")
                    )
                })
                .collect();
            (
                format!("PYTORCH_CUDA_ALLOC_CONF: {}", options.join(", ")),
                delta(c.cache_at_peak.0, c.cache_at_peak.1),
                "the cache at the peak",
            )
        } else {
            let spelled = match setting.name {
                "batch size" => c.b.batch_size().map(|k| k.spelled),
                "sequence length" => c.b.sequence_length().map(|k| k.spelled),
                _ => None,
            };
            let spelled = spelled.map_or(String::new(), |s| format!(" ({s})"));
            (
                format!(
                    "{}{spelled} {} -> {}",
                    setting.name,
                    show(before),
                    show(after)
                ),
                peak,
                "the peak",
            )
        };
        out.push(Cause {
            kind,
            what,
            bytes: bytes.unwrap_or(0),
            figure: bytes.map_or("n/a".into(), |_| figure.to_string()),
            first_ms: 0,
        });
    }
    if let Ok(diff) = &c.sites {
        for row in &diff.rows {
            let bytes = i64::try_from(row.growth()).unwrap_or(i64::MAX);
            out.push(Cause {
                kind: CauseKind::Site,
                what: format!("site {}", row.label()),
                bytes,
                figure: "held at the peak".into(),
                first_ms: 0,
            });
        }
    }
    if let Ok(categories) = &c.categories {
        out.extend(named_causes(categories, CauseKind::Category, "category"));
    }
    if let Ok(steps) = &c.steps
        && steps.growth != 0
        && let (Some(first), Some(last)) = (steps.rows.first(), steps.rows.last())
    {
        out.push(Cause {
            kind: CauseKind::StepGrowth,
            what: format!(
                "step peaks grow {} per step more in B, steps {} to {}",
                signed_bytes(steps.slope.round() as i64),
                first.0,
                last.0
            ),
            bytes: steps.growth,
            figure: "gained over the steps".into(),
            first_ms: 0,
        });
    }
    if let Ok(phases) = &c.phases {
        out.extend(named_causes(phases, CauseKind::Phase, "phase"));
    }
    out
}

fn named_causes<'a>(
    rows: &'a [NamedDelta],
    kind: CauseKind,
    word: &'static str,
) -> impl Iterator<Item = Cause> + 'a {
    rows.iter().filter_map(move |row| {
        let bytes = row.delta().filter(|d| *d != 0)?;
        Some(Cause {
            kind,
            what: format!("{word} {}", crate::text::clean(&row.name)),
            bytes,
            figure: "its peak".into(),
            first_ms: row.first_ms,
        })
    })
}

/// A setting's value as shown: an empty one is `unset`.
pub fn show(value: &str) -> String {
    if value.is_empty() {
        "unset".into()
    } else {
        crate::text::clean(value).into_owned()
    }
}

/// `+1.50 GiB`, `-512 MiB`, `0 B`.
pub fn signed_bytes(value: i64) -> String {
    let size = crate::model::units::bytes(value.unsigned_abs());
    match value {
        0 => size,
        v if v > 0 => format!("+{size}"),
        _ => format!("-{size}"),
    }
}
