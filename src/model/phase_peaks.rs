//! The highest allocation seen in each phase (`with vramscope.mark(...)` path) of one device
//! slot, over the whole run: the samples taken in the phase and the peak its `PHASE_END`
//! carries (the writer's own, exact). What `vramscope diff` compares phase by phase.
//!
//! Bounded: phase names are the program's (foreign, any number of them), so at most
//! [`KEPT_PHASES`] are kept, the first ones seen; the rest are counted, not kept.

use std::collections::BTreeMap;

/// Phases kept per slot. A training loop has a handful (forward, backward, optimizer, and a
/// module path under each); a program that names a phase per step would otherwise grow this
/// for ever.
pub const KEPT_PHASES: usize = 256;

/// One phase's highest allocation, and when the phase was first seen (to tell the order the
/// phases run in: of two that grew alike, the earlier is where the growth began).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhasePeak {
    pub peak: u64,
    pub first_ms: u64,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct PhasePeaks {
    phases: BTreeMap<String, PhasePeak>,
    /// Distinct phases seen beyond `KEPT_PHASES` (a name may be counted more than once).
    pub untracked: u64,
}

impl PhasePeaks {
    /// `value` allocated at `at_ms` inside `phase`; outside any phase (`""`) is no phase.
    pub fn raise(&mut self, phase: &str, value: u64, at_ms: u64) {
        if phase.is_empty() {
            return;
        }
        if let Some(seen) = self.phases.get_mut(phase) {
            seen.peak = seen.peak.max(value);
            seen.first_ms = seen.first_ms.min(at_ms);
        } else if self.phases.len() < KEPT_PHASES {
            self.phases.insert(
                phase.to_string(),
                PhasePeak {
                    peak: value,
                    first_ms: at_ms,
                },
            );
        } else {
            self.untracked += 1;
        }
    }

    /// Each phase kept, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, PhasePeak)> {
        self.phases
            .iter()
            .map(|(name, peak)| (name.as_str(), *peak))
    }

    pub fn get(&self, phase: &str) -> Option<PhasePeak> {
        self.phases.get(phase).copied()
    }

    pub fn is_empty(&self) -> bool {
        self.phases.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_phase_keeps_its_highest_value_and_first_moment_within_the_bound() {
        let mut peaks = PhasePeaks::default();
        peaks.raise("forward", 5, 100);
        peaks.raise("forward", 9, 300);
        peaks.raise("forward", 7, 50);
        peaks.raise("", 1_000, 10);
        assert_eq!(
            peaks.get("forward"),
            Some(PhasePeak {
                peak: 9,
                first_ms: 50
            })
        );
        assert_eq!(peaks.get(""), None);
        for i in 0..KEPT_PHASES + 10 {
            peaks.raise(&format!("step {i}"), 1, 1);
        }
        assert_eq!(peaks.iter().count(), KEPT_PHASES);
        assert_eq!(peaks.untracked, 11);
        assert_eq!(peaks.get("forward").map(|p| p.peak), Some(9));
    }
}
