//! Synchronous sampling for `--once`, `--json`, `--csv` and `--loop`: the same samplers as the
//! monitor, driven from the calling thread, feeding the same `Monitor` so every output reads
//! the same `Snapshot`.

use super::host::HostSampler;
use super::nvml::{DeviceSampler, NvmlSession};
use super::runner::SourceEvent;
use crate::model::{NvmlProblem, Snapshot, now_ms};
use crate::state::{Monitor, StaleAfter};
use std::path::Path;
use std::time::Duration;

/// An open NVML session and its samplers, kept between `--loop` iterations so per-process
/// utilisation cursors and CPU readings carry over.
pub struct OneShot {
    monitor: Monitor,
    samplers: Vec<DeviceSampler>,
    host: HostSampler,
}

impl OneShot {
    /// Opens NVML; fails with the reason when it cannot be used at all.
    pub fn open(
        nvml_lib: Option<&Path>,
        pcie_every: Option<Duration>,
    ) -> Result<Self, NvmlProblem> {
        let session = NvmlSession::open(nvml_lib)?;
        let count = session.device_count()?;
        let mut monitor = Monitor::new(now_ms());
        let mut devices = Vec::new();
        let mut samplers = Vec::new();
        for index in 0..count {
            let (info, sampler) = session.device(index, pcie_every);
            devices.push(info);
            samplers.push(sampler);
        }
        monitor.ingest(SourceEvent::Started {
            driver: session.driver_info(),
            devices,
        });
        Ok(Self {
            monitor,
            samplers,
            host: HostSampler::new(),
        })
    }

    /// Samples every GPU and the host once and returns the joined snapshot.
    pub fn take(&mut self) -> Snapshot {
        for sampler in &mut self.samplers {
            let sample = sampler.sample();
            self.monitor.ingest(SourceEvent::Device(Box::new(sample)));
        }
        let pids = self.monitor.gpu_pids();
        let host = self.host.sample(&pids);
        self.monitor.ingest(SourceEvent::Host(Box::new(host)));
        // Synchronous sampling cannot fall behind: nothing here is stale.
        self.monitor.snapshot(
            now_ms(),
            StaleAfter {
                interval_ms: u64::MAX / 8,
            },
        )
    }
}
