//! The OOM hunt of issue 13 as a recording, written event by event through the real
//! `Recorder`: a PyTorch run on a 16 GiB GPU, five steps a second, sampled every 100 ms and
//! polled once a second (at 170 ms into a step: in its optimizer phase), with
//! - a start-up ramp from 0 to 9 GiB allocated over the first 5 s;
//! - a leak of 16 MiB a step (every step's peak 16 MiB above the one before);
//! - a 30 ms spike to 12 GiB inside step 40's backward (T0+8.120 s), between two samples:
//!   only the writer's new-peak event places it; the sample after it, at T0+8.2 s in step
//!   41, carries it as its interval peak, and the poll that brings it says `optimizer`;
//! - a 6 GiB request that fails at step 80 in forward (T0+16.050 s): the allocator
//!   observer's OOM, then the uncaught error 20 ms later, then the writer ends in error.

use super::{GIB, PID, T0, uuid};
use crate::common::builders;
use std::path::Path;
use std::sync::Arc;
use vramscope::model::SourceEvent;
use vramscope::model::{
    Absent, AllocatorDevice, AllocatorEvent, AllocatorPoint, ChannelPoll, DeviceInfo, DriverInfo,
    EventKind, WriterIdentity, WriterLiveness,
};
use vramscope::recording::{Header, Recorder};

pub const MIB: u64 = 1 << 20;
pub const TOTAL: u64 = 16 * GIB;
pub const STEP_MS: u64 = 200;
pub const LEAK_PER_STEP: u64 = 16 * MIB;
pub const SPIKE: u64 = 12 * GIB;
pub const SPIKE_AT: u64 = T0 + 40 * STEP_MS + 120;
pub const OOM_AT: u64 = T0 + 80 * STEP_MS + 50;
pub const REQUESTED: u64 = 6 * GIB;
/// What the driver had left when the 6 GiB request failed.
pub const FREE_AT_OOM: u64 = 3 * GIB;
/// The context and libraries outside the allocator, as NVML counts them.
pub const CONTEXT: u64 = 512 * MIB;
pub const PATH: &str = "/dev/shm/vramscope-1000/4242-7.vsc";
/// The last writer sample: the one before the OOM.
const LAST_SAMPLE: u64 = 160;

/// Allocated at `t` ms into the run (the spike aside).
pub fn allocated(t: u64) -> u64 {
    let ramp = (9 * GIB).min(9 * GIB / 5_000 * t);
    ramp + LEAK_PER_STEP * (t / STEP_MS)
}

/// The phase at `t` ms into the run: forward, backward, optimizer in each step.
fn phase(t: u64) -> &'static str {
    match t % STEP_MS {
        0..80 => "forward",
        80..160 => "backward",
        _ => "optimizer",
    }
}

/// Reserved at `t`: the caching allocator keeps what it reached, and 512 MiB more.
pub fn reserved(t: u64) -> u64 {
    let reached = if t >= SPIKE_AT - T0 {
        SPIKE.max(allocated(t))
    } else {
        allocated(t)
    };
    reached + 512 * MIB
}

fn device_info() -> DeviceInfo {
    DeviceInfo {
        index: 0,
        name: Ok("NVIDIA T4".into()),
        uuid: Ok(uuid(0)),
        pci_bus_id: Ok("00000000:18:00.0".into()),
        memory_total: Ok(TOTAL),
        power_limit_mw: Ok(70_000),
    }
}

fn identity() -> Arc<WriterIdentity> {
    Arc::new(WriterIdentity {
        job_id: "hunt".into(),
        ..builders::writer_identity(PID, 7)
    })
}

fn event(at: u64, kind: EventKind, label: &str, phase: &str) -> AllocatorEvent {
    AllocatorEvent {
        step: Some(at / STEP_MS),
        label: label.into(),
        phase: phase.into(),
        ..builders::allocator_event(T0 + at, kind)
    }
}

/// The writer's events in `(from, to]` ms into the run, in time order.
fn events(from: u64, to: u64) -> Vec<AllocatorEvent> {
    let mut out = Vec::new();
    for t in from + 1..=to.min(80 * STEP_MS + 80) {
        let step = t / STEP_MS;
        let into = t % STEP_MS;
        if matches!(into, 0 | 80 | 160) && t < OOM_AT - T0 {
            if into != 0 {
                out.push(event(
                    t,
                    EventKind::PhaseEnd {
                        peak: Ok(allocated(t)),
                    },
                    phase(t - 1),
                    "",
                ));
            }
            out.push(event(t, EventKind::PhaseBegin, phase(t), ""));
        }
        if t == SPIKE_AT - T0 {
            out.push(event(
                t,
                EventKind::NewHighWater {
                    peak: Ok(SPIKE),
                    previous: Ok(9 * GIB),
                },
                "",
                "",
            ));
        }
        if into == STEP_MS - 10 && step < 80 {
            out.push(event(
                t,
                EventKind::PhaseEnd {
                    peak: Ok(allocated(t)),
                },
                "optimizer",
                "",
            ));
            let peak = if step == 40 { SPIKE } else { allocated(t) };
            out.push(event(
                t,
                EventKind::StepEnd {
                    peak_allocated: Ok(peak),
                    peak_reserved: Ok(reserved(t)),
                    duration_ns: Ok(STEP_MS * 1_000_000),
                },
                "",
                "",
            ));
        }
        if t == OOM_AT - T0 {
            out.push(event(
                t,
                EventKind::Oom {
                    requested: Ok(REQUESTED),
                    device_free: Ok(FREE_AT_OOM),
                    device_total: Ok(TOTAL),
                    allocated: Err(Absent::NotSupported),
                    reserved: Ok(reserved(t)),
                    retries: Ok(0),
                },
                "model.layers.3.mlp",
                "forward",
            ));
        }
        if t == OOM_AT - T0 + 20 {
            let mut error = event(
                t,
                EventKind::OomError {
                    requested: Err(Absent::NotSupported),
                },
                "CUDA out of memory. Tried to allocate 6.00 GiB",
                "",
            );
            error.slot = None;
            out.push(error);
        }
        if t == OOM_AT - T0 + 30 {
            out.push(event(t, EventKind::Exit { error: true }, "", ""));
        }
    }
    out
}

