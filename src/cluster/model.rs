//! The fleet as the view knows it: every GPU and process last seen, with when it was seen,
//! since when it is missing, and why its source is not answering. One thread owns it and
//! folds each fetch in (`ingest`); every output reads it.
//!
//! Last-good values stay, marked: a source that stops answering (Prometheus down, a target
//! refusing, hanging or sending garbage) leaves its figures as they were with their age; a
//! GPU or process that an answering source no longer lists is kept with "missing since"
//! until `FORGET_MS` has passed.

use super::charts::{Charts, GpuNow, NO_JOB, Past as ChartsPastFrom, RankNow};
use super::fetch::{Detail, Fetched, Origin};
use super::normalise::{GpuKey, GpuReading, ProcKey, ProcessReading, normalise, proc_key};
use super::prometheus::{ChartPast, HISTORY_SPAN_S, Past};
use crate::model::figures::{process, slot};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// What is missing longer than this is dropped.
pub const FORGET_MS: u64 = 15 * 60 * 1000;
/// How far back a peak's growth is measured.
const GROWTH_SPAN_MS: u64 = 5 * 60 * 1000;

/// A problem and since when it lasts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub text: String,
    pub since_ms: u64,
    /// When a refresh last found it: a problem no refresh finds any more is forgotten.
    pub last_ms: u64,
}

/// When an entity was last in an answer, and since when answers lack it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub seen_ms: u64,
    pub missing_since_ms: Option<u64>,
}

#[derive(Clone, Debug)]
pub struct TrackedGpu {
    pub reading: GpuReading,
    pub seen: Seen,
    /// Whether its single-node figures were asked for with this reading.
    pub detail: DetailState,
}

/// Whether a GPU's single-node figures (temperature, power, clocks, processes) were read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DetailState {
    /// Not asked: its node is not open (they are read from the next refresh once it is).
    NotAsked,
    /// Asked, and the query failed: why.
    Failed(String),
    /// Read: a figure still absent is one its exporter does not serve.
    Read,
}

#[derive(Clone, Debug)]
pub struct TrackedProcess {
    pub reading: ProcessReading,
    pub seen: Seen,
    /// (Unix ms, peak bytes), oldest first, over the last `GROWTH_SPAN_MS`.
    peaks: VecDeque<(u64, u64)>,
    /// When its OOM counter last rose, when known (`None`: before the view started, or
    /// not yet).
    pub oom_at_ms: Option<u64>,
}

impl TrackedProcess {
    /// How fast its peak grows, in bytes per second, over what the view has seen.
    pub fn peak_growth(&self) -> Option<f64> {
        let (t0, p0) = *self.peaks.front()?;
        let (t1, p1) = *self.peaks.back()?;
        (t1 >= t0 + 1000).then(|| (p1 as f64 - p0 as f64) / ((t1 - t0) as f64 / 1000.0))
    }
}

/// A scrape target and what is known about it.
#[derive(Clone, Debug, Default)]
pub struct Instance {
    pub node: String,
    pub problem: Option<Problem>,
    /// When the exporter itself sampled what it served last (vramscope's exporters).
    pub sampled_ms: Option<u64>,
}

/// The fleet.
#[derive(Debug, Default)]
pub struct Cluster {
    pub gpus: BTreeMap<GpuKey, TrackedGpu>,
    pub processes: BTreeMap<ProcKey, TrackedProcess>,
    pub instances: BTreeMap<String, Instance>,
    /// The Prometheus server's own problem, when it is the source.
    pub source_problem: Option<Problem>,
    /// The last fetch that brought anything.
    pub last_good_ms: Option<u64>,
    pub last_fetch_ms: Option<u64>,
    /// HTTP requests of the last fetch, and of all.
    pub last_requests: u32,
    pub requests: u64,
    pub fetches: u64,
    /// Each job's and node's history for the charts.
    pub charts: Charts,
}

