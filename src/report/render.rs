//! The summary as plain text, Markdown or JSON: one `Report`, three spellings. Absent figures
//! read `n/a` (text, Markdown) or `null` (JSON), never 0.

use super::analysis::{AllocatorSummary, At, OomSummary, ProcessSummary, Report};
use super::hints::hints;
use super::markdown::literal;
use crate::model::figures::process::STEPS_FROM;
use crate::model::foresight::describe;
use crate::model::held_sites::{
    SitesExactness, SitesState, SnapshotNote, block_words, blocks, exactness_note, headline,
    oom_words, site_words, summary,
};
use crate::model::peak_owner::{PeakOwner, Who};
use crate::model::snapshot_drops::Dropped;
use crate::model::time::{duration_label, utc_label};
use crate::model::units::bytes;
use crate::model::{NA, PodInfo, Reading, StepOrigin};
use serde_json::json;
use std::borrow::Cow;
use std::fmt::Write;

/// Text from the recording (names, commands, labels) as the format shows it: escaped as
/// literal Markdown (no forged table column, link or code span), as it is in plain text.
fn shown(text: &str, markdown: bool) -> Cow<'_, str> {
    if markdown {
        literal(text)
    } else {
        Cow::Borrowed(text)
    }
}

/// Plain text for a terminal (`markdown`: the same as Markdown tables and lists); `notes`
/// (what part of the recording it covers) follow the line saying what was recorded.
pub fn text(report: &Report, name: &str, markdown: bool, notes: &[String]) -> String {
    let mut out = String::new();
    let h = &report.header;
    let title = format!("vramscope report: {}", shown(name, markdown));
    if markdown {
        let _ = writeln!(out, "# {title}\n");
    } else {
        let _ = writeln!(out, "{title}");
    }
    let span = match (report.first_ms, report.last_ms) {
        (Some(a), Some(b)) => format!(
            "{} to {} ({})",
            utc_label(a),
            utc_label(b),
            duration_label(b.saturating_sub(a))
        ),
        _ => "no samples".into(),
    };
    let _ = writeln!(
        out,
        "recorded by vramscope {}{}, {span}, {}",
        h.vramscope_version,
        h.host.as_deref().map_or(String::new(), |host| format!(
            " on {}",
            shown(host, markdown)
        )),
        periods_words(report)
    );
    for note in notes {
        let _ = writeln!(out, "{}", shown(note, markdown));
    }
    if let Some(damage) = &report.damaged {
        let _ = writeln!(
            out,
            "\nWARNING: the recording is damaged; summarised up to: {damage}"
        );
    }

    section(&mut out, "GPUs", markdown);
    if markdown && !report.gpus.is_empty() {
        out += "| GPU | name | peak used | at | total | headroom | made by |\n|---|---|---|---|---|---|---|\n";
    }
    for g in &report.gpus {
        let peak = g.peak_used.as_ref();
        let headroom = match (g.headroom(), g.total) {
            (Some(left), Some(total)) if total > 0 => format!(
                "{} ({:.0}%)",
                bytes(left),
                left as f64 * 100.0 / total as f64
            ),
            _ => NA.into(),
        };
        let cells = [
            g.index.to_string(),
            shown(&g.name, markdown).into_owned(),
            peak.map_or(NA.into(), |p| bytes(p.value)),
            peak.map_or(NA.into(), |p| utc_label(p.at_ms)),
            g.total.map_or(NA.into(), bytes),
            headroom,
            g.peak_owner
                .as_ref()
                .map_or(NA.into(), |o| o.describe(bytes)),
        ];
        if markdown {
            let _ = writeln!(out, "| {} |", cells.join(" | "));
        } else {
            let _ = writeln!(
                out,
                "  GPU {} {}: peak {} of {} at {}, headroom {}; made by {}",
                cells[0], cells[1], cells[2], cells[4], cells[3], cells[5], cells[6]
            );
        }
    }
    if report.gpus.is_empty() {
        out += "  (no GPU in the recording)\n";
    }

    section(&mut out, "Processes (by peak NVML memory)", markdown);
    if report.processes.is_empty() {
        out += "  (no GPU process in the recording)\n";
    }
    for p in &report.processes {
        process(&mut out, p, markdown);
    }

    section(&mut out, "Out-of-memory errors", markdown);
    if report.ooms.is_empty() {
        out += if markdown { "None.\n" } else { "  none\n" };
    }
    for o in &report.ooms {
        let _ = writeln!(
            out,
            "{}{}",
            if markdown { "- " } else { "  " },
            oom_line(o, markdown)
        );
        // Why, under it: asked against free, the cache, outside, expandable_segments.
        for line in &o.explanation {
            let _ = writeln!(out, "{}{line}", if markdown { "  - " } else { "      " });
        }
    }

    held_section(&mut out, report, markdown);

    section(
        &mut out,
        "Largest spikes (rises that fall back within 10 s)",
        markdown,
    );
    if report.spikes.is_empty() {
        out += if markdown { "None.\n" } else { "  none\n" };
    }
    for s in &report.spikes {
        let mut line = format!(
            "+{} {}: {} -> {} at {}",
            bytes(s.rise.amount()),
            shown(&s.what, markdown),
            bytes(s.rise.from),
            bytes(s.rise.to),
            utc_label(s.rise.at_ms)
        );
        where_(
            &mut line,
            s.rise.step,
            s.steps_from,
            &s.rise.phase,
            markdown,
        );
        let _ = writeln!(out, "{}{line}", if markdown { "- " } else { "  " });
    }

    let advice = hints(report);
    if !advice.is_empty() {
        section(&mut out, "Hints", markdown);
        for hint in advice {
            let _ = writeln!(out, "{}{hint}", if markdown { "- " } else { "  - " });
        }
    }
    out
}

