//! Fixed-capacity storage behind a [`Series`](super::Series): the bounded
//! ring push used by every ring, and the aggregated bucket tiers that keep
//! min/max/sum/count/last (and where the max happened) once raw samples age out.

use std::collections::VecDeque;

/// Appends `item`, dropping (and returning) the oldest element once `cap` is
/// reached. `cap` must be at least 1; callers sanitise it at construction.
pub(crate) fn push_bounded<T>(ring: &mut VecDeque<T>, cap: usize, item: T) -> Option<T> {
    let evicted = if ring.len() >= cap {
        ring.pop_front()
    } else {
        None
    };
    if ring.len() == ring.capacity() {
        // VecDeque's own growth doubles, which would let a 9000-slot ring
        // allocate 16384 slots; growing by hand keeps the bound at `cap`.
        let target = ring.capacity().saturating_mul(2).max(16).min(cap);
        ring.reserve_exact(target.saturating_sub(ring.len()));
    }
    ring.push_back(item);
    evicted
}

/// One aligned time slice of a tier: the aggregate of every sample in
/// `[start_ms, start_ms + bucket width)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bucket {
    start_ms: u64,
    min: f64,
    max: f64,
    sum: f64,
    last: f64,
    // An offset rather than a full timestamp saves 8 bytes per bucket, which
    // is ~100 KB per long-lived series; bucket widths are capped to fit.
    max_offset_ms: u32,
    count: u32,
}

impl Bucket {
    fn new(start_ms: u64, at_ms: u64, value: f64) -> Self {
        Bucket {
            start_ms,
            min: value,
            max: value,
            sum: value,
            last: value,
            max_offset_ms: offset(start_ms, at_ms),
            count: 1,
        }
    }

    fn add(&mut self, at_ms: u64, value: f64) {
        self.min = self.min.min(value);
        // Strictly greater keeps the first occurrence of a plateau as its time.
        if value > self.max {
            self.max = value;
            self.max_offset_ms = offset(self.start_ms, at_ms);
        }
        self.sum += value;
        self.last = value;
        self.count = self.count.saturating_add(1);
    }

    pub fn start_ms(&self) -> u64 {
        self.start_ms
    }
    pub fn min(&self) -> f64 {
        self.min
    }
    pub fn max(&self) -> f64 {
        self.max
    }
    /// When the bucket's maximum was sampled (first time, if repeated).
    pub fn max_at(&self) -> u64 {
        self.start_ms.saturating_add(u64::from(self.max_offset_ms))
    }
    pub fn last(&self) -> f64 {
        self.last
    }
    pub fn count(&self) -> u32 {
        self.count
    }
    pub fn mean(&self) -> f64 {
        self.sum / f64::from(self.count.max(1))
    }
}

fn offset(start_ms: u64, at_ms: u64) -> u32 {
    u32::try_from(at_ms.saturating_sub(start_ms)).unwrap_or(u32::MAX)
}

/// A ring of equal-width buckets, oldest first, strictly increasing starts.
#[derive(Clone, Debug)]
pub(crate) struct Tier {
    bucket_ms: u64,
    cap: usize,
    buckets: VecDeque<Bucket>,
    // Everything before this instant has been evicted; zero until the ring
    // first overflows, because before then it holds all that was ever pushed.
    covered_from: u64,
}

impl Tier {
    /// Widths are clamped to `1..=u32::MAX` ms so that `max_offset_ms` fits.
    pub(crate) fn new(bucket_ms: u64, span_ms: u64) -> Self {
        let bucket_ms = bucket_ms.clamp(1, u64::from(u32::MAX));
        let cap = usize::try_from(span_ms / bucket_ms)
            .unwrap_or(usize::MAX)
            .max(1);
        Tier {
            bucket_ms,
            cap,
            buckets: VecDeque::new(),
            covered_from: 0,
        }
    }

    /// `at_ms` must not precede earlier calls; the series guarantees that.
    pub(crate) fn add(&mut self, at_ms: u64, value: f64) {
        let start = at_ms - at_ms % self.bucket_ms;
        if let Some(open) = self.buckets.back_mut().filter(|b| b.start_ms >= start) {
            open.add(at_ms, value);
            return;
        }
        let fresh = Bucket::new(start, at_ms, value);
        if let Some(old) = push_bounded(&mut self.buckets, self.cap, fresh) {
            self.covered_from = self.end_of(&old);
        }
    }

    pub(crate) fn covered_from(&self) -> u64 {
        self.covered_from
    }

    pub(crate) fn end_of(&self, bucket: &Bucket) -> u64 {
        bucket.start_ms.saturating_add(self.bucket_ms)
    }

    /// Buckets whose span intersects `[from_ms, to_ms)`, oldest first.
    pub(crate) fn overlapping(&self, from_ms: u64, to_ms: u64) -> impl Iterator<Item = &Bucket> {
        let first = self.buckets.partition_point(|b| self.end_of(b) <= from_ms);
        self.buckets
            .range(first..)
            .take_while(move |b| b.start_ms < to_ms)
    }

    pub(crate) fn buckets(&self) -> impl Iterator<Item = &Bucket> {
        self.buckets.iter()
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.buckets.capacity() * size_of::<Bucket>()
    }
}
