//! Synchronous sampling for `--once`, `--json`, `--csv` and `--loop`: the monitor's jobs and
//! its tick (`jobs`), driven from the calling thread. Each `once` is one tick's batch, which
//! the output feeds to the same `Monitor` as the screen's, so every output reads the same
//! `Snapshot`.

use super::channels::ChannelSampler;
use super::jobs::{Jobs, Untimed};
use super::nvml::{DeviceSampler, open_gpus};
use crate::model::{NvmlProblem, SourceEvent};
use std::path::Path;
use std::time::{Duration, Instant};

/// An open NVML session and its jobs, kept between `--loop` iterations so per-process
/// utilisation cursors and CPU readings carry over.
pub struct OneShot {
    jobs: Jobs,
    /// The fast memory sampling's period between takes; `None`: off.
    peek_every: Option<Duration>,
    /// `--gpm` and no take yet: GPM's figures are the difference of two samples, so the
    /// first take samples twice, [`GPM_PRIME`] apart (`prime_gpm`).
    gpm_unprimed: bool,
}

/// Between the two GPM samples of a single run: long enough for a meaningful SM share,
/// short enough not to slow `--json` noticeably.
const GPM_PRIME: Duration = Duration::from_millis(100);

impl OneShot {
    /// Opens NVML, with the `Started` event to ingest first; fails with the reason when it
    /// cannot be used at all. `repeated` when
    /// `take` will be called again and again (`--loop`): only then are the channel
    /// directories watched for changes, a single take lists them once. `peek_every`: the
    /// fast memory sampling's period while `wait` waits between takes.
    pub fn open(
        nvml_lib: Option<&Path>,
        pcie_every: Option<Duration>,
        repeated: bool,
        peek_every: Option<Duration>,
        gpm: bool,
    ) -> Result<(Self, SourceEvent), NvmlProblem> {
        let mut gpus = open_gpus(nvml_lib, pcie_every, gpm)?;
        let peek_every = peek_every.filter(|_| repeated);
        if peek_every.is_some() {
            gpus.samplers
                .iter_mut()
                .for_each(DeviceSampler::keep_memory_peaks);
        }
        let channels = if repeated {
            ChannelSampler::new()
        } else {
            ChannelSampler::unwatched()
        };
        // The host is read at every take: a take is seconds apart at least, or the only one.
        let jobs = Jobs::new(channels, 0);
        jobs.add_gpus(gpus.samplers);
        let started = SourceEvent::Started {
            driver: gpus.driver,
            devices: gpus.devices,
        };
        Ok((
            Self {
                jobs,
                peek_every,
                gpm_unprimed: gpm,
            },
            started,
        ))
    }

    /// Before the first take with `--gpm`: one sample of every GPU, not shown, whose GPM
    /// samples the take's are compared with; a wait of [`GPM_PRIME`] only where a GPU is in
    /// MIG mode (GPM is read for instances only). Without it a single run never has an
    /// instance's SM utilisation.
    fn prime_gpm(&mut self) {
        if !std::mem::take(&mut self.gpm_unprimed) {
            return;
        }
        let mut mig = false;
        for gpu in self.jobs.gpus().iter() {
            mig |= gpu.sampler().sample().mig_enabled().is_some();
        }
        if mig {
            std::thread::sleep(GPM_PRIME);
        }
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
            self.jobs.peek(&Untimed);
        }
    }

    /// One tick of every job, as the monitor's pool runs it: the GPUs, then the host and the
    /// channels with the pids those GPUs list.
    pub fn once(&mut self) -> SourceEvent {
        self.prime_gpm();
        SourceEvent::Batch(self.jobs.tick(0, &Untimed))
    }
}
