//! One `vramscope.snapshot` document (a remote `vramscope --json --loop` line) as the
//! series a vramscope exporter serves for the same snapshot, so that `--ssh` hosts go
//! through `normalise` and the model exactly as scraped exporters do: one model, one set of
//! rules for what is absent, stale or missing.
//!
//! The document is foreign: a figure that is not a number where one is expected is absent,
//! never zero; text goes through `Series::new`, which cleans it. A document of another
//! schema or version is refused with the remote's version named, so an older (or newer)
//! vramscope on a host is one line saying so.
//!
//! Both sides of the map are the figure tables (`model::figures`): the key the document
//! carries a figure under and the family the exporter serves it as.

use super::series::Series;
use crate::model::StepOrigin;
use crate::model::figures::{device as gpu, process, slot};
use serde_json::Value;

/// The schema and version this reader understands: what this build's `--json` prints.
const SCHEMA: &str = crate::output::json::SCHEMA;
const VERSION: u64 = crate::output::json::VERSION as u64;

/// The series of one document read from `host` (the destination as given to `--ssh`,
/// which is both the series' `instance` and, as the `hostname` label, the node's name).
pub fn series(text: &str, host: &str) -> Result<Vec<Series>, String> {
    let doc: Value = serde_json::from_str(text).map_err(|_| {
        format!(
            "sent a line that is not JSON: {}",
            shown_start(text.trim_end())
        )
    })?;
    check_schema(&doc)?;
    let mut out = Vec::new();
    // A name from the figure tables is an `Option` (a figure may have no family); every
    // figure this map sends has one (`the_reverse_map_reads_the_figure_tables`).
    let mut push = |name: Option<&str>, labels: &[(&str, String)], value: Option<f64>| {
        let Some(name) = name else { return };
        if let Some(value) = value.filter(|v| v.is_finite()) {
            let mut labels: Vec<(String, String)> = labels
                .iter()
                .map(|(k, v)| ((*k).to_string(), v.clone()))
                .collect();
            labels.push(("hostname".into(), host.to_string()));
            out.push(Series::new(name, labels, value, host));
        }
    };
    if let Some(ms) = number(&doc["taken_at_ms"]) {
        push(
            Some("vramscope_snapshot_timestamp_seconds"),
            &[],
            Some(ms / 1000.0),
        );
    }
    for d in list(&doc["devices"]) {
        let Some(index) = number(&d[gpu::INDEX.key]) else {
            continue;
        };
        let mut labels = vec![("gpu", format!("{index}"))];
        if let Some(uuid) = d[gpu::UUID.key].as_str() {
            labels.push(("uuid", uuid.to_string()));
        }
        if let Some(model) = d[gpu::NAME.key].as_str() {
            labels.push(("model_name", model.to_string()));
        }
        let flag = |v: &Value| v.as_bool().map(|b| f64::from(u8::from(b)));
        for f in [&gpu::STALE, &gpu::LOST] {
            push(f.family, &labels, flag(&d[f.key]));
        }
        // Bytes and counts are vramscope's own families in base units, as its exporter
        // serves them; the rest dcgm-exporter's, in its units (watts, not milliwatts).
        for f in [&gpu::MEMORY_USED, &gpu::MEMORY_TOTAL, &gpu::PROCESS_COUNT] {
            push(f.family, &labels, number(&d[f.key]));
        }
        for f in [
            &gpu::GPU_UTIL,
            &gpu::TEMPERATURE_C,
            &gpu::SM_CLOCK_MHZ,
            &gpu::MEM_CLOCK_MHZ,
        ] {
            push(f.dcgm, &labels, number(&d[f.key]));
        }
        for f in [&gpu::POWER_MW, &gpu::POWER_LIMIT_MW] {
            push(f.dcgm, &labels, number(&d[f.key]).map(|mw| mw / 1000.0));
        }
    }
    let allocators = list(&doc["allocators"]);
    for p in list(&doc["processes"]) {
        let (Some(gpu), Some(pid)) = (
            number(&p[process::GPU_INDEX.key]),
            number(&p[process::PID.key]),
        ) else {
            continue;
        };
        let mut labels = vec![("gpu", format!("{gpu}")), ("pid", format!("{pid}"))];
        for (label, field) in [
            ("uuid", &process::GPU_UUID),
            ("user", &process::USER),
            ("command", &process::COMMAND),
        ] {
            if let Some(text) = p[field.key].as_str() {
                labels.push((label, text.to_string()));
            }
        }
        // The channel the remote joined to this pid (its verified host pid): rank and job
        // label the process, its per-GPU figures add the OOM count and forecast.
        let channel = allocators.iter().find(|a| number(&a["pid"]) == Some(pid));
        let on_gpu = channel.and_then(|a| {
            list(&a["devices"])
                .iter()
                .find(|d| number(&d["gpu_index"]) == Some(gpu))
        });
        if let Some(a) = channel {
            for label in ["rank", "local_rank"] {
                if let Some(n) = number(&a[label]) {
                    labels.push((label, format!("{n}")));
                }
            }
            if let Some(job) = a["job_id"].as_str().filter(|j| !j.is_empty()) {
                labels.push(("job_id", job.to_string()));
            }
        }
        push(Some("vramscope_process_running"), &labels, Some(1.0));
        for f in [
            &process::USED_MEMORY,
            &process::ALLOCATED,
            &process::RESERVED,
            &process::TRUE_PEAK,
            &process::STEP,
        ] {
            push(f.family, &labels, number(&p[f.key]));
        }
        let since_attach = p[process::STEPS_FROM.key]
            .as_str()
            .and_then(StepOrigin::from_key)
            .map(|from| f64::from(from.since_attach()));
        push(process::STEPS_FROM.family, &labels, since_attach);
        if let Some(d) = on_gpu {
            push(slot::OOMS.family, &labels, number(&d[slot::OOMS.key]));
            let steps = (d["forecast"]["kind"] == "oom_in")
                .then(|| number(&d["forecast"]["steps"]))
                .flatten();
            push(
                Some("vramscope_process_allocator_oom_forecast_steps"),
                &labels,
                steps,
            );
        }
    }
    Ok(out)
}

