//! Bounded, peak-preserving downsampling of one series while it is read.
//!
//! Points fall into time buckets of a common width; each bucket keeps its highest value and
//! when that happened. When the buckets would span more than twice the limit, the width
//! doubles and neighbouring buckets merge, each keeping the higher maximum. Memory therefore
//! stays bounded by the limit whatever the recording's length, and no peak is ever lost: the
//! series' highest point is always some bucket's maximum.

use std::collections::BTreeMap;

/// One bucket: the time range its points covered and its highest value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bucket {
    pub first_ms: u64,
    pub last_ms: u64,
    /// When `value` was first reached in the bucket.
    pub peak_ms: u64,
    pub value: u64,
    pub points: u64,
}

impl Bucket {
    fn merge(&mut self, other: Bucket) {
        self.first_ms = self.first_ms.min(other.first_ms);
        self.last_ms = self.last_ms.max(other.last_ms);
        self.points = self.points.saturating_add(other.points);
        if other.value > self.value || (other.value == self.value && other.peak_ms < self.peak_ms) {
            self.value = other.value;
            self.peak_ms = other.peak_ms;
        }
    }
}

/// A series being downsampled to at most `limit` buckets.
#[derive(Clone, Debug)]
pub struct MaxBuckets {
    limit: i128,
    /// The first point's time: bucket 0 starts there. Later points may be earlier (clocks
    /// step back), hence signed indices.
    origin: Option<u64>,
    /// Milliseconds per bucket; a power of two. `u128` so doubling cannot overflow even for
    /// a hostile file spanning the whole `u64` range.
    width: u128,
    buckets: BTreeMap<i128, Bucket>,
}

impl MaxBuckets {
    /// At most `limit` buckets come out of `finish` (at least 2).
    pub fn new(limit: usize) -> Self {
        MaxBuckets {
            limit: i128::try_from(limit.max(2)).unwrap_or(i128::MAX),
            origin: None,
            width: 1,
            buckets: BTreeMap::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    pub fn push(&mut self, at_ms: u64, value: u64) {
        let origin = *self.origin.get_or_insert(at_ms);
        let index = (i128::from(at_ms) - i128::from(origin)).div_euclid(self.width as i128);
        let bucket = Bucket {
            first_ms: at_ms,
            last_ms: at_ms,
            peak_ms: at_ms,
            value,
            points: 1,
        };
        self.buckets
            .entry(index)
            .and_modify(|b| b.merge(bucket))
            .or_insert(bucket);
        // Twice the limit before merging, so a merge happens once per doubling of the
        // recording's length rather than at every point.
        while self.span() > 2 * self.limit {
            self.double();
        }
    }

    /// The buckets in time order, at most `limit` of them.
    pub fn finish(mut self) -> Vec<Bucket> {
        while self.span() > self.limit {
            self.double();
        }
        self.buckets.into_values().collect()
    }

    /// How many bucket widths the stored buckets cover, first to last.
    fn span(&self) -> i128 {
        match (
            self.buckets.first_key_value(),
            self.buckets.last_key_value(),
        ) {
            (Some((first, _)), Some((last, _))) => last - first + 1,
            _ => 0,
        }
    }

    fn double(&mut self) {
        self.width = self.width.saturating_mul(2);
        let old = std::mem::take(&mut self.buckets);
        for (index, bucket) in old {
            self.buckets
                .entry(index.div_euclid(2))
                .and_modify(|b| b.merge(bucket))
                .or_insert(bucket);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic pseudo-random sequence (xorshift), so failures reproduce.
    fn noise(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    /// Every output bucket holds exactly the maximum of the input points in its time range,
    /// the buckets do not overlap, and together they hold every point.
    fn check(points: &[(u64, u64)], limit: usize) -> Vec<Bucket> {
        let mut series = MaxBuckets::new(limit);
        for &(t, v) in points {
            series.push(t, v);
        }
        let buckets = series.finish();
        assert!(buckets.len() <= limit, "{} > {limit}", buckets.len());
        for pair in buckets.windows(2) {
            assert!(pair[0].last_ms < pair[1].first_ms, "{pair:?}");
        }
        let mut sorted = points.to_vec();
        sorted.sort_unstable();
        for b in &buckets {
            let from = sorted.partition_point(|&(t, _)| t < b.first_ms);
            let to = sorted.partition_point(|&(t, _)| t <= b.last_ms);
            let inside = &sorted[from..to];
            let max = inside.iter().map(|&(_, v)| v).max();
            assert_eq!(Some(b.value), max, "{b:?}");
            let first_at_max = inside
                .iter()
                .filter(|&&(_, v)| v == b.value)
                .map(|&(t, _)| t);
            assert_eq!(Some(b.peak_ms), first_at_max.min(), "{b:?}");
            assert_eq!(b.points, inside.len() as u64);
        }
        let total: u64 = buckets.iter().map(|b| b.points).sum();
        assert_eq!(total, points.len() as u64);
        buckets
    }

    /// Irregular sampling, 1-200 ms apart, with an hour's silence every `silence_every`.
    fn irregular(count: u64, silence_every: u64) -> Vec<(u64, u64)> {
        let mut seed = 0x9e37_79b9_7f4a_7c15;
        let mut t = 1_700_000_000_000u64;
        (0..count)
            .map(|i| {
                t += 1 + noise(&mut seed) % 200;
                if i % silence_every == silence_every - 1 {
                    t += 3_600_000;
                }
                (t, noise(&mut seed) % (80 << 30))
            })
            .collect()
    }

    #[test]
    fn downsampling_keeps_the_maximum_of_each_bucket() {
        let buckets = check(&irregular(50_000, u64::MAX), 2000);
        // Half the limit at least: the width only doubles once the span passes the limit.
        assert!(buckets.len() > 1000, "too coarse: {}", buckets.len());
        // Silences take up time, so fewer buckets hold points; each still holds its maximum.
        check(&irregular(50_000, 9_000), 2000);
    }

    #[test]
    fn a_single_sample_spike_survives_a_million_points() {
        let spike_at = 1_000_000 + 777_777;
        let points: Vec<(u64, u64)> = (1_000_000..2_000_000u64)
            .map(|t| (t, if t == spike_at { 29 << 30 } else { 20 << 30 }))
            .collect();
        let buckets = check(&points, 2000);
        let top = buckets.iter().max_by_key(|b| b.value).unwrap();
        assert_eq!((top.value, top.peak_ms), (29 << 30, spike_at));
    }

    #[test]
    fn short_series_and_clocks_stepping_back_are_kept_exactly() {
        let points = [(5_000, 3), (4_000, 9), (6_000, 1), (u64::MAX, 2), (0, 4)];
        check(&points, 2000);
        let few = check(&points[..3], 2000);
        assert_eq!(few.len(), 3);
        assert!(MaxBuckets::new(10).finish().is_empty());
    }
}
