//! One baseline value per model type that tests build by hand, every figure explicit, so a
//! test states only what it cares about and takes the rest from here:
//!
//! ```ignore
//! AllocatorDevice { allocated: Ok(9 * GIB), reserved: Ok(10 * GIB), ..builders::allocator_device(0) }
//! ```
//!
//! The baselines describe one ordinary PyTorch process, pid and channel file given, on an
//! 80 GiB GPU whose UUID is the one [`super::h100`] gives the same index: 20 GiB allocated,
//! 24 GiB reserved, nothing retried, no OOM, 40 GiB free. Changing a baseline changes every
//! test that takes a figure from it.

use super::GIB;
use std::sync::Arc;
use vramscope::model::{
    Absent, AllocatorDevice, AllocatorEvent, AllocatorPoint, ChannelBatch, ChannelPoll, EventKind,
    HostMemory, HostProcess, HostSample, WriterIdentity, WriterLiveness,
};

pub use super::gpu_uuid;

/// GPU `slot` of the writer as PyTorch reports it, every figure the channel carries read
/// except those PyTorch does not offer:
/// - `ordinal` = `slot`, `uuid` = [`gpu_uuid`]`(slot)`, no PCI bus id;
/// - `total` 80 GiB, `device_free` 40 GiB;
/// - `allocated` 20 GiB, its peak 20 GiB, `active` 20 GiB (everything allocated is live);
/// - `reserved` 24 GiB, its peak 24 GiB; `inactive_split` 0;
/// - `alloc_retries` 0, `ooms` 0;
/// - `requested` and `limit` not supported; `interval_peak` and `step_peak` not available
///   (no sample or step has ended yet).
pub fn allocator_device(slot: u16) -> AllocatorDevice {
    AllocatorDevice {
        slot,
        ordinal: u32::from(slot),
        uuid: Some(gpu_uuid(u32::from(slot))),
        pci_bus_id: None,
        total: Ok(80 * GIB),
        allocated: Ok(20 * GIB),
        allocated_peak: Ok(20 * GIB),
        reserved: Ok(24 * GIB),
        reserved_peak: Ok(24 * GIB),
        active: Ok(20 * GIB),
        inactive_split: Ok(0),
        requested: Err(Absent::NotSupported),
        alloc_retries: Ok(0),
        ooms: Ok(0),
        device_free: Ok(40 * GIB),
        limit: Err(Absent::NotSupported),
        interval_peak: Err(Absent::NotAvailable),
        step_peak: Err(Absent::NotAvailable),
    }
}

/// The writer of channel file `{pid}-{start}.vsc`: `python train.py` under `torch 2.5.1`
/// (kind `PyTorch`), rank 0 (local rank 0) of a world of 1, no job id, no allocator
/// configuration, peaks not exact, started with the program (not attached), sampling every
/// 100 ms, no allocation sites.
pub fn writer_identity(pid: u32, start: u64) -> WriterIdentity {
    WriterIdentity {
        file: format!("{pid}-{start}.vsc"),
        pid,
        kind: "PyTorch".into(),
        framework: "torch 2.5.1".into(),
        rank: Some(0),
        local_rank: Some(0),
        world_size: Some(1),
        job_id: String::new(),
        command: "python train.py".into(),
        allocator_config: String::new(),
        exact_peaks: false,
        attached: false,
        sample_period_us: 100_000,
        sites: false,
    }
}

/// One poll of `/dev/shm/vramscope-1000/{pid}-{start}.vsc`, written by
/// [`writer_identity`]`(pid, start)`, NVML listing the same pid, live, on one device
/// ([`allocator_device`]`(0)`), no step or label published, nothing new (no points, no
/// events) and nothing lost.
pub fn channel_poll(pid: u32, start: u64) -> ChannelPoll {
    ChannelPoll {
        path: format!("/dev/shm/vramscope-1000/{pid}-{start}.vsc"),
        identity: Arc::new(writer_identity(pid, start)),
        host_pid: Some(pid),
        liveness: WriterLiveness::Live,
        devices: vec![allocator_device(0)],
        step: None,
        label: String::new(),
        points: vec![],
        events: vec![],
        lost_samples: 0,
        lost_events: 0,
    }
}

/// One writer sample at `at_ms` on slot 0: `allocated` and `reserved` read, the interval's
/// peak equal to `allocated`, no step, not a new high-water mark.
pub fn allocator_point(at_ms: u64, allocated: u64, reserved: u64) -> AllocatorPoint {
    AllocatorPoint {
        at_ms,
        slot: 0,
        allocated: Some(allocated),
        reserved: Some(reserved),
        peak: Some(allocated),
        step: None,
        new_high_water: false,
        steps_since_attach: false,
    }
}

/// An event of `kind` at `at_ms` on slot 0, no step, no label, outside any phase.
pub fn allocator_event(at_ms: u64, kind: EventKind) -> AllocatorEvent {
    AllocatorEvent {
        at_ms,
        kind,
        slot: Some(0),
        step: None,
        label: String::new(),
        phase: String::new(),
    }
}

/// The channel sampler's pass at `at_ms` that read `polls`; nothing gone, nothing refused.
pub fn channel_batch(at_ms: u64, polls: Vec<ChannelPoll>) -> ChannelBatch {
    ChannelBatch {
        at_ms,
        polls,
        gone: vec![],
        rejected: vec![],
    }
}

/// What the host read of `pid` started at `start` (the start time its channel's file name
/// carries, so the two join): alice's `python train.py`, 4 GiB resident, one core busy.
pub fn host_process(pid: u32, start: u64) -> HostProcess {
    HostProcess {
        pid,
        local_pid: Some(pid),
        user: Ok("alice".into()),
        command: Ok("python train.py".into()),
        rss_bytes: Ok(4 * GIB),
        cpu_percent: Ok(100.0),
        container: None,
        pod_unreadable: None,
        pod: None,
        uid: Some(1000),
        starttime: Some(start),
    }
}

/// One host sample at `at_ms` of a 64 GiB host, 8 GiB used, listing `processes`.
pub fn host_sample(at_ms: u64, processes: Vec<HostProcess>) -> HostSample {
    HostSample {
        at_ms,
        load: None,
        memory: Ok(HostMemory {
            total: 64 * GIB,
            used: 8 * GIB,
            available: 56 * GIB,
            swap_total: 0,
            swap_used: 0,
        }),
        processes,
    }
}
