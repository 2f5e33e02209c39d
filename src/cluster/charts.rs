//! The charts' history: per job its allocated and reserved totals, its worst rank's reserved
//! and the mean utilisation of its GPUs; per node its GPU memory used and mean utilisation.
//! Filled from Prometheus's range query (`prometheus::CHARTS`, the same sums made by the
//! server), asked just after the first refresh so that it never holds up the first screen,
//! and extended by each refresh's answer (`record`); from a direct scrape only by the
//! refreshes.
//!
//! Nothing stale is drawn as current: a refresh that did not read every rank of a job (or
//! every GPU of a node) records a break, not a smaller total, and a series holds its last
//! reading only as long as readings came apart, so a chart ends where its data does.

use super::prometheus::{ChartPast, HISTORY_STEP_S};
use crate::history::{Series, SeriesConfig, TierSpec};
use std::collections::{BTreeMap, BTreeSet};

/// The job of ranks that publish no job id, as the job view names it.
pub const NO_JOB: &str = "(no job id)";

#[derive(Debug)]
pub struct JobCharts {
    pub allocated: Series,
    pub reserved: Series,
    /// The largest reserved of any of its ranks.
    pub worst: Series,
    pub util: Series,
}

#[derive(Debug)]
pub struct NodeCharts {
    pub used: Series,
    pub util: Series,
}

/// Where the history before the view started came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Past {
    /// No refresh yet.
    Nothing,
    /// Prometheus's range query, from this moment (Unix ms).
    Prometheus(u64),
    /// Only this view's refreshes, since this moment: no Prometheus.
    Refreshes(u64),
    /// Only this view's refreshes, since this moment: Prometheus's range query failed.
    Failed(u64, String),
}

#[derive(Debug)]
pub struct Charts {
    pub jobs: BTreeMap<String, JobCharts>,
    pub nodes: BTreeMap<String, NodeCharts>,
    pub past: Past,
    /// When the first refresh was recorded: the range query's past ends before it.
    first_record_ms: Option<u64>,
}

impl Default for Charts {
    fn default() -> Self {
        Charts {
            jobs: BTreeMap::new(),
            nodes: BTreeMap::new(),
            past: Past::Nothing,
            first_record_ms: None,
        }
    }
}

/// A rank as one refresh read it.
pub struct RankNow<'a> {
    pub job: &'a str,
    /// Read by this refresh, from a source that answered.
    pub read: bool,
    pub allocated: Option<u64>,
    pub reserved: Option<u64>,
    pub gpu: (&'a str, u32),
}

/// A GPU as one refresh read it.
pub struct GpuNow<'a> {
    pub node: &'a str,
    pub gpu: (&'a str, u32),
    /// Read by this refresh, current at its exporter.
    pub read: bool,
    pub used: Option<u64>,
    pub util: Option<f64>,
}

/// Ten minutes of readings as they came (a refresh a second at most kept raw), then 10 s
/// buckets for an hour: the charts show five minutes.
fn config() -> SeriesConfig {
    SeriesConfig {
        raw_span_ms: 10 * 60_000,
        min_spacing_ms: 1_000,
        tiers: vec![TierSpec {
            bucket_ms: 10_000,
            span_ms: 60 * 60_000,
        }],
    }
}

fn series() -> Series {
    Series::new(config())
}

impl JobCharts {
    fn new() -> Self {
        JobCharts {
            allocated: series(),
            reserved: series(),
            worst: series(),
            util: series(),
        }
    }

    fn gap(&mut self, at: u64) {
        for s in [
            &mut self.allocated,
            &mut self.reserved,
            &mut self.worst,
            &mut self.util,
        ] {
            s.push_gap(at);
        }
    }
}

impl NodeCharts {
    fn new() -> Self {
        NodeCharts {
            used: series(),
            util: series(),
        }
    }
}

/// `value` pushed when there is one, else a break.
fn push(series: &mut Series, at: u64, value: Option<f64>) {
    match value {
        Some(v) => series.push(at, v),
        None => series.push_gap(at),
    }
}

impl Charts {
    /// A refresh at `at` that read nothing (the source did not answer): a break everywhere.
    pub fn gap_all(&mut self, at: u64) {
        for j in self.jobs.values_mut() {
            j.gap(at);
        }
        for n in self.nodes.values_mut() {
            n.used.push_gap(at);
            n.util.push_gap(at);
        }
    }

