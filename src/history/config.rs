//! [`SeriesConfig`]: how much history a series keeps and at which
//! resolutions; the sizes here are what bound a series' memory.

/// One tier of aggregated history: buckets `bucket_ms` wide, enough of them
/// to span `span_ms` when samples arrive continuously.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TierSpec {
    pub bucket_ms: u64,
    pub span_ms: u64,
}

/// How much history a [`Series`](super::Series) keeps and at which resolutions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeriesConfig {
    /// How far back raw samples should reach at the fastest expected rate.
    pub raw_span_ms: u64,
    /// The fastest expected sample spacing; sizes the raw ring. Faster
    /// sampling still works, it just shortens how far back raw data reaches.
    pub min_spacing_ms: u64,
    /// Coarser tiers; order does not matter, they are sorted finest first.
    pub tiers: Vec<TierSpec>,
}

impl SeriesConfig {
    /// For per-process series: a process lives hours, not weeks, and there can be hundreds,
    /// so keep 5 minutes raw, 10 s buckets for 2 hours and 1 min buckets for a day
    /// (about 140 KB at most per series instead of about 730 KB).
    pub fn process() -> Self {
        const MINUTE: u64 = 60_000;
        SeriesConfig {
            raw_span_ms: 5 * MINUTE,
            min_spacing_ms: 100,
            tiers: vec![
                TierSpec {
                    bucket_ms: 10_000,
                    span_ms: 2 * 60 * MINUTE,
                },
                TierSpec {
                    bucket_ms: MINUTE,
                    span_ms: 24 * 60 * MINUTE,
                },
            ],
        }
    }
}

impl Default for SeriesConfig {
    fn default() -> Self {
        const MINUTE: u64 = 60_000;
        SeriesConfig {
            raw_span_ms: 15 * MINUTE,
            min_spacing_ms: 100,
            tiers: vec![
                TierSpec {
                    bucket_ms: 10_000,
                    span_ms: 6 * 60 * MINUTE,
                },
                TierSpec {
                    bucket_ms: MINUTE,
                    span_ms: 7 * 24 * 60 * MINUTE,
                },
            ],
        }
    }
}

impl SeriesConfig {
    /// Raw ring slots: 9000 for the default (15 min at 100 ms).
    pub fn raw_capacity(&self) -> usize {
        let slots = self.raw_span_ms / self.min_spacing_ms.max(1);
        usize::try_from(slots).unwrap_or(usize::MAX).max(1)
    }
}
