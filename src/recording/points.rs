//! Allocator points, the bulk of a recording (a writer samples at 10-100 Hz), in columns: one
//! group per device slot, each figure a column of differences from the previous value in that
//! column, so a steady figure costs a `0` and the compressor sees runs of small numbers. The
//! interval peak is recorded as its excess over the allocated figures it must reach anyway
//! (the highest allocated since the previous sample is at least the previous sample's and
//! this one's), which is 0 unless something spiked between two samples.

use crate::model::AllocatorPoint;
use serde::{Deserialize, Serialize};

/// The points of one device slot in one record, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PointGroup {
    pub slot: u16,
    /// Wall ms: the first absolute, each next the difference from the one before.
    pub t: Vec<i64>,
    /// Each present value is the difference from the previous present value in its column
    /// (the first from 0); `null` is an absent figure, which leaves the running value alone.
    pub allocated: Vec<Option<i64>>,
    pub reserved: Vec<Option<i64>>,
    /// Where the point's allocated is present: the peak minus the larger of that allocated
    /// and the previous point's (when present). Where it is absent: the peak itself.
    pub peak: Vec<Option<i64>>,
    pub step: Vec<Option<i64>>,
    /// Positions (in this group) of the points flagged as a new high-water mark.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub high_water: Vec<u32>,
    /// Positions of the points whose step counts the steps since an attach (absent in a
    /// recording from before the channel's `STEP_SINCE_ATTACH`: read as the job's own).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub since_attach: Vec<u32>,
}

/// A column being delta-coded.
#[derive(Default)]
struct Running(u64);

/// What the peak must reach given this point's and the previous point's allocated; `None`
/// when this point's is absent (the peak is then recorded as it is).
fn peak_floor(allocated: Option<u64>, previous: Option<u64>) -> Option<u64> {
    allocated.map(|a| previous.map_or(a, |p| a.max(p)))
}

fn encode_peak(peak: Option<u64>, floor: Option<u64>) -> Option<i64> {
    peak.map(|p| p.wrapping_sub(floor.unwrap_or(0)) as i64)
}

fn decode_peak(excess: Option<i64>, floor: Option<u64>) -> Option<u64> {
    excess.map(|e| floor.unwrap_or(0).wrapping_add(e as u64))
}

impl Running {
    fn encode(&mut self, value: u64) -> i64 {
        let delta = value.wrapping_sub(self.0) as i64;
        self.0 = value;
        delta
    }

    fn encode_opt(&mut self, value: Option<u64>) -> Option<i64> {
        value.map(|v| self.encode(v))
    }

    fn decode(&mut self, delta: i64) -> u64 {
        self.0 = self.0.wrapping_add(delta as u64);
        self.0
    }

    fn decode_opt(&mut self, delta: Option<i64>) -> Option<u64> {
        delta.map(|d| self.decode(d))
    }
}

/// Groups `points` by slot (in order of first appearance), keeping their order within a slot.
pub fn encode(points: &[AllocatorPoint]) -> Vec<PointGroup> {
    let mut groups: Vec<(PointGroup, [Running; 4], Option<u64>)> = Vec::new();
    for point in points {
        let at = match groups.iter().position(|(g, _, _)| g.slot == point.slot) {
            Some(at) => at,
            None => {
                let n = points.iter().filter(|p| p.slot == point.slot).count();
                groups.push((
                    PointGroup {
                        slot: point.slot,
                        t: Vec::with_capacity(n),
                        allocated: Vec::with_capacity(n),
                        reserved: Vec::with_capacity(n),
                        peak: Vec::with_capacity(n),
                        step: Vec::with_capacity(n),
                        high_water: Vec::new(),
                        since_attach: Vec::new(),
                    },
                    Default::default(),
                    None,
                ));
                groups.len() - 1
            }
        };
        let (group, [t, allocated, reserved, step], previous) = &mut groups[at];
        if point.new_high_water {
            group.high_water.push(group.t.len() as u32);
        }
        if point.steps_since_attach {
            group.since_attach.push(group.t.len() as u32);
        }
        group.t.push(t.encode(point.at_ms));
        group.allocated.push(allocated.encode_opt(point.allocated));
        group.reserved.push(reserved.encode_opt(point.reserved));
        group.peak.push(encode_peak(
            point.peak,
            peak_floor(point.allocated, *previous),
        ));
        *previous = point.allocated;
        group.step.push(step.encode_opt(point.step));
    }
    groups.into_iter().map(|(g, _, _)| g).collect()
}

