//! The flat list of named figures for a GPU and for a process. JSON and CSV both print these,
//! so the two formats cannot drift apart; each name sits beside the code that reads it, so the
//! names and the values cannot drift apart either.

use crate::model::figure_names::*;
use crate::model::mig::{MigState, RowInstance};
use crate::model::peak_owner::Who;
use crate::model::{
    Absent, AllocatorDevice, DeviceSample, DeviceSnapshot, MemoryInfo, MemoryPeak,
    ProcessAllocator, ProcessKind, ProcessRow, Reading,
};

/// One printable value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Int(u64),
    /// GPU memory in bytes: an integer in JSON, written in `--units` in CSV.
    Bytes(u64),
    Float(f64),
    Text(String),
    Bool(bool),
}

/// A named figure that may be absent.
pub type Field = (&'static str, Reading<Value>);

/// A field's name and how to read it from `T`.
pub type Column<T> = (&'static str, fn(&T) -> Reading<Value>);

/// Every GPU field, in output order (the CSV header follows it).
pub const DEVICE: &[Column<DeviceSnapshot>] = &[
    ("index", |d| Ok(Value::Int(u64::from(d.info.index)))),
    ("uuid", |d| text(&d.info.uuid)),
    ("name", |d| text(&d.info.name)),
    ("pci_bus_id", |d| text(&d.info.pci_bus_id)),
    ("sampled_at_ms", |d| sampled(d, |s| Ok(Value::Int(s.at_ms)))),
    ("stale", |d| Ok(Value::Bool(d.stale))),
    ("lost", |d| {
        Ok(Value::Bool(d.sample.as_ref().is_some_and(|s| s.lost)))
    }),
    (MEMORY_TOTAL, memory_total),
    ("memory_reserved", |d| {
        sampled(d, |s| match &s.memory {
            Ok(MemoryInfo {
                reserved: Some(reserved),
                ..
            }) => Ok(Value::Bytes(*reserved)),
            Ok(_) => Err(Absent::Error(
                "counted in memory_used by this driver's memory call".into(),
            )),
            Err(why) => Err(why.clone()),
        })
    }),
    (MEMORY_USED, |d| memory(d, |m| m.used)),
    ("memory_free", |d| memory(d, |m| m.free)),
    (MEMORY_USED_PEAK, |d| {
        memory_peak(d, |p| Value::Bytes(p.used))
    }),
    ("memory_used_peak_at_ms", |d| {
        memory_peak(d, |p| Value::Int(p.at_ms))
    }),
    // The process that made the interval's peak (`peak_owner::owner_of`).
    ("memory_used_peak_pid", |d| {
        memory_peak(d, |_| Value::Int(0))?;
        match d.interval_peak_owner.as_ref().map(|o| &o.who) {
            Some(Who::Process { pid, .. }) => Ok(Value::Int(u64::from(*pid))),
            Some(Who::NotAttributed(why)) => Err(Absent::Error(format!("not attributed: {why}"))),
            None => Err(Absent::NotAvailable),
        }
    }),
    (GPU_UTIL, |d| sampled(d, |s| int(&s.gpu_util))),
    (MEM_UTIL, |d| sampled(d, |s| int(&s.mem_util))),
    (TEMPERATURE_C, |d| sampled(d, |s| int(&s.temperature_c))),
    (POWER_MW, |d| sampled(d, |s| int(&s.power_mw))),
    ("power_limit_mw", |d| sampled(d, |s| int(&s.power_limit_mw))),
    (SM_CLOCK_MHZ, |d| sampled(d, |s| int(&s.sm_clock_mhz))),
    (MEM_CLOCK_MHZ, |d| sampled(d, |s| int(&s.mem_clock_mhz))),
    ("fan_percent", |d| sampled(d, |s| int(&s.fan_percent))),
    ("encoder_util", |d| sampled(d, |s| int(&s.encoder_util))),
    ("decoder_util", |d| sampled(d, |s| int(&s.decoder_util))),
    ("pstate", |d| sampled(d, |s| int(&s.pstate))),
    ("throttle_reasons", |d| {
        sampled(d, |s| int(&s.throttle_reasons))
    }),
    ("ecc_corrected", |d| sampled(d, |s| int(&s.ecc_corrected))),
    ("ecc_uncorrected", |d| {
        sampled(d, |s| int(&s.ecc_uncorrected))
    }),
    ("pcie_tx_kbs", |d| {
        sampled(d, |s| pcie(s.pcie_tx_kbs.as_ref()))
    }),
    ("pcie_rx_kbs", |d| {
        sampled(d, |s| pcie(s.pcie_rx_kbs.as_ref()))
    }),
    ("instrumented_reserved", |d| {
        d.instrumented_reserved
            .map(Value::Int)
            .ok_or_else(|| Absent::Error("no instrumented process".into()))
    }),
    ("process_count", |d| {
        sampled(d, |s| {
            s.processes
                .as_ref()
                .map(|p| Value::Int(p.len() as u64))
                .map_err(Clone::clone)
        })
    }),
    ("compute_process_count", |d| {
        sampled(d, |s| list_count(s, ProcessKind::Compute))
    }),
    ("graphics_process_count", |d| {
        sampled(d, |s| list_count(s, ProcessKind::Graphics))
    }),
    ("mig_mode", |d| {
        sampled(d, |s| {
            if let Some(why) = s.mig.as_ref().and_then(MigState::mode_unread_reason) {
                return Err(why);
            }
            let on = s.mig.as_ref().is_some_and(|m| m.enabled);
            Ok(Value::Text(if on { "enabled" } else { "disabled" }.into()))
        })
    }),
    ("mig_pending", |d| {
        sampled(d, |s| {
            s.mig
                .as_ref()
                .and_then(MigState::pending_note)
                .map(Value::Text)
                .ok_or_else(|| Absent::Error("no MIG mode change pending".into()))
        })
    }),
    ("mig_instance_count", |d| {
        sampled(d, |s| match s.mig_enabled() {
            Some(m) => m
                .instances
                .as_ref()
                .map(|i| Value::Int(i.len() as u64))
                .map_err(Clone::clone),
            None => Err(not_mig()),
        })
    }),
];

/// Every field of a process on one GPU, in output order.
pub const PROCESS: &[Column<ProcessRow>] = &[
    ("gpu_index", |p| Ok(Value::Int(u64::from(p.gpu_index)))),
    ("gpu_uuid", |p| Ok(Value::Text(p.gpu_uuid.to_string()))),
    ("pid", |p| Ok(Value::Int(u64::from(p.nvml.pid)))),
    ("local_pid", |p| {
        p.host
            .as_ref()
            .and_then(|h| h.local_pid)
            .map(|v| Value::Int(u64::from(v)))
            .ok_or_else(not_visible)
    }),
    ("type", |p| Ok(Value::Text(p.nvml.kind.letter().into()))),
    (USED_MEMORY, |p| {
        p.nvml.used_memory.clone().map(Value::Bytes)
    }),
    // The all-time peak of the process's history, spikes the fast sampling attributed to it
    // included.
    ("used_memory_peak", |p| {
        p.peaks
            .vram
            .map(|peak| Value::Bytes(peak.value as u64))
            .ok_or_else(|| Absent::Error("no figure read yet".into()))
    }),
    (SM_UTIL, |p| int(&p.nvml.sm_util)),
    ("mem_util", |p| int(&p.nvml.mem_util)),
    ("enc_util", |p| int(&p.nvml.enc_util)),
    ("dec_util", |p| int(&p.nvml.dec_util)),
    ("user", |p| host(p, |h| text(&h.user))),
    ("command", |p| host(p, |h| text(&h.command))),
    (HOST_RSS, |p| host(p, |h| int(&h.rss_bytes))),
    (CPU_PERCENT, |p| {
        host(p, |h| {
            h.cpu_percent
                .as_ref()
                .map(|c| Value::Float(f64::from(*c)))
                .map_err(Clone::clone)
        })
    }),
    ("container", |p| {
        p.host
            .as_ref()
            .and_then(|h| h.container.clone())
            .map(Value::Text)
            .ok_or(Absent::NotAvailable)
    }),
    // `container` above stays the container id it has been within version 1; the name
    // dcgm-exporter calls `container` is `container_name` here.
    ("pod", |p| pod(p, |pod| text(&pod.name))),
    ("namespace", |p| pod(p, |pod| text(&pod.namespace))),
    ("container_name", |p| pod(p, |pod| text(&pod.container))),
    ("pod_uid", |p| {
        pod(p, |pod| Ok(Value::Text(pod.uid.clone())))
    }),
    ("pod_qos", |p| {
        pod(p, |pod| {
            pod.qos
                .clone()
                .map(Value::Text)
                .ok_or_else(|| Absent::Error("the cgroup path does not say".into()))
        })
    }),
    ("allocated", |p| allocator(p, |a| int(&a.device.allocated))),
    ("reserved", |p| allocator(p, |a| int(&a.device.reserved))),
    ("true_peak", |p| {
        allocator(p, |a| {
            a.peak
                .as_ref()
                .map(|peak| Value::Int(peak.value))
                .ok_or(Absent::NotAvailable)
        })
    }),
    ("step", |p| {
        allocator(p, |a| {
            a.step
                .map(Value::Int)
                .ok_or_else(|| Absent::Error("no step yet".into()))
        })
    }),
    ("phase", |p| {
        allocator(p, |a| Ok(Value::Text(a.label.clone())))
    }),
    ("writer", |p| {
        allocator(p, |a| Ok(Value::Text(a.liveness.label().into())))
    }),
    ("mig_profile", |p| instance(p, |i| text(&i.profile))),
    ("gpu_instance_id", |p| {
        instance(p, |i| int(&i.gpu_instance_id))
    }),
    ("compute_instance_id", |p| {
        instance(p, |i| int(&i.compute_instance_id))
    }),
    ("mig_uuid", |p| instance(p, |i| text(&i.uuid))),
];

/// Every figure an allocator publishes for one GPU, in output order.
pub const ALLOCATOR_DEVICE: &[Column<AllocatorDevice>] = &[
    ("ordinal", |d| Ok(Value::Int(u64::from(d.ordinal)))),
    ("uuid", |d| {
        d.uuid.clone().map(Value::Text).ok_or(Absent::NotAvailable)
    }),
    ("pci_bus_id", |d| {
        d.pci_bus_id
            .clone()
            .map(Value::Text)
            .ok_or(Absent::NotAvailable)
    }),
    ("total", |d| int(&d.total)),
    ("allocated", |d| int(&d.allocated)),
    ("allocated_peak", |d| int(&d.allocated_peak)),
    ("reserved", |d| int(&d.reserved)),
    ("reserved_peak", |d| int(&d.reserved_peak)),
    ("active", |d| int(&d.active)),
    ("inactive_split", |d| int(&d.inactive_split)),
    ("requested", |d| int(&d.requested)),
    ("alloc_retries", |d| int(&d.alloc_retries)),
    ("ooms", |d| int(&d.ooms)),
    ("device_free", |d| int(&d.device_free)),
    ("limit", |d| int(&d.limit)),
    ("interval_peak", |d| int(&d.interval_peak)),
    ("step_peak", |d| int(&d.step_peak)),
];

/// Every figure of one allocator device.
pub fn allocator_device(d: &AllocatorDevice) -> Vec<Field> {
    ALLOCATOR_DEVICE
        .iter()
        .map(|(name, read)| (*name, read(d)))
        .collect()
}

/// Every figure of one GPU. A GPU never sampled has every sampled figure absent.
pub fn device(d: &DeviceSnapshot) -> Vec<Field> {
    DEVICE.iter().map(|(name, read)| (*name, read(d))).collect()
}

/// Every figure of one process on one GPU.
pub fn process(p: &ProcessRow) -> Vec<Field> {
    PROCESS
        .iter()
        .map(|(name, read)| (*name, read(p)))
        .collect()
}

fn int<T: Into<u64> + Copy>(r: &Reading<T>) -> Reading<Value> {
    r.as_ref()
        .map(|v| Value::Int((*v).into()))
        .map_err(Clone::clone)
}

fn text(r: &Reading<String>) -> Reading<Value> {
    r.as_ref()
        .map(|v| Value::Text(v.clone()))
        .map_err(Clone::clone)
}

/// The total from the latest sample or the static facts; else why neither has it (the
/// failing memory call's reason), and only before any sample "no sample yet".
fn memory_total(d: &DeviceSnapshot) -> Reading<Value> {
    if let Some(total) = d.memory_total() {
        return Ok(Value::Bytes(total));
    }
    match (d.sample.as_ref().map(|s| &s.memory), &d.info.memory_total) {
        (Some(Err(why)), _) | (None, Err(why)) => Err(why.clone()),
        _ => Err(no_sample()),
    }
}

/// How many processes one NVML list holds (a pid in both lists counts in each); absent with
/// the reason when that list, or both, could not be read.
fn list_count(s: &DeviceSample, list: ProcessKind) -> Reading<Value> {
    let gap = match list {
        ProcessKind::Graphics => &s.list_gaps.graphics,
        _ => &s.list_gaps.compute,
    };
    if let Some(why) = gap {
        return Err(why.clone());
    }
    let processes = s.processes.as_ref().map_err(Clone::clone)?;
    let count = processes
        .iter()
        .filter(|p| p.kind == list || p.kind == ProcessKind::ComputeAndGraphics)
        .count();
    Ok(Value::Int(count as u64))
}

fn not_mig() -> Absent {
    Absent::Error("GPU not in MIG mode".into())
}

/// A figure of the MIG instance the process runs in.
fn instance(p: &ProcessRow, read: impl Fn(&RowInstance) -> Reading<Value>) -> Reading<Value> {
    p.mig.as_ref().map_or_else(|| Err(not_mig()), read)
}

fn no_sample() -> Absent {
    Absent::Error("no sample yet".into())
}

fn not_visible() -> Absent {
    Absent::Error("pid not visible here".into())
}

/// A figure of the latest sample; absent with a reason when the GPU has not been sampled.
fn sampled(d: &DeviceSnapshot, read: impl Fn(&DeviceSample) -> Reading<Value>) -> Reading<Value> {
    d.sample.as_ref().map_or_else(|| Err(no_sample()), read)
}

fn memory(d: &DeviceSnapshot, pick: fn(&MemoryInfo) -> u64) -> Reading<Value> {
    sampled(d, |s| {
        s.memory
            .as_ref()
            .map(|m| Value::Bytes(pick(m)))
            .map_err(Clone::clone)
    })
}

/// The highest used memory the fast memory sampling read since the previous sample.
fn memory_peak(d: &DeviceSnapshot, pick: fn(&MemoryPeak) -> Value) -> Reading<Value> {
    sampled(d, |s| {
        s.memory_peak.as_ref().map(pick).ok_or_else(|| {
            Absent::Error(
                "no fast memory sampling (--peak-interval off, or a single reading)".into(),
            )
        })
    })
}

/// PCIe figures exist only when `--pcie` asked for them.
fn pcie(r: Option<&Reading<u32>>) -> Reading<Value> {
    match r {
        Some(reading) => int(reading),
        None => Err(Absent::Error("not sampled (enable with --pcie)".into())),
    }
}

/// A host-side figure; absent when the host knows nothing of the pid.
fn host(
    p: &ProcessRow,
    read: impl Fn(&crate::model::HostProcess) -> Reading<Value>,
) -> Reading<Value> {
    p.host.as_deref().map_or_else(|| Err(not_visible()), read)
}

/// A fact of the process's Kubernetes pod; absent when it runs in none, or when the host
/// cannot see the process at all (then for that reason).
fn pod(p: &ProcessRow, read: impl Fn(&crate::model::PodInfo) -> Reading<Value>) -> Reading<Value> {
    host(p, |h| match &h.pod {
        Some(pod) => read(pod),
        None if h.local_pid.is_none() => Err(h.user.clone().err().unwrap_or_else(not_visible)),
        None => Err(h
            .pod_unreadable
            .clone()
            .unwrap_or_else(|| Absent::Error("not in a Kubernetes pod".into()))),
    })
}

/// An allocator figure; absent when the process publishes none.
fn allocator(p: &ProcessRow, read: impl Fn(&ProcessAllocator) -> Reading<Value>) -> Reading<Value> {
    match (&p.allocator, &p.unjoined) {
        (Some(a), _) => read(a),
        // Its writer publishes, for a GPU that is not here: said as `--once` says it.
        (None, Some(why)) => Err(Absent::Error(why.clone())),
        (None, None) => Err(Absent::Error("not instrumented".into())),
    }
}
