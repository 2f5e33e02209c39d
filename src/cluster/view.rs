//! The two views of the fleet, built once per refresh from the model for every output (the
//! screen, `--once`, `--json`): the job view (one row per rank, grouped by job, riskiest
//! first) and the node view (one line per node, its GPUs below). Every row says how old its
//! figures are and, when they are not current, why.

use super::model::{Cluster, DetailState, Problem, Seen};
use super::normalise::GpuReading;
use crate::model::StepOrigin;
use std::collections::BTreeMap;

/// A rank this many steps behind its job's median step is a straggler.
pub const STRAGGLER_STEPS: u64 = 2;

/// How current a row's figures are.
#[derive(Clone, Debug, PartialEq)]
pub struct Freshness {
    /// Since the figures were last read (ms).
    pub age_ms: u64,
    /// Why they are not current, when they are not.
    pub stale: Option<String>,
    /// Since when the source no longer lists it.
    pub missing_since_ms: Option<u64>,
}

impl Freshness {
    pub fn is_current(&self) -> bool {
        self.stale.is_none() && self.missing_since_ms.is_none()
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct RankRow {
    pub job: String,
    pub rank: Option<u32>,
    pub local_rank: Option<u32>,
    pub node: String,
    pub instance: String,
    pub gpu: u32,
    pub uuid: Option<String>,
    pub pid: u32,
    pub running: Option<bool>,
    pub allocated: Option<u64>,
    pub reserved: Option<u64>,
    pub peak: Option<u64>,
    /// Bytes per second the peak grew over the last minutes seen.
    pub peak_growth: Option<f64>,
    pub step: Option<u64>,
    pub steps_from: StepOrigin,
    pub oom_in_steps: Option<u64>,
    pub ooms: Option<u64>,
    pub oom_at_ms: Option<u64>,
    /// Steps behind the job's median, when a straggler.
    pub behind: Option<u64>,
    /// The rank nearest to OOM (fewest steps forecast), and the one whose peak grows
    /// fastest, in its job.
    pub nearest_oom: bool,
    pub fastest_growth: bool,
    pub fresh: Freshness,
}

#[derive(Clone, Debug, PartialEq)]
pub struct OomNote {
    pub rank: Option<u32>,
    pub node: String,
    pub gpu: u32,
    pub count: u64,
    pub at_ms: Option<u64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct JobGroup {
    pub job: String,
    pub median_step: Option<u64>,
    pub ooms: Vec<OomNote>,
    pub ranks: Vec<RankRow>,
}

/// A process on a GPU, as an open node lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuProcess {
    pub pid: u32,
    pub rank: Option<u32>,
    pub job: Option<String>,
    pub command: Option<String>,
    pub user: Option<String>,
    /// GPU memory NVML charges it (vramscope's exporters only).
    pub used_bytes: Option<u64>,
    pub allocated: Option<u64>,
    pub reserved: Option<u64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct GpuRow {
    pub gpu: u32,
    pub instance: String,
    pub reading: GpuReading,
    /// Ranks on it.
    pub ranks: Vec<u32>,
    /// Whether its single-node figures were read.
    pub detail: DetailState,
    /// Processes its exporter lists on it, by pid.
    pub processes: Vec<GpuProcess>,
    pub fresh: Freshness,
}

#[derive(Clone, Debug, PartialEq)]
pub struct NodeRow {
    pub node: String,
    pub instances: Vec<String>,
    /// Sums over its GPUs; `None` unless every GPU gives the figure.
    pub used_bytes: Option<u64>,
    pub total_bytes: Option<u64>,
    pub util_percent: Option<f64>,
    pub gpus: Vec<GpuRow>,
    /// The oldest of its GPUs' freshness.
    pub fresh: Freshness,
}

/// Everything the outputs show.
#[derive(Clone, Debug, PartialEq)]
pub struct Screen {
    pub source: String,
    pub now_ms: u64,
    /// One line each: the source's problem, targets not answering.
    pub problems: Vec<String>,
    pub jobs: Vec<JobGroup>,
    pub nodes: Vec<NodeRow>,
    pub last_requests: u32,
    pub fetches: u64,
}

impl Screen {
    /// Whether the job view is the default: some process has a rank.
    pub fn has_ranks(&self) -> bool {
        self.jobs.iter().any(|j| !j.ranks.is_empty())
    }
}

/// When figures stop being current.
#[derive(Clone, Copy, Debug)]
pub struct StaleAfter {
    /// Not read again for this long (a few refreshes missed).
    pub unread_ms: u64,
    /// Sampled by their exporter this long ago (its sampling stopped, though it answers).
    pub sampled_ms: u64,
}

/// Builds the views at `now_ms`.
pub fn build(cluster: &Cluster, source: &str, now_ms: u64, stale_after: StaleAfter) -> Screen {
    let fresh =
        |instance: &str, seen: &Seen| freshness(cluster, instance, seen, now_ms, stale_after);
    let mut problems = Vec::new();
    if let Some(p) = &cluster.source_problem {
        let last = cluster.last_good_ms.map_or_else(
            || "nothing read yet".to_string(),
            |t| format!("figures from {}", clock(t)),
        );
        problems.push(format!(
            "{source}: {} (since {}; {last})",
            p.text,
            clock(p.since_ms)
        ));
    }
    for (instance, entry) in &cluster.instances {
        if let Some(Problem { text, since_ms, .. }) = &entry.problem {
            // A host reached by its name (`--ssh`) is its node: named once.
            let node = if entry.node.is_empty() || entry.node == *instance {
                instance.clone()
            } else {
                format!("{} ({instance})", entry.node)
            };
            problems.push(format!(
                "{node}: {text} (missing since {})",
                clock(*since_ms)
            ));
        }
    }
    // Jobs.
    let mut by_job: BTreeMap<String, Vec<RankRow>> = BTreeMap::new();
    for ((instance, gpu, pid), p) in &cluster.processes {
        let r = &p.reading;
        if r.rank.is_none() && r.job.is_none() {
            continue;
        }
        let job = r.job.clone().unwrap_or_else(|| "(no job id)".into());
        by_job.entry(job.clone()).or_default().push(RankRow {
            job,
            rank: r.rank,
            local_rank: r.local_rank,
            node: r.node.clone(),
            instance: instance.clone(),
            gpu: *gpu,
            uuid: r.uuid.clone(),
            pid: *pid,
            running: r.running,
            allocated: r.allocated,
            reserved: r.reserved,
            peak: r.peak,
            peak_growth: p.peak_growth(),
            step: r.step,
            steps_from: StepOrigin::of(r.steps_since_attach == Some(true)),
            oom_in_steps: r.oom_in_steps,
            ooms: r.ooms,
            oom_at_ms: p.oom_at_ms,
            behind: None,
            nearest_oom: false,
            fastest_growth: false,
            fresh: fresh(instance, &p.seen),
        });
    }
    let mut jobs: Vec<JobGroup> = by_job
        .into_iter()
        .map(|(job, ranks)| group(job, ranks))
        .collect();
    // Jobs with an OOM first.
    jobs.sort_by_key(|j| j.ooms.is_empty());
    // Nodes.
    let mut ranks_on: BTreeMap<(String, u32), Vec<u32>> = BTreeMap::new();
    let mut processes_on: BTreeMap<(String, u32), Vec<GpuProcess>> = BTreeMap::new();
    for ((instance, gpu, pid), p) in &cluster.processes {
        let r = &p.reading;
        if let Some(rank) = r.rank {
            ranks_on
                .entry((instance.clone(), *gpu))
                .or_default()
                .push(rank);
        }
        processes_on
            .entry((instance.clone(), *gpu))
            .or_default()
            .push(GpuProcess {
                pid: *pid,
                rank: r.rank,
                job: r.job.clone(),
                command: r.command.clone(),
                user: r.user.clone(),
                used_bytes: r.used_bytes,
                allocated: r.allocated,
                reserved: r.reserved,
            });
    }
    let mut by_node: BTreeMap<String, Vec<GpuRow>> = BTreeMap::new();
    for ((instance, gpu), g) in &cluster.gpus {
        let mut ranks = ranks_on
            .remove(&(instance.clone(), *gpu))
            .unwrap_or_default();
        ranks.sort_unstable();
        by_node
            .entry(g.reading.node.clone())
            .or_default()
            .push(GpuRow {
                gpu: *gpu,
                instance: instance.clone(),
                reading: g.reading.clone(),
                ranks,
                detail: g.detail.clone(),
                processes: processes_on
                    .remove(&(instance.clone(), *gpu))
                    .unwrap_or_default(),
                fresh: fresh(instance, &g.seen),
            });
    }
    let nodes = by_node
        .into_iter()
        .map(|(node, gpus)| node_row(node, gpus))
        .collect();
    Screen {
        source: source.to_string(),
        now_ms,
        problems,
        jobs,
        nodes,
        last_requests: cluster.last_requests,
        fetches: cluster.fetches,
    }
}

fn freshness(
    cluster: &Cluster,
    instance: &str,
    seen: &Seen,
    now: u64,
    stale_after: StaleAfter,
) -> Freshness {
    let age_ms = now.saturating_sub(seen.seen_ms);
    let entry = cluster.instances.get(instance);
    let stale = if let Some(p) = &cluster.source_problem {
        Some(p.text.clone())
    } else if let Some(p) = entry.and_then(|e| e.problem.as_ref()) {
        Some(p.text.clone())
    } else if let Some(sampled) = entry.and_then(|e| e.sampled_ms)
        && now.saturating_sub(sampled) > stale_after.sampled_ms
    {
        Some(format!(
            "its exporter's figures are {} old",
            crate::model::time::duration_label(now - sampled)
        ))
    } else if age_ms > stale_after.unread_ms {
        Some("not refreshed".to_string())
    } else {
        None
    };
    // The figures are as old as the exporter's sampling of them, when it says when.
    let sampled_age = entry
        .and_then(|e| e.sampled_ms)
        .map_or(0, |s| now.saturating_sub(s));
    Freshness {
        age_ms: age_ms.max(sampled_age),
        stale,
        missing_since_ms: seen.missing_since_ms,
    }
}

/// A job's rows: stragglers marked, the nearest-to-OOM and fastest-growing ranks marked,
/// riskiest first.
fn group(job: String, mut ranks: Vec<RankRow>) -> JobGroup {
    // A step counted from an attach is not the job's: it neither moves the median nor is
    // measured against it.
    let of_the_job = |r: &RankRow| r.step.filter(|_| r.steps_from == StepOrigin::Job);
    let mut steps: Vec<u64> = ranks
        .iter()
        .filter(|r| r.fresh.is_current() && r.running != Some(false))
        .filter_map(of_the_job)
        .collect();
    steps.sort_unstable();
    let median_step = (!steps.is_empty()).then(|| steps[(steps.len() - 1) / 2]);
    for r in &mut ranks {
        if let (Some(median), Some(step)) = (median_step, of_the_job(r))
            && median >= step + STRAGGLER_STEPS
            && r.running != Some(false)
        {
            r.behind = Some(median - step);
        }
    }
    let nearest = ranks
        .iter()
        .enumerate()
        .filter_map(|(i, r)| Some((r.oom_in_steps?, i)))
        .min()
        .map(|(_, i)| i);
    let fastest = ranks
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.peak_growth.filter(|g| *g > 0.0).map(|g| (g, i)))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, i)| i);
    if let Some(i) = nearest {
        ranks[i].nearest_oom = true;
    }
    if let Some(i) = fastest {
        ranks[i].fastest_growth = true;
    }
    sort_by_risk(&mut ranks);
    let mut ooms: Vec<OomNote> = ranks
        .iter()
        .filter(|r| r.ooms.is_some_and(|n| n > 0))
        .map(|r| OomNote {
            rank: r.rank,
            node: r.node.clone(),
            gpu: r.gpu,
            count: r.ooms.unwrap_or(0),
            at_ms: r.oom_at_ms,
        })
        .collect();
    // The most recent first; those of unknown time last.
    ooms.sort_by_key(|o| std::cmp::Reverse(o.at_ms));
    JobGroup {
        job,
        median_step,
        ooms,
        ranks,
    }
}