/// What held the memory, from the snapshots the writers announced (`vramscope run --sites`):
/// per process at its peak, per OOM at the failing request. Absent when none was announced.
fn held_section(out: &mut String, report: &Report, markdown: bool) {
    // A process is here for its peak's snapshot, or for the ones its writer deleted.
    let processes: Vec<(&ProcessSummary, Option<&SnapshotNote>, Option<String>)> = report
        .processes
        .iter()
        .filter_map(|p| {
            let a = p.allocator.as_ref()?;
            let dropped = a.snapshots_dropped.as_ref().and_then(Dropped::words);
            (a.held.is_some() || dropped.is_some()).then_some((p, a.held.as_ref(), dropped))
        })
        .collect();
    let ooms: Vec<(&OomSummary, &SnapshotNote)> = report
        .ooms
        .iter()
        .filter_map(|o| Some((o, o.held.as_ref()?)))
        .collect();
    if processes.is_empty() && ooms.is_empty() {
        return;
    }
    section(out, "What held the memory (allocation sites)", markdown);
    let bullet = if markdown { "- " } else { "  " };
    for (p, note, dropped) in processes {
        let _ = writeln!(
            out,
            "{bullet}pid {} on GPU {}, at its peak:",
            p.pid, p.gpu_index
        );
        match note {
            Some(note) => {
                let steps = p
                    .allocator
                    .as_ref()
                    .map_or(StepOrigin::Job, |a| a.steps_from);
                held_lines(out, note, steps, markdown);
                let words = peak_not_covered(note, a_peak(p), steps)
                    .or_else(|| dumped_after_the_peak(note, a_peak_step(p), steps));
                if let Some(words) = words {
                    let inner = if markdown { "  - " } else { "      " };
                    let _ = writeln!(out, "{inner}{}", shown(&words, markdown));
                }
            }
            None => {
                let inner = if markdown { "  - " } else { "      " };
                let _ = writeln!(out, "{inner}no snapshot of its peak was announced");
            }
        }
        if let Some(words) = dropped {
            let inner = if markdown { "  - " } else { "      " };
            let _ = writeln!(out, "{inner}{}", shown(&words, markdown));
        }
    }
    for (o, note) in ooms {
        let who = o.pid.map_or("a writer".into(), |pid| format!("pid {pid}"));
        let _ = writeln!(out, "{bullet}OOM of {who} at {}:", utc_label(o.oom.at_ms));
        held_lines(out, note, o.steps_from, markdown);
    }
}

