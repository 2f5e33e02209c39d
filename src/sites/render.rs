//! `vramscope sites` output: text for people, JSON (schema `vramscope.sites` version 1) for
//! programs. Every string from a snapshot was cleaned when it was read; file names given
//! on the command line are cleaned here.

use crate::memory_snapshot::{
    Change, Exactness, Held, Known, MemorySnapshot, Moment, Site, SitesDiff, diff as compare,
};
use crate::model::units::bytes;
use crate::text::clean;
use serde_json::{Value, json};
use std::fmt::Write;
use std::path::Path;

/// The writer's words on the dump (reason, pid, step, phase), when the key has them.
pub fn context(snap: &MemorySnapshot, _path: &Path) -> String {
    let mut line = dumped(snap);
    // One device is answered for; a snapshot of several must say the others exist, or a
    // user reads device 0's answer as the whole process's.
    let devices = snap.devices();
    if devices.len() > 1 {
        let list: Vec<String> = devices.iter().map(u32::to_string).collect();
        line.push_str(&format!(
            "; devices {} in the snapshot (--device N picks one)",
            list.join(", ")
        ));
    }
    line
}

fn dumped(snap: &MemorySnapshot) -> String {
    let Some(key) = &snap.vramscope else {
        return "dumped without vramscope (no `vramscope` key)".to_string();
    };
    let mut parts = Vec::new();
    if let Some(reason) = &key.reason {
        parts.push(format!("dumped at {reason}"));
    }
    if let Some(pid) = key.pid {
        parts.push(format!("pid {pid}"));
    }
    if let Some(Some(rank)) = key.rank {
        parts.push(format!("rank {rank}"));
    }
    if let Some(step) = key.step {
        let since = crate::model::StepOrigin::of(key.steps_since_attach).after();
        parts.push(format!("step {step}{since}"));
    }
    if let Some(phase) = &key.phase {
        parts.push(format!("phase {phase}"));
    }
    if let Some(max) = key.max_entries {
        parts.push(format!("history ring {max} entries"));
    }
    if let Some(owner) = &key.history_owner {
        parts.push(format!("history turned on by {owner}"));
    }
    parts.join(", ")
}

fn moment_words(moment: Moment) -> &'static str {
    match moment {
        Moment::Peak => "at the peak",
        Moment::Oom => "at the OOM",
        Moment::End => "at the dump",
    }
}

/// The exactness in one line of words.
pub fn exactness_words(held: &Held) -> String {
    let unit = if held.recorded_is_requested {
        "requested bytes"
    } else {
        "allocated bytes"
    };
    match &held.exactness {
        Exactness::Exact => match (held.moment, held.recorded_peak) {
            (Moment::Peak, Some(peak)) => format!(
                "exact: equals the allocator's recorded peak {} ({unit})",
                bytes(peak)
            ),
            (Moment::Peak, None) => {
                "exact: the history reaches back to an empty allocator".to_string()
            }
            (Moment::End, _) => "exact: the live set at the dump".to_string(),
            (Moment::Oom, _) => "exact: the live set at the failed request".to_string(),
        },
        Exactness::Short {
            recorded_peak,
            reconstructed,
            shortfall,
            suggested_max_entries,
        } => {
            let advice = match suggested_max_entries {
                Some(n) => format!("; max_entries ~ {n} would have covered it"),
                None => {
                    "; the history began after the peak, so a larger ring would not have reached it"
                        .to_string()
                }
            };
            format!(
                "not exact: the peak {} fell outside the history (reconstructed {}, {} short){advice}",
                bytes(*recorded_peak),
                bytes(*reconstructed),
                bytes(*shortfall)
            )
        }
        Exactness::Unknown { why } => format!("exactness unknown: {why}"),
    }
}

/// A figure, or `n/a (why)`: never a made-up 0.
fn known(figure: &Known<u64>) -> String {
    match figure {
        Ok(b) => bytes(*b),
        Err(why) => format!("n/a ({why})"),
    }
}

/// The figure for JSON: the value or `null`, with the reason put in `unavailable`.
fn known_json(
    figure: &Known<u64>,
    name: &str,
    unavailable: &mut serde_json::Map<String, Value>,
) -> Value {
    match figure {
        Ok(b) => json!(b),
        Err(why) => {
            unavailable.insert(name.to_string(), json!(why));
            Value::Null
        }
    }
}

fn site_row(out: &mut String, site: &Site) {
    let _ = writeln!(
        out,
        "  {:>5.1}%  {:>10}  {:>6}  {}",
        site.share * 100.0,
        bytes(site.bytes),
        site.blocks,
        site.label()
    );
}

