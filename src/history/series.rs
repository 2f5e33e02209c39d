//! [`Series`]: one metric's bounded history — a raw ring of recent samples,
//! coarser bucket tiers behind it, and an all-time peak that no eviction or
//! decimation can lose — plus the windowed queries charts draw from.

use std::collections::VecDeque;

use super::config::SeriesConfig;
use super::figures::{Column, Peak};
use super::tier::{Bucket, Tier, push_bounded};

/// A raw sample; a NaN value marks a gap. `push` rejects non-finite input,
/// so NaN can never be confused with a reading.
#[derive(Clone, Copy, Debug)]
struct RawPoint {
    at_ms: u64,
    value: f64,
}

impl RawPoint {
    fn reading(&self) -> Option<f64> {
        (!self.value.is_nan()).then_some(self.value)
    }
}

/// Bounded history of one metric. See the module docs for the layout.
#[derive(Clone, Debug)]
pub struct Series {
    raw: VecDeque<RawPoint>,
    raw_cap: usize,
    // Raw holds every sample at or after this instant (see `Tier::covered_from`).
    raw_covered_from: u64,
    tiers: Vec<Tier>,
    clock_ms: Option<u64>,
    last: Option<(u64, f64)>,
    in_gap: bool,
    // Explicit breaks `[gap recorded, next reading)`, oldest first; an open one ends at
    // `u64::MAX`. Kept apart from raw so a break still shows once raw has aged into tiers.
    gaps: VecDeque<(u64, u64)>,
    // Time between the last two regular readings with no break between them: how long the
    // latest reading is taken to hold before the next one is due.
    spacing_ms: u64,
    // When the last regular reading (not `push_between`) was taken, for `spacing_ms`.
    regular_at: Option<u64>,
    peak: Option<Peak>,
}

/// Breaks remembered per series; older ones lie beyond what charts are asked to draw.
const GAP_CAP: usize = 256;

/// Where one stretch of a queried window is answered from.
#[derive(Clone, Copy)]
enum Source {
    Raw,
    Tier(usize),
}

/// Maps instants in `[from, to)` onto `columns` equal slices.
struct Grid {
    from: u64,
    span: u128,
    columns: u128,
}

/// The column `at_ms` falls in when `[from_ms, to_ms)` is split into `columns` equal slices,
/// exactly as [`Series::query`] lays its columns out; `None` outside the window. Charts use it
/// to put a marker on the column that holds a given moment.
pub fn column_of(at_ms: u64, from_ms: u64, to_ms: u64, columns: usize) -> Option<usize> {
    if columns == 0 || !(from_ms..to_ms).contains(&at_ms) {
        return None;
    }
    let grid = Grid {
        from: from_ms,
        span: u128::from(to_ms - from_ms),
        columns: columns as u128,
    };
    Some(grid.column(at_ms))
}

impl Grid {
    /// `at` must lie in the grid's window.
    fn column(&self, at: u64) -> usize {
        let offset = u128::from(at.saturating_sub(self.from));
        let col = (offset * self.columns / self.span).min(self.columns - 1);
        usize::try_from(col).unwrap_or(usize::MAX)
    }
}

fn merge(slot: &mut Option<Column>, min: f64, max: f64, last: f64) {
    match slot {
        Some(c) => {
            c.min = c.min.min(min);
            c.max = c.max.max(max);
            c.last = last;
        }
        None => *slot = Some(Column { min, max, last }),
    }
}

impl Default for Series {
    fn default() -> Self {
        Series::new(SeriesConfig::default())
    }
}

impl Series {
    pub fn new(config: SeriesConfig) -> Self {
        let raw_cap = config.raw_capacity();
        let mut specs = config.tiers;
        specs.sort_by_key(|t| t.bucket_ms);
        Series {
            raw: VecDeque::new(),
            raw_cap,
            raw_covered_from: 0,
            tiers: specs
                .iter()
                .map(|t| Tier::new(t.bucket_ms, t.span_ms))
                .collect(),
            clock_ms: None,
            last: None,
            in_gap: false,
            gaps: VecDeque::new(),
            spacing_ms: 0,
            regular_at: None,
            peak: None,
        }
    }