/// The run's allocated peak of a process, as the report found it.
fn a_peak(p: &ProcessSummary) -> Option<u64> {
    p.allocator
        .as_ref()?
        .peak_allocated
        .as_ref()
        .map(|at| at.value)
}

/// The step of the run's allocated peak of a process, as the report found it.
fn a_peak_step(p: &ProcessSummary) -> Option<u64> {
    p.allocator.as_ref()?.peak_allocated.as_ref()?.step
}

/// Where the snapshot that covers the run's peak was dumped in a later step (a new peak is
/// seen, then dumped), which moment its answer is of: the peak, rebuilt from its history,
/// not the dump's step it is labelled with.
fn dumped_after_the_peak(
    note: &SnapshotNote,
    peak_step: Option<u64>,
    steps: StepOrigin,
) -> Option<String> {
    let SitesState::Reduced(held) = &note.sites else {
        return None;
    };
    let (dumped, peak) = (note.step?, peak_step?);
    if held.moment != "peak" || dumped <= peak {
        return None;
    }
    // Only an exact answer is the peak's own moment: otherwise the history reached the
    // highest moment it still holds, which may be another.
    let what = match held.exactness {
        SitesExactness::Exact => "its history rebuilds the moment of the peak",
        _ => "what it shows is the highest moment its history still holds",
    };
    Some(format!(
        "dumped in {}, after {}: {what}",
        steps.words(dumped),
        the_peak_of(peak, steps)
    ))
}

/// `the step-5 peak`, or `the peak of step 5 since attach`.
fn the_peak_of(step: u64, steps: StepOrigin) -> String {
    match steps {
        StepOrigin::Job => format!("the step-{step} peak"),
        StepOrigin::Attach => format!("the peak of {}", steps.words(step)),
    }
}

/// Where the snapshot of a peak was taken below the run's own peak, what it describes: the
/// peak at its dump, not the run's, which no snapshot covers. Its "exact" is of that moment.
fn peak_not_covered(
    note: &SnapshotNote,
    run_peak: Option<u64>,
    steps: StepOrigin,
) -> Option<String> {
    let SitesState::Reduced(held) = &note.sites else {
        return None;
    };
    let dumped = *note.peak.as_ref().ok()?;
    let run_peak = run_peak?;
    if held.moment != "peak" || dumped >= run_peak {
        return None;
    }
    let at = note
        .step
        .map_or("an earlier peak".to_string(), |s| the_peak_of(s, steps));
    Some(format!(
        "this is {at} ({}), not the run's peak {}: no snapshot covers it",
        bytes(dumped),
        bytes(run_peak)
    ))
}

/// One snapshot: which file, then its top sites (or why it could not be read), whether the
/// answer is exact, and at an OOM why the request did not fit.
fn held_lines(out: &mut String, note: &SnapshotNote, steps: StepOrigin, markdown: bool) {
    let inner = if markdown { "  - " } else { "      " };
    let mut about = format!(
        "snapshot {} ({}, {}",
        shown(&note.name, markdown),
        note.reason.label(),
        utc_label(note.at_ms)
    );
    where_(&mut about, note.step, steps, &note.phase, markdown);
    about.push(')');
    let _ = writeln!(out, "{inner}{about}");
    match &note.sites {
        SitesState::Reduced(held) => {
            let _ = writeln!(out, "{inner}{}", shown(&summary(held), markdown));
            for site in &held.sites {
                let _ = writeln!(
                    out,
                    "{inner}  {} in {}",
                    shown(&site_words(site), markdown),
                    blocks(site.blocks)
                );
            }
            if !held.largest.is_empty() {
                let largest: Vec<String> = held.largest.iter().map(block_words).collect();
                let _ = writeln!(
                    out,
                    "{inner}largest blocks: {}",
                    shown(&largest.join(", "), markdown)
                );
            }
            if let Some(text) = exactness_note(held) {
                let _ = writeln!(out, "{inner}{}", shown(&text, markdown));
            }
            if let Some(fit) = &held.oom {
                let _ = writeln!(
                    out,
                    "{inner}why it did not fit: {}",
                    shown(&oom_words(fit), markdown)
                );
            }
        }
        SitesState::Failed { why } => {
            let _ = writeln!(out, "{inner}not read: {}", shown(why, markdown));
        }
        SitesState::NotRead | SitesState::Reading => {
            let _ = writeln!(out, "{inner}not read");
        }
    }
}

