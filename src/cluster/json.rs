//! `vramscope cluster --json`: the screen as one JSON object (schema `vramscope.cluster`,
//! version 1). Absent figures are `null`, never 0; ages are milliseconds; moments are Unix
//! milliseconds.

use super::cells::detail_figures;
use super::model::DetailState;
use super::view::{Freshness, GpuRow, JobGroup, NodeRow, RankRow, Screen};
use crate::model::figures::process::STEPS_FROM;
use serde_json::{Value, json};

pub const SCHEMA: &str = "vramscope.cluster";
pub const VERSION: u32 = 1;

pub fn render(screen: &Screen) -> Value {
    json!({
        "schema": SCHEMA,
        "version": VERSION,
        "source": screen.source,
        "taken_at_ms": screen.now_ms,
        "requests_per_refresh": screen.last_requests,
        "problems": screen.problems,
        "jobs": screen.jobs.iter().map(job).collect::<Vec<_>>(),
        "nodes": screen.nodes.iter().map(node).collect::<Vec<_>>(),
    })
}

fn job(j: &JobGroup) -> Value {
    json!({
        "job": j.job,
        "median_step": j.median_step,
        "ooms": j.ooms.iter().map(|o| json!({
            "rank": o.rank,
            "node": o.node,
            "gpu": o.gpu,
            "count": o.count,
            "at_ms": o.at_ms,
        })).collect::<Vec<_>>(),
        "ranks": j.ranks.iter().map(rank).collect::<Vec<_>>(),
    })
}

fn rank(r: &RankRow) -> Value {
    json!({
        "rank": r.rank,
        "local_rank": r.local_rank,
        "node": r.node,
        "instance": r.instance,
        "gpu": r.gpu,
        "uuid": r.uuid,
        "pid": r.pid,
        "running": r.running,
        "allocated_bytes": r.allocated,
        "reserved_bytes": r.reserved,
        "peak_bytes": r.peak,
        "peak_growth_bytes_per_second": r.peak_growth.map(|g| (g * 10.0).round() / 10.0),
        "step": r.step,
        (STEPS_FROM.key): r.step.map(|_| r.steps_from.key()),
        "oom_in_steps": r.oom_in_steps,
        "ooms": r.ooms,
        "last_oom_at_ms": r.oom_at_ms,
        "steps_behind": r.behind,
        "nearest_oom": r.nearest_oom,
        "fastest_peak_growth": r.fastest_growth,
        "freshness": freshness(&r.fresh),
    })
}

fn node(n: &NodeRow) -> Value {
    json!({
        "node": n.node,
        "instances": n.instances,
        "memory_used_bytes": n.used_bytes,
        "memory_total_bytes": n.total_bytes,
        "utilization_percent": n.util_percent,
        "freshness": freshness(&n.fresh),
        "gpus": n.gpus.iter().map(gpu).collect::<Vec<_>>(),
    })
}

fn gpu(g: &GpuRow) -> Value {
    let r = &g.reading;
    json!({
        "gpu": g.gpu,
        "instance": g.instance,
        "uuid": r.uuid,
        "model": r.model,
        "memory_used_bytes": r.used_bytes,
        "memory_total_bytes": r.total_bytes,
        "utilization_percent": r.util_percent,
        "stale": r.stale,
        "lost": r.lost,
        "pod": r.pod,
        "namespace": r.namespace,
        "container": r.container,
        "ranks": g.ranks,
        "detail": detail(g),
        "freshness": freshness(&g.fresh),
    })
}

/// An open GPU's single-node figures: each `null` when absent, with why in `absent`.
fn detail(g: &GpuRow) -> Value {
    let mut out = serde_json::Map::new();
    let mut absent = serde_json::Map::new();
    let state = match &g.detail {
        DetailState::NotAsked => "not asked",
        DetailState::Failed(_) => "failed",
        DetailState::Read => "read",
    };
    out.insert("state".into(), json!(state));
    for f in detail_figures(g) {
        out.insert(f.key.into(), json!(f.value));
        if let Err(why) = f.shown {
            absent.insert(f.key.into(), json!(why));
        }
    }
    out.insert("absent".into(), Value::Object(absent));
    out.insert(
        "processes".into(),
        json!(
            g.processes
                .iter()
                .map(|p| json!({
                    "pid": p.pid,
                    "rank": p.rank,
                    "job": p.job,
                    "command": p.command,
                    "user": p.user,
                    "memory_used_bytes": p.used_bytes,
                    "allocated_bytes": p.allocated,
                    "reserved_bytes": p.reserved,
                }))
                .collect::<Vec<_>>()
        ),
    );
    Value::Object(out)
}

fn freshness(f: &Freshness) -> Value {
    json!({
        "current": f.is_current(),
        "age_ms": f.age_ms,
        "stale_because": f.stale,
        "missing_since_ms": f.missing_since_ms,
    })
}
