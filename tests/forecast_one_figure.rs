//! The OOM forecast is one figure on every path: the same events, recorded and also fed to
//! the live monitor, give the same steps in the report as in the live `--json` (which the screen's text is,
//! tests/tui_forecast.rs), and
//! that figure counts what other processes and the driver hold on the GPU, not the device's
//! total less this process's own memory outside the allocator.

mod common;
mod recording_fixture;

use common::{builders, stderr};
use recording_fixture::{GIB, PID, T0, device_sample, start_recording};
use std::sync::Arc;
use vramscope::model::{
    Absent, AllocatorDevice, AllocatorEvent, AllocatorPoint, ChannelPoll, EventKind, GpuProcess,
    ProcessKind, SourceEvent, WriterIdentity,
};
use vramscope::state::Monitor;
use vramscope::state::StaleAfter;

const MIB: u64 = 1 << 20;
const STEPS: u64 = 80;
/// The CUDA context and libraries: NVML counts them for the process, the allocator does not.
const CONTEXT: u64 = GIB + 100 * MIB;
/// A neighbour on the same GPU, pid 5151.
const NEIGHBOUR: u64 = 20 * GIB;
/// What the driver keeps for itself (NVML's `reserved`, in neither used nor free).
const DRIVER_RESERVE: u64 = GIB / 2;

fn allocated(step: u64) -> u64 {
    4 * GIB + step * GIB / 4
}

fn reserved(step: u64) -> u64 {
    allocated(step) + GIB
}

/// The run's events, second by second: GPU 0's sample (this process, its neighbour, the
/// driver's reserve) and one poll of the writer that ends step `s` with its peak.
fn events() -> Vec<(u64, SourceEvent)> {
    let identity = Arc::new(WriterIdentity {
        exact_peaks: true,
        ..builders::writer_identity(PID, 1)
    });
    let mut out = Vec::new();
    for s in 0..STEPS {
        let at = T0 + s * 1000;
        let process = reserved(s) + CONTEXT;
        let used = process + NEIGHBOUR;
        let mut sample = device_sample(0, at, used, Some(process));
        if let SourceEvent::Device(d) = &mut sample {
            let memory = d.memory.as_mut().unwrap();
            memory.reserved = Some(DRIVER_RESERVE);
            memory.free = memory.total - used - DRIVER_RESERVE;
            d.processes.as_mut().unwrap().push(GpuProcess {
                pid: 5151,
                kind: ProcessKind::Compute,
                used_memory: Ok(NEIGHBOUR),
                sm_util: Ok(10),
                mem_util: Ok(5),
                enc_util: Err(Absent::NotSupported),
                dec_util: Err(Absent::NotSupported),
            });
        }
        out.push((at, sample));
        let device = AllocatorDevice {
            uuid: Some(recording_fixture::UUID.into()),
            allocated: Ok(allocated(s)),
            allocated_peak: Ok(allocated(s)),
            reserved: Ok(reserved(s)),
            reserved_peak: Ok(reserved(s)),
            active: Ok(allocated(s)),
            // The writer's own cudaMemGetInfo would say the same; NVML's is read first.
            device_free: Err(Absent::NotSupported),
            ..builders::allocator_device(0)
        };
        let poll = ChannelPoll {
            identity: Arc::clone(&identity),
            devices: vec![device],
            step: Some(s + 1),
            points: vec![AllocatorPoint {
                step: Some(s),
                new_high_water: true,
                steps_since_attach: false,
                ..builders::allocator_point(at + 500, allocated(s), reserved(s))
            }],
            events: vec![AllocatorEvent {
                step: Some(s),
                ..builders::allocator_event(
                    at + 900,
                    EventKind::StepEnd {
                        peak_allocated: Ok(allocated(s)),
                        peak_reserved: Ok(reserved(s)),
                        duration_ns: Ok(1_000_000_000),
                    },
                )
            }],
            ..builders::channel_poll(PID, 1)
        };
        out.push((
            at + 999,
            SourceEvent::Channels(Box::new(builders::channel_batch(at + 999, vec![poll]))),
        ));
    }
    out
}

#[test]
fn the_report_and_the_live_json_give_one_forecast_that_counts_the_neighbour() {
    // At the last step: peak 23.75 GiB rising 256 MiB a step. GPU 0 has 80 - (24.75 + 1.1 +
    // 20) - 0.5 = 33.65 GiB free and the allocator holds 24.75 GiB it can hand out again: the
    // peak can reach 58.40 GiB, 34.65 GiB above it, 138.6 steps, so the 139th fails (shown
    // as about 140). The total less the 1.1 GiB context alone (78.9 GiB) would say 221.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("leak.jsonl.zst");
    let mut rec = start_recording(&path, Some("node-7"));
    let mut monitor = Monitor::new(T0);
    monitor.ingest(SourceEvent::Started {
        driver: vramscope::model::DriverInfo {
            driver_version: Ok("550.54.15".into()),
            cuda_version: Ok(12040),
            nvml_version: Ok("12.550.54.15".into()),
        },
        devices: vec![recording_fixture::device_info(0)],
    });
    let mut last = T0;
    for (at, event) in events() {
        rec.record(at, &event).unwrap();
        monitor.ingest(event);
        last = at;
    }
    rec.finish().unwrap();

    let live =
        vramscope::output::json::to_value(&monitor.snapshot(last, StaleAfter::interval(1000)));
    let device = &live["allocators"][0]["devices"][0];
    assert_eq!(device["forecast"]["steps"], 139, "{device}");
    assert_eq!(device["forecast_text"], "OOM in about 140 steps (2 min)");

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vramscope"))
        .args(["report", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "pid {PID} on GPU 0: memory leaks: each step's peak 256 MiB above the one before (OOM in about 140 steps (2 min))"
        )),
        "{text}"
    );
}