fn section(out: &mut String, title: &str, markdown: bool) {
    if markdown {
        let _ = writeln!(out, "\n## {title}\n");
    } else {
        let _ = writeln!(out, "\n{title}");
    }
}

/// `, step 41, forward/model.head`
fn where_(line: &mut String, step: Option<u64>, steps: StepOrigin, phase: &str, markdown: bool) {
    if let Some(step) = step {
        let _ = write!(line, ", {}", steps.words(step));
    }
    if !phase.is_empty() {
        let _ = write!(line, ", {}", shown(phase, markdown));
    }
}

fn at(a: Option<&At>, steps: StepOrigin, markdown: bool) -> String {
    match a {
        None => NA.into(),
        Some(a) => {
            let mut s = format!("{} at {}", bytes(a.value), utc_label(a.at_ms));
            where_(&mut s, a.step, steps, &a.phase, markdown);
            s
        }
    }
}

/// ` in pod ml-team/trainer-0, container trainer`, or ` in pod <uid> (names n/a: why)`.
fn in_pod(pod: &PodInfo, markdown: bool) -> String {
    match (&pod.namespace, &pod.name) {
        (Ok(_), Ok(_)) => {
            let container = pod.container.as_ref().map_or(String::new(), |c| {
                format!(", container {}", shown(c, markdown))
            });
            format!(" in pod {}{container}", shown(&pod.label(), markdown))
        }
        (Err(why), _) | (_, Err(why)) => format!(
            " in pod {} (names {NA}: {})",
            shown(&pod.uid, markdown),
            shown(&why.reason(), markdown)
        ),
    }
}

/// ` (MIG 1g.10gb GI 2)`: the instance a process ran in, where it was recorded.
fn in_instance(p: &ProcessSummary, markdown: bool) -> String {
    let Some(i) = &p.mig else {
        return String::new();
    };
    let profile = i.profile.as_deref().unwrap_or(NA);
    let gi = i
        .gpu_instance_id
        .as_ref()
        .map_or(NA.to_string(), u32::to_string);
    format!(" (MIG {} GI {gi})", shown(profile, markdown))
}

fn process(out: &mut String, p: &ProcessSummary, markdown: bool) {
    let bullet = if markdown { "- " } else { "  " };
    let _ = writeln!(
        out,
        "{bullet}pid {} on GPU {}{}: {}{}{}: NVML used {}",
        p.pid,
        p.gpu_index,
        in_instance(p, markdown),
        shown(p.command.as_deref().unwrap_or(NA), markdown),
        p.user
            .as_deref()
            .map_or(String::new(), |u| format!(" ({})", shown(u, markdown))),
        p.pod
            .as_ref()
            .map_or(String::new(), |pod| in_pod(pod, markdown)),
        // NVML's peak carries no writer's step.
        at(p.peak_nvml.as_ref(), StepOrigin::Job, markdown)
    );
    let Some(a) = &p.allocator else { return };
    let inner = if markdown { "  - " } else { "      " };
    let rank = match (a.rank, a.world_size) {
        (Some(r), Some(w)) => format!(", rank {r}/{w}"),
        _ => String::new(),
    };
    let _ = writeln!(
        out,
        "{inner}allocator {} {}{rank}",
        shown(&a.kind, markdown),
        shown(&a.framework, markdown)
    );
    let _ = writeln!(
        out,
        "{inner}allocated peak {}",
        at(a.peak_allocated.as_ref(), a.steps_from, markdown)
    );
    let _ = writeln!(
        out,
        "{inner}reserved peak {}",
        at(a.peak_reserved.as_ref(), a.steps_from, markdown)
    );
    // The reserved figure is the one read with the largest split: beside none, it says nothing.
    let frag = a
        .fragmentation
        .map_or(NA.into(), |(split, reserved)| match split {
            0 => bytes(0),
            _ => format!("{} of {} reserved", bytes(split), bytes(reserved)),
        });
    let _ = writeln!(
        out,
        "{inner}cache at the allocated peak {}; largest inactive split {frag}; allocation retries {}; OOMs {}",
        a.cache_at_peak.map_or(NA.into(), bytes),
        a.alloc_retries.map_or(NA.into(), |r| r.to_string()),
        a.ooms.map_or(NA.into(), |o| o.to_string()),
    );
}