/// Nearest to OOM first (fewest forecast steps), then the fastest-growing peak, then the
/// largest peak, then by rank.
pub fn sort_by_risk(ranks: &mut [RankRow]) {
    ranks.sort_by(|a, b| {
        let steps = |r: &RankRow| r.oom_in_steps.unwrap_or(u64::MAX);
        let growth = |r: &RankRow| r.peak_growth.unwrap_or(f64::NEG_INFINITY);
        steps(a)
            .cmp(&steps(b))
            .then(growth(b).total_cmp(&growth(a)))
            .then(b.peak.cmp(&a.peak))
            .then(a.rank.cmp(&b.rank))
            .then(a.pid.cmp(&b.pid))
    });
}

fn node_row(node: String, gpus: Vec<GpuRow>) -> NodeRow {
    let all = |pick: fn(&GpuRow) -> Option<u64>| -> Option<u64> {
        gpus.iter().map(pick).sum::<Option<u64>>()
    };
    let used_bytes = all(|g| g.reading.used_bytes);
    let total_bytes = all(|g| g.reading.total_bytes);
    let utils: Option<Vec<f64>> = gpus.iter().map(|g| g.reading.util_percent).collect();
    let util_percent = utils
        .filter(|u| !u.is_empty())
        .map(|u| u.iter().sum::<f64>() / u.len() as f64);
    let mut instances: Vec<String> = gpus.iter().map(|g| g.instance.clone()).collect();
    instances.sort();
    instances.dedup();
    let fresh = gpus
        .iter()
        .map(|g| g.fresh.clone())
        .max_by_key(|f| (f.stale.is_some() || f.missing_since_ms.is_some(), f.age_ms))
        .unwrap_or(Freshness {
            age_ms: 0,
            stale: None,
            missing_since_ms: None,
        });
    NodeRow {
        node,
        instances,
        used_bytes,
        total_bytes,
        util_percent,
        gpus,
        fresh,
    }
}