/// The document's schema and version, checked: another one is named with the remote
/// vramscope's version.
fn check_schema(doc: &Value) -> Result<(), String> {
    let schema = doc["schema"].as_str();
    let version = doc["version"].as_u64();
    if schema == Some(SCHEMA) && version == Some(VERSION) {
        return Ok(());
    }
    let remote = doc["vramscope_version"].as_str().map_or_else(
        || "an older vramscope".to_string(),
        |v| format!("vramscope {v}"),
    );
    let spoken = match (schema, version) {
        (Some(s), Some(v)) => format!("{} version {v}", shown_start(s)),
        (Some(s), None) => format!("{} without a version", shown_start(s)),
        _ => "no schema".to_string(),
    };
    Err(format!(
        "its {} sends {spoken}; this vramscope {} reads {SCHEMA} version {VERSION}",
        crate::text::clean(&remote),
        env!("CARGO_PKG_VERSION")
    ))
}

fn list(v: &Value) -> &[Value] {
    v.as_array().map_or(&[], Vec::as_slice)
}

/// A figure: a JSON number, not negative; anything else is absent.
fn number(v: &Value) -> Option<f64> {
    v.as_f64().filter(|n| n.is_finite() && *n >= 0.0)
}

/// The start of foreign text, cleaned, for a message.
fn shown_start(text: &str) -> String {
    const SHOWN: usize = 60;
    let mut end = text.len().min(SHOWN);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = if end < text.len() { "..." } else { "" };
    format!("{}{cut}", crate::text::clean(&text[..end]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(extra: Value) -> String {
        let mut d = json!({
            "schema": SCHEMA, "version": VERSION, "vramscope_version": "9.9.9",
            "taken_at_ms": 1_700_000_000_500u64,
            "devices": [{
                "index": 1, "uuid": "GPU-b", "name": "H100\u{1b}[2J", "stale": false,
                "lost": true, "memory_used": 3_000_000_000u64, "memory_total": 8_000_000_000u64,
                "gpu_util": 71, "temperature_c": null, "power_mw": 250_500,
                "power_limit_mw": 700_000, "sm_clock_mhz": 1980, "mem_clock_mhz": 2619,
                "process_count": 1,
            }],
            "processes": [{
                "gpu_index": 1, "gpu_uuid": "GPU-b", "pid": 42, "used_memory": 1_000_000,
                "user": "ann", "command": "python\u{202e} train.py", "allocated": 900,
                "reserved": 950, "true_peak": 990, "step": 12, "steps_from": "attach",
            }],
            "allocators": [{
                "pid": 42, "rank": 3, "local_rank": 1, "job_id": "j-1",
                "devices": [{ "gpu_index": 1, "ooms": 2,
                              "forecast": { "kind": "oom_in", "steps": 40 } }],
            }],
        });
        if let (Some(d), Some(extra)) = (d.as_object_mut(), extra.as_object()) {
            d.extend(extra.clone());
        }
        d.to_string()
    }

    fn find<'a>(all: &'a [Series], name: &str) -> Option<&'a Series> {
        all.iter().find(|s| s.name == name)
    }

    #[test]
    fn a_document_reads_as_the_exporter_series_of_its_snapshot() {
        let all = series(&doc(json!({})), "box-1").unwrap();
        let readings = super::super::normalise::normalise(&all);
        let g = &readings.gpus[&("box-1".to_string(), 1)];
        assert_eq!(g.node, "box-1");
        assert_eq!(
            (g.used_bytes, g.total_bytes, g.util_percent),
            (Some(3_000_000_000), Some(8_000_000_000), Some(71.0))
        );
        assert_eq!((g.stale, g.lost, g.processes), (false, true, Some(1)));
        // Absent stays absent: no temperature series at all, not a 0.
        assert_eq!(g.temperature_c, None);
        assert!(find(&all, "DCGM_FI_DEV_GPU_TEMP").is_none());
        assert_eq!((g.power_w, g.power_limit_w), (Some(250.5), Some(700.0)));
        // Foreign text is cleaned as it enters.
        assert_eq!(g.model.as_deref(), Some("H100\u{FFFD}[2J"));
        let p = &readings.processes[&("box-1".to_string(), 1, 42)];
        assert_eq!(
            (p.rank, p.local_rank, p.job.as_deref()),
            (Some(3), Some(1), Some("j-1"))
        );
        assert_eq!(p.command.as_deref(), Some("python\u{FFFD} train.py"));
        assert_eq!(
            (
                p.allocated,
                p.reserved,
                p.peak,
                p.step,
                p.ooms,
                p.oom_in_steps
            ),
            (Some(900), Some(950), Some(990), Some(12), Some(2), Some(40))
        );
        // Its step counts from an attach: said through the same family a scrape reads.
        assert_eq!(p.steps_since_attach, Some(true));
        assert_eq!((p.used_bytes, p.running), (Some(1_000_000), Some(true)));
        assert_eq!(readings.sampled_ms["box-1"], 1_700_000_000_500);
    }

    #[test]
    fn the_reverse_map_reads_the_figure_tables() {
        let all = series(&doc(json!({})), "box-1").unwrap();
        let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
        let tables = [gpu::ALL, process::ALL, slot::ALL].concat();
        let own = [
            "vramscope_snapshot_timestamp_seconds",
            "vramscope_process_running",
            "vramscope_process_allocator_oom_forecast_steps",
        ];
        for name in &names {
            let of_a_figure = tables
                .iter()
                .any(|f| f.family == Some(*name) || f.dcgm == Some(*name));
            assert!(of_a_figure || own.contains(name), "{name}");
        }
        // Every figure the document carries (its temperature is null) came through under
        // the family its table names.
        let sent = [
            (&gpu::STALE, gpu::STALE.family),
            (&gpu::MEMORY_USED, gpu::MEMORY_USED.family),
            (&gpu::PROCESS_COUNT, gpu::PROCESS_COUNT.family),
            (&gpu::POWER_LIMIT_MW, gpu::POWER_LIMIT_MW.dcgm),
            (&gpu::MEM_CLOCK_MHZ, gpu::MEM_CLOCK_MHZ.dcgm),
            (&process::TRUE_PEAK, process::TRUE_PEAK.family),
            (&slot::OOMS, slot::OOMS.family),
        ];
        for (figure, family) in sent {
            let family = family.unwrap_or_else(|| panic!("{} has no family", figure.key));
            assert!(
                names.contains(&family),
                "{} as {family}: {names:?}",
                figure.key
            );
        }
        assert!(!names.contains(&"DCGM_FI_DEV_GPU_TEMP"));
    }

    #[test]
    fn another_schema_or_version_names_the_remote_vramscope() {
        let newer = series(&doc(json!({ "version": 2 })), "h").unwrap_err();
        assert_eq!(
            newer,
            format!(
                "its vramscope 9.9.9 sends vramscope.snapshot version 2; this vramscope {} \
                 reads vramscope.snapshot version 1",
                env!("CARGO_PKG_VERSION")
            )
        );
        let older = series(r#"{"gpus": []}"#, "h").unwrap_err();
        assert!(
            older.starts_with("its an older vramscope sends no schema;"),
            "{older}"
        );
        let garbage = series("\u{1b}]52;c;x\u{7} not json", "h").unwrap_err();
        assert_eq!(
            garbage,
            "sent a line that is not JSON: \u{FFFD}]52;c;x\u{FFFD} not json"
        );
    }

    #[test]
    fn figures_that_are_not_numbers_are_absent() {
        let text = doc(json!({ "devices": [{ "index": 0, "memory_used": "lots",
                                              "memory_total": -1, "gpu_util": null }] }));
        let all = series(&text, "h").unwrap();
        let readings = super::super::normalise::normalise(&all);
        // Nothing but its identity was readable: no GPU entry from figures it lacks.
        assert!(readings.gpus.is_empty(), "{:?}", readings.gpus);
    }
}