/// The answer as text.
pub fn text(held: &Held, file: &Path, context: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "vramscope sites: {}",
        clean(&file.display().to_string())
    );
    let device = held
        .device
        .map_or_else(|| "no device".to_string(), |d| format!("device {d}"));
    let _ = writeln!(out, "{device}, {}; {context}", moment_words(held.moment));
    let _ = writeln!(
        out,
        "held: {} in {} blocks; reserved {}",
        bytes(held.total_bytes),
        held.blocks,
        known(&held.reserved)
    );
    let _ = writeln!(out, "{}", exactness_words(held));
    let mut history = format!("history: {} entries", held.trace_entries);
    if held.cut.trace_entries > 0 {
        let _ = write!(
            history,
            " ({} older ones cut by the limits)",
            held.cut.trace_entries
        );
    }
    if held.cut.blocks > 0 || held.cut.frames > 0 {
        let _ = write!(
            history,
            "; cut by the limits: {} blocks, {} frames",
            held.cut.blocks, held.cut.frames
        );
    }
    if held.mismatches > 0 {
        let _ = write!(
            history,
            "; {} entries contradicted the snapshot and were passed over",
            held.mismatches
        );
    }
    let _ = writeln!(out, "{history}");
    let _ = writeln!(out);
    if held.sites.is_empty() {
        let _ = writeln!(out, "no live blocks");
    } else {
        let _ = writeln!(out, "   share       bytes  blocks  site");
        for site in &held.sites {
            site_row(&mut out, site);
        }
    }
    if !held.largest.is_empty() {
        let _ = writeln!(out, "\nlargest blocks:");
        for block in &held.largest {
            let _ = writeln!(
                out,
                "  {:>10}  {}  (0x{:x})",
                bytes(block.bytes),
                block.site.label(),
                block.address
            );
        }
    }
    if let Some(oom) = &held.oom {
        let requested = oom
            .requested
            .map_or_else(|| "n/a (not recorded)".to_string(), bytes);
        // Where the request was made, by the table's rule and label; never a made-up site.
        let site = match &oom.request_site {
            Ok(site) => format!(" at {}", site.label()),
            Err(why) => format!(", where n/a ({why})"),
        };
        let _ = writeln!(out, "\nOOM: {requested} requested{site}");
        let free = oom
            .device_free
            .map_or_else(|| "n/a (not recorded)".to_string(), bytes);
        let _ = writeln!(out, "  device free: {free}");
        match &oom.reserved {
            // The cache's figures are unknown with it: its reason is said once.
            Err(why) => {
                let _ = writeln!(
                    out,
                    "  reserved n/a ({why}), allocated {}; cached free and largest free block n/a with it",
                    bytes(oom.allocated)
                );
            }
            Ok(reserved) => {
                let _ = writeln!(
                    out,
                    "  reserved {}, allocated {}, cached free {}, largest free block {}",
                    bytes(*reserved),
                    bytes(oom.allocated),
                    known(&oom.cached_free),
                    known(&oom.largest_free_block)
                );
            }
        }
        let _ = writeln!(out, "  {}", oom.verdict);
    }
    out
}

fn site_json(site: &Site) -> Value {
    json!({
        "file": site.file,
        "line": site.line,
        "function": site.function,
        "bytes": site.bytes,
        "blocks": site.blocks,
        "share": site.share,
    })
}

/// Where an OOM's request was made, `{file, line, function}`, or `null` with the reason
/// put in `unavailable` under `request_site`.
fn request_site_json(
    site: &Known<Site>,
    unavailable: &mut serde_json::Map<String, Value>,
) -> Value {
    match site {
        Ok(site) => json!({
            "file": site.file,
            "line": site.line,
            "function": site.function,
        }),
        Err(why) => {
            unavailable.insert("request_site".to_string(), json!(why));
            Value::Null
        }
    }
}

/// The answer as a JSON value (the monitor's `--json` and the report can embed it).
pub fn held_json(held: &Held) -> Value {
    let exactness = match &held.exactness {
        Exactness::Exact => json!({"kind": "exact"}),
        Exactness::Short {
            recorded_peak,
            reconstructed,
            shortfall,
            suggested_max_entries,
        } => json!({
            "kind": "short",
            "recorded_peak": recorded_peak,
            "reconstructed": reconstructed,
            "shortfall": shortfall,
            "suggested_max_entries": suggested_max_entries,
        }),
        Exactness::Unknown { why } => json!({"kind": "unknown", "why": why}),
    };
    let mut exactness = exactness;
    exactness["text"] = json!(exactness_words(held));
    exactness["recorded_peak_unit"] = json!(if held.recorded_is_requested {
        "requested"
    } else {
        "allocated"
    });
    let mut unavailable = serde_json::Map::new();
    let reserved = known_json(&held.reserved, "reserved_bytes", &mut unavailable);
    let oom = held.oom.as_ref().map(|o| {
        let mut missing = serde_json::Map::new();
        json!({
            "requested": o.requested,
            "device_free": o.device_free,
            "reserved": known_json(&o.reserved, "reserved", &mut missing),
            "allocated": o.allocated,
            "cached_free": known_json(&o.cached_free, "cached_free", &mut missing),
            "largest_free_block": known_json(&o.largest_free_block, "largest_free_block", &mut missing),
            "verdict": o.verdict,
            "request_site": request_site_json(&o.request_site, &mut missing),
            "unavailable": missing,
        })
    });
    json!({
        "device": held.device,
        "moment": held.moment.name(),
        "total_bytes": held.total_bytes,
        "blocks": held.blocks,
        "reserved_bytes": reserved,
        "unavailable": unavailable,
        "time_us": held.time_us,
        "trace_entries": held.trace_entries,
        "exactness": exactness,
        "sites": held.sites.iter().map(site_json).collect::<Vec<_>>(),
        "largest": held.largest.iter().map(|b| json!({
            "address": b.address,
            "bytes": b.bytes,
            "file": b.site.file,
            "line": b.site.line,
            "function": b.site.function,
            "allocated_us": b.allocated_us,
        })).collect::<Vec<_>>(),
        "oom": oom,
        "cut": {
            "trace_entries": held.cut.trace_entries,
            "blocks": held.cut.blocks,
            "frames": held.cut.frames,
        },
        "mismatches": held.mismatches,
    })
}

