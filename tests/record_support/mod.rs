//! Shared by the recording tests: events of every kind, with absent figures of every reason,
//! and reading a recording back whole.

#![allow(
    dead_code,
    reason = "shared by several test crates, each of which uses a different part"
)]

use crate::common::builders;
use std::path::Path;
use std::sync::Arc;
use vramscope::model::SourceEvent;
use vramscope::model::{
    Absent, AllocatorDevice, AllocatorEvent, AllocatorPoint, ChannelBatch, ChannelPoll, DeviceInfo,
    DeviceSample, DriverInfo, EventKind, Gone, GpuProcess, HostMemory, HostProcess, HostSample,
    MemoryInfo, NvmlProblem, PodInfo, ProcessKind, WriterIdentity, WriterLiveness,
};
use vramscope::recording::{Header, Recorder, Recording};

pub const GIB: u64 = 1 << 30;
pub const T0: u64 = 1_760_000_000_000;

pub fn header() -> Header {
    Header {
        version: vramscope::recording::VERSION,
        vramscope_version: "0.1.0".into(),
        started_ms: T0,
        interval_ms: 1000,
        host: Some("node17".into()),
    }
}

pub fn started() -> SourceEvent {
    SourceEvent::Started {
        driver: DriverInfo {
            driver_version: Ok("550.54.15".into()),
            cuda_version: Ok(12040),
            nvml_version: Err(Absent::MissingFunction("nvmlSystemGetNVMLVersion".into())),
        },
        devices: vec![
            DeviceInfo {
                index: 0,
                name: Ok("NVIDIA H100 80GB HBM3".into()),
                uuid: Ok("GPU-00000000-0000-0000-0000-000000000000".into()),
                pci_bus_id: Ok("00000000:18:00.0".into()),
                memory_total: Ok(80 * GIB),
                power_limit_mw: Ok(700_000),
            },
            DeviceInfo {
                index: 1,
                name: Err(Absent::GpuLost),
                uuid: Err(Absent::Error("driver said \"no\"\n".into())),
                pci_bus_id: Err(Absent::Timeout),
                memory_total: Err(Absent::NoPermission),
                power_limit_mw: Err(Absent::NotSupported),
            },
        ],
    }
}

pub fn device(index: u32, at_ms: u64, used: u64) -> DeviceSample {
    DeviceSample {
        index,
        at_ms,
        memory: Ok(MemoryInfo {
            total: 80 * GIB,
            reserved: Some(512 << 20),
            used,
            free: 80 * GIB - used - (512 << 20),
        }),
        gpu_util: Ok(87),
        mem_util: Ok(0),
        temperature_c: Ok(64),
        power_mw: Ok(412_000),
        power_limit_mw: Ok(700_000),
        sm_clock_mhz: Ok(1755),
        mem_clock_mhz: Ok(2619),
        fan_percent: Err(Absent::NotSupported),
        encoder_util: Ok(0),
        decoder_util: Err(Absent::NotAvailable),
        throttle_reasons: Ok(u64::MAX),
        pstate: Ok(0),
        ecc_corrected: Ok(0),
        ecc_uncorrected: Err(Absent::NoPermission),
        pcie_tx_kbs: None,
        pcie_rx_kbs: Some(Err(Absent::Timeout)),
        processes: Ok(vec![
            GpuProcess {
                pid: 4242,
                kind: ProcessKind::Compute,
                used_memory: Ok(used / 2),
                sm_util: Ok(0),
                mem_util: Err(Absent::NotAvailable),
                enc_util: Ok(0),
                dec_util: Ok(0),
            },
            GpuProcess {
                pid: 77,
                kind: ProcessKind::ComputeAndGraphics,
                used_memory: Err(Absent::NotAvailable),
                sm_util: Err(Absent::NotSupported),
                mem_util: Ok(3),
                enc_util: Err(Absent::NotSupported),
                dec_util: Err(Absent::NotSupported),
            },
        ]),
        list_gaps: Default::default(),
        memory_peak: None,
        lost: false,
        mig: None,
    }
}

/// A GPU that fell off the bus: everything absent.
pub fn lost_device(index: u32, at_ms: u64) -> DeviceSample {
    let gone = || Err(Absent::GpuLost);
    DeviceSample {
        index,
        at_ms,
        memory: Err(Absent::GpuLost),
        gpu_util: gone(),
        mem_util: gone(),
        temperature_c: gone(),
        power_mw: gone(),
        power_limit_mw: gone(),
        sm_clock_mhz: gone(),
        mem_clock_mhz: gone(),
        fan_percent: gone(),
        encoder_util: gone(),
        decoder_util: gone(),
        throttle_reasons: Err(Absent::GpuLost),
        pstate: gone(),
        ecc_corrected: Err(Absent::GpuLost),
        ecc_uncorrected: Err(Absent::GpuLost),
        pcie_tx_kbs: Some(Ok(0)),
        pcie_rx_kbs: Some(Ok(12)),
        processes: Err(Absent::GpuLost),
        list_gaps: Default::default(),
        memory_peak: None,
        lost: true,
        mig: None,
    }
}

