//! Synchronous sampling for `--once`, `--json`, `--csv` and `--loop`: the same samplers as the
//! monitor, driven from the calling thread, feeding the same `Monitor` so every output reads
//! the same `Snapshot`.

use super::channels::ChannelSampler;
use super::host::HostSampler;
use super::nvml::{DeviceSampler, open_gpus};
use super::runner::SourceEvent;
use crate::model::{NvmlProblem, Snapshot, now_ms};
use crate::state::{Monitor, StaleAfter};
use std::path::Path;
use std::time::{Duration, Instant};

/// An open NVML session and its samplers, kept between `--loop` iterations so per-process
/// utilisation cursors and CPU readings carry over.
pub struct OneShot {
    monitor: Monitor,
    samplers: Vec<DeviceSampler>,
    host: HostSampler,
    channels: ChannelSampler,
    /// The fast memory sampling's period between takes; `None`: off.
    peek_every: Option<Duration>,
}

impl OneShot {
    /// Opens NVML; fails with the reason when it cannot be used at all. `repeated` when
    /// `take` will be called again and again (`--loop`): only then are the channel
    /// directories watched for changes, a single take lists them once. `peek_every`: the
    /// fast memory sampling's period while `wait` waits between takes.
    pub fn open(
        nvml_lib: Option<&Path>,
        pcie_every: Option<Duration>,
        repeated: bool,
        peek_every: Option<Duration>,
        gpm: bool,
    ) -> Result<Self, NvmlProblem> {
        let mut gpus = open_gpus(nvml_lib, pcie_every, gpm)?;
        let peek_every = peek_every.filter(|_| repeated);
        if peek_every.is_some() {
            gpus.samplers
                .iter_mut()
                .for_each(DeviceSampler::keep_memory_peaks);
        }
        let mut monitor = Monitor::new(now_ms());
        monitor.ingest(SourceEvent::Started {
            driver: gpus.driver,
            devices: gpus.devices,
        });
        Ok(Self {
            monitor,
            samplers: gpus.samplers,
            host: HostSampler::new(),
            channels: if repeated {
                ChannelSampler::new()
            } else {
                ChannelSampler::unwatched()
            },
            peek_every,
        })
    }

    /// Waits `rest` before the next `take`, reading each GPU's used memory alone every
    /// `peek_every` meanwhile, so the next snapshot's `memory_peak` holds the highest reading
    /// in between. No peek falls within one period of the end: the take reads memory itself.
    pub fn wait(&mut self, rest: Duration) {
        let deadline = Instant::now() + rest;
        let Some(every) = self.peek_every else {
            std::thread::sleep(rest);
            return;
        };
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left <= every {
                std::thread::sleep(left);
                return;
            }
            std::thread::sleep(every);
            self.samplers
                .iter_mut()
                .for_each(DeviceSampler::peek_memory);
        }
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
        self.channels.set_pids(&pids);
        if let Some(batch) = self.channels.sample() {
            self.monitor.ingest(SourceEvent::Channels(Box::new(batch)));
        }
        // Each writer's relevant memory snapshot, reduced here: a one-shot run has no screen
        // to keep responsive. Once per snapshot, however many takes `--loop` makes.
        for job in self.monitor.reductions_wanted() {
            let sites = super::sites::reduce(&job);
            self.monitor.sites_done(&job.channel, &job.path, sites);
        }
        self.monitor.snapshot(now_ms(), StaleAfter::NEVER)
    }
}