    /// Clamps `at_ms` so time never runs backwards within a series; wall
    /// clocks do step back (NTP, manual changes) and reordering would break
    /// the sorted rings every query relies on.
    fn advance_clock(&mut self, at_ms: u64) -> u64 {
        let at = self.clock_ms.map_or(at_ms, |now| now.max(at_ms));
        self.clock_ms = Some(at);
        at
    }

    fn push_raw(&mut self, point: RawPoint) {
        if let Some(old) = push_bounded(&mut self.raw, self.raw_cap, point) {
            self.raw_covered_from = old.at_ms.saturating_add(1);
        }
    }

    /// Records a reading. Non-finite values are dropped: they are read errors,
    /// not measurements, and would poison min/max.
    pub fn push(&mut self, at_ms: u64, value: f64) {
        if let Some(at) = self.push_reading(at_ms, value) {
            if let Some(prev) = self.regular_at {
                self.spacing_ms = at - prev;
            }
            self.regular_at = Some(at);
        }
    }

    /// Records a reading taken between the regular ones (the fast memory sampling's peak of
    /// an interval): kept in the history, the charts and the peak like any reading, but it does
    /// not change how long the regular readings are taken to hold.
    pub fn push_between(&mut self, at_ms: u64, value: f64) {
        self.push_reading(at_ms, value);
    }

    /// `push`'s common part; the reading's (clamped) time, `None` when it was dropped.
    fn push_reading(&mut self, at_ms: u64, value: f64) -> Option<u64> {
        if !value.is_finite() {
            return None;
        }
        let at = self.advance_clock(at_ms);
        self.push_raw(RawPoint { at_ms: at, value });
        for tier in &mut self.tiers {
            tier.add(at, value);
        }
        if self.in_gap
            && let Some(open) = self.gaps.back_mut()
        {
            open.1 = at;
        }
        self.last = Some((at, value));
        self.in_gap = false;
        if self.peak.is_none_or(|p| value > p.value) {
            self.peak = Some(Peak { value, at_ms: at });
        }
        Some(at)
    }

    /// Records that no reading could be taken at `at_ms`.
    pub fn push_gap(&mut self, at_ms: u64) {
        let at = self.advance_clock(at_ms);
        // A stalled sampler reports a gap every tick; one marker per stall
        // is enough and stops the stall from flushing real data out of raw.
        if !self.in_gap {
            self.push_raw(RawPoint {
                at_ms: at,
                value: f64::NAN,
            });
            push_bounded(&mut self.gaps, GAP_CAP, (at, u64::MAX));
        }
        self.in_gap = true;
        // The spacing is of readings with no break between them.
        self.regular_at = None;
    }

    /// The most recent reading, even if gaps were recorded after it.
    pub fn last(&self) -> Option<(u64, f64)> {
        self.last
    }

    /// True when the latest event was a gap, i.e. `last()` is stale.
    pub fn in_gap(&self) -> bool {
        self.in_gap
    }

    pub fn peak(&self) -> Option<Peak> {
        self.peak
    }

    /// Forgets the all-time peak; the next reading becomes the new one.
    pub fn reset_peak(&mut self) {
        self.peak = None;
    }

    /// The oldest moment the series holds anything for: its first sample while raw still
    /// holds everything, else the start of the oldest bucket kept. Charts say "over the last
    /// 5s" rather than claim a window longer than the history behind it.
    pub fn first_at(&self) -> Option<u64> {
        if self.raw_covered_from == 0 {
            return self.raw.front().map(|p| p.at_ms);
        }
        self.tiers
            .iter()
            .filter_map(|t| t.buckets().next().map(Bucket::start_ms))
            .min()
            .or(Some(self.raw_covered_from))
    }

