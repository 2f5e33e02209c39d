//! The comparison as plain text or as JSON (schema `vramscope.diff` version 1). An absent
//! figure reads `n/a` with its reason (JSON: `null`, and the reason beside it), never 0.

use super::compare::{Comparison, NamedDelta, Setting, delta, signed_bytes};
use crate::model::figures::process::STEPS_FROM;
use crate::model::units::bytes;
use crate::report::OomSummary;
use crate::text::clean;
use serde_json::{Value, json};
use std::fmt::Write;

/// Steps the text lists one by one: evenly spread, the first, the last and the largest
/// among them (`--json` has every step).
const STEPS_LISTED: usize = 8;

fn figure(value: Option<u64>) -> String {
    value.map_or("n/a".into(), bytes)
}

/// `A 20.0 GiB, B 23.0 GiB: +3.00 GiB (+15%)`.
fn pair(a: Option<u64>, b: Option<u64>) -> String {
    let change = match (delta(a, b), a) {
        (Some(d), Some(base)) if base > 0 => {
            format!(
                ": {} ({:+.0}%)",
                signed_bytes(d),
                d as f64 * 100.0 / base as f64
            )
        }
        (Some(d), _) => format!(": {}", signed_bytes(d)),
        (None, _) => String::new(),
    };
    format!("A {}, B {}{change}", figure(a), figure(b))
}

pub fn text(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "vramscope diff: A = {}, B = {}", c.a.name, c.b.name);
    for (which, run) in [("A", c.a), ("B", c.b)] {
        let who = run
            .who()
            .map_or("no instrumented process".into(), |w| clean(&w).into_owned());
        let damaged = run
            .report
            .damaged
            .as_deref()
            .map_or(String::new(), |d| format!(" (damaged: {})", clean(d)));
        let _ = writeln!(out, "{which}: {who}{damaged}");
    }
    let (a, b) = c.peak_allocated;
    let _ = writeln!(out, "peak allocated: {}", pair(a, b));
    let (a, b) = c.peak_reserved;
    let _ = writeln!(out, "peak reserved: {}", pair(a, b));
    let (a, b) = c.cache_at_peak;
    let _ = writeln!(out, "cache at the peak: {}", pair(a, b));
    let (a, b) = c.gpu_peak_used;
    let _ = writeln!(out, "GPU used (NVML), highest: {}", pair(a, b));

    let _ = writeln!(out, "\nWhat changed, largest first:");
    if c.causes.is_empty() {
        let _ = writeln!(out, "  nothing that moved memory");
    }
    for (i, cause) in c.causes.iter().enumerate() {
        let _ = writeln!(
            out,
            "  {:>2}. {:>11}  {} ({})",
            i + 1,
            signed_bytes(cause.bytes),
            clean(&cause.what),
            cause.figure
        );
    }

    let _ = writeln!(out, "\nSettings that change memory:");
    for setting in &c.settings {
        let mark = if setting.changed() { "  changed" } else { "" };
        let _ = writeln!(
            out,
            "  {}: A {}, B {}{mark}",
            setting.name,
            setting_text(&setting.a),
            setting_text(&setting.b)
        );
    }

    let _ = writeln!(out, "\nPhases (peak allocated in each):");
    named_text(&mut out, &c.phases);

    let _ = writeln!(out, "\nSteps (peak allocated in each):");
    match &c.steps {
        Ok(steps) => {
            let rows = &steps.rows;
            let (first, last) = (rows[0], rows[rows.len() - 1]);
            let _ = writeln!(
                out,
                "  {} steps in both, {} to {}; B gains {} per step on A ({} over them)",
                rows.len(),
                first.0,
                last.0,
                signed_bytes(steps.slope.round() as i64),
                signed_bytes(steps.growth)
            );
            if let Some((step, d)) = steps.largest() {
                let _ = writeln!(out, "  largest: {} at step {step}", signed_bytes(d));
            }
            let stride = rows.len().div_ceil(STEPS_LISTED).max(1);
            for (i, &(step, a, b)) in rows.iter().enumerate() {
                if i % stride == 0 || i + 1 == rows.len() {
                    let _ = writeln!(out, "  step {step}: {}", pair(Some(a), Some(b)));
                }
            }
        }
        Err(why) => {
            let _ = writeln!(out, "  n/a: {}", clean(why));
        }
    }

    let _ = writeln!(out, "\nSites held at each run's peak:");
    match &c.sites {
        Ok(diff) => {
            let _ = writeln!(
                out,
                "  held: {} ({} sites compared)",
                pair(Some(diff.before_total), Some(diff.after_total)),
                diff.sites_compared
            );
            for row in &diff.rows {
                let _ = writeln!(
                    out,
                    "  {:>11}  {}: A {}, B {}",
                    signed_bytes(i64::try_from(row.growth()).unwrap_or(i64::MAX)),
                    clean(&row.label()),
                    bytes(row.before_bytes),
                    bytes(row.after_bytes)
                );
            }
        }
        Err(why) => {
            let _ = writeln!(out, "  n/a: {}", clean(why));
        }
    }

    let _ = writeln!(out, "\nCategories:");
    named_text(&mut out, &c.categories);

    let _ = writeln!(out, "\nOOMs:");
    for (which, ooms) in [("A", c.ooms.0), ("B", c.ooms.1)] {
        if ooms.is_empty() {
            let _ = writeln!(out, "  {which}: none");
        }
        for oom in ooms {
            let _ = writeln!(out, "  {which}: {}", oom_text(oom));
        }
    }
    out
}

