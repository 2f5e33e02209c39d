//! What the writer said of a dump, for `vramscope sites --json`: who wrote it (pid, rank,
//! the channel it came from), where the program was (step, phase), the allocator's figures
//! it announced with it (its peak), and the file itself (name, size). Each figure the
//! snapshot lacks is `null`, its reason under `unavailable`: a snapshot a program dumped
//! itself has no `vramscope` key, and an older writer's key lacks the identity fields.

use crate::memory_snapshot::{Known, MemorySnapshot, VramscopeKey};
use crate::model::StepOrigin;
use crate::model::figures::process::STEPS_FROM;
use crate::model::held_sites::SnapshotName;
use crate::text::clean;
use serde_json::{Map, Value, json};
use std::path::Path;

const NO_KEY: &str = "dumped without vramscope's writer (the snapshot has no `vramscope` key)";
const NOT_IN_KEY: &str = "not in the snapshot's `vramscope` key";

/// One field: its value, or `null` with `why` put under `unavailable`.
fn put(
    out: &mut Map<String, Value>,
    missing: &mut Map<String, Value>,
    name: &str,
    value: Option<Value>,
    why: &str,
) {
    match value {
        Some(v) => {
            out.insert(name.into(), v);
        }
        None => {
            out.insert(name.into(), Value::Null);
            missing.insert(name.into(), json!(why));
        }
    }
}

/// An identity field the writer may lack (outer `None`) or say there is none of (inner).
fn said<T: Into<Value> + Clone>(field: &Option<Option<T>>, none: &str) -> (Option<Value>, String) {
    match field {
        None => (None, NOT_IN_KEY.to_string()),
        Some(None) => (None, none.to_string()),
        Some(Some(v)) => (Some(v.clone().into()), String::new()),
    }
}

/// The channel the dump came from: the key's, else the one the writer's file name carries.
fn channel(key: Option<&VramscopeKey>, file_name: &str) -> (Option<Value>, String) {
    let from_key = key.and_then(|k| k.channel.clone().flatten());
    let (name, from) = match (from_key, SnapshotName::parse(file_name)) {
        (Some(name), _) => (name, "key"),
        (None, Some(parsed)) => (parsed.channel.to_string(), "file name"),
        (None, None) => {
            let why = if key.is_none() {
                NO_KEY
            } else {
                "the key names no channel and the file's name is not a writer's (`<channel>.snap-<n>-<reason>.pickle`)"
            };
            return (None, why.to_string());
        }
    };
    let full = format!("{name}.snap-0-x.pickle");
    let ids = SnapshotName::parse(&full).and_then(|n| n.channel_pid_starttime());
    (
        Some(json!({
            "file": name,
            "pid": ids.map(|(pid, _)| pid),
            "starttime": ids.map(|(_, start)| start),
            "from": from,
        })),
        String::new(),
    )
}

/// The `writer` object.
pub fn writer(snap: &MemorySnapshot, file_name: &str) -> Value {
    let mut out = Map::new();
    let mut missing = Map::new();
    let key = snap.vramscope.as_ref();
    let (value, why) = channel(key, file_name);
    put(&mut out, &mut missing, "channel", value, &why);
    let Some(k) = key else {
        for name in [
            "pid",
            "rank",
            "local_rank",
            "world_size",
            "job_id",
            "device",
            "reason",
            "step",
            "phase",
            "peak_allocated",
            "peak_requested",
            "peak_time_us",
            "allocated",
            "reserved",
            "max_entries",
            "history_owner",
        ] {
            put(&mut out, &mut missing, name, None, NO_KEY);
        }
        out.insert("unavailable".into(), Value::Object(missing));
        return Value::Object(out);
    };
    let plain = |v: Option<Value>| v;
    put(
        &mut out,
        &mut missing,
        "pid",
        plain(k.pid.map(Value::from)),
        NOT_IN_KEY,
    );
    let ranks = "the writer found no rank: not one of several processes";
    for (name, field) in [
        ("rank", &k.rank),
        ("local_rank", &k.local_rank),
        ("world_size", &k.world_size),
    ] {
        let (value, why) = said(field, ranks);
        put(&mut out, &mut missing, name, value, &why);
    }
    let (value, why) = said(&k.job_id, "the writer found no job id");
    put(&mut out, &mut missing, "job_id", value, &why);
    put(
        &mut out,
        &mut missing,
        "device",
        k.device.map(Value::from),
        NOT_IN_KEY,
    );
    put(
        &mut out,
        &mut missing,
        "reason",
        k.reason.clone().map(Value::from),
        NOT_IN_KEY,
    );
    put(
        &mut out,
        &mut missing,
        "step",
        k.step.map(Value::from),
        "none: before the first step, or the key lacks it",
    );
    out.insert(
        STEPS_FROM.key.into(),
        json!(StepOrigin::of(k.steps_since_attach).key()),
    );
    put(
        &mut out,
        &mut missing,
        "phase",
        k.phase.clone().map(Value::from),
        "none: outside every phase, or the key lacks it",
    );
    put(
        &mut out,
        &mut missing,
        "peak_allocated",
        k.peak_allocated.map(Value::from),
        "the writer had not read the allocator's peak yet, or the key lacks it",
    );
    for (name, value) in [
        ("peak_requested", k.peak_requested.map(Value::from)),
        ("peak_time_us", k.peak_time_us.map(Value::from)),
        ("allocated", k.allocated.map(Value::from)),
        ("reserved", k.reserved.map(Value::from)),
    ] {
        put(&mut out, &mut missing, name, value, NOT_IN_KEY);
    }
    put(
        &mut out,
        &mut missing,
        "max_entries",
        k.max_entries.map(Value::from),
        "the program turned the history on and did not say its size, or the key lacks it",
    );
    put(
        &mut out,
        &mut missing,
        "history_owner",
        k.history_owner.clone().map(Value::from),
        NOT_IN_KEY,
    );
    out.insert("unavailable".into(), Value::Object(missing));
    Value::Object(out)
}

/// The file's name (cleaned) and size into `doc`, and the `writer` object; a size that
/// could not be read is `null` with its reason under `doc`'s `unavailable`.
pub fn add_dump(doc: &mut Value, snap: &MemorySnapshot, file: &Path, size: &Known<u64>) {
    let name = file
        .file_name()
        .map(|n| clean(&n.to_string_lossy()).into_owned())
        .unwrap_or_default();
    doc["writer"] = writer(snap, &name);
    doc["file_name"] = json!(name);
    match size {
        Ok(size) => doc["file_size"] = json!(size),
        Err(why) => {
            doc["file_size"] = Value::Null;
            if let Some(missing) = doc["unavailable"].as_object_mut() {
                missing.insert("file_size".into(), json!(why));
            }
        }
    }
}
