//! `--json`: schema `vramscope.snapshot`, version 1 (documented in README.md). Absent figures
//! are `null`, and each object's `unavailable` map says why, so no reader mistakes them for 0.

use super::fields::{self, Field, Value};
use crate::model::writer_fold::Oom;
use crate::model::{AllocatorEvent, AllocatorSnapshot, Snapshot};
use serde_json::{Map, Value as Json, json};

pub const SCHEMA: &str = "vramscope.snapshot";
pub const VERSION: u32 = 1;

/// The snapshot as JSON: pretty for one shot, one line per snapshot for `--loop`.
pub fn render(snapshot: &Snapshot, pretty: bool) -> String {
    let value = to_value(snapshot);
    let text = if pretty {
        serde_json::to_string_pretty(&value)
    } else {
        serde_json::to_string(&value)
    };
    // Serialising a serde_json::Value cannot fail; an empty object is still valid output.
    text.unwrap_or_else(|_| "{}".into()) + "\n"
}

pub fn to_value(snapshot: &Snapshot) -> Json {
    let driver = snapshot.driver.as_ref().map(|d| {
        object(&[
            ("driver_version", d.driver_version.clone().map(Value::Text)),
            ("nvml_version", d.nvml_version.clone().map(Value::Text)),
            (
                "cuda_version",
                d.cuda_label().map(Value::Text).ok_or_else(|| {
                    d.cuda_version
                        .clone()
                        .err()
                        .unwrap_or(crate::model::Absent::NotAvailable)
                }),
            ),
        ])
    });
    let host = snapshot.host_memory.as_ref().map(|m| match m {
        Ok(m) => json!({
            "memory_total": m.total, "memory_used": m.used, "memory_available": m.available,
            "swap_total": m.swap_total, "swap_used": m.swap_used,
        }),
        Err(why) => json!({ "unavailable": why.reason() }),
    });
    json!({
        "schema": SCHEMA,
        "version": VERSION,
        "vramscope_version": env!("CARGO_PKG_VERSION"),
        "taken_at_ms": snapshot.taken_at_ms,
        "driver": driver,
        "nvml_problem": snapshot.nvml_problem.as_ref().map(|p| json!({"cause": p.cause(), "hint": p.hint()})),
        "host": host,
        "devices": snapshot.devices.iter().map(|d| object(&fields::device(d))).collect::<Vec<_>>(),
        "processes": snapshot.processes.iter().map(|p| object(&fields::process(p))).collect::<Vec<_>>(),
        "allocators": snapshot.allocators.iter().map(allocator).collect::<Vec<_>>(),
        "rejected_channels": snapshot.rejected_channels,
    })
}

/// One instrumented process: who it is, its figures per GPU, and its recent events.
fn allocator(a: &AllocatorSnapshot) -> Json {
    let id = &a.identity;
    let devices: Vec<Json> = a
        .devices
        .iter()
        .zip(&a.gpu_indices)
        .zip(&a.peaks)
        .zip(&a.forecasts)
        .map(|(((d, gpu), peak), forecast)| {
            let mut value = object(&fields::allocator_device(d));
            value["gpu_index"] = json!(gpu);
            value["true_peak"] = json!(peak.as_ref().map(|p| p.value));
            value["true_peak_at"] = json!(peak);
            value["forecast"] = json!(forecast);
            value["forecast_text"] = json!(crate::model::foresight::describe(forecast));
            value
        })
        .collect();
    json!({
        "file": id.file, "pid": a.host_pid, "pid_in_namespace": id.pid,
        "kind": id.kind, "framework": id.framework, "rank": id.rank,
        "local_rank": id.local_rank, "world_size": id.world_size, "job_id": id.job_id,
        "command": id.command, "allocator_config": id.allocator_config,
        "exact_peaks": id.exact_peaks, "attached": id.attached, "sample_period_us": id.sample_period_us,
        "writer": a.liveness.label(), "step": a.step, "phase": a.label,
        "devices": devices,
        "recent_events": a.recent_events.iter().map(event).collect::<Vec<_>>(),
        "ooms": a.ooms.iter().map(oom).collect::<Vec<_>>(),
        "lost_samples": a.lost_samples, "lost_events": a.lost_events,
    })
}

/// One OOM, however many events told of it: its figures as every figure is (`null` with
/// the reason when absent), where it happened and whether it killed the program.
fn oom(o: &Oom) -> Json {
    let figure = |r: &crate::model::Reading<u64>| r.clone().map(Value::Int);
    let mut value = object(&[
        ("requested", figure(&o.requested)),
        ("device_free", figure(&o.device_free)),
        ("device_total", figure(&o.device_total)),
        ("allocated", figure(&o.allocated)),
        ("reserved", figure(&o.reserved)),
    ]);
    value["at_ms"] = json!(o.at_ms);
    value["slot"] = json!(o.slot);
    value["step"] = json!(o.step);
    value["phase"] = json!(o.phase);
    value["outcome"] = json!(o.outcome);
    value["message"] = json!(o.message);
    value
}

fn event(e: &AllocatorEvent) -> Json {
    let figures: Vec<fields::Field> = e
        .kind
        .figures()
        .into_iter()
        .map(|(name, r)| (name, r.map(fields::Value::Int)))
        .collect();
    json!({
        "at_ms": e.at_ms, "kind": e.kind.name(), "slot": e.slot, "step": e.step,
        "label": e.label, "figures": object(&figures),
    })
}

fn object(fields: &[Field]) -> Json {
    let mut map = Map::new();
    let mut unavailable = Map::new();
    for (name, reading) in fields {
        match reading {
            Ok(value) => {
                map.insert((*name).into(), scalar(value));
            }
            Err(why) => {
                map.insert((*name).into(), Json::Null);
                unavailable.insert((*name).into(), Json::String(why.reason()));
            }
        }
    }
    map.insert("unavailable".into(), Json::Object(unavailable));
    Json::Object(map)
}

fn scalar(value: &Value) -> Json {
    match value {
        Value::Int(v) => json!(v),
        Value::Float(v) => json!((v * 10.0).round() / 10.0),
        Value::Text(v) => json!(v),
        Value::Bool(v) => json!(v),
    }
}