impl Cluster {
    pub fn ingest(&mut self, fetched: Fetched) {
        let at = fetched.at_ms;
        self.fetches += 1;
        self.last_fetch_ms = Some(at);
        self.last_requests = fetched.requests;
        self.requests += u64::from(fetched.requests);
        // Which instances answered: all of them when Prometheus did.
        let mut answered: Option<Vec<String>> = Some(Vec::new());
        for origin in &fetched.origins {
            match origin {
                Origin::Prometheus { problem } => match problem {
                    Some(text) => {
                        keep_since(&mut self.source_problem, text, at);
                        answered = None;
                    }
                    None => self.source_problem = None,
                },
                Origin::Target { instance, problem } => {
                    let entry = self.instances.entry(instance.clone()).or_default();
                    match problem {
                        Some(text) => keep_since(&mut entry.problem, text, at),
                        None => {
                            entry.problem = None;
                            if let Some(list) = &mut answered {
                                list.push(instance.clone());
                            }
                        }
                    }
                }
            }
        }
        let prometheus = fetched
            .origins
            .iter()
            .any(|o| matches!(o, Origin::Prometheus { .. }));
        let Some(answered) = answered else {
            self.forget(at);
            self.charts.gap_all(at);
            return;
        };
        let answered_all = prometheus;
        let is_answered = |instance: &str| answered_all || answered.iter().any(|a| a == instance);
        let readings = normalise(&fetched.series);
        if !readings.gpus.is_empty() || !readings.processes.is_empty() || !answered.is_empty() {
            self.last_good_ms = Some(at);
        }
        for (instance, node) in &readings.nodes {
            let entry = self.instances.entry(instance.clone()).or_default();
            entry.node = node.clone();
            entry.sampled_ms = readings.sampled_ms.get(instance).copied();
            if prometheus {
                entry.problem = None;
            }
        }
        if prometheus {
            for (instance, node) in &fetched.down {
                let entry = self.instances.entry(instance.clone()).or_default();
                if entry.node.is_empty()
                    && let Some(node) = node
                {
                    entry.node = node.clone();
                }
                keep_since(
                    &mut entry.problem,
                    "its last scrape by Prometheus failed",
                    at,
                );
            }
            // A target that vanished from Prometheus altogether.
            for (instance, entry) in &mut self.instances {
                if !readings.nodes.contains_key(instance) && entry.problem.is_none() {
                    keep_since(&mut entry.problem, "no series in Prometheus", at);
                }
            }
        }
        for (key, g) in &mut self.gpus {
            if is_answered(&key.0) && !readings.gpus.contains_key(key) {
                g.seen.missing_since_ms.get_or_insert(at);
            }
        }
        for (key, p) in &mut self.processes {
            if is_answered(&key.0) && !readings.processes.contains_key(key) {
                p.seen.missing_since_ms.get_or_insert(at);
            }
        }
        for (key, reading) in readings.gpus {
            let seen = Seen {
                seen_ms: at,
                missing_since_ms: None,
            };
            let detail = match (&fetched.detail_problem, fetched.detail.covers(&key.0)) {
                (_, true) => DetailState::Read,
                (Some(why), false) if fetched.detail == Detail::None => {
                    DetailState::Failed(why.clone())
                }
                _ => DetailState::NotAsked,
            };
            self.gpus.insert(
                key,
                TrackedGpu {
                    reading,
                    seen,
                    detail,
                },
            );
        }
        for (key, reading) in readings.processes {
            self.update_process(key, reading, at);
        }
        if !fetched.history.is_empty() {
            let window_start = at.saturating_sub(HISTORY_SPAN_S * 1000);
            self.take_history(&fetched.history, window_start, at);
        }
        self.forget(at);
        self.record_charts(at);
    }

