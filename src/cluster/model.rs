//! The fleet as the view knows it: every GPU and process last seen, with when it was seen,
//! since when it is missing, and why its source is not answering. One thread owns it and
//! folds each fetch in (`ingest`); every output reads it.
//!
//! Last-good values stay, marked: a source that stops answering (Prometheus down, a target
//! refusing, hanging or sending garbage) leaves its figures as they were with their age; a
//! GPU or process that an answering source no longer lists is kept with "missing since"
//! until `FORGET_MS` has passed.

use super::fetch::{Fetched, Origin};
use super::normalise::{
    GpuKey, GpuReading, ProcKey, ProcessReading, normalise, proc_key,
};
use super::prometheus::{HISTORY_SPAN_S, Past};
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
                Origin::Prometheus { problem } => {
                    match problem {
                        Some(text) => {
                            keep_since(&mut self.source_problem, text, at);
                            answered = None;
                        }
                        None => self.source_problem = None,
                    }
                }
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
            for instance in &fetched.down {
                if let Some(entry) = self.instances.get_mut(instance) {
                    keep_since(&mut entry.problem, "its last scrape by Prometheus failed", at);
                }
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
            self.gpus.insert(key, TrackedGpu { reading, seen });
        }
        for (key, reading) in readings.processes {
            self.update_process(key, reading, at);
        }
        if !fetched.history.is_empty() {
            let window_start = at.saturating_sub(HISTORY_SPAN_S * 1000);
            self.take_history(&fetched.history, window_start, at);
        }
        self.forget(at);
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
            match past.series.name.as_str() {
                "vramscope_process_allocator_peak_bytes" => {
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
                "vramscope_process_allocator_ooms_total" => {
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
                .is_some_and(|p| now.saturating_sub(p.since_ms) <= FORGET_MS)
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

/// Sets `slot` to `text` since `at`, keeping the older start when the text is unchanged.
fn keep_since(slot: &mut Option<Problem>, text: &str, at: u64) {
    match slot {
        Some(p) if p.text == text => {}
        Some(p) => p.text = text.to_string(),
        None => {
            *slot = Some(Problem {
                text: text.to_string(),
                since_ms: at,
            });
        }
    }
}
