//! Runs the samplers off the UI thread: the GPUs in a pool (see `gpu_pool`), the host on a
//! thread of its own, all on one shared tick clock.

use super::gpu_pool;
use super::host::HostSampler;
use super::nvml::open_gpus;
use super::schedule::Schedule;
use crate::model::{DeviceInfo, DeviceSample, DriverInfo, HostSample, NvmlProblem};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread;
use std::time::{Duration, Instant};

/// What samplers send to the state owner.
#[derive(Debug)]
pub enum SourceEvent {
    /// NVML opened: static facts, sent once before any sample.
    Started {
        driver: DriverInfo,
        devices: Vec<DeviceInfo>,
    },
    /// NVML cannot be used at all; host sampling goes on.
    NvmlUnavailable(NvmlProblem),
    Device(Box<DeviceSample>),
    Host(Box<HostSample>),
}

/// Sampler settings.
#[derive(Clone, Debug)]
pub struct SamplingConfig {
    pub nvml_lib: Option<PathBuf>,
    pub interval: Duration,
    /// Period of the PCIe throughput call; `None` leaves it off.
    pub pcie_every: Option<Duration>,
}

/// Handle to running samplers: change the interval, tell the host sampler which pids to watch.
pub struct Sampling {
    interval_ms: Arc<AtomicU64>,
    pids: Sender<Vec<u32>>,
}

impl Sampling {
    /// Starts every sampler; events arrive on `tx` for as long as the receiver lives.
    pub fn start<E>(config: SamplingConfig, tx: Sender<E>) -> Self
    where
        E: From<SourceEvent> + Send + 'static,
    {
        let interval_ms = Arc::new(AtomicU64::new(config.interval.as_millis() as u64));
        let (pid_tx, pid_rx) = channel();
        let schedule = Schedule {
            epoch: Instant::now(),
        };
        {
            let tx = tx.clone();
            let interval_ms = interval_ms.clone();
            let _ = thread::Builder::new()
                .name("host-sampler".into())
                .spawn(move || host_loop(tx, pid_rx, interval_ms, schedule));
        }
        {
            let interval_ms = interval_ms.clone();
            let _ = thread::Builder::new()
                .name("nvml-open".into())
                .spawn(move || nvml_start(config, tx, interval_ms, schedule));
        }
        Sampling {
            interval_ms,
            pids: pid_tx,
        }
    }

    pub fn interval(&self) -> Duration {
        Duration::from_millis(self.interval_ms.load(Ordering::Relaxed))
    }

    pub fn set_interval(&self, interval: Duration) {
        self.interval_ms
            .store(interval.as_millis() as u64, Ordering::Relaxed);
    }

    /// The host pids NVML currently lists, for the targeted host refresh.
    pub fn watch_pids(&self, pids: Vec<u32>) {
        let _ = self.pids.send(pids);
    }
}

/// NVML init can itself take seconds (persistence mode off), so it runs off the UI thread too.
fn nvml_start<E>(
    config: SamplingConfig,
    tx: Sender<E>,
    interval_ms: Arc<AtomicU64>,
    schedule: Schedule,
) where
    E: From<SourceEvent> + Send + 'static,
{
    let gpus = match open_gpus(config.nvml_lib.as_deref(), config.pcie_every) {
        Ok(gpus) => gpus,
        Err(problem) => {
            let _ = tx.send(SourceEvent::NvmlUnavailable(problem).into());
            return;
        }
    };
    let started = SourceEvent::Started {
        driver: gpus.driver,
        devices: gpus.devices,
    };
    if tx.send(started.into()).is_err() {
        return;
    }
    gpu_pool::start(gpus.samplers, tx, interval_ms, schedule);
}

fn host_loop<E>(
    tx: Sender<E>,
    pids: Receiver<Vec<u32>>,
    interval_ms: Arc<AtomicU64>,
    schedule: Schedule,
) where
    E: From<SourceEvent>,
{
    let mut sampler = HostSampler::new();
    let mut watched: Vec<u32> = Vec::new();
    loop {
        // Only the newest pid list matters.
        while let Ok(latest) = pids.try_recv() {
            watched = latest;
        }
        let sample = sampler.sample(&watched);
        if tx.send(SourceEvent::Host(Box::new(sample)).into()).is_err() {
            return;
        }
        // Host figures move slowly; below 500 ms they cost more than they tell.
        schedule.wait_at_least(&interval_ms, 500);
    }
}
