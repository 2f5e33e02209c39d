//! The sampling pool: every sampling job (each GPU once NVML has opened, the host, and the
//! instrumented programs' channels) runs from as few threads as possible, and one tick's
//! samples reach the state owner as one batch, so each tick costs one wakeup here and one
//! there.
//!
//! Wakeups, not NVML calls, were most of an idle monitor's CPU: a thread per GPU plus one for
//! the host cost ten a tick, and the screen redrew when the first sample came and again when
//! the stragglers did. So one worker normally runs every job in turn. Each job sits behind its
//! own lock, so a worker stuck inside one GPU's driver call holds only that GPU. A watchdog
//! starts a new worker when every worker has been inside one call for longer than
//! `STUCK_AFTER_MS`. It sleeps on an alarm that each tick sets on starting and cancels on
//! finishing, so it wakes only for a tick that overran, not once a second. The new worker runs the jobs whose locks are free and skips
//! the stuck one, which the state owner then marks stale from its silence. When the stuck
//! call returns, a worker that finds another healthy one beside it leaves, so the pool
//! shrinks back to one.
//!
//! Between full ticks, the fast memory sampling (`--peak-interval`) wakes the same worker to
//! read each GPU's used memory alone, behind the same per-GPU locks and under the same
//! watchdog: a peek blocked in the driver holds one GPU like a blocked full sample, and a
//! peek tick missed while a call blocks is skipped, not made up. A peek sends nothing: each
//! GPU's sampler keeps the highest reading and hands it over with its next full sample, so the
//! state owner and the screen wake no more often than before.

use super::alarm::Alarm;
use super::channels::ChannelSampler;
use super::host::HostSampler;
use super::nvml::DeviceSampler;
use super::runner::SourceEvent;
use super::schedule::{Schedule, Tick};
use crate::threads::{self, SpawnFailed};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::thread;
use std::time::{Duration, Instant};

/// A call running longer than this is taken to be stuck. NVML's slowest normal call (PCIe
/// throughput) takes about 20 ms.
const STUCK_AFTER_MS: u64 = 500;
/// How often the watchdog looks where no alarm could be made.
const WATCH_EVERY: Duration = Duration::from_secs(1);
/// Host figures (RAM, and each GPU process's RSS and CPU %) move slowly: sampled more often
/// than this they cost more than they tell. Reading 64 processes is two syscalls each and
/// was half of an idle monitor's sampling CPU at a 1 s refresh. A change in the pid list
/// is read at once, so a new process never waits this long for its first figures.
const HOST_MIN_PERIOD_MS: u64 = 2000;
/// How long the first GPU batch waits for a host pass already under way (see `add_gpus`).
const FIRST_HOST_WAIT: Duration = Duration::from_millis(500);

/// Handle kept by `Sampling`: where NVML's GPUs join once opened.
pub struct Pool<E> {
    shared: Arc<Shared>,
    tx: Sender<E>,
}

struct Shared {
    host: Mutex<HostJob>,
    /// Instrumented programs' channels, polled every tick: reading a channel is a few
    /// `pread`s, and every record between two polls is in the file's rings anyway.
    channels: Mutex<ChannelSampler>,
    /// The newest pid list the channels job has not taken yet. Filled wherever the list
    /// changes (the host job, the first GPU batch) and taken by whichever worker next holds
    /// the channels' lock, so no list is lost to a busy lock or to the first batch skipping
    /// the host job's change detection.
    channel_pids: Mutex<Option<Vec<u32>>>,
    /// Empty until NVML has opened; then one entry per GPU, each with its own lock.
    gpus: Mutex<Vec<Arc<Mutex<DeviceSampler>>>>,
    /// The live workers, for the watchdog and for a worker deciding whether to leave.
    workers: Mutex<Vec<Arc<Worker>>>,
    interval_ms: Arc<AtomicU64>,
    /// The fast memory sampling's period; `None`: off.
    peek_ms: Option<u64>,
    schedule: Schedule,
    /// The receiver is gone: everyone stops.
    closed: AtomicBool,
    /// Rings the watchdog; `None` where no timerfd could be made, and the watchdog polls.
    alarm: Option<Alarm>,
}

