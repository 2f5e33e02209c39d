//! What reading a snapshot cost, stage by stage (the benchmark prints it): the pickle
//! crate's share and ours are measured apart, so a change to either shows where it landed.

use std::time::{Duration, Instant};

/// Wall and CPU time (of the calling thread) one stage took.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Spent {
    pub wall: Duration,
    pub cpu: Duration,
}

/// The stages of `read_bytes`. The guard runs on the caller's thread while the parse and
/// then the walk run on the parse thread (`parse.rs`): the guard overlaps the parse, and
/// the crate's values are dropped after the answer, off the caller's path (not counted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadCost {
    /// The opcode guard (`guard.rs`).
    pub guard: Spent,
    /// The pickle crate building its values (waiting for the guard included in wall).
    pub parse: Spent,
    /// Our walk copying them into `MemorySnapshot`.
    pub walk: Spent,
}

/// A running stopwatch over both clocks.
pub(crate) struct Watch {
    wall: Instant,
    cpu_ns: u64,
}

impl Watch {
    pub(crate) fn start() -> Self {
        Watch {
            wall: Instant::now(),
            cpu_ns: crate::channel::thread_cpu_ns(),
        }
    }

    /// The time since the start (or the last lap), and a new start.
    pub(crate) fn lap(&mut self) -> Spent {
        let now = Watch::start();
        let spent = Spent {
            wall: now.wall.duration_since(self.wall),
            cpu: Duration::from_nanos(now.cpu_ns.saturating_sub(self.cpu_ns)),
        };
        *self = now;
        spent
    }
}