    /// One refresh's readings at `at`: each job's and node's sums, or a break where some of
    /// its ranks or GPUs were not read. Jobs and nodes no longer listed are dropped.
    pub fn record(&mut self, at: u64, ranks: &[RankNow], gpus: &[GpuNow]) {
        if self.past == Past::Nothing {
            self.past = Past::Refreshes(at);
        }
        self.first_record_ms.get_or_insert(at);
        let util_of: BTreeMap<(&str, u32), Option<f64>> = gpus
            .iter()
            .map(|g| (g.gpu, g.util.filter(|_| g.read)))
            .collect();
        let mut by_job: BTreeMap<&str, Vec<&RankNow>> = BTreeMap::new();
        for r in ranks {
            by_job.entry(r.job).or_default().push(r);
        }
        self.jobs.retain(|job, _| by_job.contains_key(job.as_str()));
        for (job, ranks) in by_job {
            let charts = self
                .jobs
                .entry(job.to_string())
                .or_insert_with(JobCharts::new);
            if !ranks.iter().all(|r| r.read) {
                charts.gap(at);
                continue;
            }
            let sum = |pick: fn(&RankNow) -> Option<u64>| -> Option<f64> {
                let values: Vec<u64> = ranks.iter().filter_map(|r| pick(r)).collect();
                (!values.is_empty()).then(|| values.iter().map(|v| *v as f64).sum())
            };
            let worst = ranks.iter().filter_map(|r| r.reserved).max();
            // Each GPU once, however many of the job's ranks share it; as the range query
            // counts them, the GPUs where its ranks publish allocator figures.
            let on: BTreeSet<(&str, u32)> = ranks
                .iter()
                .filter(|r| r.allocated.is_some())
                .map(|r| r.gpu)
                .collect();
            let utils: Vec<f64> = on
                .iter()
                .filter_map(|g| util_of.get(g).copied().flatten())
                .collect();
            push(&mut charts.allocated, at, sum(|r| r.allocated));
            push(&mut charts.reserved, at, sum(|r| r.reserved));
            push(&mut charts.worst, at, worst.map(|w| w as f64));
            push(&mut charts.util, at, mean(&utils));
        }
        let mut by_node: BTreeMap<&str, Vec<&GpuNow>> = BTreeMap::new();
        for g in gpus {
            by_node.entry(g.node).or_default().push(g);
        }
        self.nodes
            .retain(|node, _| by_node.contains_key(node.as_str()));
        for (node, gpus) in by_node {
            let charts = self
                .nodes
                .entry(node.to_string())
                .or_insert_with(NodeCharts::new);
            if !gpus.iter().all(|g| g.read) {
                charts.used.push_gap(at);
                charts.util.push_gap(at);
                continue;
            }
            let used: Option<Vec<u64>> = gpus.iter().map(|g| g.used).collect();
            let used = used.map(|u| u.iter().map(|v| *v as f64).sum());
            let utils: Option<Vec<f64>> = gpus.iter().map(|g| g.util).collect();
            push(&mut charts.used, at, used);
            push(&mut charts.util, at, utils.and_then(|u| mean(&u)));
        }
    }

