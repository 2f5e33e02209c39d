//! A synthetic recording shared by the report, export and replay tests: one minute of one
//! GPU at 1 Hz with an instrumented process sampled at 10 Hz, written event by event through
//! the real `Recorder`, so every peak, time, step and phase is known exactly:
//! - NVML used on GPU 0: 40 GiB, 75 GiB at T0+30 s;
//! - pid 4242 ("python train.py", alice): NVML used 30 GiB; allocated 20 GiB with a 100 ms
//!   spike to 29 GiB at T0+29.9 s in step 7 during `backward/lm_head` (the phase's events
//!   say so; the next poll's label says `optimizer`); reserved 24 GiB;
//! - a caught OOM at T0+45.5 s asking for 8 GiB, step 11, phase `forward` (module
//!   `forward/model.attn`), caught: step 11 ends at T0+48 s.

#![allow(
    dead_code,
    reason = "shared by several test crates, each of which uses a different part"
)]

pub mod hunt;

use crate::common::builders;
use std::path::Path;
use std::sync::Arc;
use vramscope::model::SourceEvent;
use vramscope::model::{
    Absent, AllocatorDevice, AllocatorEvent, AllocatorPoint, ChannelPoll, DeviceInfo, DeviceSample,
    DriverInfo, EventKind, GpuProcess, HostProcess, MemoryInfo, ProcessKind, WriterIdentity,
};
use vramscope::recording::{Header, Recorder};

pub const GIB: u64 = 1 << 30;

pub const T0: u64 = 1_700_000_000_000;
pub const UUID: &str = "GPU-00000000-0000-0000-0000-000000000000";

/// The pid of the instrumented process in every fixture.
pub const PID: u32 = 4242;

pub fn uuid(index: u32) -> String {
    format!("GPU-00000000-0000-0000-0000-00000000000{index}")
}

pub fn device_info(index: u32) -> DeviceInfo {
    DeviceInfo {
        index,
        name: Ok("NVIDIA H100 80GB HBM3".into()),
        uuid: Ok(uuid(index)),
        pci_bus_id: Ok(format!("00000000:{:02X}:00.0", 0x18 + index)),
        memory_total: Ok(80 * GIB),
        power_limit_mw: Ok(700_000),
    }
}

/// GPU `index` at `at_ms`: `used` bytes, and pid 4242 with `pid_used` when given.
pub fn device_sample(index: u32, at_ms: u64, used: u64, pid_used: Option<u64>) -> SourceEvent {
    let processes = pid_used
        .map(|used| GpuProcess {
            pid: PID,
            kind: ProcessKind::Compute,
            used_memory: Ok(used),
            sm_util: Ok(90),
            mem_util: Ok(40),
            enc_util: Err(Absent::NotSupported),
            dec_util: Err(Absent::NotSupported),
        })
        .into_iter()
        .collect();
    SourceEvent::Device(Box::new(DeviceSample {
        index,
        at_ms,
        memory: Ok(MemoryInfo {
            total: 80 * GIB,
            reserved: Some(GIB / 2),
            used,
            free: 80 * GIB - used,
        }),
        gpu_util: Ok(90),
        mem_util: Ok(40),
        temperature_c: Ok(60),
        power_mw: Ok(400_000),
        power_limit_mw: Ok(700_000),
        sm_clock_mhz: Ok(1980),
        mem_clock_mhz: Ok(2619),
        fan_percent: Err(Absent::NotSupported),
        encoder_util: Ok(0),
        decoder_util: Ok(0),
        throttle_reasons: Ok(0),
        pstate: Ok(0),
        ecc_corrected: Ok(0),
        ecc_uncorrected: Ok(0),
        pcie_tx_kbs: None,
        pcie_rx_kbs: None,
        processes: Ok(processes),
        list_gaps: Default::default(),
        memory_peak: None,
        lost: false,
        mig: None,
    }))
}

fn allocator_device(allocated: u64, reserved: u64, retries: u64, split: u64) -> AllocatorDevice {
    AllocatorDevice {
        uuid: Some(UUID.into()),
        allocated: Ok(allocated),
        allocated_peak: Ok(allocated),
        reserved: Ok(reserved),
        reserved_peak: Ok(reserved),
        active: Ok(allocated),
        inactive_split: Ok(split),
        alloc_retries: Ok(retries),
        ooms: Ok(1),
        device_free: Ok(GIB),
        ..builders::allocator_device(0)
    }
}

