//! The sampling jobs and one tick over them, shared by the pool (`pool`, on its workers) and
//! one-shot output (`oneshot`, on the calling thread), so both sample the same way.
//!
//! The pid list is the tick's own: each GPU job keeps the pids its last sample listed, and
//! the tick hands their union to the host and channel jobs after the GPUs, in the same tick.
//! The host facts (user, command, RSS) of a process therefore come in the same batch as the
//! first GPU sample that lists it, and no owner of the state has to send the list back down.

use super::channels::ChannelSampler;
use super::host::HostSampler;
use super::nvml::DeviceSampler;
use crate::model::{DeviceSample, SourceEvent};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Runs each driver or kernel call of a tick: the pool marks it in progress for its
/// watchdog; one-shot output just calls it.
pub trait Timer {
    fn timed<T>(&self, call: impl FnOnce() -> T) -> T;
}

/// Calls without watching: for the calling thread of one-shot output.
pub struct Untimed;

impl Timer for Untimed {
    fn timed<T>(&self, call: impl FnOnce() -> T) -> T {
        call()
    }
}

pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic inside one sampler must not take the pool's bookkeeping down with it.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One GPU: its sampler, and the pids its last sample listed.
pub struct GpuJob {
    sampler: Mutex<DeviceSampler>,
    /// Beside the sampler's lock, not behind it: a tick whose GPU is held by a call stuck in
    /// the driver still hands on that GPU's last list, as a screen still shows its last
    /// sample. An unreadable list is none (as the screen has no rows for it).
    pids: Mutex<Vec<u32>>,
}

impl GpuJob {
    pub fn new(sampler: DeviceSampler) -> Self {
        GpuJob {
            sampler: Mutex::new(sampler),
            pids: Mutex::new(Vec::new()),
        }
    }

    /// A full sample, unless another worker holds this GPU (stuck in a call): `None`.
    fn try_sample(&self, timer: &impl Timer) -> Option<DeviceSample> {
        let mut sampler = self.sampler.try_lock().ok()?;
        let sample = timer.timed(|| sampler.sample());
        drop(sampler);
        *lock(&self.pids) = listed(&sample);
        Some(sample)
    }

    /// The used memory alone (the fast memory sampling), kept for the next full sample;
    /// skipped (false) while another worker holds this GPU.
    fn try_peek(&self) -> bool {
        match self.sampler.try_lock() {
            Ok(mut sampler) => {
                sampler.peek_memory();
                true
            }
            Err(_) => false,
        }
    }

    /// The sampler itself, for what one-shot output does around a tick (`--gpm`'s priming).
    pub fn sampler(&self) -> MutexGuard<'_, DeviceSampler> {
        lock(&self.sampler)
    }
}

/// The pids a sample lists; none when its list could not be read.
fn listed(sample: &DeviceSample) -> Vec<u32> {
    sample
        .processes
        .as_ref()
        .map(|list| list.iter().map(|p| p.pid).collect())
        .unwrap_or_default()
}

/// The host sampler, the pid list it last read, and when it last ran.
struct HostJob {
    sampler: HostSampler,
    watched: Vec<u32>,
    last_run: Option<Instant>,
    /// Host figures are read no more often than this (the pool's `HOST_MIN_PERIOD_MS`;
    /// one-shot output: 0, every take), unless the pid list changed.
    min_period_ms: u64,
}

impl HostJob {
    /// Due every `max(interval, min_period_ms)`, on the shared ticks: half a tick of slack,
    /// since a tick can fire a little early relative to the previous run.
    fn due(&self, interval_ms: u64, now: Instant) -> bool {
        let period = interval_ms.max(self.min_period_ms);
        self.last_run.is_none_or(|last| {
            now.duration_since(last) >= Duration::from_millis(period - interval_ms.min(period) / 2)
        })
    }
}

