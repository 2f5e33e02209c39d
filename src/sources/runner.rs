//! Runs the samplers off the UI thread, in a pool (see `pool`) on one shared tick clock.

use super::nvml::open_gpus;
use super::pool::Pool;
use super::schedule::Schedule;
use crate::model::{
    ChannelBatch, DeviceInfo, DeviceSample, DriverInfo, ForeignText, HostSample, NvmlProblem,
};
use crate::threads::{self, SpawnFailed};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::time::{Duration, Instant};

/// What samplers send to the state owner.
#[derive(Clone, Debug)]
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
    /// What instrumented programs published since the previous pass.
    Channels(Box<ChannelBatch>),
    /// One tick's samples, sent together so they cost the receiver one wakeup and one frame.
    Batch(Vec<SourceEvent>),
}

impl ForeignText for SourceEvent {
    fn clean_text(&mut self) {
        match self {
            SourceEvent::Started { driver, devices } => {
                driver.clean_text();
                devices.iter_mut().for_each(DeviceInfo::clean_text);
            }
            SourceEvent::NvmlUnavailable(problem) => problem.clean_text(),
            // NVML's per-tick figures are numbers; their absence reasons are our own words
            // (a recording's are cleaned where they are read, `record::wire`). MIG instances
            // carry NVML's strings.
            SourceEvent::Device(sample) => sample.clean_text(),
            SourceEvent::Host(sample) => sample.clean_text(),
            SourceEvent::Channels(batch) => batch.clean_text(),
            SourceEvent::Batch(events) => events.iter_mut().for_each(SourceEvent::clean_text),
        }
    }
}

/// Sampler settings.
#[derive(Clone, Debug)]
pub struct SamplingConfig {
    pub nvml_lib: Option<PathBuf>,
    pub interval: Duration,
    /// Period of the PCIe throughput call; `None` leaves it off.
    pub pcie_every: Option<Duration>,
    /// Period of the fast memory sampling, which reads each GPU's used memory alone between
    /// refreshes to catch spikes shorter than the interval; `None` leaves it off.
    pub peak_every: Option<Duration>,
    /// Read MIG instances' SM utilisation through GPM (`--gpm`).
    pub gpm: bool,
}

/// Handle to running samplers: change the interval, tell the host sampler which pids to watch.
pub struct Sampling {
    interval_ms: Arc<AtomicU64>,
    pids: Sender<Vec<u32>>,
    /// The last list sent: the host sampler reads a changed list at once, so an unchanged
    /// one is not sent again.
    sent_pids: Vec<u32>,
}

impl Sampling {
    /// Starts every sampler; events arrive on `tx` for as long as the receiver lives.
    pub fn start<E>(config: SamplingConfig, tx: Sender<E>) -> Result<Self, SpawnFailed>
    where
        E: From<SourceEvent> + Send + 'static,
    {
        let interval_ms = Arc::new(AtomicU64::new(config.interval.as_millis() as u64));
        let (pid_tx, pid_rx) = channel();
        let schedule = Schedule {
            epoch: Instant::now(),
        };
        let pool = Pool::start(
            pid_rx,
            tx.clone(),
            interval_ms.clone(),
            config.peak_every,
            schedule,
        )?;
        threads::spawn("nvml-open", move || nvml_start(config, tx, pool))?;
        Ok(Sampling {
            interval_ms,
            pids: pid_tx,
            sent_pids: Vec::new(),
        })
    }

    pub fn set_interval(&self, interval: Duration) {
        self.interval_ms
            .store(interval.as_millis() as u64, Ordering::Relaxed);
    }

    /// The host pids NVML currently lists (sorted), for the targeted host refresh; callers
    /// pass the list after every event, and only a change goes to the sampler.
    pub fn watch_pids(&mut self, pids: Vec<u32>) {
        if pids != self.sent_pids {
            let _ = self.pids.send(pids.clone());
            self.sent_pids = pids;
        }
    }
}

/// NVML init can itself take seconds (persistence mode off), so it runs off the UI thread too;
/// the host is sampled meanwhile.
fn nvml_start<E>(config: SamplingConfig, tx: Sender<E>, pool: Pool<E>)
where
    E: From<SourceEvent> + Send + 'static,
{
    let gpus = match open_gpus(config.nvml_lib.as_deref(), config.pcie_every, config.gpm) {
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
    if tx.send(started.into()).is_ok() {
        pool.add_gpus(gpus.samplers);
    }
}
