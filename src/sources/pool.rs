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
//! The jobs and what one tick does are `jobs`'s (shared with one-shot output): the pid list
//! the host and channel jobs follow is the tick's own, taken from the GPU jobs' last lists.
//! When NVML's GPUs join, the next tick is now, so the first full screen does not wait a
//! whole interval; when the refresh period changes, the next tick is planned again by it.
//!
//! Between full ticks, the fast memory sampling (`--peak-interval`) wakes the same worker to
//! read each GPU's used memory alone, behind the same per-GPU locks and under the same
//! watchdog (rung by an alarm the full tick before set for just after the next is due, at most
//! `PEEK_WATCH_MS` ahead, which the peeks of a longer period set again as it nears): a
//! peek blocked in the driver holds one GPU like a blocked full sample, and a peek tick
//! missed while a call blocks is skipped, not made up. A peek sends nothing: each
//! GPU's sampler keeps the highest reading and hands it over with its next full sample, so the
//! state owner and the screen wake no more often than before.

use super::alarm::Alarm;
use super::channels::ChannelSampler;
use super::jobs::{Jobs, Timer, lock};
use super::nvml::DeviceSampler;
use super::schedule::{Schedule, Tick, peeks_between};
use crate::model::SourceEvent;
use crate::threads::{self, SpawnFailed};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// A call running longer than this is taken to be stuck. NVML's slowest normal call (PCIe
/// throughput) takes about 20 ms.
const STUCK_AFTER_MS: u64 = 500;
/// The longest the alarm is set ahead to watch the peeks: a stuck peek starts a spare worker
/// within this (plus `STUCK_AFTER_MS`) however long the refresh period, at the cost of one
/// syscall per this long from the peeks of a long period.
const PEEK_WATCH_MS: u64 = 2000;
/// How often the watchdog looks where no alarm could be made.
const WATCH_EVERY: Duration = Duration::from_secs(1);
/// Host figures (RAM, and each GPU process's RSS and CPU %) move slowly: sampled more often
/// than this they cost more than they tell. Reading 64 processes is two syscalls each and
/// was half of an idle monitor's sampling CPU at a 1 s refresh. A change in the pid list
/// is read at once, so a new process never waits this long for its first figures.
const HOST_MIN_PERIOD_MS: u64 = 2000;

/// Handle kept by `Sampling`: where NVML's GPUs join once opened, and where a new refresh
/// period is taken up at once.
#[derive(Clone)]
pub struct Pool {
    shared: Arc<Shared>,
}

/// What a waiting worker is woken for.
#[derive(Default)]
struct Kick {
    /// The next tick is now, a full one (the GPUs joined).
    tick_now: bool,
    /// The refresh period changed: the tick waited for was planned at the old one, which
    /// may be up to 30 s away (or past the new one's next tick), so plan it again.
    replan: bool,
}

struct Shared {
    jobs: Jobs,
    /// The live workers, for the watchdog and for a worker deciding whether to leave.
    workers: Mutex<Vec<Arc<Worker>>>,
    interval_ms: Arc<AtomicU64>,
    /// The fast memory sampling's period; `None`: off.
    peek_ms: Option<u64>,
    schedule: Schedule,
    /// Why a waiting worker should wake before its tick; it wakes on `kicked`.
    kick: Mutex<Kick>,
    kicked: Condvar,
    /// The receiver is gone: everyone stops.
    closed: AtomicBool,
    /// Rings the watchdog; `None` where no timerfd could be made, and the watchdog polls.
    alarm: Option<Alarm>,
    /// When the alarm is set to ring (`clock_ms`); 0: not set. A peek reads it to know
    /// whether a ring is still to come without a syscall.
    alarm_at_ms: AtomicU64,
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
            let at = self.clock_ms() + after.as_millis() as u64;
            self.alarm_at_ms.store(at, Ordering::Relaxed);
        }
    }

    fn calm_watchdog(&self) {
        if let Some(alarm) = &self.alarm {
            alarm.cancel();
            self.alarm_at_ms.store(0, Ordering::Relaxed);
        }
    }

    /// Sets the alarm to ring `STUCK_AFTER_MS` after the next full tick is due, or after
    /// `PEEK_WATCH_MS` if that comes first: the watch over the peeks until then.
    fn watch_peeks(&self, interval_ms: u64) {
        let (next_full, _) = self.schedule.next(interval_ms, None);
        let ahead = next_full
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(PEEK_WATCH_MS));
        self.ring_watchdog_in(ahead + Duration::from_millis(STUCK_AFTER_MS + 1));
    }

    /// Whether the alarm will ring no sooner than `STUCK_AFTER_MS` from now: a call
    /// starting now that sticks is then caught by it.
    fn watched_from_now(&self) -> bool {
        self.alarm_at_ms.load(Ordering::Relaxed) > self.clock_ms() + STUCK_AFTER_MS
    }
}