/// Every sampling job: the GPUs (none until NVML has opened), the host, the channels. Each
/// behind its own lock, so a call stuck in one holds only that one.
pub struct Jobs {
    /// A shared slice, replaced whole when GPUs join: a tick or a peek takes it by cloning one
    /// `Arc`, so walking the GPUs without holding the lock allocates nothing (a peek runs ten
    /// times a second and must cost its driver calls, not a list copy).
    gpus: Mutex<Arc<[Arc<GpuJob>]>>,
    host: Mutex<HostJob>,
    /// Instrumented programs' channels, polled every tick: reading a channel is a few
    /// `pread`s, and every record between two polls is in the file's rings anyway.
    channels: Mutex<ChannelSampler>,
}

impl Jobs {
    /// No GPUs yet; the host read at most every `host_min_period_ms` while the pid list
    /// stays the same.
    pub fn new(channels: ChannelSampler, host_min_period_ms: u64) -> Self {
        Jobs {
            gpus: Mutex::new(Arc::from(Vec::new())),
            host: Mutex::new(HostJob {
                sampler: HostSampler::new(),
                watched: Vec::new(),
                last_run: None,
                min_period_ms: host_min_period_ms,
            }),
            channels: Mutex::new(channels),
        }
    }

    pub fn add_gpus(&self, samplers: impl IntoIterator<Item = DeviceSampler>) {
        let mut gpus = lock(&self.gpus);
        let joined: Vec<Arc<GpuJob>> = gpus
            .iter()
            .cloned()
            .chain(samplers.into_iter().map(|s| Arc::new(GpuJob::new(s))))
            .collect();
        *gpus = Arc::from(joined);
    }

    /// The GPUs, for a tick to walk without holding the list's lock.
    pub fn gpus(&self) -> Arc<[Arc<GpuJob>]> {
        Arc::clone(&lock(&self.gpus))
    }

    /// A peek (the fast memory sampling): each GPU whose lock is free reads its used memory
    /// alone, kept for its next full sample. The pass is timed as one call: its reads take
    /// microseconds, and a GPU stuck inside one still holds only its own lock. Nothing is
    /// allocated and nothing is sent. Returns how many GPUs were read.
    pub fn peek(&self, timer: &impl Timer) -> usize {
        let gpus = self.gpus();
        if gpus.is_empty() {
            return 0;
        }
        timer.timed(|| gpus.iter().filter(|gpu| gpu.try_peek()).count())
    }

    /// One tick: every GPU whose lock is free, then the host (when due, or at once when the
    /// GPUs' pid list changed), then the channels, both given this tick's pid list. A lock
    /// held by a worker stuck inside that job's call is skipped: its silence marks it stale.
    pub fn tick(&self, interval_ms: u64, timer: &impl Timer) -> Vec<SourceEvent> {
        let gpus = self.gpus();
        let mut batch = Vec::with_capacity(gpus.len() + 2);
        for gpu in gpus.iter() {
            if let Some(sample) = gpu.try_sample(timer) {
                batch.push(SourceEvent::Device(Box::new(sample)));
            }
        }
        let mut pids: Vec<u32> = gpus.iter().flat_map(|g| lock(&g.pids).clone()).collect();
        pids.sort_unstable();
        pids.dedup();
        if let Ok(mut host) = self.host.try_lock() {
            let now = Instant::now();
            let changed = host.watched != pids;
            if changed || host.due(interval_ms, now) {
                host.last_run = Some(now);
                host.watched.clone_from(&pids);
                let sample = timer.timed(|| host.sampler.sample(&pids));
                batch.push(SourceEvent::Host(Box::new(sample)));
            }
        }
        if let Ok(mut channels) = self.channels.try_lock() {
            // Compared inside: an unchanged list costs nothing.
            channels.set_pids(&pids);
            if let Some(found) = timer.timed(|| channels.sample()) {
                batch.push(SourceEvent::Channels(Box::new(found)));
            }
        }
        batch
    }

    /// How many jobs there are (the GPUs, the host and the channels), for the watchdog.
    pub fn count(&self) -> usize {
        lock(&self.gpus).len() + 2
    }
}
