//! Events that arrive together: a tick's batch is one moment (the monitor takes every GPU's
//! sample in it before it drops processes it has not seen for too long, so the order of the
//! GPUs never decides whether a process keeps its history). A host pass always asks about
//! the processes of its own tick (`sources::jobs`; tests/sampling_pids.rs), so none arrives
//! narrower than the list it follows.

// Shares the rendering tests' builders; most of them draw screens, which this file does not.
#[allow(
    dead_code,
    reason = "shared by several test crates, each of which uses a different part"
)]
mod tui_fixtures;

use std::sync::Arc;
use tui_fixtures::*;
use vramscope::history::Lingering;
use vramscope::model::SourceEvent;
use vramscope::state::{Monitor, ProcessKey, StaleAfter};

const LINGER: u64 = Lingering::<ProcessKey, ()>::DEFAULT_LINGER_MS;

fn started() -> Monitor {
    start(Monitor::new(T0))
}

/// `monitor` told of two GPUs.
fn start(mut monitor: Monitor) -> Monitor {
    monitor.ingest(SourceEvent::Started {
        driver: driver(),
        devices: vec![
            info(0, "NVIDIA H100", 80 * GIB),
            info(1, "NVIDIA H100", 80 * GIB),
        ],
    });
    monitor
}

/// GPU 0's sample with `pid` on it (or nothing), then GPU 1's, as one batch.
fn batch(at_ms: u64, pid_on_gpu0: Option<(u32, u64)>, gpu1_first: bool) -> SourceEvent {
    let mut gpu0 = sample(0, at_ms, 20 * GIB, 80 * GIB, 50);
    if let Some((pid, used)) = pid_on_gpu0 {
        gpu0.processes = Ok(vec![gpu_process(pid, used, Ok(30))]);
    }
    let gpu1 = sample(1, at_ms, 10 * GIB, 80 * GIB, 5);
    let mut events = vec![
        SourceEvent::Device(Box::new(gpu0)),
        SourceEvent::Device(Box::new(gpu1)),
    ];
    if gpu1_first {
        events.reverse();
    }
    SourceEvent::Batch(events)
}

fn key(pid: u32) -> ProcessKey {
    ProcessKey {
        pid,
        gpu_uuid: Arc::from(info(0, "", 0).key()),
    }
}

#[test]
fn a_process_back_after_a_long_silence_keeps_its_peak_whatever_the_gpu_order() {
    for gpu1_first in [false, true] {
        let mut monitor = started();
        monitor.ingest(batch(T0, Some((42, 30 * GIB)), gpu1_first));
        // GPU 0 said nothing for longer than processes are kept (lost and back, say), then
        // lists the process again: the batch that brings it back must not drop it first.
        let back = T0 + LINGER + 5_000;
        monitor.ingest(batch(back, Some((42, 2 * GIB)), gpu1_first));
        let series = monitor
            .process_series(&key(42))
            .unwrap_or_else(|| panic!("pid 42 gone (gpu1 first: {gpu1_first})"));
        let peak = series.vram.peak().expect("a peak");
        assert_eq!(peak.value, (30 * GIB) as f64, "gpu1 first: {gpu1_first}");
        assert_eq!(peak.at_ms, T0, "gpu1 first: {gpu1_first}");
    }
}

#[test]
fn a_process_unseen_for_longer_than_it_is_kept_is_dropped_after_the_batch() {
    let mut monitor = started();
    monitor.ingest(batch(T0, Some((42, 30 * GIB)), false));
    monitor.ingest(batch(T0 + LINGER, None, false));
    assert!(
        monitor.process_series(&key(42)).is_some(),
        "kept for the whole linger"
    );
    monitor.ingest(batch(T0 + LINGER + 1_000, None, true));
    assert!(monitor.process_series(&key(42)).is_none());
}

/// The snapshot is where an exited process is remembered: its row comes with its last
/// facts and its all-time peak, for as long as the monitor is asked to remember it (the
/// exporter's grace period, when that is longer than the usual linger), then it goes.
#[test]
fn exited_rows_carry_their_peak_for_as_long_as_the_monitor_remembers() {
    let hour = 3_600_000;
    let remembering = start(Monitor::remembering(T0, hour));
    for (mut monitor, kept_ms) in [(started(), LINGER), (remembering, hour)] {
        monitor.ingest(batch(T0, Some((42, 9 * GIB)), false));
        monitor.ingest(batch(T0 + 1_000, Some((42, 5 * GIB)), false));
        monitor.ingest(batch(T0 + 2_000, None, false));
        let at = |ms: u64, m: &mut Monitor| {
            m.ingest(batch(ms, None, false));
            m.snapshot(ms, StaleAfter::interval(1_000))
        };
        let snapshot = at(T0 + 1_000 + kept_ms, &mut monitor);
        let row = snapshot
            .exited
            .iter()
            .find(|r| r.pid == 42)
            .expect("still remembered");
        assert_eq!(row.last_listed_ms, T0 + 1_000);
        let peak = row.peaks.vram.expect("its peak");
        assert_eq!((peak.value, peak.at_ms), ((9 * GIB) as f64, T0));
        let snapshot = at(T0 + 1_001 + kept_ms, &mut monitor);
        assert!(snapshot.exited.iter().all(|r| r.pid != 42), "kept too long");
    }
}