pub fn host(at_ms: u64) -> HostSample {
    HostSample {
        at_ms,
        load: None,
        memory: Ok(HostMemory {
            total: 512 * GIB,
            used: 100 * GIB,
            available: 400 * GIB,
            swap_total: 0,
            swap_used: 0,
        }),
        processes: vec![
            HostProcess {
                pid: 4242,
                local_pid: Some(4242),
                user: Ok("alice".into()),
                command: Ok("python train.py --lr 3e-4 \u{e9}\u{1F600}".into()),
                rss_bytes: Ok(12 * GIB),
                cpu_percent: Ok(101.5),
                container: Some("3f2a9c1b".into()),
                pod_unreadable: None,
                // A pod whose container name could not be found: recorded with the reason.
                pod: Some(PodInfo {
                    uid: "8e7f6a5b-4c3d-2e1f-0a9b-8c7d6e5f4a3b".into(),
                    qos: Some("burstable".into()),
                    container_id: Some(format!("3f2a9c1b{}", "0".repeat(56))),
                    namespace: Ok("ml-team".into()),
                    name: Ok("trainer-0".into()),
                    container: Err(Absent::Error("no /var/log/containers link".into())),
                }),
                uid: Some(1000),
                starttime: None,
            },
            HostProcess::unreadable(77, None, Absent::NoPermission, None),
        ],
    }
}

pub fn host_unreadable(at_ms: u64) -> HostSample {
    HostSample {
        at_ms,
        load: None,
        memory: Err(Absent::Error("cannot read /proc/meminfo".into())),
        processes: Vec::new(),
    }
}

pub fn identity(pid: u32) -> Arc<WriterIdentity> {
    Arc::new(WriterIdentity {
        framework: "torch 2.5.1+cu124".into(),
        local_rank: None,
        world_size: Some(8),
        job_id: "slurm-991".into(),
        command: "python train.py --config big.yaml".into(),
        allocator_config: "expandable_segments:True".into(),
        exact_peaks: true,
        sample_period_us: 20_000,
        ..builders::writer_identity(pid, 123_456)
    })
}

pub fn allocator_device(slot: u16, allocated: u64) -> AllocatorDevice {
    AllocatorDevice {
        allocated: Ok(allocated),
        allocated_peak: Ok(allocated + GIB),
        reserved: Ok(allocated + 2 * GIB),
        reserved_peak: Ok(allocated + 3 * GIB),
        active: Err(Absent::NotSupported),
        requested: Err(Absent::NotAvailable),
        ooms: Ok(1),
        device_free: Ok(10 * GIB),
        interval_peak: Ok(allocated + GIB),
        ..builders::allocator_device(slot)
    }
}

/// `n` writer samples on `slot`, 20 ms apart from `from_ms`, some figures absent.
pub fn points(slot: u16, from_ms: u64, n: u64) -> Vec<AllocatorPoint> {
    (0..n)
        .map(|i| AllocatorPoint {
            at_ms: from_ms + i * 20,
            slot,
            allocated: (i % 5 != 2).then_some(10 * GIB + (i % 50) * (64 << 20)),
            reserved: Some(16 * GIB),
            peak: (!i.is_multiple_of(7)).then_some(10 * GIB + (i % 50) * (64 << 20) + 4096),
            step: (!i.is_multiple_of(11)).then_some(100 + i / 50),
            new_high_water: i.is_multiple_of(13),
            steps_since_attach: false,
        })
        .collect()
}

pub fn every_event_kind(at_ms: u64) -> Vec<AllocatorEvent> {
    let r = |v: u64| -> vramscope::model::Reading<u64> { Ok(v) };
    let kinds = vec![
        EventKind::Oom {
            requested: r(2 * GIB),
            device_free: r(GIB),
            device_total: r(80 * GIB),
            allocated: r(70 * GIB),
            reserved: r(78 * GIB),
            retries: Err(Absent::NotSupported),
        },
        EventKind::OomError {
            requested: Err(Absent::NotAvailable),
        },
        EventKind::PhaseBegin,
        EventKind::PhaseEnd { peak: r(12 * GIB) },
        EventKind::StepEnd {
            peak_allocated: r(12 * GIB),
            peak_reserved: r(14 * GIB),
            duration_ns: r(812_000_000),
        },
        EventKind::Mark,
        EventKind::NewHighWater {
            peak: r(13 * GIB),
            previous: r(12 * GIB),
        },
        EventKind::AllocRetry { retries: r(3) },
        EventKind::Exit { error: true },
        EventKind::SnapshotWritten {
            path: Ok("/dev/shm/vramscope-1000/7-9.vsc.snap-1-peak.pickle".into()),
            size: r(4096),
            peak: r(13 * GIB),
            reason: r(1),
            allocated: r(12 * GIB),
            max_entries: r(100_000),
            deleted: r(2),
        },
        EventKind::ForeignPeakReset {
            before: r(9),
            after: r(1),
        },
        EventKind::EmptyCache {
            before: r(16 * GIB),
            after: Err(Absent::Error("cudaMemGetInfo failed".into())),
        },
        EventKind::Unknown { code: 999 },
    ];
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, kind)| AllocatorEvent {
            at_ms: at_ms + i as u64,
            kind,
            slot: (!i.is_multiple_of(3)).then_some(1),
            step: i.is_multiple_of(2).then_some(101),
            label: format!("phase {i}"),
            phase: if i.is_multiple_of(2) {
                format!("outer/phase {i}")
            } else {
                String::new()
            },
        })
        .collect()
}