impl Pool {
    /// Starts one worker (sampling the host from the first tick) and the watchdog. With
    /// `peek_every`, the GPUs' used memory is also read alone at that period between ticks.
    pub fn start<E>(
        tx: Sender<E>,
        interval_ms: Arc<AtomicU64>,
        peek_every: Option<Duration>,
        schedule: Schedule,
    ) -> Result<Self, SpawnFailed>
    where
        E: From<SourceEvent> + Send + 'static,
    {
        let shared = Arc::new(Shared {
            jobs: Jobs::new(ChannelSampler::new(), HOST_MIN_PERIOD_MS),
            workers: Mutex::new(Vec::new()),
            interval_ms,
            peek_ms: peek_every.map(|p| p.as_millis() as u64),
            schedule,
            kick: Mutex::new(Kick::default()),
            kicked: Condvar::new(),
            closed: AtomicBool::new(false),
            alarm: Alarm::new().ok(),
            alarm_at_ms: AtomicU64::new(0),
        });
        spawn_worker(&shared, tx.clone());
        {
            let shared = Arc::clone(&shared);
            threads::spawn("sampling-watchdog", move || watchdog(shared, tx))?;
        }
        Ok(Pool { shared })
    }

    /// Adds NVML's GPUs, and makes the next tick now: the first full screen does not wait
    /// for the next tick, and that tick's host pass reads the processes the GPUs list.
    pub fn add_gpus(&self, samplers: Vec<DeviceSampler>) {
        let peek = self.shared.peek_ms.is_some();
        self.shared.jobs.add_gpus(samplers.into_iter().map(|mut s| {
            if peek {
                s.keep_memory_peaks();
            }
            s
        }));
        lock(&self.shared.kick).tick_now = true;
        self.shared.kicked.notify_all();
    }

    /// The refresh period changed (`Sampling::set_interval`): the next tick falls by the new
    /// one, not at the moment planned by the old one.
    pub fn replan(&self) {
        lock(&self.shared.kick).replan = true;
        self.shared.kicked.notify_all();
    }
}

impl Shared {
    /// Sleeps until the next tick, or until kicked: for a full tick now, or to plan the next
    /// tick again by a new refresh period.
    fn wait(&self) -> Tick {
        let mut kick = lock(&self.kick);
        'plan: loop {
            let (at, tick) = self
                .schedule
                .next(self.interval_ms.load(Ordering::Relaxed), self.peek_ms);
            loop {
                if std::mem::take(&mut kick.tick_now) {
                    return Tick::Full;
                }
                if std::mem::take(&mut kick.replan) {
                    continue 'plan;
                }
                let left = at.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return tick;
                }
                kick = self
                    .kicked
                    .wait_timeout(kick, left)
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0;
            }
        }
    }
}

/// A worker's calls, marked in progress for the watchdog.
struct Watched<'a> {
    shared: &'a Shared,
    me: &'a Worker,
}

impl Timer for Watched<'_> {
    fn timed<T>(&self, call: impl FnOnce() -> T) -> T {
        self.me.timed(self.shared, call)
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
        tick = shared.wait();
    }
}

/// A peek tick (`Jobs::peek`). It normally touches no alarm: the full tick before it set the
/// watchdog to ring just after the next full tick is due, or `PEEK_WATCH_MS` ahead if sooner
/// (`run_jobs`), and every full tick sets it again on starting. So a peek stuck in the driver
/// keeps that tick from starting, and the alarm rings and starts a spare worker at most
/// `PEEK_WATCH_MS` + `STUCK_AFTER_MS` after the peek stuck. A peek that finds the ring less
/// than `STUCK_AFTER_MS` away, or none to come (a long period's watch running out; the refresh
/// period changed since the last full tick, which had no peeks to watch or set the alarm by
/// the old period; a full tick a late peek made the schedule skip), sets it again first. A
/// healthy peek at a 1 s refresh thus makes no syscall but its NVML read: on a virtual machine
/// a syscall that sets a timer costs microseconds, and at nine peeks a second that was a
/// tenth of the monitor's sampling CPU.
fn peek_gpus(shared: &Shared, me: &Worker) {
    if shared.peek_ms.is_none() {
        return;
    }
    if !shared.watched_from_now() {
        shared.watch_peeks(shared.interval_ms.load(Ordering::Relaxed));
    }
    shared.jobs.peek(&Watched { shared, me });
}

/// One tick (`Jobs::tick`), watched.
/// Where peeks fall between full ticks, the alarm is not cancelled at the end but set to ring
/// `STUCK_AFTER_MS` after the next full tick is due, which that tick's start replaces: the
/// watch over the peeks between (`peek_gpus`).
fn run_jobs(shared: &Shared, me: &Worker) -> Vec<SourceEvent> {
    shared.ring_watchdog_in(Duration::from_millis(STUCK_AFTER_MS + 1));
    let interval_ms = shared.interval_ms.load(Ordering::Relaxed);
    let batch = shared.jobs.tick(interval_ms, &Watched { shared, me });
    if peeks_between(interval_ms, shared.peek_ms) {
        shared.watch_peeks(interval_ms);
    } else {
        shared.calm_watchdog();
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
        let jobs = shared.jobs.count();
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