fn setting_text(value: &Result<String, &'static str>) -> String {
    match value {
        Ok(v) => super::compare::show(v),
        Err(why) => format!("n/a ({why})"),
    }
}

fn named_text(out: &mut String, rows: &Result<Vec<NamedDelta>, String>) {
    match rows {
        Ok(rows) => {
            for row in rows {
                let change = row
                    .delta()
                    .map_or(String::new(), |d| format!(": {}", signed_bytes(d)));
                let _ = writeln!(
                    out,
                    "  {}: A {}, B {}{change}",
                    clean(&row.name),
                    figure(row.a),
                    figure(row.b)
                );
            }
        }
        Err(why) => {
            let _ = writeln!(out, "  n/a: {}", clean(why));
        }
    }
}

fn oom_text(o: &OomSummary) -> String {
    let oom = &o.oom;
    let asked = oom.requested.as_ref().ok().copied();
    let mut line = format!(
        "{} asking for {} ({})",
        crate::model::time::utc_label(oom.at_ms),
        figure(asked),
        oom.outcome.label()
    );
    if let Some(step) = oom.step {
        let _ = write!(line, ", {}", o.steps_from.words(step));
    }
    if !oom.phase.is_empty() {
        let _ = write!(line, ", {}", clean(&oom.phase));
    }
    line
}

fn setting_json(s: &Setting) -> Value {
    let side = |v: &Result<String, &'static str>| match v {
        Ok(v) => json!({ "value": clean(v) }),
        Err(why) => json!({ "value": null, "unavailable": why }),
    };
    json!({ "name": s.name, "a": side(&s.a), "b": side(&s.b), "changed": s.changed() })
}

fn named_json(rows: &Result<Vec<NamedDelta>, String>) -> Value {
    match rows {
        Ok(rows) => json!(
            rows.iter()
                .map(|r| json!({
                    "name": clean(&r.name), "a": r.a, "b": r.b, "delta": r.delta(),
                }))
                .collect::<Vec<_>>()
        ),
        Err(why) => json!({ "unavailable": clean(why) }),
    }
}

fn oom_json(o: &OomSummary) -> Value {
    let oom = &o.oom;
    json!({
        "at_ms": oom.at_ms, "pid": o.pid, "gpu_index": o.gpu_index,
        "requested": oom.requested.as_ref().ok(), "outcome": oom.outcome,
        "step": oom.step, (STEPS_FROM.key): o.steps_from.key(), "phase": clean(&oom.phase),
    })
}

pub fn json(c: &Comparison) -> String {
    let pair = |(a, b): (Option<u64>, Option<u64>)| json!({ "a": a, "b": b, "delta": delta(a, b) });
    let run = |r: &super::facts::Run| {
        json!({
            "file": r.name, "process": r.who(), "damaged": r.report.damaged,
        })
    };
    let doc = json!({
        "schema": "vramscope.diff",
        "version": 1,
        "a": run(c.a),
        "b": run(c.b),
        "peak_allocated": pair(c.peak_allocated),
        "peak_reserved": pair(c.peak_reserved),
        "cache_at_peak": pair(c.cache_at_peak),
        "gpu_peak_used": pair(c.gpu_peak_used),
        "causes": c.causes.iter().map(|cause| json!({
            "kind": cause.kind.key(), "what": clean(&cause.what), "bytes": cause.bytes,
            "figure": cause.figure,
        })).collect::<Vec<_>>(),
        "settings": c.settings.iter().map(setting_json).collect::<Vec<_>>(),
        "allocator_config_changes": c.allocator_changes.iter().map(|o| json!({
            "option": clean(&o.option), "a": o.before.as_deref().map(clean),
            "b": o.after.as_deref().map(clean),
        })).collect::<Vec<_>>(),
        "phases": named_json(&c.phases),
        "steps": match &c.steps {
            Ok(steps) => json!({
                "compared": steps.rows.len(),
                "growth_per_step": steps.slope.round() as i64,
                "growth": steps.growth,
                "largest": steps.largest().map(|(step, d)| json!({ "step": step, "delta": d })),
                "rows": steps.rows.iter().map(|&(step, a, b)| json!({
                    "step": step, "a": a, "b": b, "delta": delta(Some(a), Some(b)),
                })).collect::<Vec<_>>(),
            }),
            Err(why) => json!({ "unavailable": clean(why) }),
        },
        "sites": match &c.sites {
            Ok(diff) => json!({
                "a_total": diff.before_total, "b_total": diff.after_total,
                "compared": diff.sites_compared,
                "rows": diff.rows.iter().map(|r| json!({
                    "file": clean(&r.file), "line": r.line, "function": clean(&r.function),
                    "a": r.before_bytes, "b": r.after_bytes,
                    "delta": i64::try_from(r.growth()).unwrap_or(i64::MAX),
                    "a_blocks": r.before_blocks, "b_blocks": r.after_blocks,
                })).collect::<Vec<_>>(),
            }),
            Err(why) => json!({ "unavailable": clean(why) }),
        },
        "categories": named_json(&c.categories),
        "ooms": { "a": c.ooms.0.iter().map(oom_json).collect::<Vec<_>>(),
                  "b": c.ooms.1.iter().map(oom_json).collect::<Vec<_>>() },
    });
    serde_json::to_string_pretty(&doc).unwrap_or_else(|_| "{}".into()) + "\n"
}