pub fn poll(pid: u32, at_ms: u64, liveness: WriterLiveness, n: u64) -> ChannelPoll {
    let mut pts = points(0, at_ms - 1000, n);
    pts.extend(points(1, at_ms - 1000, n / 2));
    ChannelPoll {
        identity: identity(pid),
        host_pid: (pid != 9).then_some(pid + 100_000),
        liveness,
        devices: vec![allocator_device(0, 10 * GIB), allocator_device(1, 3 * GIB)],
        step: Some(120),
        label: "forward.decoder.layers.11".into(),
        points: pts,
        events: every_event_kind(at_ms - 500),
        lost_samples: 7,
        ..builders::channel_poll(pid, 123_456)
    }
}

pub fn channels(at_ms: u64) -> ChannelBatch {
    ChannelBatch {
        at_ms,
        polls: vec![
            poll(4242, at_ms, WriterLiveness::Live, 50),
            poll(9, at_ms, WriterLiveness::Stalled { silent_ms: 4000 }, 3),
            poll(
                10,
                at_ms,
                WriterLiveness::Ended {
                    crashed: true,
                    error: false,
                },
                0,
            ),
            poll(11, at_ms, WriterLiveness::Unreadable, 1),
        ],
        gone: vec![
            ("/dev/shm/vramscope-1000/1-1.vsc".into(), Gone::Removed),
            ("/proc/4/root/dev/shm/x.vsc".into(), Gone::Refused),
            ("/proc/5/root/dev/shm/y.vsc".into(), Gone::Unreachable),
            ("/dev/shm/vramscope-1000/2-2.vsc".into(), Gone::Retired),
        ],
        rejected: vec!["3-3.vsc: wrong magic".into()],
    }
}

/// One of every event kind, a batch among them, as the samplers send them.
pub fn every_kind() -> Vec<SourceEvent> {
    vec![
        SourceEvent::NvmlUnavailable(NvmlProblem::LibraryNotFound("libnvidia-ml.so.1".into())),
        SourceEvent::NvmlUnavailable(NvmlProblem::DriverNotLoaded),
        SourceEvent::NvmlUnavailable(NvmlProblem::Other("weird".into())),
        started(),
        SourceEvent::Batch(vec![
            SourceEvent::Device(Box::new(device(0, T0 + 1000, 10 * GIB))),
            SourceEvent::Device(Box::new(lost_device(1, T0 + 1000))),
            SourceEvent::Host(Box::new(host(T0 + 1001))),
            SourceEvent::Channels(Box::new(channels(T0 + 1002))),
        ]),
        SourceEvent::Host(Box::new(host_unreadable(T0 + 2000))),
        SourceEvent::Channels(Box::new(builders::channel_batch(
            T0 + 2001,
            vec![poll(4242, T0 + 2001, WriterLiveness::Live, 50)],
        ))),
        SourceEvent::Interval { ms: 250 },
    ]
}

/// `events` without batches, as a recording gives them back.
pub fn flatten(events: Vec<SourceEvent>) -> Vec<SourceEvent> {
    let mut flat = Vec::new();
    for event in events {
        match event {
            SourceEvent::Batch(members) => flat.extend(flatten(members)),
            other => flat.push(other),
        }
    }
    flat
}

/// Records `events` at `T0 + i` (a batch's members share its time).
pub fn write(path: &Path, events: &[SourceEvent]) {
    let mut recorder = Recorder::create(path, header()).expect("create");
    for (i, event) in events.iter().enumerate() {
        recorder.record(T0 + i as u64, event).expect("record");
    }
    recorder.finish().expect("finish");
}

/// Every event of a recording; panics on an error.
pub fn read_all(path: &Path) -> Vec<(u64, SourceEvent)> {
    Recording::open(path)
        .expect("open")
        .events()
        .collect::<Result<Vec<_>, _>>()
        .expect("events")
}
