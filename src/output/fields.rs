//! The flat list of named figures for a GPU and for a process. JSON and CSV both print these,
//! so the two formats cannot drift apart; each name sits beside the code that reads it, so the
//! names and the values cannot drift apart either.

use crate::model::figures::{Figure, device as gpu, process, slot};
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
pub type Column<T> = (&'static Figure, fn(&T) -> Reading<Value>);

/// Every GPU field, in output order (the CSV header follows it).
pub const DEVICE: &[Column<DeviceSnapshot>] = &[
    (&gpu::INDEX, |d| Ok(Value::Int(u64::from(d.info.index)))),
    (&gpu::UUID, |d| text(&d.info.uuid)),
    (&gpu::NAME, |d| text(&d.info.name)),
    (&gpu::PCI_BUS_ID, |d| text(&d.info.pci_bus_id)),
    (&gpu::SAMPLED_AT_MS, |d| {
        sampled(d, |s| Ok(Value::Int(s.at_ms)))
    }),
    (&gpu::STALE, |d| Ok(Value::Bool(d.stale))),
    (&gpu::LOST, |d| {
        Ok(Value::Bool(d.sample.as_ref().is_some_and(|s| s.lost)))
    }),
    (&gpu::MEMORY_TOTAL, memory_total),
    (&gpu::MEMORY_RESERVED, |d| {
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
    (&gpu::MEMORY_USED, |d| memory(d, |m| m.used)),
    (&gpu::MEMORY_FREE, |d| memory(d, |m| m.free)),
    (&gpu::MEMORY_USED_PEAK, |d| {
        memory_peak(d, |p| Value::Bytes(p.used))
    }),
    (&gpu::MEMORY_USED_PEAK_AT_MS, |d| {
        memory_peak(d, |p| Value::Int(p.at_ms))
    }),
    // The process that made the interval's peak (`peak_owner::owner_of`).
    (&gpu::MEMORY_USED_PEAK_PID, |d| {
        memory_peak(d, |_| Value::Int(0))?;
        match d.interval_peak_owner.as_ref().map(|o| &o.who) {
            Some(Who::Process { pid, .. }) => Ok(Value::Int(u64::from(*pid))),
            Some(Who::NotAttributed(why)) => Err(Absent::Error(format!("not attributed: {why}"))),
            None => Err(Absent::NotAvailable),
        }
    }),
    (&gpu::GPU_UTIL, |d| sampled(d, |s| int(&s.gpu_util))),
    (&gpu::MEM_UTIL, |d| sampled(d, |s| int(&s.mem_util))),
    (&gpu::TEMPERATURE_C, |d| {
        sampled(d, |s| int(&s.temperature_c))
    }),
    (&gpu::POWER_MW, |d| sampled(d, |s| int(&s.power_mw))),
    (&gpu::POWER_LIMIT_MW, |d| {
        sampled(d, |s| int(&s.power_limit_mw))
    }),
    (&gpu::SM_CLOCK_MHZ, |d| sampled(d, |s| int(&s.sm_clock_mhz))),
    (&gpu::MEM_CLOCK_MHZ, |d| {
        sampled(d, |s| int(&s.mem_clock_mhz))
    }),
    (&gpu::FAN_PERCENT, |d| sampled(d, |s| int(&s.fan_percent))),
    (&gpu::ENCODER_UTIL, |d| sampled(d, |s| int(&s.encoder_util))),
    (&gpu::DECODER_UTIL, |d| sampled(d, |s| int(&s.decoder_util))),
    (&gpu::PSTATE, |d| sampled(d, |s| int(&s.pstate))),
    (&gpu::THROTTLE_REASONS, |d| {
        sampled(d, |s| int(&s.throttle_reasons))
    }),
    (&gpu::ECC_CORRECTED, |d| {
        sampled(d, |s| int(&s.ecc_corrected))
    }),
    (&gpu::ECC_UNCORRECTED, |d| {
        sampled(d, |s| int(&s.ecc_uncorrected))
    }),
    (&gpu::PCIE_TX_KBS, |d| {
        sampled(d, |s| pcie(s.pcie_tx_kbs.as_ref()))
    }),
    (&gpu::PCIE_RX_KBS, |d| {
        sampled(d, |s| pcie(s.pcie_rx_kbs.as_ref()))
    }),
    (&gpu::INSTRUMENTED_RESERVED, |d| {
        d.instrumented_reserved
            .map(Value::Int)
            .ok_or_else(|| Absent::Error("no instrumented process".into()))
    }),
    (&gpu::PROCESS_COUNT, |d| {
        sampled(d, |s| {
            s.processes
                .as_ref()
                .map(|p| Value::Int(p.len() as u64))
                .map_err(Clone::clone)
        })
    }),
    (&gpu::COMPUTE_PROCESS_COUNT, |d| {
        sampled(d, |s| list_count(s, ProcessKind::Compute))
    }),
    (&gpu::GRAPHICS_PROCESS_COUNT, |d| {
        sampled(d, |s| list_count(s, ProcessKind::Graphics))
    }),
    (&gpu::MIG_MODE, |d| {
        sampled(d, |s| {
            if let Some(why) = s.mig.as_ref().and_then(MigState::mode_unread_reason) {
                return Err(why);
            }
            let on = s.mig.as_ref().is_some_and(|m| m.enabled);
            Ok(Value::Text(if on { "enabled" } else { "disabled" }.into()))
        })
    }),
    (&gpu::MIG_PENDING, |d| {
        sampled(d, |s| {
            s.mig
                .as_ref()
                .and_then(MigState::pending_note)
                .map(Value::Text)
                .ok_or_else(|| Absent::Error("no MIG mode change pending".into()))
        })
    }),
    (&gpu::MIG_INSTANCE_COUNT, |d| {
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
    (&process::GPU_INDEX, |p| {
        Ok(Value::Int(u64::from(p.gpu_index)))
    }),
    (&process::GPU_UUID, |p| {
        Ok(Value::Text(p.gpu_uuid.to_string()))
    }),
    (&process::PID, |p| Ok(Value::Int(u64::from(p.nvml.pid)))),
    (&process::LOCAL_PID, |p| {
        p.host
            .as_ref()
            .and_then(|h| h.local_pid)
            .map(|v| Value::Int(u64::from(v)))
            .ok_or_else(not_visible)
    }),
    (&process::TYPE, |p| {
        Ok(Value::Text(p.nvml.kind.letter().into()))
    }),
    (&process::USED_MEMORY, |p| {
        p.nvml.used_memory.clone().map(Value::Bytes)
    }),
    // The all-time peak of the process's history, spikes the fast sampling attributed to it
    // included.
    (&process::USED_MEMORY_PEAK, |p| {
        p.peaks
            .vram
            .map(|peak| Value::Bytes(peak.value as u64))
            .ok_or_else(|| Absent::Error("no figure read yet".into()))
    }),
    (&process::SM_UTIL, |p| int(&p.nvml.sm_util)),
    (&process::MEM_UTIL, |p| int(&p.nvml.mem_util)),
    (&process::ENC_UTIL, |p| int(&p.nvml.enc_util)),
    (&process::DEC_UTIL, |p| int(&p.nvml.dec_util)),
    (&process::USER, |p| host(p, |h| text(&h.user))),
    (&process::COMMAND, |p| host(p, |h| text(&h.command))),
    (&process::HOST_RSS, |p| host(p, |h| int(&h.rss_bytes))),
    (&process::CPU_PERCENT, |p| {
        host(p, |h| {
            h.cpu_percent
                .as_ref()
                .map(|c| Value::Float(f64::from(*c)))
                .map_err(Clone::clone)
        })
    }),
    (&process::CONTAINER, |p| {
        p.host
            .as_ref()
            .and_then(|h| h.container.clone())
            .map(Value::Text)
            .ok_or(Absent::NotAvailable)
    }),
    // `container` above stays the container id it has been within version 1; the name
    // dcgm-exporter calls `container` is `container_name` here.
    (&process::POD, |p| pod(p, |pod| text(&pod.name))),
    (&process::NAMESPACE, |p| pod(p, |pod| text(&pod.namespace))),
    (&process::CONTAINER_NAME, |p| {
        pod(p, |pod| text(&pod.container))
    }),
    (&process::POD_UID, |p| {
        pod(p, |pod| Ok(Value::Text(pod.uid.clone())))
    }),
    (&process::POD_QOS, |p| {
        pod(p, |pod| {
            pod.qos
                .clone()
                .map(Value::Text)
                .ok_or_else(|| Absent::Error("the cgroup path does not say".into()))
        })
    }),
    (&process::ALLOCATED, |p| {
        allocator(p, |a| int(&a.device.allocated))
    }),
    (&process::RESERVED, |p| {
        allocator(p, |a| int(&a.device.reserved))
    }),
    (&process::TRUE_PEAK, |p| {
        allocator(p, |a| {
            a.peak
                .as_ref()
                .map(|peak| Value::Int(peak.value))
                .ok_or(Absent::NotAvailable)
        })
    }),
    (&process::STEP, |p| {
        allocator(p, |a| {
            a.step
                .map(Value::Int)
                .ok_or_else(|| Absent::Error("no step yet".into()))
        })
    }),
    (&process::STEPS_FROM, |p| {
        allocator(p, |a| {
            a.step
                .map(|_| Value::Text(a.steps_from.key().into()))
                .ok_or_else(|| Absent::Error("no step yet".into()))
        })
    }),
    (&process::PHASE, |p| {
        allocator(p, |a| Ok(Value::Text(a.label.clone())))
    }),
    (&process::WRITER, |p| {
        allocator(p, |a| Ok(Value::Text(a.liveness.label().into())))
    }),
    (&process::MIG_PROFILE, |p| instance(p, |i| text(&i.profile))),
    (&process::GPU_INSTANCE_ID, |p| {
        instance(p, |i| int(&i.gpu_instance_id))
    }),
    (&process::COMPUTE_INSTANCE_ID, |p| {
        instance(p, |i| int(&i.compute_instance_id))
    }),
    (&process::MIG_UUID, |p| instance(p, |i| text(&i.uuid))),
];

/// Every figure an allocator publishes for one GPU, in output order.
pub const ALLOCATOR_DEVICE: &[Column<AllocatorDevice>] = &[
    (&slot::ORDINAL, |d| Ok(Value::Int(u64::from(d.ordinal)))),
    (&slot::UUID, |d| {
        d.uuid.clone().map(Value::Text).ok_or(Absent::NotAvailable)
    }),
    (&slot::PCI_BUS_ID, |d| {
        d.pci_bus_id
            .clone()
            .map(Value::Text)
            .ok_or(Absent::NotAvailable)
    }),
    (&slot::TOTAL, |d| int(&d.total)),
    (&slot::ALLOCATED, |d| int(&d.allocated)),
    (&slot::ALLOCATED_PEAK, |d| int(&d.allocated_peak)),
    (&slot::RESERVED, |d| int(&d.reserved)),
    (&slot::RESERVED_PEAK, |d| int(&d.reserved_peak)),
    (&slot::ACTIVE, |d| int(&d.active)),
    (&slot::INACTIVE_SPLIT, |d| int(&d.inactive_split)),
    (&slot::REQUESTED, |d| int(&d.requested)),
    (&slot::ALLOC_RETRIES, |d| int(&d.alloc_retries)),
    (&slot::OOMS, |d| int(&d.ooms)),
    (&slot::DEVICE_FREE, |d| int(&d.device_free)),
    (&slot::LIMIT, |d| int(&d.limit)),
    (&slot::INTERVAL_PEAK, |d| int(&d.interval_peak)),
    (&slot::STEP_PEAK, |d| int(&d.step_peak)),
];

/// Every figure of one allocator device.
pub fn allocator_device(d: &AllocatorDevice) -> Vec<Field> {
    ALLOCATOR_DEVICE
        .iter()
        .map(|(figure, read)| (figure.key, read(d)))
        .collect()
}

/// Every figure of one GPU. A GPU never sampled has every sampled figure absent.
pub fn device(d: &DeviceSnapshot) -> Vec<Field> {
    DEVICE
        .iter()
        .map(|(figure, read)| (figure.key, read(d)))
        .collect()
}

/// Every figure of one process on one GPU.
pub fn process(p: &ProcessRow) -> Vec<Field> {
    PROCESS
        .iter()
        .map(|(figure, read)| (figure.key, read(p)))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn keys<T>(columns: &[Column<T>]) -> Vec<&'static str> {
        columns.iter().map(|(figure, _)| figure.key).collect()
    }

    fn table(figures: &[&Figure]) -> Vec<&'static str> {
        figures.iter().map(|f| f.key).collect()
    }

    /// The readers here and the tables in `model::figures` name the same figures in the same
    /// order, so a figure added to one and not the other fails here, not in a user's parser.
    #[test]
    fn every_column_is_its_tables_figure_in_its_order() {
        assert_eq!(keys(DEVICE), table(gpu::ALL));
        assert_eq!(keys(PROCESS), table(process::ALL));
        assert_eq!(keys(ALLOCATOR_DEVICE), table(slot::ALL));
    }
}