    /// Prometheus's range query for the charts' past, asked at `at` (just after the first
    /// refresh): one request more.
    pub fn take_chart_past(&mut self, past: Result<Vec<ChartPast>, String>, at: u64) {
        self.requests += 1;
        let past = match past {
            Ok(past) => past,
            Err(why) => {
                let since = match self.charts.past {
                    ChartsPastFrom::Refreshes(since) | ChartsPastFrom::Failed(since, _) => since,
                    _ => at,
                };
                self.charts.past = ChartsPastFrom::Failed(since, why);
                return;
            }
        };
        let instances = &self.instances;
        self.charts.take_past(&past, at, |instance| {
            instances
                .get(instance)
                .map(|e| e.node.clone())
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| super::normalise::host_of(instance))
        });
    }

    /// This refresh's figures onto the charts: a rank or GPU counts as read when this
    /// refresh listed it and its target has no problem.
    fn record_charts(&mut self, at: u64) {
        let ok = |instance: &str, seen: &Seen| {
            seen.seen_ms == at
                && seen.missing_since_ms.is_none()
                && self
                    .instances
                    .get(instance)
                    .is_none_or(|e| e.problem.is_none())
        };
        let ranks: Vec<RankNow> = self
            .processes
            .iter()
            .filter(|(_, p)| p.reading.rank.is_some() || p.reading.job.is_some())
            .map(|((instance, gpu, _), p)| RankNow {
                job: p.reading.job.as_deref().unwrap_or(NO_JOB),
                read: ok(instance, &p.seen),
                allocated: p.reading.allocated,
                reserved: p.reading.reserved,
                gpu: (instance.as_str(), *gpu),
            })
            .collect();
        let gpus: Vec<GpuNow> = self
            .gpus
            .iter()
            .map(|((instance, gpu), g)| GpuNow {
                node: g.reading.node.as_str(),
                gpu: (instance.as_str(), *gpu),
                read: ok(instance, &g.seen) && !g.reading.stale && !g.reading.lost,
                used: g.reading.used_bytes,
                util: g.reading.util_percent,
            })
            .collect();
        self.charts.record(at, &ranks, &gpus);
    }

    fn update_process(&mut self, key: ProcKey, reading: ProcessReading, at: u64) {
        let seen = Seen {
            seen_ms: at,
            missing_since_ms: None,
        };
        match self.processes.get_mut(&key) {
            Some(p) => {
                if let (Some(before), Some(now)) = (p.reading.ooms, reading.ooms)
                    && now > before
                {
                    p.oom_at_ms = Some(at);
                }
                if p.reading.ooms.is_none() && reading.ooms.is_some_and(|n| n > 0) {
                    p.oom_at_ms = Some(at);
                }
                if let Some(peak) = reading.peak {
                    push_peak(&mut p.peaks, at, peak);
                }
                p.reading = reading;
                p.seen = seen;
            }
            None => {
                let mut peaks = VecDeque::new();
                if let Some(peak) = reading.peak {
                    peaks.push_back((at, peak));
                }
                self.processes.insert(
                    key,
                    TrackedProcess {
                        reading,
                        seen,
                        peaks,
                        oom_at_ms: None,
                    },
                );
            }
        }
    }

    /// The range query's past: older peaks for the growth, and when each OOM counter last
    /// rose. A counter above what the past shows rose just now (after the past's last point).
    fn take_history(&mut self, history: &[Past], window_start: u64, at: u64) {
        let mut known = BTreeSet::new();
        let mut last_counts: BTreeMap<ProcKey, f64> = BTreeMap::new();
        for past in history {
            let Some(key) = proc_key(&past.series) else {
                continue;
            };
            let Some(p) = self.processes.get_mut(&key) else {
                continue;
            };
            known.insert(key.clone());
            let name = Some(past.series.name.as_str());
            match name {
                _ if name == process::TRUE_PEAK.family => {
                    let first = p.peaks.front().map(|f| f.0);
                    let mut older: VecDeque<(u64, u64)> = past
                        .points
                        .iter()
                        .filter(|(t, v)| v.is_finite() && *v >= 0.0 && first.is_none_or(|f| *t < f))
                        .map(|(t, v)| (*t, v.round() as u64))
                        .collect();
                    older.extend(p.peaks.drain(..));
                    p.peaks = older;
                }
                _ if name == slot::OOMS.family => {
                    // A counter that appears during the window with OOMs already counted
                    // (a writer that publishes no count until its first OOM) rose then.
                    let appeared = past
                        .points
                        .first()
                        .filter(|(t, v)| *v > 0.0 && *t > window_start);
                    let mut last_rise = appeared.map(|(t, _)| *t);
                    for pair in past.points.windows(2) {
                        if pair[1].1 > pair[0].1 {
                            last_rise = Some(pair[1].0);
                        }
                    }
                    if last_rise.is_some() {
                        p.oom_at_ms = last_rise;
                    }
                    if let Some((_, v)) = past.points.last() {
                        last_counts.insert(key, *v);
                    }
                }
                _ => {}
            }
        }
        for key in known {
            let Some(p) = self.processes.get_mut(&key) else {
                continue;
            };
            let now = p.reading.ooms.unwrap_or(0) as f64;
            if now > last_counts.get(&key).copied().unwrap_or(0.0) {
                p.oom_at_ms = Some(at);
            }
        }
    }

    /// Drops what has been missing, or unseen, for longer than `FORGET_MS`.
    fn forget(&mut self, now: u64) {
        let keep = |seen: &Seen| {
            let since = seen.missing_since_ms.unwrap_or(seen.seen_ms);
            now.saturating_sub(since) <= FORGET_MS
        };
        self.gpus.retain(|_, g| keep(&g.seen));
        self.processes.retain(|_, p| keep(&p.seen));
        for p in self.processes.values_mut() {
            while p
                .peaks
                .front()
                .is_some_and(|(t, _)| now.saturating_sub(*t) > GROWTH_SPAN_MS)
                && p.peaks.len() > 1
            {
                p.peaks.pop_front();
            }
        }
        let mut listed: BTreeSet<&str> = self.gpus.keys().map(|k| k.0.as_str()).collect();
        listed.extend(self.processes.keys().map(|k| k.0.as_str()));
        self.instances.retain(|instance, entry| {
            entry
                .problem
                .as_ref()
                .is_some_and(|p| now.saturating_sub(p.last_ms) <= FORGET_MS)
                || listed.contains(instance.as_str())
        });
    }
}