/// The host sampler, the pid list it follows, and when it last ran.
struct HostJob {
    sampler: HostSampler,
    pids: Receiver<Vec<u32>>,
    watched: Vec<u32>,
    last_run: Option<Instant>,
}

impl HostJob {
    /// Takes the newest pid list (only the newest matters); true when it differs.
    fn follow_pids(&mut self) -> bool {
        let mut changed = false;
        while let Ok(latest) = self.pids.try_recv() {
            changed = latest != self.watched;
            self.watched = latest;
        }
        changed
    }

    /// Due every `max(interval, HOST_MIN_PERIOD_MS)`, on the shared ticks: half a tick of
    /// slack, since a tick can fire a little early relative to the previous run.
    fn due(&self, interval_ms: u64, now: Instant) -> bool {
        let period = interval_ms.max(HOST_MIN_PERIOD_MS);
        self.last_run.is_none_or(|last| {
            now.duration_since(last) >= Duration::from_millis(period - interval_ms.min(period) / 2)
        })
    }
}

/// What the watchdog can see of one worker.
#[derive(Default)]
struct Worker {
    /// When the call in progress began (`Shared::clock_ms`); 0 between calls.
    in_call_since_ms: AtomicU64,
}

impl Worker {
    fn stuck(&self, now_ms: u64) -> bool {
        self.stuck_from().is_some_and(|at| now_ms >= at)
    }

    /// When the call in progress will count as stuck; `None` between calls.
    fn stuck_from(&self) -> Option<u64> {
        let since = self.in_call_since_ms.load(Ordering::Relaxed);
        (since != 0).then(|| since + STUCK_AFTER_MS + 1)
    }

    /// Runs `call` marked as in progress, for the watchdog.
    fn timed<T>(&self, shared: &Shared, call: impl FnOnce() -> T) -> T {
        self.in_call_since_ms
            .store(shared.clock_ms(), Ordering::Relaxed);
        let out = call();
        self.in_call_since_ms.store(0, Ordering::Relaxed);
        out
    }
}

impl Shared {
    /// Monotonic ms since sampling began, never 0 (0 means "not in a call"); a wall clock
    /// stepped back by NTP would make a healthy call look stuck.
    fn clock_ms(&self) -> u64 {
        self.schedule.epoch.elapsed().as_millis() as u64 + 1
    }

    fn ring_watchdog_in(&self, after: Duration) {
        if let Some(alarm) = &self.alarm {
            alarm.set(after);
        }
    }

