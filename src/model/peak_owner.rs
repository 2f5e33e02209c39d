//! Who made a GPU's memory peak. The fast memory sampling reads used memory alone between two
//! refreshes, so a 250 ms spike shows on the GPU but in no process's figure: the refreshes'
//! process lists come before and after it. When a peek finds used memory risen by
//! [`ATTRIBUTE_RISE`] or more since the last refresh, the sampler reads the compute list right
//! then ([`PeakHolders::Read`]) and the fold names the process whose memory rose most
//! ([`owner_of`]). Every output (the table's PEAK, the detail pane, `--json`, the recording,
//! the report) asks that one function.

use super::absent::Absent;
use super::device::{DeviceSample, MemoryPeak};
pub use super::peak_holders::{ATTRIBUTE_RISE, HeldBy, NotAttributed, PeakHolders};
use serde::Serialize;

/// Who made a peak, and whether the peak was read between two refreshes (by a peek, where the
/// refreshes' process figures never saw it) or by a refresh.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PeakOwner {
    pub between_refreshes: bool,
    pub who: Who,
}

/// The process that made a peak, or why none is named.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Who {
    /// `pid`'s memory rose by `rise` (to `used`) since the refresh before the peak: the
    /// largest rise of any listed process.
    Process {
        pid: u32,
        used: u64,
        rise: u64,
    },
    NotAttributed(String),
}

impl PeakOwner {
    /// `pid 4242 (+20.0 GiB)` or `not attributed: <why>`, for a label.
    pub fn describe(&self, bytes: impl Fn(u64) -> String) -> String {
        match &self.who {
            Who::Process { pid, rise, .. } => format!("pid {pid} (+{})", bytes(*rise)),
            Who::NotAttributed(why) => format!("not attributed: {why}"),
        }
    }

    pub fn pid(&self) -> Option<u32> {
        match self.who {
            Who::Process { pid, .. } => Some(pid),
            Who::NotAttributed(_) => None,
        }
    }
}

/// The peak `sample` carries (its interval's highest reading, or its own reading where the
/// fast sampling is off) with the processes that held it: `(used, at_ms, holders)`.
/// `None` where the sample has no memory reading at all.
fn peak_of(sample: &DeviceSample) -> Option<(u64, u64, PeakHolders)> {
    match (&sample.memory_peak, &sample.memory) {
        (
            Some(MemoryPeak {
                used,
                at_ms,
                holders,
            }),
            _,
        ) => Some((*used, *at_ms, holders.clone())),
        (None, Ok(m)) => Some((m.used, sample.at_ms, PeakHolders::TheSample)),
        (None, Err(_)) => None,
    }
}

/// Each process's used memory at `sample`'s peak, where it was read: the peek's list, or the
/// sample's own list where the peak is the sample's reading.
pub fn holders_at_peak(sample: &DeviceSample) -> Result<Vec<HeldBy>, NotAttributed> {
    let (used, _, holders) =
        peak_of(sample).ok_or(NotAttributed::ListUnread(Absent::NotAvailable))?;
    // A peek that rose too little to read the list, at a level the sample itself reads
    // again (a flat interval's first peek keeps its earlier moment on a tie): the sample's
    // list held that memory.
    let holders = match holders {
        PeakHolders::NotRead(NotAttributed::SmallRise { .. })
            if sample.memory.as_ref().is_ok_and(|m| m.used >= used) =>
        {
            PeakHolders::TheSample
        }
        other => other,
    };
    match holders {
        PeakHolders::Read(list) => Ok(list),
        PeakHolders::NotRead(why) => Err(why),
        PeakHolders::TheSample => match &sample.processes {
            Ok(list) => Ok(list
                .iter()
                .filter_map(|p| {
                    p.used_memory
                        .as_ref()
                        .ok()
                        .map(|&used| HeldBy { pid: p.pid, used })
                })
                .collect()),
            Err(why) => Err(NotAttributed::ListUnread(why.clone())),
        },
    }
}

/// The owner of `sample`'s peak: of the processes that held memory then, the one whose figure
/// rose most since `before` (the GPU's previous sample; a process it did not list counts from
/// zero, as one that started in between). `None` where the sample has no memory reading.
pub fn owner_of(sample: &DeviceSample, before: Option<&DeviceSample>) -> Option<PeakOwner> {
    let (_, at_ms, _) = peak_of(sample)?;
    let between_refreshes = at_ms != sample.at_ms;
    let owner = |who| {
        Some(PeakOwner {
            between_refreshes,
            who,
        })
    };
    let holders = match holders_at_peak(sample) {
        Ok(list) => list,
        Err(why) => return owner(Who::NotAttributed(reason(&why))),
    };
    let earlier = |pid: u32| -> u64 {
        before
            .and_then(|b| b.processes.as_ref().ok())
            .and_then(|list| list.iter().find(|p| p.pid == pid))
            .and_then(|p| p.used_memory.as_ref().ok().copied())
            .unwrap_or(0)
    };
    let top = holders
        .iter()
        .map(|h| (h.used.saturating_sub(earlier(h.pid)), h))
        .filter(|(rise, _)| *rise > 0)
        // The largest rise; of equal rises, the lower pid, so every reader names the same one.
        .max_by(|(a, x), (b, y)| a.cmp(b).then(y.pid.cmp(&x.pid)));
    owner(match top {
        Some((rise, h)) => Who::Process {
            pid: h.pid,
            used: h.used,
            rise,
        },
        None => Who::NotAttributed(
            "no listed process's memory rose: the memory is outside every listed process".into(),
        ),
    })
}

