//! The state thread of `vramscope serve`: the one owner of the `Monitor`, as the TUI's main
//! loop is, but headless. It drains each tick's events, takes one snapshot, and publishes it
//! with the processes to export.

use super::fresh::fresh;
use super::node::Node;
use super::processes;
use super::published::{Latest, Published};
use super::retention::Retention;
use crate::model::SourceEvent;
use crate::model::{Snapshot, now_ms};
use crate::sources::runner::Sampling;
use crate::state::{Monitor, StaleAfter};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::thread;
use std::time::Duration;

/// What the state thread needs from the command line.
pub struct Settings {
    pub grace: Duration,
    /// `--hostname`: the node's name in the labels, instead of this machine's host name.
    pub hostname: Option<String>,
    /// `--on EVENT=CMD`: the hooks, which look at each snapshot published.
    pub notifier: Option<crate::notify::Notifier>,
}

/// Starts the state thread; it runs until the samplers stop.
pub fn spawn(
    rx: Receiver<SourceEvent>,
    sampling: Sampling,
    latest: Arc<Latest>,
    settings: Settings,
) -> std::io::Result<()> {
    thread::Builder::new()
        .name("serve-state".into())
        .spawn(move || run(&rx, sampling, &latest, settings))
        .map(|_| ())
}

fn run(rx: &Receiver<SourceEvent>, sampling: Sampling, latest: &Latest, mut settings: Settings) {
    let interval_ms = sampling.interval_ms();
    let stale = StaleAfter::interval(interval_ms);
    // Exited processes are remembered by the monitor, for the whole grace period; the
    // retention only says which of its rows are exported.
    let mut monitor = Monitor::remembering(now_ms(), Retention::grace_ms(settings.grace));
    let mut retention = Retention::new(settings.grace);
    let mut node = Node::new(settings.hostname.clone());
    let mut told_problem = false;
    // Even when no event comes (every sampler stuck), publish now and then so that stale
    // GPUs are marked so.
    let idle_wake = Duration::from_millis(interval_ms).max(Duration::from_secs(1));
    loop {
        match rx.recv_timeout(idle_wake) {
            Ok(event) => {
                monitor.ingest(event);
                // Everything pending, then one snapshot.
                while let Ok(event) = rx.try_recv() {
                    monitor.ingest(event);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        // Said once: the endpoint keeps serving (`vramscope_nvml_available 0`) for alerts.
        if let (Some(problem), false) = (&monitor.problem, told_problem) {
            eprintln!(
                "vramscope: {}; serving without GPU figures",
                problem.one_line()
            );
            told_problem = true;
        }
        let now = now_ms();
        let snapshot = Arc::new(monitor.snapshot(now, stale));
        if let Some(notifier) = settings.notifier.as_mut() {
            notifier.observe(&snapshot);
            for line in notifier.take_said() {
                eprintln!("vramscope: {line}");
            }
        }
        let unreadable = unreadable_process_lists(&snapshot);
        let current = processes::from_snapshot(&snapshot);
        let exported = retention.update(current, &unreadable, now);
        let labels = node.labels(&snapshot.devices);
        let hostname = node.hostname().map(str::to_string);
        latest.set(Published::new(snapshot, labels, exported).with_hostname(hostname));
    }
}

/// GPUs whose process list is not known this tick (stale, lost, or the call failed).
fn unreadable_process_lists(snapshot: &Snapshot) -> Vec<String> {
    snapshot
        .devices
        .iter()
        .filter(|d| fresh(d).is_none_or(|s| s.processes.is_err()))
        .map(|d| d.info.key())
        .collect()
}