/// The points back, group after group; an error names what is inconsistent.
pub fn decode(groups: Vec<PointGroup>) -> Result<Vec<AllocatorPoint>, String> {
    let total: usize = groups.iter().map(|g| g.t.len()).sum();
    let mut points = Vec::with_capacity(total);
    for group in groups {
        let n = group.t.len();
        let lengths = [
            group.allocated.len(),
            group.reserved.len(),
            group.peak.len(),
            group.step.len(),
        ];
        if lengths.iter().any(|&len| len != n) {
            return Err(format!(
                "the point columns of slot {} differ in length",
                group.slot
            ));
        }
        for (positions, what) in [
            (&group.high_water, "high-water"),
            (&group.since_attach, "since-attach"),
        ] {
            if let Some(&bad) = positions.iter().find(|&&i| i as usize >= n) {
                return Err(format!(
                    "{what} position {bad} is past the {n} points of slot {}",
                    group.slot
                ));
            }
        }
        let [mut t, mut allocated, mut reserved, mut step] = <[Running; 4]>::default();
        let mut previous = None;
        let first = points.len();
        for i in 0..n {
            let this = allocated.decode_opt(group.allocated[i]);
            points.push(AllocatorPoint {
                at_ms: t.decode(group.t[i]),
                slot: group.slot,
                allocated: this,
                reserved: reserved.decode_opt(group.reserved[i]),
                peak: decode_peak(group.peak[i], peak_floor(this, previous)),
                step: step.decode_opt(group.step[i]),
                new_high_water: false,
                steps_since_attach: false,
            });
            previous = this;
        }
        for i in group.high_water {
            points[first + i as usize].new_high_water = true;
        }
        for i in group.since_attach {
            points[first + i as usize].steps_since_attach = true;
        }
    }
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(at_ms: u64, slot: u16, allocated: Option<u64>) -> AllocatorPoint {
        AllocatorPoint {
            at_ms,
            slot,
            allocated,
            reserved: Some(20 << 30),
            peak: allocated.map(|a| a + 4096),
            step: Some(at_ms / 1000),
            new_high_water: at_ms.is_multiple_of(3),
            steps_since_attach: at_ms.is_multiple_of(7),
        }
    }

    #[test]
    fn columns_round_trip_with_gaps_and_extremes() {
        let mut points: Vec<AllocatorPoint> = (0..50)
            .map(|i| {
                point(
                    1_700_000_000_000 + i * 20,
                    0,
                    (i % 7 != 3).then_some(i << 20),
                )
            })
            .collect();
        points.push(AllocatorPoint {
            allocated: Some(u64::MAX),
            reserved: None,
            peak: Some(0),
            step: None,
            ..point(1_700_000_001_000, 0, None)
        });
        let groups = encode(&points);
        assert_eq!(groups.len(), 1);
        // A steady figure costs a zero; an absent one is null and leaves the chain alone.
        assert!(groups[0].reserved[1..50].iter().all(|d| *d == Some(0)));
        assert_eq!(groups[0].allocated[3], None);
        // A peak is its excess over the allocated figures around it.
        assert_eq!(groups[0].peak[1], Some(4096));
        assert_eq!(decode(groups), Ok(points));
    }

    #[test]
    fn a_peak_below_its_floor_still_round_trips() {
        // A writer without exact peaks may report a peak under the allocated figures.
        let mut points = vec![point(1000, 0, Some(5 << 30)), point(1020, 0, Some(6 << 30))];
        points[1].peak = Some(1 << 30);
        points[0].peak = None;
        let groups = encode(&points);
        assert_eq!(groups[0].peak, [None, Some(-(5 << 30))]);
        assert_eq!(decode(groups), Ok(points));
    }

    #[test]
    fn slots_are_grouped_keeping_each_slot_in_order() {
        let points: Vec<AllocatorPoint> = (0..20)
            .map(|i| point(1000 + i * 10, (i % 2) as u16, Some(i * 512)))
            .collect();
        let groups = encode(&points);
        assert_eq!(groups.iter().map(|g| g.slot).collect::<Vec<_>>(), [0, 1]);
        let mut expected = points.clone();
        expected.sort_by_key(|p| p.slot);
        assert_eq!(decode(groups), Ok(expected));
    }

    #[test]
    fn inconsistent_columns_are_refused() {
        let mut groups = encode(&[point(1000, 0, Some(1)), point(1020, 0, Some(2))]);
        groups[0].peak.pop();
        assert!(
            decode(groups.clone())
                .unwrap_err()
                .contains("differ in length")
        );
        groups[0].peak.push(None);
        groups[0].high_water = vec![7];
        assert!(decode(groups).unwrap_err().contains("past the 2 points"));
    }
}
