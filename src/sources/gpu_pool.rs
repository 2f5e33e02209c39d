//! Samples every GPU from as few threads as possible, without letting one GPU that blocks
//! inside the driver hold up the others.
//!
//! One worker normally samples all GPUs in turn each tick: a thread per GPU cost eight
//! wakeups a tick, and on the machines we measured the wakeups cost more than the NVML
//! calls. Each GPU's sampler sits behind its own lock, so a worker stuck inside one GPU's
//! call holds only that GPU. A watchdog, waking once a second, starts a new worker when every
//! worker has been inside one call for longer than `STUCK_AFTER`; the new worker samples the
//! GPUs whose locks are free and skips the stuck one, which the state owner then marks stale
//! from the silence. When the stuck call returns, whichever worker finds another healthy one
//! beside it leaves, so the pool shrinks back to one.

use super::nvml::DeviceSampler;
use super::runner::SourceEvent;
use super::schedule::Schedule;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::Duration;

/// A call running longer than this is taken to be stuck. NVML's slowest normal call (PCIe
/// throughput) takes about 20 ms.
const STUCK_AFTER_MS: u64 = 500;
/// How often the watchdog looks.
const WATCH_EVERY: Duration = Duration::from_secs(1);

/// Starts one worker and the watchdog; both live as long as `tx`'s receiver.
pub fn start<E>(
    samplers: Vec<DeviceSampler>,
    tx: Sender<E>,
    interval_ms: Arc<AtomicU64>,
    schedule: Schedule,
) where
    E: From<SourceEvent> + Send + 'static,
{
    if samplers.is_empty() {
        return;
    }
    let pool = Arc::new(Pool {
        devices: samplers.into_iter().map(Mutex::new).collect(),
        workers: Mutex::new(Vec::new()),
        interval_ms,
        schedule,
        closed: AtomicBool::new(false),
    });
    spawn_worker(&pool, tx.clone());
    let _ = thread::Builder::new()
        .name("gpu-watchdog".into())
        .spawn(move || watchdog(pool, tx));
}

struct Pool {
    devices: Vec<Mutex<DeviceSampler>>,
    /// The live workers, for the watchdog and for a worker deciding whether to leave.
    workers: Mutex<Vec<Arc<Worker>>>,
    interval_ms: Arc<AtomicU64>,
    schedule: Schedule,
    /// The receiver is gone: everyone stops.
    closed: AtomicBool,
}

impl Pool {
    /// Monotonic ms since sampling began, never 0 (0 means "not in a call"); a wall clock
    /// stepped back by NTP would make a healthy call look stuck.
    fn clock_ms(&self) -> u64 {
        self.schedule.epoch.elapsed().as_millis() as u64 + 1
    }
}

/// What the watchdog can see of one worker.
#[derive(Default)]
struct Worker {
    /// When the call in progress began (`Pool::clock_ms`); 0 between calls.
    in_call_since_ms: AtomicU64,
}

impl Worker {
    fn stuck(&self, now_ms: u64) -> bool {
        let since = self.in_call_since_ms.load(Ordering::Relaxed);
        since != 0 && now_ms.saturating_sub(since) > STUCK_AFTER_MS
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic inside one sampler must not take the pool's bookkeeping down with it.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn spawn_worker<E>(pool: &Arc<Pool>, tx: Sender<E>)
where
    E: From<SourceEvent> + Send + 'static,
{
    let me = Arc::new(Worker::default());
    lock(&pool.workers).push(Arc::clone(&me));
    let pool_for_thread = Arc::clone(pool);
    let spawned = thread::Builder::new()
        .name("gpu-sampler".into())
        .spawn(move || work(pool_for_thread, me, tx));
    if spawned.is_err() {
        // Out of threads: the watchdog tries again next time.
        lock(&pool.workers).pop();
    }
}

fn work<E>(pool: Arc<Pool>, me: Arc<Worker>, tx: Sender<E>)
where
    E: From<SourceEvent>,
{
    loop {
        for device in &pool.devices {
            // Held by a worker stuck inside this GPU's call: skip it; its silence marks it stale.
            let Ok(mut sampler) = device.try_lock() else {
                continue;
            };
            me.in_call_since_ms
                .store(pool.clock_ms(), Ordering::Relaxed);
            let sample = sampler.sample();
            me.in_call_since_ms.store(0, Ordering::Relaxed);
            drop(sampler);
            if tx
                .send(SourceEvent::Device(Box::new(sample)).into())
                .is_err()
            {
                pool.closed.store(true, Ordering::Relaxed);
            }
            if pool.closed.load(Ordering::Relaxed) {
                return;
            }
        }
        if leave_if_spare(&pool, &me) {
            return;
        }
        pool.schedule.wait(&pool.interval_ms);
    }
}

/// A worker leaves when another healthy worker is there to carry on: this is how the pool
/// shrinks back after a stuck call returns. Decided under the list's lock, so two healthy
/// workers never both leave.
fn leave_if_spare(pool: &Pool, me: &Arc<Worker>) -> bool {
    let now = pool.clock_ms();
    let mut workers = lock(&pool.workers);
    let other_healthy = workers.iter().any(|w| !Arc::ptr_eq(w, me) && !w.stuck(now));
    if other_healthy {
        workers.retain(|w| !Arc::ptr_eq(w, me));
    }
    other_healthy
}

fn watchdog<E>(pool: Arc<Pool>, tx: Sender<E>)
where
    E: From<SourceEvent> + Send + 'static,
{
    while !pool.closed.load(Ordering::Relaxed) {
        thread::sleep(WATCH_EVERY);
        let now = pool.clock_ms();
        let all_stuck = lock(&pool.workers).iter().all(|w| w.stuck(now));
        // The spare skips every GPU held by a stuck worker, so at most one spare per stuck
        // GPU can ever be started, however long the calls block.
        if all_stuck && lock(&pool.workers).len() <= pool.devices.len() {
            spawn_worker(&pool, tx.clone());
        }
    }
}