fn figure(r: &Reading<u64>) -> String {
    r.as_ref().map_or(NA.into(), |b| bytes(*b))
}

fn oom_line(o: &OomSummary, markdown: bool) -> String {
    let who = match (o.pid, o.gpu_index) {
        (Some(pid), Some(gpu)) => format!("pid {pid} on GPU {gpu}"),
        (Some(pid), None) => format!("pid {pid}"),
        _ => "a writer".into(),
    };
    let oom = &o.oom;
    let mut line = format!(
        "{} {who} ({}): asked for {}, {} free, allocated {}, reserved {}",
        utc_label(oom.at_ms),
        oom.outcome.label(),
        figure(&oom.requested),
        figure(&oom.device_free),
        figure(&oom.allocated),
        figure(&oom.reserved),
    );
    where_(&mut line, oom.step, o.steps_from, &oom.phase, markdown);
    if let Some(note) = oom.sources_note() {
        line.push_str(&format!(" ({note})"));
    }
    line
}

/// A snapshot and what reducing it said, as `--json` spells it.
fn held_json(note: &SnapshotNote) -> serde_json::Value {
    let figure = |r: &Reading<u64>| r.as_ref().ok().copied();
    json!({
        "name": note.name,
        "path": note.path.as_ref().ok(),
        "path_refused": note.path.as_ref().err().map(|why| why.reason()),
        "at_ms": note.at_ms, "reason": note.reason, "step": note.step, "phase": note.phase,
        "size": figure(&note.size), "peak": figure(&note.peak),
        "allocated": figure(&note.allocated), "max_entries": figure(&note.max_entries),
        "deleted": figure(&note.deleted),
        "sites": note.sites,
        "headline": match &note.sites {
            SitesState::Reduced(held) => Some(headline(held, 3)),
            _ => None,
        },
    })
}

/// Most period changes the text names one by one.
const PERIODS_NAMED: usize = 4;

/// `every 1000 ms`, or where the monitor's `+`/`-` changed it while recording, `every
/// 1000 ms, then 5000 and 2000 ms` (`--json` says when).
fn periods_words(report: &Report) -> String {
    let first = format!("every {} ms", report.header.interval_ms);
    let changes: Vec<u64> = report.periods.changes().map(|(_, ms)| ms).collect();
    match changes.as_slice() {
        [] => first,
        [.., last] if changes.len() > PERIODS_NAMED => {
            format!(
                "{first}, changed {} times, lastly to {last} ms",
                changes.len()
            )
        }
        [only] => format!("{first}, then {only} ms"),
        [before @ .., last] => {
            let before: Vec<String> = before.iter().map(u64::to_string).collect();
            format!("{first}, then {} and {last} ms", before.join(", "))
        }
    }
}