    /// The range query's past (asked at `at`), put before what the refreshes recorded: each
    /// part's points before the first refresh (or `at`), with a break where a step has no
    /// point, then the refreshes' readings again. A node served by several targets gets
    /// their sums (memory) and means (utilisation) step by step; `node_of` names a target's
    /// node.
    pub fn take_past(&mut self, past: &[ChartPast], at: u64, node_of: impl Fn(&str) -> String) {
        let at = self.first_record_ms.map_or(at, |first| first.min(at));
        // (subject is a job?, name, part) -> time -> values from each target.
        let mut grouped: BTreeMap<(bool, String, &str), BTreeMap<u64, Vec<f64>>> = BTreeMap::new();
        let mut from = None::<u64>;
        for p in past {
            let (job, name) = match (p.part.as_str(), &p.instance) {
                ("node_used" | "node_util", Some(instance)) => (false, node_of(instance)),
                ("job_alloc" | "job_reserved" | "job_worst" | "job_util", _) => {
                    (true, p.job.clone().unwrap_or_else(|| NO_JOB.to_string()))
                }
                _ => continue,
            };
            let points = grouped.entry((job, name, p.part.as_str())).or_default();
            for &(t, v) in &p.points {
                if t < at && v.is_finite() {
                    points.entry(t).or_default().push(v);
                    from = Some(from.map_or(t, |f| f.min(t)));
                }
            }
        }
        let step = HISTORY_STEP_S * 1000;
        for ((job, name, part), points) in grouped {
            let target = if job {
                let charts = self.jobs.entry(name).or_insert_with(JobCharts::new);
                match part {
                    "job_alloc" => &mut charts.allocated,
                    "job_reserved" => &mut charts.reserved,
                    "job_worst" => &mut charts.worst,
                    _ => &mut charts.util,
                }
            } else {
                let charts = self.nodes.entry(name).or_insert_with(NodeCharts::new);
                if part == "node_used" {
                    &mut charts.used
                } else {
                    &mut charts.util
                }
            };
            // A series holds readings in time order: the past goes into a new one, and
            // what the refreshes recorded is replayed after it.
            let recorded = std::mem::replace(target, series());
            let series = target;
            let mut previous: Option<u64> = None;
            for (t, values) in points {
                if let Some(p) = previous
                    && t > p + step + step / 2
                {
                    series.push_gap(p + step);
                }
                let value = if part == "node_util" {
                    mean(&values)
                } else {
                    Some(values.iter().sum())
                };
                if let Some(v) = value {
                    series.push(t, v);
                }
                previous = Some(t);
            }
            // The past ends a step before now: what follows it is the refreshes'.
            if let Some(p) = previous
                && at > p + step + step / 2
            {
                series.push_gap(p + step);
            }
            for (t, value) in recorded.raw() {
                match value {
                    Some(v) => series.push(t, v),
                    None => series.push_gap(t),
                }
            }
        }
        if let Some(from) = from {
            self.past = Past::Prometheus(from);
        }
    }
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank<'a>(job: &'a str, read: bool, alloc: u64, gpu: (&'a str, u32)) -> RankNow<'a> {
        RankNow {
            job,
            read,
            allocated: Some(alloc),
            reserved: Some(alloc + 10),
            gpu,
        }
    }

    fn gpu<'a>(node: &'a str, gpu: (&'a str, u32), read: bool, util: f64) -> GpuNow<'a> {
        GpuNow {
            node,
            gpu,
            read,
            used: Some(100),
            util: Some(util),
        }
    }

    #[test]
    fn each_refresh_adds_the_sums_and_a_rank_not_read_breaks_the_job_instead_of_shrinking_it() {
        let mut c = Charts::default();
        let gpus = [
            gpu("na", ("a:1", 0), true, 40.0),
            gpu("na", ("a:1", 1), true, 60.0),
        ];
        let ranks = [
            rank("j", true, 5, ("a:1", 0)),
            rank("j", true, 7, ("a:1", 0)),
            rank("j", true, 9, ("a:1", 1)),
        ];
        c.record(1_000, &ranks, &gpus);
        assert_eq!(c.past, Past::Refreshes(1_000));
        let j = &c.jobs["j"];
        assert_eq!(j.allocated.last(), Some((1_000, 21.0)));
        assert_eq!(j.reserved.last(), Some((1_000, 51.0)));
        assert_eq!(j.worst.last(), Some((1_000, 19.0)));
        // GPU 0 once, though two ranks share it.
        assert_eq!(j.util.last(), Some((1_000, 50.0)));
        assert_eq!(c.nodes["na"].used.last(), Some((1_000, 200.0)));
        let ranks = [
            rank("j", true, 5, ("a:1", 0)),
            rank("j", false, 7, ("a:1", 0)),
            rank("j", true, 9, ("a:1", 1)),
        ];
        c.record(2_000, &ranks, &gpus);
        let j = &c.jobs["j"];
        assert!(j.allocated.in_gap() && j.util.in_gap());
        assert_eq!(j.allocated.last(), Some((1_000, 21.0)));
        // A job no longer listed is dropped.
        c.record(3_000, &[], &gpus);
        assert!(c.jobs.is_empty());
    }

    #[test]
    fn the_past_fills_before_the_first_refresh_with_breaks_where_steps_lack_points() {
        let mut c = Charts::default();
        let past = vec![
            ChartPast {
                part: "job_alloc".into(),
                job: Some("j".into()),
                instance: None,
                points: vec![(0, 1.0), (5_000, 2.0), (20_000, 3.0), (30_000, 4.0)],
            },
            ChartPast {
                part: "node_used".into(),
                job: None,
                instance: Some("a:1".into()),
                points: vec![(0, 10.0), (5_000, 10.0)],
            },
            ChartPast {
                part: "node_used".into(),
                job: None,
                instance: Some("a:2".into()),
                points: vec![(0, 5.0)],
            },
        ];
        // The refreshes' first reading came before the past (asked just after it).
        c.record(
            30_000,
            &[RankNow {
                job: "j",
                read: true,
                allocated: Some(8),
                reserved: Some(9),
                gpu: ("a:1", 0),
            }],
            &[],
        );
        c.take_past(&past, 31_000, |_| "na".to_string());
        assert_eq!(c.past, Past::Prometheus(0));
        let alloc = &c.jobs["j"].allocated;
        let raw: Vec<(u64, Option<f64>)> = alloc.raw().collect();
        // 10 s and 15 s have no point: a break at 10 s; the point at `at` is the refresh's.
        assert_eq!(
            raw,
            [
                (0, Some(1.0)),
                (5_000, Some(2.0)),
                (10_000, None),
                (20_000, Some(3.0)),
                (25_000, None),
                (30_000, Some(8.0))
            ]
        );
        let used: Vec<(u64, Option<f64>)> = c.nodes["na"].used.raw().collect();
        // Two targets of one node are summed step by step; after the last point, a break.
        assert_eq!(used, [(0, Some(15.0)), (5_000, Some(10.0)), (10_000, None)]);
    }
}
