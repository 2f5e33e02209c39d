//! One channel as JSON, everything in it: identity, state, devices, status, phases, every ring
//! record still in the file and the lost counts. Written by hand so it needs no serde and works
//! without the monitor feature. Absent figures are `null`.

use std::path::Path;

use super::layout::ABSENT;
use super::model::{DeviceSlot, EventRecord, Identity, Liveness, SampleRecord, Update};
use super::reader::{Channel, Policy, Rejected};
use super::text::slot_uuid_string;

/// Opens `path` from the start of its rings, polls it once and renders it as pretty JSON.
pub fn inspect(path: &Path) -> Result<String, Rejected> {
    let policy = Policy {
        from_start: true,
        ..Policy::current()
    };
    let mut channel = Channel::open(path, &policy)?;
    let update = channel.poll()?;
    let mut out = String::new();
    document(channel.path(), channel.identity(), &update).write(&mut out, 0);
    out.push('\n');
    Ok(out)
}

enum J {
    Null,
    Bool(bool),
    Num(u64),
    Int(i64),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(&'static str, J)>),
}

fn opt(v: Option<u64>) -> J {
    v.map_or(J::Null, J::Num)
}

fn text(s: &str) -> J {
    J::Str(s.to_string())
}

impl J {
    fn write(&self, out: &mut String, indent: usize) {
        match self {
            J::Null => out.push_str("null"),
            J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            J::Num(n) => out.push_str(&n.to_string()),
            J::Int(n) => out.push_str(&n.to_string()),
            J::Str(s) => escape(s, out),
            J::Arr(items) if items.is_empty() => out.push_str("[]"),
            J::Obj(items) if items.is_empty() => out.push_str("{}"),
            J::Arr(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    out.push_str(if i == 0 { "\n" } else { ",\n" });
                    pad(out, indent + 1);
                    item.write(out, indent + 1);
                }
                out.push('\n');
                pad(out, indent);
                out.push(']');
            }
            J::Obj(items) => {
                out.push('{');
                for (i, (key, value)) in items.iter().enumerate() {
                    out.push_str(if i == 0 { "\n" } else { ",\n" });
                    pad(out, indent + 1);
                    escape(key, out);
                    out.push_str(": ");
                    value.write(out, indent + 1);
                }
                out.push('\n');
                pad(out, indent);
                out.push('}');
            }
        }
    }
}

fn pad(out: &mut String, indent: usize) {
    for _ in 0..indent {
        out.push_str("  ");
    }
}

