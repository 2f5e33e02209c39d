//! `--json`: schema `vramscope.snapshot`, version 1 (documented in docs/oneshot.md). Absent figures
//! are `null`, and each object's `unavailable` map says why, so no reader mistakes them for 0.

use super::fields::{self, Field, Value};
use crate::model::figures::process;
use crate::model::held_sites::{SitesState, SnapshotNote, exactness_note, headline};
use crate::model::writer_fold::Oom;
use crate::model::{
    AllocatorEvent, AllocatorSnapshot, DeviceSnapshot, MigInstance, MigState, Reading, Snapshot,
};
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
        "devices": snapshot.devices.iter().map(device).collect::<Vec<_>>(),
        "processes": snapshot.processes.iter().map(|p| object(&fields::process(p))).collect::<Vec<_>>(),
        "allocators": snapshot.allocators.iter().map(allocator).collect::<Vec<_>>(),
        "rejected_channels": snapshot.rejected_channels,
    })
}

/// One GPU: its figures, and its MIG state (`null` for a GPU without MIG, or with MIG off
/// and nothing pending).
fn device(d: &DeviceSnapshot) -> Json {
    let mut value = object(&fields::device(d));
    value["mig"] = d
        .sample
        .as_ref()
        .and_then(|s| s.mig.as_ref())
        .map_or(Json::Null, mig);
    value
}

/// MIG mode and instances, each with its figures and processes.
fn mig(m: &MigState) -> Json {
    let instances = match &m.instances {
        Ok(list) => json!(list.iter().map(instance).collect::<Vec<_>>()),
        Err(_) => Json::Null,
    };
    let mut unavailable = serde_json::Map::new();
    if let Err(why) = &m.instances {
        unavailable.insert("instances".into(), json!(why.reason()));
    }
    let unread = m.mode_unread_reason();
    if let Some(why) = &unread {
        unavailable.insert("enabled".into(), json!(why.reason()));
    }
    json!({
        // Unknown, not false, where the mode could not be read.
        "enabled": if unread.is_some() { Json::Null } else { json!(m.enabled) },
        "pending": m.pending,
        "pending_note": m.pending_note(),
        "instances": instances,
        "unavailable": unavailable,
    })
}

fn instance(i: &MigInstance) -> Json {
    let memory = |pick: fn(&crate::model::MemoryInfo) -> u64| {
        i.memory
            .as_ref()
            .map(|m| Value::Int(pick(m)))
            .map_err(Clone::clone)
    };
    let int = |r: &Reading<u32>| r.clone().map(|v| Value::Int(u64::from(v)));
    let mut value = object(&[
        ("gpu_instance_id", int(&i.gpu_instance_id)),
        ("compute_instance_id", int(&i.compute_instance_id)),
        ("uuid", i.uuid.clone().map(Value::Text)),
        ("profile", i.profile.clone().map(Value::Text)),
        ("memory_total", memory(|m| m.total)),
        ("memory_used", memory(|m| m.used)),
        ("memory_free", memory(|m| m.free)),
        ("sm_util", int(&i.sm_util)),
    ]);
    value["processes"] = match &i.processes {
        Ok(list) => json!(
            list.iter()
                .map(|p| object(&[
                    ("pid", Ok(Value::Int(u64::from(p.pid)))),
                    ("used_memory", p.used_memory.clone().map(Value::Int)),
                ]))
                .collect::<Vec<_>>()
        ),
        Err(why) => {
            value["unavailable"]["processes"] = json!(why.reason());
            Json::Null
        }
    };
    value
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
        "writer": a.liveness.label(), "step": a.step,
        (process::STEPS_FROM.key): a.steps_from.key(), "phase": a.label,
        "devices": devices,
        "recent_events": a.recent_events.iter().map(event).collect::<Vec<_>>(),
        "ooms": a.ooms.iter().enumerate().map(|(i, o)| {
            let mut value = oom(o);
            // The fold's answer, as the report gives it under each OOM.
            value["snapshot"] = json!(a.oom_snapshots.get(i).cloned().flatten());
            value
        }).collect::<Vec<_>>(),
        "ooms_dropped": a.ooms_dropped,
        "sites": id.sites,
        "snapshots": a.snapshots.iter().map(snapshot).collect::<Vec<_>>(),
        "snapshots_dropped": a.snapshots_dropped,
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
    value["from_message"] = json!(o.from_message);
    value
}

/// One memory snapshot the writer announced, and what reducing it said: `sites` is
/// `{"state": "reduced", "sites": [...], "exactness": {...}, "oom": ...}`, or `not_read`,
/// `reading`, `failed` with `why`.
fn snapshot(n: &SnapshotNote) -> Json {
    let figure = |r: &crate::model::Reading<u64>| r.clone().map(Value::Int);
    let mut value = object(&[
        ("path", n.path.clone().map(Value::Text)),
        ("size", figure(&n.size)),
        ("peak", figure(&n.peak)),
        ("allocated", figure(&n.allocated)),
        ("max_entries", figure(&n.max_entries)),
        ("deleted", figure(&n.deleted)),
    ]);
    value["name"] = json!(n.name);
    value["at_ms"] = json!(n.at_ms);
    value["slot"] = json!(n.slot);
    value["reason"] = json!(n.reason);
    value["step"] = json!(n.step);
    value["phase"] = json!(n.phase);
    value["sites"] = serde_json::to_value(&n.sites).unwrap_or(Json::Null);
    if let SitesState::Reduced(held) = &n.sites {
        value["sites"]["headline"] = json!(headline(held, 3));
        value["sites"]["exactness_note"] = json!(exactness_note(held));
    }
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
        Value::Int(v) | Value::Bytes(v) => json!(v),
        Value::Float(v) => json!((v * 10.0).round() / 10.0),
        Value::Text(v) => json!(v),
        Value::Bool(v) => json!(v),
    }
}