/// The status read at a poll: figures of the sample at `t`, and the OOM counter.
fn status(t: u64, ooms: u64) -> AllocatorDevice {
    AllocatorDevice {
        uuid: Some(uuid(0)),
        total: Ok(TOTAL),
        allocated: Ok(allocated(t)),
        allocated_peak: Err(Absent::NotSupported),
        reserved: Ok(reserved(t)),
        reserved_peak: Err(Absent::NotSupported),
        active: Err(Absent::NotSupported),
        // The caching allocator frees its cache and retries once before an OOM.
        alloc_retries: Ok(ooms),
        ooms: Ok(ooms),
        device_free: Ok(TOTAL - reserved(t) - CONTEXT),
        ..builders::allocator_device(0)
    }
}

/// The host's view of the writer: its start time is the one its file's name carries, so
/// that a listed row knows its own channel after the writer ended.
fn host_sample(at_ms: u64) -> SourceEvent {
    SourceEvent::Host(Box::new(builders::host_sample(
        at_ms,
        vec![builders::host_process(PID, 7)],
    )))
}

/// The run, up to the poll after its death at T0+16.170 s; its figures are the constants above.
pub fn write_hunt(path: &Path) {
    let mut rec = Recorder::create(
        path,
        Header {
            version: 1,
            vramscope_version: "0.1.0".into(),
            started_ms: T0,
            interval_ms: 1000,
            host: Some("node-7".into()),
        },
    )
    .unwrap();
    let started = SourceEvent::Started {
        driver: DriverInfo {
            driver_version: Ok("550.54.15".into()),
            cuda_version: Ok(12040),
            nvml_version: Ok("12.550.54.15".into()),
        },
        devices: vec![device_info()],
    };
    rec.record(T0, &started).unwrap();
    let identity = identity();
    let mut polled = 0;
    for n in 0..=16u64 {
        let at = n * 1000;
        let alive = at <= OOM_AT - T0;
        let used = if alive { reserved(at) + CONTEXT } else { 0 };
        let mut sample = super::device_sample(0, T0 + at, used, alive.then_some(used));
        if let SourceEvent::Device(s) = &mut sample
            && let Ok(m) = &mut s.memory
        {
            m.total = TOTAL;
            m.free = TOTAL - used;
        }
        rec.record(T0 + at, &sample).unwrap();
        if alive {
            rec.record(T0 + at, &host_sample(T0 + at)).unwrap();
        }
        let poll_at = at + 170;
        if polled > OOM_AT - T0 {
            continue;
        }
        let points: Vec<AllocatorPoint> = (0..=LAST_SAMPLE)
            .map(|k| k * 100)
            .filter(|&t| t > polled && t <= poll_at)
            .map(|t| {
                let carries_spike = t == SPIKE_AT - T0 + 80;
                AllocatorPoint {
                    peak: Some(if carries_spike { SPIKE } else { allocated(t) }),
                    step: Some(t / STEP_MS),
                    new_high_water: carries_spike,
                    steps_since_attach: false,
                    ..builders::allocator_point(T0 + t, allocated(t), reserved(t))
                }
            })
            .collect();
        let ended = poll_at > OOM_AT - T0;
        let poll = ChannelPoll {
            path: PATH.into(),
            identity: Arc::clone(&identity),
            liveness: if ended {
                WriterLiveness::Ended {
                    crashed: false,
                    error: true,
                }
            } else {
                WriterLiveness::Live
            },
            devices: vec![status(poll_at.min(LAST_SAMPLE * 100), u64::from(ended))],
            step: Some(poll_at.min(OOM_AT - T0) / STEP_MS),
            label: phase(poll_at).into(),
            points,
            events: events(polled, poll_at),
            ..builders::channel_poll(PID, 7)
        };
        rec.record(
            T0 + poll_at,
            &SourceEvent::Channels(Box::new(builders::channel_batch(T0 + poll_at, vec![poll]))),
        )
        .unwrap();
        polled = poll_at;
    }
    rec.finish().unwrap();
}
