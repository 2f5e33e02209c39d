//! Events that arrive together or overlap: a tick's batch is one moment (the monitor takes
//! every GPU's sample in it before it drops processes it has not seen for too long, so the
//! order of the GPUs never decides whether a process keeps its history), and a host pass that
//! asked about fewer processes does not blank the facts of the others.

// Shares the rendering tests' builders; most of them draw screens, which this file does not.
#[allow(
    dead_code,
    reason = "shared by several test crates, each of which uses a different part"
)]
mod tui_fixtures;

use std::sync::Arc;
use tui_fixtures::*;
use vramscope::history::Retained;
use vramscope::model::SourceEvent;
use vramscope::state::{Monitor, ProcessKey, StaleAfter};

const LINGER: u64 = Retained::<ProcessKey, ()>::DEFAULT_LINGER_MS;

fn started() -> Monitor {
    let mut monitor = Monitor::new(T0);
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

#[test]
fn a_narrower_host_pass_arriving_late_keeps_the_other_processes_named() {
    let mut monitor = started();
    monitor.ingest(batch(T0, Some((42, 3 * GIB)), false));
    // The first GPU batch's own host pass, which asked about pid 42...
    let named = host_process(42, "ada", "python train.py", GIB, 99.0);
    monitor.ingest(SourceEvent::Host(Box::new(host_sample(
        T0 + 20,
        vec![named],
    ))));
    // ...then a worker's pass begun before the pid list reached it, asking about nobody.
    monitor.ingest(SourceEvent::Host(Box::new(host_sample(
        T0 + 10,
        Vec::new(),
    ))));
    let snapshot = monitor.snapshot(T0 + 30, StaleAfter::NEVER);
    let row = &snapshot.processes[0];
    assert_eq!(row.nvml.pid, 42);
    let host = row.host.as_ref().expect("host facts kept");
    assert_eq!(host.command.as_deref(), Ok("python train.py"));
    assert_eq!(host.user.as_deref(), Ok("ada"));
    // Carried over for the screen, not recorded again: one RSS reading in the history.
    let rss = &monitor.process_series(&key(42)).unwrap().host_rss;
    assert_eq!(rss.raw().count(), 1);

    // Once NVML no longer lists the process, its facts are not carried any further.
    monitor.ingest(batch(T0 + 1_000, None, false));
    monitor.ingest(SourceEvent::Host(Box::new(host_sample(
        T0 + 1_010,
        Vec::new(),
    ))));
    let snapshot = monitor.snapshot(T0 + 1_020, StaleAfter::NEVER);
    assert!(snapshot.processes.is_empty());
    monitor.ingest(batch(T0 + 2_000, Some((42, 3 * GIB)), false));
    let snapshot = monitor.snapshot(T0 + 2_020, StaleAfter::NEVER);
    assert!(
        snapshot.processes[0].host.is_none(),
        "stale facts came back"
    );
}
