//! The flat list of named figures for a GPU and for a process. JSON and CSV both print these,
//! so the two formats cannot drift apart.

use crate::model::{Absent, DeviceSnapshot, ProcessRow, Reading};

/// One printable value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Int(u64),
    Float(f64),
    Text(String),
    Bool(bool),
}

/// A named figure that may be absent.
pub type Field = (&'static str, Reading<Value>);

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

/// Names of the device fields, in output order (the CSV header uses them).
pub const DEVICE_FIELDS: [&str; 28] = [
    "index",
    "uuid",
    "name",
    "pci_bus_id",
    "sampled_at_ms",
    "stale",
    "lost",
    "memory_total",
    "memory_reserved",
    "memory_used",
    "memory_free",
    "gpu_util",
    "mem_util",
    "temperature_c",
    "power_mw",
    "power_limit_mw",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "fan_percent",
    "encoder_util",
    "decoder_util",
    "pstate",
    "throttle_reasons",
    "ecc_corrected",
    "ecc_uncorrected",
    "pcie_tx_kbs",
    "pcie_rx_kbs",
    "process_count",
];

/// Names of the process fields, in output order.
pub const PROCESS_FIELDS: [&str; 15] = [
    "gpu_index",
    "gpu_uuid",
    "pid",
    "local_pid",
    "type",
    "used_memory",
    "sm_util",
    "mem_util",
    "enc_util",
    "dec_util",
    "user",
    "command",
    "host_rss",
    "cpu_percent",
    "container",
];

/// Every figure of one GPU. A GPU never sampled has every sampled figure absent.
pub fn device(d: &DeviceSnapshot) -> Vec<Field> {
    let info = &d.info;
    let never = Absent::Error("no sample yet".into());
    let s = d.sample.as_ref();
    let sampled = |f: &dyn Fn(&crate::model::DeviceSample) -> Reading<Value>| match s {
        Some(sample) => f(sample),
        None => Err(never.clone()),
    };
    let memory = |pick: fn(&crate::model::MemoryInfo) -> u64| {
        sampled(&|x| {
            x.memory
                .as_ref()
                .map(|m| Value::Int(pick(m)))
                .map_err(Clone::clone)
        })
    };
    let optional = |r: Option<&Reading<u32>>| match r {
        Some(reading) => int(reading),
        None => Err(Absent::Error("not sampled (enable with --pcie)".into())),
    };
    let fields: Vec<Field> = vec![
        ("index", Ok(Value::Int(u64::from(info.index)))),
        ("uuid", text(&info.uuid)),
        ("name", text(&info.name)),
        ("pci_bus_id", text(&info.pci_bus_id)),
        ("sampled_at_ms", sampled(&|x| Ok(Value::Int(x.at_ms)))),
        ("stale", Ok(Value::Bool(d.stale))),
        ("lost", Ok(Value::Bool(s.is_some_and(|x| x.lost)))),
        (
            "memory_total",
            d.memory_total()
                .map(Value::Int)
                .ok_or_else(|| never.clone()),
        ),
        ("memory_reserved", memory(|m| m.reserved)),
        ("memory_used", memory(|m| m.used)),
        ("memory_free", memory(|m| m.free)),
        ("gpu_util", sampled(&|x| int(&x.gpu_util))),
        ("mem_util", sampled(&|x| int(&x.mem_util))),
        ("temperature_c", sampled(&|x| int(&x.temperature_c))),
        ("power_mw", sampled(&|x| int(&x.power_mw))),
        ("power_limit_mw", sampled(&|x| int(&x.power_limit_mw))),
        ("sm_clock_mhz", sampled(&|x| int(&x.sm_clock_mhz))),
        ("mem_clock_mhz", sampled(&|x| int(&x.mem_clock_mhz))),
        ("fan_percent", sampled(&|x| int(&x.fan_percent))),
        ("encoder_util", sampled(&|x| int(&x.encoder_util))),
        ("decoder_util", sampled(&|x| int(&x.decoder_util))),
        ("pstate", sampled(&|x| int(&x.pstate))),
        ("throttle_reasons", sampled(&|x| int(&x.throttle_reasons))),
        ("ecc_corrected", sampled(&|x| int(&x.ecc_corrected))),
        ("ecc_uncorrected", sampled(&|x| int(&x.ecc_uncorrected))),
        (
            "pcie_tx_kbs",
            sampled(&|x| optional(x.pcie_tx_kbs.as_ref())),
        ),
        (
            "pcie_rx_kbs",
            sampled(&|x| optional(x.pcie_rx_kbs.as_ref())),
        ),
        (
            "process_count",
            sampled(&|x| {
                x.processes
                    .as_ref()
                    .map(|p| Value::Int(p.len() as u64))
                    .map_err(Clone::clone)
            }),
        ),
    ];
    debug_assert!(fields.iter().map(|f| f.0).eq(DEVICE_FIELDS));
    fields
}

/// Every figure of one process on one GPU.
pub fn process(p: &ProcessRow) -> Vec<Field> {
    let n = &p.nvml;
    let missing = || Err(Absent::Error("pid not visible here".into()));
    let host = p.host.as_ref();
    let fields: Vec<Field> = vec![
        ("gpu_index", Ok(Value::Int(u64::from(p.gpu_index)))),
        ("gpu_uuid", Ok(Value::Text(p.gpu_uuid.clone()))),
        ("pid", Ok(Value::Int(u64::from(n.pid)))),
        (
            "local_pid",
            host.and_then(|h| h.local_pid)
                .map(|v| Value::Int(u64::from(v)))
                .ok_or(Absent::Error("pid not visible here".into())),
        ),
        ("type", Ok(Value::Text(n.kind.letter().into()))),
        ("used_memory", int(&n.used_memory)),
        ("sm_util", int(&n.sm_util)),
        ("mem_util", int(&n.mem_util)),
        ("enc_util", int(&n.enc_util)),
        ("dec_util", int(&n.dec_util)),
        ("user", host.map_or_else(missing, |h| text(&h.user))),
        ("command", host.map_or_else(missing, |h| text(&h.command))),
        ("host_rss", host.map_or_else(missing, |h| int(&h.rss_bytes))),
        (
            "cpu_percent",
            host.map_or_else(missing, |h| {
                h.cpu_percent
                    .as_ref()
                    .map(|c| Value::Float(f64::from(*c)))
                    .map_err(Clone::clone)
            }),
        ),
        (
            "container",
            host.and_then(|h| h.container.clone())
                .map(Value::Text)
                .ok_or(Absent::NotAvailable),
        ),
    ];
    debug_assert!(fields.iter().map(|f| f.0).eq(PROCESS_FIELDS));
    fields
}