/// A recorder on `path` (1 s interval, started at T0, on `host`) that has recorded its start
/// on GPU 0.
pub fn start_recording(path: &Path, host: Option<&str>) -> Recorder {
    let mut rec = Recorder::create(
        path,
        Header {
            version: 1,
            vramscope_version: "0.1.0".into(),
            started_ms: T0,
            interval_ms: 1000,
            host: host.map(str::to_string),
        },
    )
    .unwrap();
    let started = SourceEvent::Started {
        driver: DriverInfo {
            driver_version: Ok("550.54.15".into()),
            cuda_version: Ok(12040),
            nvml_version: Ok("12.550.54.15".into()),
        },
        devices: vec![device_info(0)],
    };
    rec.record(T0, &started).unwrap();
    rec
}

/// One minute of a run: steady 20 GiB allocated, a 100 ms spike to 29 GiB at T0+30.0 s in
/// step 7 during `backward/lm_head`, a caught OOM at T0+45 s, and NVML's figure peaking at
/// 75 GiB at T0+30 s.
pub fn write_recording(path: &Path) {
    let mut rec = start_recording(path, Some("node-7"));
    let identity = Arc::new(WriterIdentity {
        world_size: Some(2),
        job_id: "job-1".into(),
        ..builders::writer_identity(PID, 1)
    });
    for s in 0..60u64 {
        let at = T0 + s * 1000;
        let used = if s == 30 { 75 * GIB } else { 40 * GIB };
        rec.record(at, &device_sample(0, at, used, Some(30 * GIB)))
            .unwrap();
        rec.record(
            at,
            &SourceEvent::Host(Box::new(builders::host_sample(
                at,
                vec![HostProcess {
                    starttime: None,
                    ..builders::host_process(4242, 1)
                }],
            ))),
        )
        .unwrap();
        // Ten writer samples a second; the spike lasts one of them.
        let points: Vec<AllocatorPoint> = (0..10u64)
            .map(|k| {
                let t = at + k * 100;
                let spike = s == 29 && k == 9;
                AllocatorPoint {
                    peak: Some(if spike { 29 * GIB } else { 20 * GIB }),
                    step: Some(s / 4),
                    new_high_water: spike,
                    steps_since_attach: false,
                    ..builders::allocator_point(t, 20 * GIB, 24 * GIB)
                }
            })
            .collect();
        let mut events = Vec::new();
        if s == 29 {
            // The spike's phase, as `vramscope.mark` publishes it: the poll's own label says
            // only where the program was when it was read.
            let phase = |at_ms: u64, kind: EventKind| AllocatorEvent {
                slot: None,
                step: Some(7),
                label: "backward/lm_head".into(),
                ..builders::allocator_event(at_ms, kind)
            };
            events.push(phase(at + 850, EventKind::PhaseBegin));
            events.push(phase(at + 950, EventKind::PhaseEnd { peak: Ok(29 * GIB) }));
        }
        if s == 48 {
            // Step 11 ends after its OOM: the program caught it.
            events.push(AllocatorEvent {
                step: Some(11),
                ..builders::allocator_event(
                    at,
                    EventKind::StepEnd {
                        peak_allocated: Ok(20 * GIB),
                        peak_reserved: Ok(24 * GIB),
                        duration_ns: Ok(4_000_000_000),
                    },
                )
            });
        }
        if s == 45 {
            events.push(AllocatorEvent {
                step: Some(11),
                label: "forward/model.attn".into(),
                phase: "forward".into(),
                ..builders::allocator_event(
                    at + 500,
                    EventKind::Oom {
                        requested: Ok(8 * GIB),
                        device_free: Ok(GIB / 2),
                        device_total: Ok(80 * GIB),
                        allocated: Ok(20 * GIB),
                        reserved: Ok(24 * GIB),
                        retries: Ok(3),
                    },
                )
            });
        }
        let poll = ChannelPoll {
            identity: Arc::clone(&identity),
            devices: vec![allocator_device(20 * GIB, 24 * GIB, 3, 6 * GIB)],
            step: Some(s / 4),
            // The label published at each poll: after the spike, the optimizer ran.
            label: if s == 29 {
                "optimizer".into()
            } else {
                "forward".into()
            },
            points,
            events,
            ..builders::channel_poll(PID, 1)
        };
        rec.record(
            at + 999,
            &SourceEvent::Channels(Box::new(builders::channel_batch(at + 999, vec![poll]))),
        )
        .unwrap();
    }
    rec.finish().unwrap();
}
