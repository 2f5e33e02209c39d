//! The causes of a difference, ranked by bytes. One change shows in several figures at once
//! (a buffer added at a line raises its site, the phase it runs in and every step's peak by
//! the same bytes), so causes within 1 % of each other count as one figure and are told most
//! telling first: a setting the user changed, then the allocator's configuration, a site,
//! a category, the growth over the steps, a phase (of two phases, the one that ran first:
//! where the growth began), and last the framework or GPU model.

/// What kind of difference a cause is, in the order a tie is told.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CauseKind {
    /// The batch size, sequence length or world size.
    Setting,
    /// `PYTORCH_CUDA_ALLOC_CONF`.
    AllocatorConfig,
    /// An allocation site held at the peak.
    Site,
    /// A category of memory (parameters, activations...): no recording carries them yet.
    Category,
    /// B's step peaks gaining on A's step after step.
    StepGrowth,
    /// A phase's peak.
    Phase,
    /// The framework's version or the GPU model.
    Environment,
}

impl CauseKind {
    /// The name `--json` gives it.
    pub fn key(self) -> &'static str {
        match self {
            CauseKind::Setting => "setting",
            CauseKind::AllocatorConfig => "allocator_config",
            CauseKind::Site => "site",
            CauseKind::Category => "category",
            CauseKind::StepGrowth => "step_growth",
            CauseKind::Phase => "phase",
            CauseKind::Environment => "environment",
        }
    }
}

/// One difference and its bytes (B minus A).
#[derive(Clone, Debug, PartialEq)]
pub struct Cause {
    pub kind: CauseKind,
    /// What changed, in words (foreign text cleaned).
    pub what: String,
    pub bytes: i64,
    /// What figure `bytes` is: `the peak`, `held at the peak`, ...
    pub figure: String,
    /// When a phase was first seen, to tell which of two ran first; 0 for other kinds.
    pub first_ms: u64,
}

/// `causes` by bytes (either way), largest first, ties told as the module says.
pub fn rank(mut causes: Vec<Cause>) -> Vec<Cause> {
    causes.sort_by(|a, b| {
        b.bytes
            .unsigned_abs()
            .cmp(&a.bytes.unsigned_abs())
            .then_with(|| tie(a, b))
    });
    let mut ranked = Vec::with_capacity(causes.len());
    let mut rest = causes.into_iter().peekable();
    while let Some(leader) = rest.next() {
        // Within 1 % of the tier's largest (rounding down: a figure under 100 bytes ties
        // only with itself).
        let top = leader.bytes.unsigned_abs();
        let floor = top - top / 100;
        let mut tier = vec![leader];
        while let Some(next) = rest.next_if(|c| c.bytes.unsigned_abs() >= floor) {
            tier.push(next);
        }
        tier.sort_by(tie);
        ranked.extend(tier);
    }
    ranked
}

fn tie(a: &Cause, b: &Cause) -> std::cmp::Ordering {
    a.kind
        .cmp(&b.kind)
        .then_with(|| a.first_ms.cmp(&b.first_ms))
        .then_with(|| b.bytes.unsigned_abs().cmp(&a.bytes.unsigned_abs()))
        .then_with(|| a.what.cmp(&b.what))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cause(kind: CauseKind, what: &str, bytes: i64, first_ms: u64) -> Cause {
        Cause {
            kind,
            what: what.into(),
            bytes,
            figure: String::new(),
            first_ms,
        }
    }

    #[test]
    fn bytes_rank_and_a_near_tie_is_told_most_telling_first() {
        let ranked = rank(vec![
            cause(CauseKind::Phase, "phase backward", 1_000_000, 30),
            cause(CauseKind::Phase, "phase forward/block.3", 1_000_000, 10),
            cause(CauseKind::Site, "site model.py:7", 995_000, 0),
            cause(CauseKind::Phase, "phase optimizer", -3_000_000, 50),
            cause(CauseKind::Site, "site data.py:1", 10, 0),
        ]);
        let order: Vec<&str> = ranked.iter().map(|c| c.what.as_str()).collect();
        assert_eq!(
            order,
            [
                "phase optimizer",
                "site model.py:7",
                "phase forward/block.3",
                "phase backward",
                "site data.py:1"
            ]
        );
        // 2 % apart is two figures: the larger first, whatever its kind.
        let ranked = rank(vec![
            cause(CauseKind::Site, "site", 980, 0),
            cause(CauseKind::Phase, "phase", 1000, 0),
        ]);
        assert_eq!(ranked[0].what, "phase");
    }
}