fn push_peak(peaks: &mut VecDeque<(u64, u64)>, at: u64, peak: u64) {
    if peaks.back().is_some_and(|(t, _)| *t >= at) {
        return;
    }
    peaks.push_back((at, peak));
}

/// Sets `slot` to `text` as found at `at`; its start stays that of the first problem in a
/// row, whatever the text has become since.
fn keep_since(slot: &mut Option<Problem>, text: &str, at: u64) {
    match slot {
        Some(p) => {
            if p.text != text {
                p.text = text.to_string();
            }
            p.last_ms = at;
        }
        None => {
            *slot = Some(Problem {
                text: text.to_string(),
                since_ms: at,
                last_ms: at,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::series::Series;

    fn s(name: &str, labels: &[(&str, &str)], value: f64, instance: &str) -> Series {
        let labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Series::new(name, labels, value, instance)
    }

    fn rank(instance: &str, host: &str, peak: f64, ooms: Option<f64>) -> Vec<Series> {
        let l = [
            ("gpu", "0"),
            ("pid", "7"),
            ("rank", "1"),
            ("job_id", "j"),
            ("hostname", host),
        ];
        let mut out = vec![
            s(
                "DCGM_FI_DEV_FB_USED",
                &[("gpu", "0"), ("hostname", host)],
                10.0,
                instance,
            ),
            s("vramscope_process_allocator_peak_bytes", &l, peak, instance),
        ];
        out.extend(ooms.map(|n| s("vramscope_process_allocator_ooms_total", &l, n, instance)));
        out
    }

    fn targets(at_ms: u64, answers: Vec<(&str, Result<Vec<Series>, &str>)>) -> Fetched {
        let mut f = Fetched {
            at_ms,
            ..Fetched::default()
        };
        for (instance, answer) in answers {
            let problem = match answer {
                Ok(series) => {
                    f.series.extend(series);
                    None
                }
                Err(why) => Some(why.to_string()),
            };
            f.origins.push(Origin::Target {
                instance: instance.into(),
                problem,
            });
        }
        f
    }

    #[test]
    fn a_target_that_fails_keeps_its_last_figures_with_its_problem_since_first_failure() {
        let mut c = Cluster::default();
        c.ingest(targets(
            1_000,
            vec![
                ("a:1", Ok(rank("a:1", "na", 5.0, Some(0.0)))),
                ("b:1", Ok(rank("b:1", "nb", 6.0, None))),
            ],
        ));
        assert_eq!(c.processes.len(), 2);
        c.ingest(targets(
            2_000,
            vec![
                ("a:1", Err("connection refused")),
                ("b:1", Ok(rank("b:1", "nb", 6.0, None))),
            ],
        ));
        c.ingest(targets(
            3_000,
            vec![("a:1", Err("no answer within 2 s")), ("b:1", Ok(vec![]))],
        ));
        let a = &c.processes[&("a:1".to_string(), 0, 7)];
        assert_eq!(a.seen.seen_ms, 1_000);
        assert_eq!(a.seen.missing_since_ms, None);
        assert_eq!(a.reading.peak, Some(5));
        let problem = c.instances["a:1"].problem.clone().unwrap();
        assert_eq!(
            (problem.text.as_str(), problem.since_ms),
            ("no answer within 2 s", 2_000)
        );
        // b answered without its process: missing since then, last figures kept.
        let b = &c.processes[&("b:1".to_string(), 0, 7)];
        assert_eq!(b.seen.missing_since_ms, Some(3_000));
        assert_eq!(b.reading.peak, Some(6));
        // Forgotten after FORGET_MS.
        c.ingest(targets(
            3_000 + FORGET_MS + 1,
            vec![("a:1", Err("x")), ("b:1", Ok(vec![]))],
        ));
        assert!(c.processes.is_empty());
    }

    #[test]
    fn a_rising_oom_counter_is_timed_and_the_peak_growth_measured() {
        let mut c = Cluster::default();
        c.ingest(targets(
            10_000,
            vec![("a:1", Ok(rank("a:1", "na", 1e9, None)))],
        ));
        let key = ("a:1".to_string(), 0, 7);
        assert_eq!(c.processes[&key].peak_growth(), None);
        c.ingest(targets(
            12_000,
            vec![("a:1", Ok(rank("a:1", "na", 1.2e9, Some(1.0))))],
        ));
        let p = &c.processes[&key];
        assert_eq!(p.oom_at_ms, Some(12_000));
        assert_eq!(p.peak_growth(), Some(1e8));
        c.ingest(targets(
            13_000,
            vec![("a:1", Ok(rank("a:1", "na", 1.2e9, Some(1.0))))],
        ));
        assert_eq!(c.processes[&key].oom_at_ms, Some(12_000));
    }

    #[test]
    fn prometheus_down_marks_everything_and_its_history_times_past_ooms() {
        let mut c = Cluster::default();
        let mut f = Fetched {
            at_ms: 400_000,
            series: rank("a:1", "na", 2e9, Some(2.0)),
            origins: vec![Origin::Prometheus { problem: None }],
            ..Fetched::default()
        };
        let labels = rank("a:1", "na", 0.0, Some(0.0));
        f.history = vec![
            Past {
                series: labels[2].clone(),
                points: vec![
                    (100_000, 0.0),
                    (200_000, 1.0),
                    (300_000, 2.0),
                    (400_000, 2.0),
                ],
            },
            Past {
                series: labels[1].clone(),
                points: vec![(100_000, 1e9), (300_000, 1.5e9)],
            },
        ];
        c.ingest(f);
        let key = ("a:1".to_string(), 0, 7);
        assert_eq!(c.processes[&key].oom_at_ms, Some(300_000));
        assert_eq!(c.processes[&key].peak_growth(), Some(1e9 / 300.0));
        c.ingest(Fetched {
            at_ms: 401_000,
            origins: vec![Origin::Prometheus {
                problem: Some("connection refused".into()),
            }],
            ..Fetched::default()
        });
        assert_eq!(c.source_problem.as_ref().map(|p| p.since_ms), Some(401_000));
        assert_eq!(c.last_good_ms, Some(400_000));
        assert_eq!(c.processes[&key].seen.seen_ms, 400_000);
    }
}