/// The answer as JSON text, one object, with what the writer said of the dump and the
/// file's name and size (`size`: why not, when it could not be read).
pub fn json(held: &Held, file: &Path, snap: &MemorySnapshot, size: &Known<u64>) -> String {
    let mut value = held_json(held);
    value["schema"] = json!("vramscope.sites");
    value["version"] = json!(1);
    value["file"] = json!(clean(&file.display().to_string()));
    super::writer_json::add_dump(&mut value, snap, file, size);
    format!("{value}\n")
}

fn signed(delta: i128) -> String {
    let magnitude = u64::try_from(delta.unsigned_abs()).unwrap_or(u64::MAX);
    let sign = if delta < 0 { "-" } else { "+" };
    format!("{sign}{}", bytes(magnitude))
}

/// Two answers compared, as text or JSON; `writers`: each dump's `writer` object
/// (`writer_json::writer`), for the JSON's `before` and `after`.
pub fn diff(
    before: &Held,
    after: &Held,
    files: (&Path, &Path),
    top: usize,
    json_out: bool,
    writers: (Value, Value),
) -> String {
    let d: SitesDiff = compare(before, after, top);
    let (a, b) = (
        clean(&files.0.display().to_string()).into_owned(),
        clean(&files.1.display().to_string()).into_owned(),
    );
    if json_out {
        let value = json!({
            "schema": "vramscope.sites.diff",
            "version": 1,
            "before": {"file": a, "moment": before.moment.name(), "total_bytes": d.before_total, "exactness": exactness_words(before), "writer": writers.0},
            "after": {"file": b, "moment": after.moment.name(), "total_bytes": d.after_total, "exactness": exactness_words(after), "writer": writers.1},
            "sites_compared": d.sites_compared,
            "rows": d.rows.iter().map(|r| json!({
                "file": r.file,
                "line": r.line,
                "function": r.function,
                "before_bytes": r.before_bytes,
                "after_bytes": r.after_bytes,
                "before_blocks": r.before_blocks,
                "after_blocks": r.after_blocks,
                "growth": i64::try_from(r.growth()).unwrap_or(i64::MAX),
                "change": change_name(r.change),
            })).collect::<Vec<_>>(),
        });
        return format!("{value}\n");
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "vramscope sites: {a} {} -> {b} {}",
        moment_words(before.moment),
        moment_words(after.moment)
    );
    let growth = i128::from(d.after_total) - i128::from(d.before_total);
    let _ = writeln!(
        out,
        "held: {} -> {} ({})",
        bytes(d.before_total),
        bytes(d.after_total),
        signed(growth)
    );
    let _ = writeln!(out, "before: {}", exactness_words(before));
    let _ = writeln!(out, "after: {}", exactness_words(after));
    let _ = writeln!(out);
    if d.rows.is_empty() {
        let _ = writeln!(out, "no site changed ({} compared)", d.sites_compared);
        return out;
    }
    let _ = writeln!(
        out,
        "      change      before       after      blocks  site"
    );
    for row in &d.rows {
        let _ = writeln!(
            out,
            "  {:>10}  {:>10}  {:>10}  {:>10}  {} ({})",
            signed(row.growth()),
            bytes(row.before_bytes),
            bytes(row.after_bytes),
            format!("{}->{}", row.before_blocks, row.after_blocks),
            row.label(),
            change_name(row.change)
        );
    }
    out
}

fn change_name(change: Change) -> &'static str {
    match change {
        Change::Grew => "grew",
        Change::Shrank => "shrank",
        Change::Appeared => "appeared",
        Change::Gone => "gone",
        Change::Same => "same",
    }
}
