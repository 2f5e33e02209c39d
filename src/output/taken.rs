//! The snapshots `--once`, `--json`, `--csv` and `--loop` print: each take is one tick of the
//! monitor's sampling (`OneShot::once`) fed to a `Monitor`, as the screen's ticks are.

use crate::model::{NvmlProblem, Snapshot, now_ms};
use crate::sources::oneshot::OneShot;
use crate::sources::sites;
use crate::state::{Monitor, StaleAfter};
use std::path::Path;
use std::time::Duration;

pub struct Takes {
    sampling: OneShot,
    monitor: Monitor,
}

impl Takes {
    /// Opens NVML (`OneShot::open`, whose arguments these are).
    pub fn open(
        nvml_lib: Option<&Path>,
        pcie_every: Option<Duration>,
        repeated: bool,
        peek_every: Option<Duration>,
        gpm: bool,
    ) -> Result<Self, NvmlProblem> {
        let (sampling, started) = OneShot::open(nvml_lib, pcie_every, repeated, peek_every, gpm)?;
        let mut monitor = Monitor::new(now_ms());
        monitor.ingest(started);
        Ok(Takes { sampling, monitor })
    }

    /// Samples once and returns the joined snapshot.
    pub fn take(&mut self) -> Snapshot {
        self.monitor.ingest(self.sampling.once());
        // Each writer's relevant memory snapshot, reduced here: a one-shot run has no screen
        // to keep responsive. Once per snapshot, however many takes `--loop` makes.
        for job in self.monitor.reductions_wanted() {
            let reduced = sites::reduce(&job);
            self.monitor.sites_done(&job.channel, &job.path, reduced);
        }
        self.monitor.snapshot(now_ms(), StaleAfter::NEVER)
    }

    /// Waits `rest` before the next take (`OneShot::wait`).
    pub fn wait(&mut self, rest: Duration) {
        self.sampling.wait(rest);
    }
}