/// The summary as JSON, schema `vramscope.report` version 2 (each OOM once, with its
/// `outcome`, `phase`, `message` and `explanation`; version 1 had one per event, with
/// `caught` and `label`); bytes and ms throughout.
/// `scope`: what part of the recording it covers (`recording::scope::Told::json`).
pub fn json(report: &Report, scope: serde_json::Value) -> String {
    let at = at_json;
    let reading = |r: &Reading<u64>| r.as_ref().ok().copied();
    let doc = json!({
        "schema": "vramscope.report",
        "version": 2,
        "recorded_by": report.header.vramscope_version,
        "host": report.header.host,
        "interval_ms": report.header.interval_ms,
        "interval_changes": report.periods.changes().map(|(at_ms, ms)| json!({
            "at_ms": at_ms, "interval_ms": ms,
        })).collect::<Vec<_>>(),
        "first_ms": report.first_ms,
        "last_ms": report.last_ms,
        "damaged": report.damaged,
        "scope": scope,
        "gpus": report.gpus.iter().map(|g| json!({
            "index": g.index, "name": g.name, "uuid": g.uuid, "total": g.total,
            "peak_used": at(g.peak_used.as_ref()), "headroom": g.headroom(),
            "peak_owner": g.peak_owner.as_ref().map(owner_json),
        })).collect::<Vec<_>>(),
        "processes": report.processes.iter().map(|p| json!({
            "pid": p.pid, "gpu_index": p.gpu_index, "command": p.command, "user": p.user,
            "pod": p.pod.as_ref().and_then(|pod| pod.name.as_ref().ok()),
            "namespace": p.pod.as_ref().and_then(|pod| pod.namespace.as_ref().ok()),
            "container_name": p.pod.as_ref().and_then(|pod| pod.container.as_ref().ok()),
            "pod_uid": p.pod.as_ref().map(|pod| &pod.uid),
            "mig_profile": p.mig.as_ref().and_then(|i| i.profile.as_ref().ok()),
            "gpu_instance_id": p.mig.as_ref().and_then(|i| i.gpu_instance_id.as_ref().ok()),
            "mig_uuid": p.mig.as_ref().and_then(|i| i.uuid.as_ref().ok()),
            "peak_nvml_used": at(p.peak_nvml.as_ref()),
            "allocator": p.allocator.as_ref().map(allocator_json),
        })).collect::<Vec<_>>(),
        "ooms": report.ooms.iter().map(|o| {
            let oom = &o.oom;
            json!({
                "at_ms": oom.at_ms, "pid": o.pid, "gpu_index": o.gpu_index,
                "outcome": oom.outcome,
                "requested": reading(&oom.requested), "device_free": reading(&oom.device_free),
                "device_total": reading(&oom.device_total),
                "allocated": reading(&oom.allocated), "reserved": reading(&oom.reserved),
                "step": oom.step, (STEPS_FROM.key): o.steps_from.key(),
                "phase": oom.phase, "message": oom.message,
                "from_message": oom.from_message,
                "explanation": o.explanation,
                "held": o.held.as_ref().map(held_json),
            })
        }).collect::<Vec<_>>(),
        "spikes": report.spikes.iter().map(|s| json!({
            "what": s.what, "rise": s.rise.amount(), "from": s.rise.from,
            "from_ms": s.rise.from_ms, "to": s.rise.to, "at_ms": s.rise.at_ms,
            "step": s.rise.step, (STEPS_FROM.key): s.steps_from.key(), "phase": s.rise.phase,
        })).collect::<Vec<_>>(),
        "hints": hints(report),
    });
    let text = serde_json::to_string_pretty(&doc).unwrap_or_else(|_| "{}".into());
    text + "\n"
}

/// A figure's moment in the report's `--json`.
fn at_json(a: Option<&At>) -> Option<serde_json::Value> {
    a.map(|a| json!({ "bytes": a.value, "at_ms": a.at_ms, "step": a.step, "phase": a.phase }))
}

/// A process's allocator in the report's `--json`.
fn allocator_json(a: &AllocatorSummary) -> serde_json::Value {
    json!({
        "kind": a.kind, "framework": a.framework, "rank": a.rank,
        "world_size": a.world_size, (STEPS_FROM.key): a.steps_from.key(),
        "peak_allocated": at_json(a.peak_allocated.as_ref()),
        "peak_reserved": at_json(a.peak_reserved.as_ref()),
        "cache_at_peak": a.cache_at_peak,
        "inactive_split": a.fragmentation.map(|f| f.0),
        "reserved_at_inactive_split": a.fragmentation.map(|f| f.1),
        "alloc_retries": a.alloc_retries, "ooms": a.ooms,
        "allocator_config": a.allocator_config,
        "held_at_peak": a.held.as_ref().map(held_json),
        "snapshots_dropped": a.snapshots_dropped,
        // The same keys as the monitor's `--json` device.
        "forecast": a.forecast,
        "forecast_text": describe(&a.forecast),
    })
}