/// A moment as the person's clock shows it.
pub fn clock(ms: u64) -> String {
    crate::terminal_kit::clock::time_of_day(ms, crate::terminal_kit::clock::Clock::Local)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(rank: u32, step: u64, oom_in: Option<u64>, growth: Option<f64>) -> RankRow {
        RankRow {
            job: "j".into(),
            rank: Some(rank),
            local_rank: None,
            node: format!("n{rank}"),
            instance: "i".into(),
            gpu: 0,
            uuid: None,
            pid: rank,
            running: Some(true),
            allocated: None,
            reserved: None,
            peak: Some(u64::from(rank)),
            peak_growth: growth,
            step: Some(step),
            steps_from: crate::model::StepOrigin::Job,
            oom_in_steps: oom_in,
            ooms: None,
            oom_at_ms: None,
            behind: None,
            nearest_oom: false,
            fastest_growth: false,
            fresh: Freshness {
                age_ms: 0,
                stale: None,
                missing_since_ms: None,
            },
        }
    }

    #[test]
    fn the_nearest_to_oom_then_the_fastest_growing_come_first_and_stragglers_are_marked() {
        let g = group(
            "j".into(),
            vec![
                row(0, 40, None, Some(0.0)),
                row(1, 40, Some(30), Some(1.0)),
                row(2, 37, None, Some(5e6)),
                row(3, 41, Some(12), None),
                row(4, 39, None, None),
            ],
        );
        let order: Vec<u32> = g.ranks.iter().filter_map(|r| r.rank).collect();
        assert_eq!(order, [3, 1, 2, 0, 4]);
        assert_eq!(g.median_step, Some(40));
        let by_rank = |n: u32| g.ranks.iter().find(|r| r.rank == Some(n)).unwrap();
        assert!(by_rank(3).nearest_oom && !by_rank(1).nearest_oom);
        assert!(by_rank(2).fastest_growth && !by_rank(1).fastest_growth);
        assert_eq!(by_rank(2).behind, Some(3));
        // One step behind is in step, not a straggler.
        assert_eq!(by_rank(4).behind, None);
    }

    #[test]
    fn a_rank_counting_since_its_attach_is_no_straggler_and_moves_no_median() {
        let mut attached = row(2, 3, None, None);
        attached.steps_from = StepOrigin::Attach;
        let g = group("j".into(), vec![row(0, 50, None, None), attached]);
        // Counted in, its 3 would have been the median of the two.
        assert_eq!(g.median_step, Some(50));
        let rank2 = g.ranks.iter().find(|r| r.rank == Some(2)).unwrap();
        assert_eq!(rank2.behind, None);
    }

    #[test]
    fn a_stale_rank_does_not_move_the_median() {
        let mut stale = row(2, 1, None, None);
        stale.fresh.stale = Some("connection refused".into());
        let g = group(
            "j".into(),
            vec![row(0, 50, None, None), row(1, 50, None, None), stale],
        );
        assert_eq!(g.median_step, Some(50));
        assert_eq!(
            g.ranks.iter().find(|r| r.rank == Some(2)).unwrap().behind,
            Some(49)
        );
    }
}