    fn calm_watchdog(&self) {
        if let Some(alarm) = &self.alarm {
            alarm.cancel();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic inside one sampler must not take the pool's bookkeeping down with it.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `lock`, giving up after `wait`: std's Mutex has no timed lock, so it polls, which is
/// fine for the one place that uses it, once at start.
fn lock_within<T>(m: &Mutex<T>, wait: Duration) -> Option<MutexGuard<'_, T>> {
    let deadline = Instant::now() + wait;
    loop {
        match m.try_lock() {
            Ok(guard) => return Some(guard),
            Err(TryLockError::Poisoned(poisoned)) => return Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) if Instant::now() >= deadline => return None,
            Err(TryLockError::WouldBlock) => thread::sleep(Duration::from_millis(2)),
        }
    }
}

impl<E> Pool<E>
where
    E: From<SourceEvent> + Send + 'static,
{
    /// Starts one worker (sampling the host from the first tick) and the watchdog. With
    /// `peek_every`, the GPUs' used memory is also read alone at that period between ticks.
    pub fn start(
        pids: Receiver<Vec<u32>>,
        tx: Sender<E>,
        interval_ms: Arc<AtomicU64>,
        peek_every: Option<Duration>,
        schedule: Schedule,
    ) -> Result<Self, SpawnFailed> {
        let shared = Arc::new(Shared {
            host: Mutex::new(HostJob {
                sampler: HostSampler::new(),
                pids,
                watched: Vec::new(),
                last_run: None,
            }),
            channels: Mutex::new(ChannelSampler::new()),
            channel_pids: Mutex::new(None),
            gpus: Mutex::new(Vec::new()),
            workers: Mutex::new(Vec::new()),
            interval_ms,
            peek_ms: peek_every.map(|p| p.as_millis() as u64),
            schedule,
            closed: AtomicBool::new(false),
            alarm: Alarm::new().ok(),
        });
        spawn_worker(&shared, tx.clone());
        {
            let shared = Arc::clone(&shared);
            let tx = tx.clone();
            threads::spawn("sampling-watchdog", move || watchdog(shared, tx))?;
        }
        Ok(Pool { shared, tx })
    }

    /// Adds NVML's GPUs: they are sampled once at once, with the host facts (user, command)
    /// of the processes they list, so the first full screen waits neither for the next tick
    /// nor for the pid list's round trip through the state owner; and from then on with
    /// every tick.
    pub fn add_gpus(&self, samplers: Vec<DeviceSampler>) {
        let mut first = Vec::with_capacity(samplers.len() + 1);
        let mut pids = Vec::new();
        let samplers: Vec<Arc<Mutex<DeviceSampler>>> = samplers
            .into_iter()
            .map(|mut s| {
                if self.shared.peek_ms.is_some() {
                    s.keep_memory_peaks();
                }
                let sample = s.sample();
                if let Ok(processes) = &sample.processes {
                    pids.extend(processes.iter().map(|p| p.pid));
                }
                first.push(SourceEvent::Device(Box::new(sample)));
                Arc::new(Mutex::new(s))
            })
            .collect();
        pids.sort_unstable();
        pids.dedup();
        // A worker may be sampling the host right now, with the pid list it had: none of
        // these. Its next pass is a whole interval away, so wait for this one to end, but not
        // on a host read stuck in the kernel: then the regular passes catch up.
        let host = (!pids.is_empty())
            .then(|| lock_within(&self.shared.host, FIRST_HOST_WAIT))
            .flatten();
        if let Some(mut host) = host {
            host.last_run = Some(Instant::now());
            let HostJob {
                sampler, watched, ..
            } = &mut *host;
            // The state owner sends this same list back: unchanged, it is not read again.
            *watched = pids.clone();
            first.push(SourceEvent::Host(Box::new(sampler.sample(watched))));
        }
        // Passed on here too: the host job will not see this list as a change.
        if !pids.is_empty() {
            *lock(&self.shared.channel_pids) = Some(pids);
        }
        let _ = self.tx.send(SourceEvent::Batch(first).into());
        lock(&self.shared.gpus).extend(samplers);
    }
}

fn spawn_worker<E>(shared: &Arc<Shared>, tx: Sender<E>)
where
    E: From<SourceEvent> + Send + 'static,
{
    let me = Arc::new(Worker::default());
    lock(&shared.workers).push(Arc::clone(&me));
    let for_thread = Arc::clone(shared);
    let spawned = thread::Builder::new()
        .name("sampler".into())
        .spawn(move || work(for_thread, me, tx));
    if spawned.is_err() {
        // Out of threads: the watchdog tries again next time.
        lock(&shared.workers).pop();
    }
}

fn work<E>(shared: Arc<Shared>, me: Arc<Worker>, tx: Sender<E>)
where
    E: From<SourceEvent>,
{
    let mut tick = Tick::Full;
    loop {
        if tick == Tick::Peek {
            peek_gpus(&shared, &me);
        } else {
            let batch = run_jobs(&shared, &me);
            if !batch.is_empty() && tx.send(SourceEvent::Batch(batch).into()).is_err() {
                shared.closed.store(true, Ordering::Relaxed);
            }
        }
        if shared.closed.load(Ordering::Relaxed) {
            // Wakes the watchdog to see that it should stop too.
            shared.ring_watchdog_in(Duration::ZERO);
            return;
        }
        if leave_if_spare(&shared, &me) {
            return;
        }
        tick = shared.schedule.wait(&shared.interval_ms, shared.peek_ms);
    }
}

/// A peek tick: each GPU whose lock is free reads its used memory alone, and keeps it for its
/// next full sample. Watched like a full tick, so a peek stuck in the driver gets a spare
/// worker started beside it.
fn peek_gpus(shared: &Shared, me: &Worker) {
    let gpus: Vec<Arc<Mutex<DeviceSampler>>> = lock(&shared.gpus).clone();
    if gpus.is_empty() {
        return;
    }
    shared.ring_watchdog_in(Duration::from_millis(STUCK_AFTER_MS + 1));
    for gpu in &gpus {
        if let Ok(mut sampler) = gpu.try_lock() {
            me.timed(shared, || sampler.peek_memory());
        }
    }
    shared.calm_watchdog();
}

/// One tick: every GPU whose lock is free, then the host when due. A lock held by a worker
/// stuck inside that job's call is skipped: its silence marks it stale.
fn run_jobs(shared: &Shared, me: &Worker) -> Vec<SourceEvent> {
    shared.ring_watchdog_in(Duration::from_millis(STUCK_AFTER_MS + 1));
    let batch = run_each_job(shared, me);
    shared.calm_watchdog();
    batch
}

fn run_each_job(shared: &Shared, me: &Worker) -> Vec<SourceEvent> {
    let gpus: Vec<Arc<Mutex<DeviceSampler>>> = lock(&shared.gpus).clone();
    let mut batch = Vec::with_capacity(gpus.len() + 1);
    for gpu in &gpus {
        if let Ok(mut sampler) = gpu.try_lock() {
            let sample = me.timed(shared, || sampler.sample());
            batch.push(SourceEvent::Device(Box::new(sample)));
        }
    }
    if let Ok(mut host) = shared.host.try_lock() {
        let now = Instant::now();
        let pids_changed = host.follow_pids();
        if pids_changed {
            *lock(&shared.channel_pids) = Some(host.watched.clone());
        }
        if pids_changed || host.due(shared.interval_ms.load(Ordering::Relaxed), now) {
            host.last_run = Some(now);
            let HostJob {
                sampler, watched, ..
            } = &mut *host;
            let sample = me.timed(shared, || sampler.sample(watched));
            batch.push(SourceEvent::Host(Box::new(sample)));
        }
    }
    if let Ok(mut channels) = shared.channels.try_lock() {
        if let Some(pids) = lock(&shared.channel_pids).take() {
            channels.set_pids(&pids);
        }
        if let Some(found) = me.timed(shared, || channels.sample()) {
            batch.push(SourceEvent::Channels(Box::new(found)));
        }
    }
    batch
}

/// A worker leaves when another healthy worker is there to carry on: this is how the pool
/// shrinks back after a stuck call returns. Decided under the list's lock, so two healthy
/// workers never both leave.
fn leave_if_spare(shared: &Shared, me: &Arc<Worker>) -> bool {
    let now = shared.clock_ms();
    let mut workers = lock(&shared.workers);
    let other_healthy = workers.iter().any(|w| !Arc::ptr_eq(w, me) && !w.stuck(now));
    if other_healthy {
        workers.retain(|w| !Arc::ptr_eq(w, me));
    }
    other_healthy
}

fn watchdog<E>(shared: Arc<Shared>, tx: Sender<E>)
where
    E: From<SourceEvent> + Send + 'static,
{
    loop {
        match &shared.alarm {
            Some(alarm) => alarm.wait(),
            None => thread::sleep(WATCH_EVERY),
        }
        if shared.closed.load(Ordering::Relaxed) {
            return;
        }
        let now = shared.clock_ms();
        // The GPUs, the host and the channels.
        let jobs = lock(&shared.gpus).len() + 2;
        let workers = lock(&shared.workers);
        let all_stuck = workers.iter().all(|w| w.stuck(now));
        // Every spare skips the jobs held by stuck workers, so there can be no more stuck
        // workers than jobs, however long the calls block.
        let room = workers.len() <= jobs;
        // A call that began late in an overrunning tick is not stuck yet: look again when
        // it would be.
        let look_again = workers
            .iter()
            .filter_map(|w| w.stuck_from())
            .filter(|&at| at > now)
            .min();
        drop(workers);
        if all_stuck && room {
            crate::log_file::note(
                "a driver call is stuck: a spare sampling worker takes over the other jobs",
            );
            spawn_worker(&shared, tx.clone());
            // Looks again later in case the thread could not be made; a new worker's first
            // tick replaces this setting with its own.
            shared.ring_watchdog_in(Duration::from_millis(STUCK_AFTER_MS));
        } else if let Some(at) = look_again {
            shared.ring_watchdog_in(Duration::from_millis(at - now));
        }
    }
}