/// A GPU peak's owner in the report's JSON: `{"pid", "used", "rise"}`, or
/// `{"not_attributed": why}`.
fn owner_json(owner: &PeakOwner) -> serde_json::Value {
    let between = owner.between_refreshes;
    match &owner.who {
        Who::Process { pid, used, rise } => json!({
            "pid": pid, "used": used, "rise": rise, "between_refreshes": between,
        }),
        Who::NotAttributed(why) => json!({ "not_attributed": why, "between_refreshes": between }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::held_sites::{HeldSites, SitesExactness, SnapshotReason};

    const GIB: u64 = 1 << 30;

    fn peak_note(dumped: u64, step: u64) -> SnapshotNote {
        SnapshotNote {
            at_ms: 1_000,
            slot: Some(0),
            name: "7-9.vsc.snap-1-peak.pickle".into(),
            path: Ok("/dev/shm/vramscope-0/7-9.vsc.snap-1-peak.pickle".into()),
            size: Ok(100),
            reason: SnapshotReason::Peak,
            peak: Ok(dumped),
            allocated: Ok(dumped),
            step: Some(step),
            phase: String::new(),
            max_entries: Ok(1000),
            deleted: Ok(0),
            sites: SitesState::Reduced(Box::new(HeldSites {
                moment: "peak".into(),
                total_bytes: dumped,
                blocks: 3,
                sites: vec![],
                largest: vec![],
                exactness: SitesExactness::Exact,
                oom: None,
                trace_entries: 10,
            })),
        }
    }

    #[test]
    fn a_snapshot_of_an_earlier_peak_says_it_is_not_the_run_s() {
        let gib = |x: f64| (x * GIB as f64) as u64;
        let note = peak_note(gib(3.77), 2);
        assert_eq!(
            peak_not_covered(&note, Some(gib(9.99)), StepOrigin::Job).as_deref(),
            Some(
                "this is the step-2 peak (3.77 GiB), not the run's peak 9.99 GiB: no snapshot covers it"
            )
        );
        // The snapshot of the run's own peak needs no such word.
        assert_eq!(
            peak_not_covered(&note, Some(gib(3.77)), StepOrigin::Job),
            None
        );
        assert_eq!(peak_not_covered(&note, None, StepOrigin::Job), None);
        // A step counted from an attach is said so.
        assert_eq!(
            peak_not_covered(&note, Some(gib(9.99)), StepOrigin::Attach).as_deref(),
            Some(
                "this is the peak of step 2 since attach (3.77 GiB), not the run's peak 9.99 GiB: no snapshot covers it"
            )
        );
        assert_eq!(
            dumped_after_the_peak(&peak_note(GIB, 6), Some(5), StepOrigin::Attach).as_deref(),
            Some(
                "dumped in step 6 since attach, after the peak of step 5 since attach: its history rebuilds the moment of the peak"
            )
        );
    }

    #[test]
    fn a_snapshot_dumped_after_the_peak_says_which_moment_it_answers_for() {
        let note = peak_note(GIB, 6);
        assert_eq!(
            dumped_after_the_peak(&note, Some(5), StepOrigin::Job).as_deref(),
            Some(
                "dumped in step 6, after the step-5 peak: its history rebuilds the moment of the peak"
            )
        );
        // Not exact: not said to be the peak's moment.
        let mut short = note.clone();
        if let SitesState::Reduced(held) = &mut short.sites {
            held.exactness = SitesExactness::Short {
                recorded_peak: 2 * GIB,
                reconstructed: GIB,
                shortfall: GIB,
                suggested_max_entries: None,
            };
        }
        assert_eq!(
            dumped_after_the_peak(&short, Some(5), StepOrigin::Job).as_deref(),
            Some(
                "dumped in step 6, after the step-5 peak: what it shows is the highest moment its history still holds"
            )
        );
        // Dumped in the peak's own step, or with no step known: nothing to say.
        assert_eq!(dumped_after_the_peak(&note, Some(6), StepOrigin::Job), None);
        assert_eq!(dumped_after_the_peak(&note, None, StepOrigin::Job), None);
    }
}
