//! What reading a snapshot cost, stage by stage (the benchmark prints it): the one pass
//! over the pickle and the walk of what it built are measured apart, so a change to either
//! shows where it landed.

use std::time::{Duration, Instant};

/// Wall and CPU time (of the calling thread) one stage took.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Spent {
    pub wall: Duration,
    pub cpu: Duration,
}

/// The stages of `read_bytes`, one after the other on the caller's thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadCost {
    /// The one pass (`guard.rs`): every opcode decoded, checked and built, each device's
    /// history read into trace entries as it comes.
    pub decode: Spent,
    /// The walk of the rest (segments, blocks, the `vramscope` key) into `MemorySnapshot`.
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
