//! Whether the reconstructed peak is the allocator's own peak.
//!
//! Byte for byte when the allocator's peak of *requested* bytes is known (the `vramscope`
//! key's `peak_requested`, `requested_bytes.all.peak`): the trace's sizes are requests, so
//! the reconstructed maximum equals it exactly when the history reaches back to the peak.
//!
//! Against the peak of *allocated* bytes (`allocated_bytes.all.peak`, the channel's figure)
//! the blocks' sizes count, which the history knows only for the blocks live at the dump:
//! a restored block counts as its request rounded up to 512 bytes, the least the allocator
//! gives. A large request (over 1 MiB) may have been given a block up to 1 MiB larger (the
//! allocator does not split off a remainder of 1 MiB or less), so a reconstruction below
//! the recorded peak by no more than 1 MiB per such block is undecided, not short.
//!
//! With no recorded peak, the history itself proves the answer when its oldest state is an
//! empty allocator: it then holds the allocator's whole life.
//!
//! A shortfall's suggested `max_entries`: the history's own rate (kept entries over the
//! time they span) times the time from the writer's `peak_time_us` to the dump, plus a
//! quarter for margin, rounded up to two significant figures. Without the peak's time, and
//! when the ring was full, twice the entries held; when the ring was not full, none: the
//! history began after the peak, and a larger ring would not have reached it.

use super::held::Exactness;
use super::snapshot::{TraceEntry, VramscopeKey};
use super::walk::{State, Walked};

/// The large pool's unsplit remainder at most (`kSmallSize`).
const UNSPLIT: u64 = 1 << 20;

/// What the peak is compared with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Recorded {
    Requested(u64),
    Allocated(u64),
}

impl Recorded {
    pub fn bytes(self) -> u64 {
        match self {
            Recorded::Requested(b) | Recorded::Allocated(b) => b,
        }
    }
}

/// The recorded peak to compare with: the key's requested peak first (exact), then the
/// caller's allocated peak, then the key's.
pub(crate) fn recorded(key: Option<&VramscopeKey>, given: Option<u64>) -> Option<Recorded> {
    key.and_then(|k| k.peak_requested)
        .map(Recorded::Requested)
        .or(given.map(Recorded::Allocated))
        .or(key.and_then(|k| k.peak_allocated).map(Recorded::Allocated))
}

/// Whether the peak state `at_peak` (found by `walked`) is the allocator's peak.
pub(crate) fn judge(
    walked: &Walked,
    at_peak: &State,
    recorded: Option<Recorded>,
    history: &History,
) -> Exactness {
    let Some(recorded) = recorded else {
        if walked.starts_empty && history.cut == 0 && walked.mismatches == 0 && history.kept > 0 {
            return Exactness::Exact;
        }
        return Exactness::Unknown {
            why: "no recorded peak to compare with (the snapshot has no `vramscope` key), and the history does not reach back to an empty allocator".to_string(),
        };
    };
    let (reconstructed, slack) = match recorded {
        Recorded::Requested(_) => (walked.max, 0),
        Recorded::Allocated(_) => {
            let size: u64 = at_peak.live.values().map(|l| l.size_at_least()).sum();
            let large = at_peak
                .live
                .values()
                .filter(|l| l.size.is_none() && l.requested > UNSPLIT)
                .count() as u64;
            (size, large.saturating_mul(UNSPLIT))
        }
    };
    let peak = recorded.bytes();
    if reconstructed == peak {
        return Exactness::Exact;
    }
    if reconstructed > peak {
        return Exactness::Unknown {
            why: format!(
                "the reconstruction ({reconstructed} bytes) is above the recorded peak ({peak} bytes): the peak statistics were reset after this history began"
            ),
        };
    }
    let shortfall = peak - reconstructed;
    if shortfall <= slack {
        return Exactness::Unknown {
            why: format!(
                "the reconstruction is {shortfall} bytes below the allocator's peak of allocated bytes, within what the history cannot size ({slack} bytes of large blocks' remainders); a writer that records `peak_requested` makes this exact"
            ),
        };
    }
    Exactness::Short {
        recorded_peak: peak,
        reconstructed,
        shortfall,
        suggested_max_entries: suggest(history),
    }
}

/// The history a device's answer came from.
#[derive(Clone, Debug)]
pub(crate) struct History<'e> {
    pub entries: &'e [TraceEntry],
    /// Entries held (kept here).
    pub kept: usize,
    /// Older entries the limits cut.
    pub cut: usize,
    /// The ring's size, when the writer says.
    pub max_entries: Option<u64>,
    pub peak_time_us: Option<i64>,
}

fn suggest(history: &History) -> Option<u64> {
    let held = (history.kept + history.cut) as u64;
    if held == 0 {
        return None;
    }
    let first = history.entries.iter().find_map(|e| e.time_us);
    let last = history.entries.iter().rev().find_map(|e| e.time_us);
    if let (Some(peak), Some(first), Some(last)) = (history.peak_time_us, first, last)
        && peak < first
        && last > first
    {
        let per_us = history.kept.saturating_sub(1) as f64 / (last - first) as f64;
        let needed = (last - peak) as f64 * per_us * 1.25;
        return Some(round_up_2sf(needed.ceil() as u64).max(held + 1));
    }
    let full = history.max_entries.is_none_or(|max| held >= max) || history.cut > 0;
    full.then(|| round_up_2sf(held.saturating_mul(2)))
}

/// Rounds up to two significant figures: 123,456 -> 130,000.
fn round_up_2sf(n: u64) -> u64 {
    if n < 100 {
        return n;
    }
    let mut unit = 1u64;
    while n / unit >= 100 {
        unit *= 10;
    }
    n.div_ceil(unit).saturating_mul(unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_round_up_to_two_figures() {
        assert_eq!(round_up_2sf(123_456), 130_000);
        assert_eq!(round_up_2sf(99), 99);
        assert_eq!(round_up_2sf(240_000), 240_000);
        assert_eq!(round_up_2sf(240_001), 250_000);
    }
}