    /// Raw samples still held, oldest first; `None` marks a gap.
    pub fn raw(&self) -> impl Iterator<Item = (u64, Option<f64>)> + '_ {
        self.raw.iter().map(|p| (p.at_ms, p.reading()))
    }

    /// Buckets of tier `index` (0 = finest), oldest first.
    pub fn tier_buckets(&self, index: usize) -> impl Iterator<Item = &Bucket> {
        self.tiers.get(index).into_iter().flat_map(Tier::buckets)
    }

    /// Splits `[from, to)` into stretches each answered by the finest source
    /// that still covers it, oldest stretch first. Sources never overlap, so
    /// no sample is counted twice except inside a tier bucket straddling a
    /// boundary, where the bucket is the best information left.
    fn segments(&self, from: u64, to: u64) -> Vec<(Source, u64, u64)> {
        let sources = std::iter::once((Source::Raw, self.raw_covered_from)).chain(
            self.tiers
                .iter()
                .enumerate()
                .map(|(i, t)| (Source::Tier(i), t.covered_from())),
        );
        let mut upper = to;
        let mut out = Vec::with_capacity(self.tiers.len() + 1);
        for (source, covered_from) in sources {
            let lo = from.max(covered_from);
            if lo < upper {
                out.push((source, lo, upper));
            }
            upper = upper.min(covered_from);
        }
        out.reverse();
        out
    }

    fn raw_in(&self, from: u64, to: u64) -> impl Iterator<Item = (u64, f64)> + '_ {
        let first = self.raw.partition_point(|p| p.at_ms < from);
        self.raw
            .range(first..)
            .take_while(move |p| p.at_ms < to)
            .filter_map(|p| p.reading().map(|v| (p.at_ms, v)))
    }

    /// Min/max/last per column over `[from_ms, to_ms)` in `columns` equal
    /// slices. A tier bucket counts toward every column its span touches,
    /// so a spike can widen when zoomed past the tier's resolution but is
    /// never dropped. Costs O(columns + samples in the window).
    pub fn query(&self, from_ms: u64, to_ms: u64, columns: usize) -> Vec<Option<Column>> {
        self.query_ending_by(from_ms, to_ms, columns, u64::MAX)
    }

    /// [`Series::query`] of the series as it stood at `end_ms` (exclusive): a tier bucket
    /// counts only when it ended by then, as one still open then may hold readings from
    /// after it (a screen paused for longer than raw reaches back).
    pub(super) fn query_ending_by(
        &self,
        from_ms: u64,
        to_ms: u64,
        columns: usize,
        end_ms: u64,
    ) -> Vec<Option<Column>> {
        let mut out = Vec::new();
        // A caller-supplied width must not be able to abort the process.
        if out.try_reserve_exact(columns).is_err() {
            return out;
        }
        out.resize(columns, None);
        if columns == 0 || from_ms >= to_ms {
            return out;
        }
        let grid = Grid {
            from: from_ms,
            span: u128::from(to_ms - from_ms),
            columns: columns as u128,
        };
        for (source, lo, hi) in self.segments(from_ms, to_ms) {
            match source {
                Source::Raw => {
                    for (at, v) in self.raw_in(lo, hi) {
                        merge(&mut out[grid.column(at)], v, v, v);
                    }
                }
                Source::Tier(i) => {
                    let tier = &self.tiers[i];
                    for b in tier
                        .overlapping(lo, hi)
                        .filter(|b| tier.end_of(b) <= end_ms)
                    {
                        let start = b.start_ms().max(lo);
                        let end = tier.end_of(b).min(hi);
                        let cols = grid.column(start)..=grid.column(end - 1);
                        for cell in out.get_mut(cols).into_iter().flatten() {
                            merge(cell, b.min(), b.max(), b.last());
                        }
                    }
                }
            }
        }
        out
    }

    /// The highest reading in `[from_ms, to_ms)`. Where only buckets remain,
    /// a bucket counts when its max was sampled inside the window, so the
    /// reported time is always exact and inside the window.
    pub fn window_peak(&self, from_ms: u64, to_ms: u64) -> Option<Peak> {
        let mut best: Option<Peak> = None;
        let mut offer = |value: f64, at_ms: u64| {
            if best.is_none_or(|p| value > p.value) {
                best = Some(Peak { value, at_ms });
            }
        };
        for (source, lo, hi) in self.segments(from_ms, to_ms) {
            match source {
                Source::Raw => self.raw_in(lo, hi).for_each(|(at, v)| offer(v, at)),
                Source::Tier(i) => {
                    for b in self.tiers[i].overlapping(lo, hi) {
                        if (lo..hi).contains(&b.max_at()) {
                            offer(b.max(), b.max_at());
                        }
                    }
                }
            }
        }
        best
    }

    /// The recorded breaks `[start, end)` that overlap `[from_ms, to_ms)`, oldest first.
    pub(super) fn gaps_in(&self, from_ms: u64, to_ms: u64) -> Vec<(u64, u64)> {
        self.gaps
            .iter()
            .copied()
            .filter(|&(start, end)| start < to_ms && end > from_ms)
            .collect()
    }

    /// The latest reading before `end_ms`, even if breaks came after it: `last` as it stood
    /// then. From raw where raw reaches, else from the finest tier holding anything before.
    pub(super) fn last_before(&self, end_ms: u64) -> Option<(u64, f64)> {
        if let Some(last) = self.last.filter(|(at, _)| *at < end_ms) {
            return Some(last);
        }
        let before = self.raw.partition_point(|p| p.at_ms < end_ms);
        let in_raw = self
            .raw
            .range(..before)
            .rev()
            .find_map(|p| p.reading().map(|v| (p.at_ms, v)));
        if in_raw.is_some() {
            return in_raw;
        }
        // Only buckets wholly before the cap: a bucket's last value may be from after it.
        self.tiers.iter().find_map(|tier| {
            tier.buckets()
                .take_while(|b| tier.end_of(b) <= end_ms)
                .last()
                .map(|b| (tier.end_of(b).saturating_sub(1), b.last()))
        })
    }

    /// How long the latest reading holds: the spacing of the last two readings.
    pub(super) fn spacing_ms(&self) -> u64 {
        self.spacing_ms
    }

    /// The latest reading before `at_ms`, or `None` when a break came after it or nothing
    /// is held that early. Answered from raw where raw reaches, else from the finest tier
    /// (a bucket's last value, dated at the bucket's end).
    pub(super) fn reading_before(&self, at_ms: u64) -> Option<(u64, f64)> {
        let before = self.raw.partition_point(|p| p.at_ms < at_ms);
        if let Some(p) = before.checked_sub(1).and_then(|i| self.raw.get(i)) {
            return p.reading().map(|v| (p.at_ms, v));
        }
        // Raw still holds every reading: none came before `at_ms`. A bucket that began
        // before it may hold only later readings (buckets start on their own grid, before
        // the first reading): taking its last would draw history from before the series
        // began.
        if self.raw_covered_from == 0 {
            return None;
        }
        self.tiers.iter().find_map(|tier| {
            tier.buckets()
                .take_while(|b| tier.end_of(b) <= at_ms)
                .last()
                .map(|b| (tier.end_of(b), b.last()))
        })
    }

    /// Approximate heap plus inline size, for checking that memory stays bounded.
    pub fn memory_bytes(&self) -> usize {
        size_of::<Self>()
            + self.raw.capacity() * size_of::<RawPoint>()
            + self.tiers.capacity() * size_of::<Tier>()
            + self.gaps.capacity() * size_of::<(u64, u64)>()
            + self.tiers.iter().map(Tier::heap_bytes).sum::<usize>()
    }
}