fn escape(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn document(path: &Path, id: &Identity, u: &Update) -> J {
    let liveness = match u.liveness {
        Liveness::Alive => J::Obj(vec![("status", text("alive"))]),
        Liveness::Stalled { heartbeat_age_ns } => J::Obj(vec![
            ("status", text("stalled")),
            ("heartbeat_age_ns", J::Num(heartbeat_age_ns)),
        ]),
        Liveness::Ended { crashed } => J::Obj(vec![
            ("status", text("ended")),
            ("crashed", J::Bool(crashed)),
        ]),
    };
    let status = u.status.as_ref().map_or(J::Null, |s| {
        J::Obj(vec![
            ("step", opt(s.step)),
            ("set_at_ns", J::Num(s.set_at_ns)),
            ("label", text(&s.label)),
        ])
    });
    J::Obj(vec![
        ("path", text(&path.display().to_string())),
        ("identity", identity(id)),
        ("state", text(&u.state.name())),
        ("liveness", liveness),
        ("heartbeat_ns", opt(u.heartbeat_ns)),
        ("status", status),
        ("phases", J::Arr(u.phases.iter().map(|p| text(p)).collect())),
        ("devices", J::Arr(u.devices.iter().map(device).collect())),
        ("samples", J::Arr(u.samples.iter().map(sample).collect())),
        ("events", J::Arr(u.events.iter().map(event).collect())),
        ("lost_samples", J::Num(u.lost_samples)),
        ("lost_events", J::Num(u.lost_events)),
    ])
}

fn identity(id: &Identity) -> J {
    let rank = |r: Option<i32>| r.map_or(J::Null, |v| J::Int(i64::from(v)));
    J::Obj(vec![
        ("pid", J::Num(id.pid)),
        ("starttime", J::Num(id.starttime)),
        ("pid_ns", opt(id.pid_ns)),
        ("uid", J::Num(id.uid)),
        ("created_realtime_ns", J::Num(id.created_realtime_ns)),
        ("created_monotonic_ns", J::Num(id.created_monotonic_ns)),
        ("kind", text(&id.kind.name())),
        ("kind_code", J::Num(u64::from(id.kind.code()))),
        ("sample_period_us", J::Num(u64::from(id.sample_period_us))),
        ("rank", rank(id.rank)),
        ("local_rank", rank(id.local_rank)),
        ("world_size", rank(id.world_size)),
        ("job_id", text(&id.job_id)),
        ("framework", text(&id.framework)),
        ("cmdline", text(&id.cmdline)),
        ("allocator_config", text(&id.allocator_config)),
        ("flags", J::Num(u64::from(id.flags))),
        ("minor", J::Num(u64::from(id.minor))),
        ("file_size", J::Num(id.file_size)),
    ])
}

fn device(d: &DeviceSlot) -> J {
    J::Obj(vec![
        ("index", J::Num(d.index as u64)),
        ("ordinal", J::Num(u64::from(d.ordinal))),
        (
            "uuid",
            d.uuid
                .map_or(J::Null, |u| J::Str(slot_uuid_string(&u, d.uuid_is_mig))),
        ),
        ("pci_bus_id", d.pci_bus_id.as_deref().map_or(J::Null, text)),
        ("total", opt(d.total)),
        ("read_at_ns", opt(d.read_at_ns)),
        ("allocated", opt(d.allocated)),
        ("allocated_peak", opt(d.allocated_peak)),
        ("reserved", opt(d.reserved)),
        ("reserved_peak", opt(d.reserved_peak)),
        ("active", opt(d.active)),
        ("inactive_split", opt(d.inactive_split)),
        ("requested", opt(d.requested)),
        ("alloc_retries", opt(d.alloc_retries)),
        ("ooms", opt(d.ooms)),
        ("device_allocs", opt(d.device_allocs)),
        ("device_frees", opt(d.device_frees)),
        ("device_free", opt(d.device_free)),
        ("limit", opt(d.limit)),
        ("interval_peak", opt(d.interval_peak)),
        ("step_peak", opt(d.step_peak)),
    ])
}

fn sample(s: &SampleRecord) -> J {
    J::Obj(vec![
        ("t_ns", J::Num(s.t_ns)),
        ("slot", J::Num(u64::from(s.slot))),
        ("flags", J::Num(u64::from(s.flags))),
        ("phase", J::Num(u64::from(s.phase))),
        ("allocated", opt(s.allocated)),
        ("reserved", opt(s.reserved)),
        ("peak", opt(s.peak)),
        ("active", opt(s.active)),
        ("step", opt(s.step)),
    ])
}

fn event(e: &EventRecord) -> J {
    let args = e
        .args
        .iter()
        .map(|&a| if a == ABSENT { J::Null } else { J::Num(a) })
        .collect();
    J::Obj(vec![
        ("t_ns", J::Num(e.t_ns)),
        ("kind", text(&e.kind.name())),
        ("kind_code", J::Num(u64::from(e.kind.code()))),
        ("slot", e.slot.map_or(J::Null, |s| J::Num(u64::from(s)))),
        ("phase", J::Num(u64::from(e.phase))),
        ("step", opt(e.step)),
        ("args", J::Arr(args)),
        ("text", text(&e.text)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped_and_nesting_is_indented() {
        let doc = J::Obj(vec![
            ("a", text("q\"b\\s\u{1}")),
            ("b", J::Arr(vec![J::Num(1), J::Null, J::Int(-2)])),
            ("c", J::Arr(vec![])),
        ]);
        let mut out = String::new();
        doc.write(&mut out, 0);
        let expected = "{\n  \"a\": \"q\\\"b\\\\s\\u0001\",\n  \"b\": [\n    1,\n    null,\n    -2\n  ],\n  \"c\": []\n}";
        assert_eq!(out, expected);
    }
}
