//! A recording whose refresh period changed (the monitor's `+`/`-`): replay and plot read
//! each period from the moment it was recorded, not the header's for the whole file. Written
//! through the real `Recorder` and read through the real `Recording`.

use super::collect::collect;
use super::contents::Role;
use crate::model::{Absent, DeviceInfo, DeviceSample, DriverInfo, MemoryInfo, SourceEvent};
use crate::recording::{Header, Recorder, Recording};
use crate::replay::{Command, Replay};
use std::path::Path;

const T0: u64 = 1_700_000_000_000;
const GIB: u64 = 1 << 30;

fn sample(at_ms: u64) -> SourceEvent {
    SourceEvent::Device(Box::new(DeviceSample {
        index: 0,
        at_ms,
        memory: Ok(MemoryInfo {
            total: 80 * GIB,
            reserved: None,
            used: 10 * GIB,
            free: 70 * GIB,
        }),
        gpu_util: Ok(50),
        mem_util: Ok(10),
        temperature_c: Err(Absent::NotSupported),
        power_mw: Err(Absent::NotSupported),
        power_limit_mw: Err(Absent::NotSupported),
        sm_clock_mhz: Err(Absent::NotSupported),
        mem_clock_mhz: Err(Absent::NotSupported),
        fan_percent: Err(Absent::NotSupported),
        encoder_util: Err(Absent::NotSupported),
        decoder_util: Err(Absent::NotSupported),
        throttle_reasons: Err(Absent::NotSupported),
        pstate: Err(Absent::NotSupported),
        ecc_corrected: Err(Absent::NotSupported),
        ecc_uncorrected: Err(Absent::NotSupported),
        pcie_tx_kbs: None,
        pcie_rx_kbs: None,
        processes: Ok(Vec::new()),
        list_gaps: Default::default(),
        memory_peak: None,
        lost: false,
        mig: None,
    }))
}

/// 20 s at the header's 1 s; with `change`, then the period set to 30 s (recorded as the
/// monitor records a key press) and five minutes at it; without, the same samples alone, as
/// a recording made before interval events were.
fn write(path: &Path, change: bool) {
    let header = Header {
        version: 1,
        vramscope_version: "0.1.0".into(),
        started_ms: T0,
        interval_ms: 1_000,
        host: None,
    };
    let mut rec = Recorder::create(path, header).unwrap();
    let started = SourceEvent::Started {
        driver: DriverInfo {
            driver_version: Ok("550.54.15".into()),
            cuda_version: Ok(12040),
            nvml_version: Ok("12.550.54.15".into()),
        },
        devices: vec![DeviceInfo {
            index: 0,
            name: Ok("NVIDIA H100 80GB HBM3".into()),
            uuid: Ok("GPU-00000000-0000-0000-0000-000000000000".into()),
            pci_bus_id: Ok("00000000:18:00.0".into()),
            memory_total: Ok(80 * GIB),
            power_limit_mw: Ok(700_000),
        }],
    };
    rec.record(T0, &started).unwrap();
    for s in 0..20 {
        let at = T0 + s * 1_000;
        rec.record(at + 2, &sample(at)).unwrap();
    }
    if change {
        rec.record(T0 + 19_500, &SourceEvent::Interval { ms: 30_000 })
            .unwrap();
    }
    for n in 1..=10 {
        let at = T0 + 19_000 + n * 30_000;
        rec.record(at + 2, &sample(at)).unwrap();
    }
    rec.finish().unwrap();
}

/// How many pieces the plot draws GPU 0's used memory in.
fn gpu_line_pieces(path: &Path) -> usize {
    let timeline = collect(Recording::open(path).unwrap(), 2_000);
    let series = timeline.panels[0]
        .series
        .iter()
        .find(|s| s.role == Role::GpuUsed)
        .expect("GPU 0's line");
    series.segments().len()
}

#[test]
fn a_recorded_interval_change_is_the_period_from_then_on_for_replay_and_plot() {
    let dir = tempfile::tempdir().unwrap();
    let changed = dir.path().join("changed.jsonl");
    let old = dir.path().join("old.jsonl");
    write(&changed, true);
    write(&old, false);

    // Plot: 30 s apart is a sampler's rhythm after the change, not ten silences. Without the
    // event (an old recording), the header's 1 s makes each of those gaps a break.
    assert_eq!(gpu_line_pieces(&changed), 1);
    assert_eq!(gpu_line_pieces(&old), 11);

    // Replay: the period at the cursor, for a sample step and the stale mark.
    let mut replay = Replay::open(&changed).unwrap();
    let mut monitor = replay.fresh_monitor();
    assert_eq!(replay.interval_ms(), 1_000);
    let start = replay.now_ms();
    replay.command(Command::SampleForward, &mut monitor);
    assert_eq!(replay.now_ms(), start + 1_000);
    replay.seek(&mut monitor, T0 + 49_000);
    assert_eq!(replay.interval_ms(), 30_000);
    replay.command(Command::SampleForward, &mut monitor);
    assert_eq!(replay.now_ms(), T0 + 79_000);
    replay.command(Command::Start, &mut monitor);
    assert_eq!(replay.interval_ms(), 1_000);

    // The old recording keeps the header's period throughout, as before.
    let mut replay = Replay::open(&old).unwrap();
    let mut monitor = replay.fresh_monitor();
    replay.seek(&mut monitor, T0 + 49_000);
    assert_eq!(replay.interval_ms(), 1_000);
}