fn reason(why: &NotAttributed) -> String {
    match why {
        NotAttributed::SmallRise { rise } => format!(
            "it rose {} MiB since the refresh, under the {} MiB that reads the process list",
            rise / (1024 * 1024),
            ATTRIBUTE_RISE / (1024 * 1024)
        ),
        NotAttributed::ListUnread(why) => format!("the process list was not read ({why})"),
        NotAttributed::NotRecorded => {
            "recorded by a vramscope that did not read the processes at a peak".into()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{GpuProcess, MemoryInfo, ProcessKind};

    const GIB: u64 = 1 << 30;

    fn process(pid: u32, used: u64) -> GpuProcess {
        GpuProcess {
            pid,
            kind: ProcessKind::Compute,
            used_memory: Ok(used),
            sm_util: Err(Absent::NotAvailable),
            mem_util: Err(Absent::NotAvailable),
            enc_util: Err(Absent::NotAvailable),
            dec_util: Err(Absent::NotAvailable),
        }
    }

    fn sample(used: u64, peak: Option<MemoryPeak>, processes: Vec<GpuProcess>) -> DeviceSample {
        let mut s = DeviceSample::unreadable(0, 1_000, Absent::NotAvailable);
        s.memory = Ok(MemoryInfo {
            total: 80 * GIB,
            used,
            free: 80 * GIB - used,
            reserved: None,
        });
        s.memory_peak = peak;
        s.processes = Ok(processes);
        s
    }

    #[test]
    fn the_largest_riser_owns_a_peek_peak() {
        let before = sample(
            10 * GIB,
            None,
            vec![process(1, 4 * GIB), process(2, 6 * GIB)],
        );
        let peak = MemoryPeak {
            used: 30 * GIB,
            at_ms: 900,
            holders: PeakHolders::Read(vec![
                HeldBy {
                    pid: 1,
                    used: 5 * GIB,
                },
                HeldBy {
                    pid: 2,
                    used: 25 * GIB,
                },
            ]),
        };
        let after = sample(
            10 * GIB,
            Some(peak),
            vec![process(1, 4 * GIB), process(2, 6 * GIB)],
        );
        assert_eq!(
            owner_of(&after, Some(&before)),
            Some(PeakOwner {
                between_refreshes: true,
                who: Who::Process {
                    pid: 2,
                    used: 25 * GIB,
                    rise: 19 * GIB
                }
            })
        );
    }

    #[test]
    fn a_peak_without_a_list_says_why() {
        let peak = MemoryPeak {
            used: 10 * GIB + 1024,
            at_ms: 900,
            holders: PeakHolders::NotRead(NotAttributed::SmallRise { rise: 1024 }),
        };
        let s = sample(10 * GIB, Some(peak), vec![process(1, GIB)]);
        let Some(PeakOwner {
            who: Who::NotAttributed(why),
            ..
        }) = owner_of(&s, None)
        else {
            panic!("no owner");
        };
        assert!(why.contains("under the 256 MiB"), "{why}");
    }

    #[test]
    fn a_flat_interval_s_peek_is_owned_from_the_sample_s_list() {
        let peak = MemoryPeak {
            used: 10 * GIB,
            at_ms: 900,
            holders: PeakHolders::NotRead(NotAttributed::SmallRise { rise: 0 }),
        };
        let s = sample(10 * GIB, Some(peak), vec![process(1, GIB)]);
        let owner = owner_of(&s, None).unwrap();
        assert_eq!((owner.pid(), owner.between_refreshes), (Some(1), true));
    }

    #[test]
    fn the_sample_s_own_reading_is_owned_from_its_own_list() {
        let before = sample(10 * GIB, None, vec![process(1, 4 * GIB)]);
        let now = sample(
            14 * GIB,
            None,
            vec![process(1, 4 * GIB), process(7, 4 * GIB)],
        );
        let owner = owner_of(&now, Some(&before)).unwrap();
        assert_eq!((owner.pid(), owner.between_refreshes), (Some(7), false));
        let flat = sample(10 * GIB, None, vec![process(1, 4 * GIB)]);
        assert!(matches!(
            owner_of(&flat, Some(&before)).map(|o| o.who),
            Some(Who::NotAttributed(_))
        ));
    }
}
