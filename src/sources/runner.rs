//! Runs the samplers off the UI thread, in a pool (see `pool`) on one shared tick clock.

use super::nvml::open_gpus;
use super::pool::Pool;
use super::schedule::Schedule;
use crate::model::SourceEvent;
use crate::threads::{self, SpawnFailed};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

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

/// Handle to running samplers. The refresh period lives here, read by the pool at every
/// tick; whoever shows it or records it asks here.
pub struct Sampling {
    interval_ms: Arc<AtomicU64>,
    /// To wake a worker waiting for a tick planned at the old period.
    pool: Pool,
}

impl Sampling {
    /// Starts every sampler; events arrive on `tx` for as long as the receiver lives.
    pub fn start<E>(config: SamplingConfig, tx: Sender<E>) -> Result<Self, SpawnFailed>
    where
        E: From<SourceEvent> + Send + 'static,
    {
        let interval_ms = Arc::new(AtomicU64::new(config.interval.as_millis() as u64));
        let schedule = Schedule {
            epoch: Instant::now(),
        };
        let pool = Pool::start(tx.clone(), interval_ms.clone(), config.peak_every, schedule)?;
        let joining = pool.clone();
        threads::spawn("nvml-open", move || nvml_start(config, tx, joining))?;
        Ok(Sampling { interval_ms, pool })
    }

    /// The refresh period now.
    pub fn interval_ms(&self) -> u64 {
        self.interval_ms.load(Ordering::Relaxed)
    }

    /// A new refresh period, from the next tick on: the next tick by the new period, not
    /// the one planned by the old (from 30 s to 1 s, the first sample at 1 s comes within
    /// a second, not up to 30 s later). The event saying so is the caller's to record and
    /// ingest like the samplers' own, so a recording knows the period it was made at at
    /// every moment.
    pub fn set_interval(&self, interval: Duration) -> SourceEvent {
        let ms = interval.as_millis() as u64;
        self.interval_ms.store(ms, Ordering::Relaxed);
        self.pool.replan();
        SourceEvent::Interval { ms }
    }
}

/// NVML init can itself take seconds (persistence mode off), so it runs off the UI thread too;
/// the host is sampled meanwhile.
fn nvml_start<E>(config: SamplingConfig, tx: Sender<E>, pool: Pool)
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
