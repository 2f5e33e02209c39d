//! Which processes each tick exports. An exited process stays for a grace period, so that
//! the first scrape after it ended still sees its final OOM count, peak and step; then it
//! leaves, which keeps the number of series bounded. A new process waits a moment for the
//! host's facts (user, command), so that its series start with their final labels rather
//! than changing label set one tick later.

use super::processes::ProcessEntry;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// How long a new process may wait for its host facts before it is exported without them.
const SETTLE_MS: u64 = 3_000;
/// Exited processes kept at most, whatever the grace period: a machine starting thousands
/// of short GPU processes a minute must not grow the output without bound.
const MAX_EXITED: usize = 1024;

type Key = (String, u32);

#[derive(Debug)]
struct Kept {
    entry: ProcessEntry,
    first_seen_ms: u64,
    last_seen_ms: u64,
}

/// Processes seen recently, running or not.
#[derive(Debug)]
pub struct Retention {
    grace_ms: u64,
    kept: HashMap<Key, Kept>,
}

impl Retention {
    pub fn new(grace: Duration) -> Self {
        Self {
            grace_ms: u64::try_from(grace.as_millis()).unwrap_or(u64::MAX),
            kept: HashMap::new(),
        }
    }

    /// Takes the processes listed now and returns those to export, in GPU then pid order.
    /// On GPUs in `unreadable` (keyed like `ProcessLabels::uuid`) the process list could not
    /// be read this tick: their processes are carried as last seen, not taken for exited.
    pub fn update(
        &mut self,
        current: Vec<ProcessEntry>,
        unreadable: &[String],
        now_ms: u64,
    ) -> Vec<ProcessEntry> {
        let mut seen = HashSet::new();
        for entry in current {
            let key = entry.key();
            if !entry.running {
                self.refresh_exited(entry, unreadable);
                continue;
            }
            seen.insert(key.clone());
            match self.kept.get_mut(&key) {
                Some(kept) => {
                    // The same pid back after it had gone: a new process, settling anew.
                    if !kept.entry.running {
                        kept.first_seen_ms = now_ms;
                    }
                    kept.entry = entry;
                    kept.last_seen_ms = now_ms;
                }
                None => {
                    self.kept.insert(
                        key,
                        Kept {
                            entry,
                            first_seen_ms: now_ms,
                            last_seen_ms: now_ms,
                        },
                    );
                }
            }
        }
        let grace_ms = self.grace_ms;
        self.kept
            .retain(|_, k| now_ms.saturating_sub(k.last_seen_ms) <= grace_ms);
        let mut out = Vec::new();
        for (key, kept) in &mut self.kept {
            if seen.contains(key) {
                let settled = now_ms.saturating_sub(kept.first_seen_ms) >= SETTLE_MS;
                if kept.entry.host_known || settled {
                    out.push(kept.entry.clone());
                }
            } else if kept.entry.running && unreadable.contains(&key.0) {
                out.push(kept.entry.clone());
            } else {
                if kept.entry.running {
                    kept.entry = kept.entry.clone().exited();
                }
                out.push(kept.entry.clone());
            }
        }
        self.bound_exited(&mut out);
        out.sort_by_key(|e| (e.labels.gpu, e.labels.pid));
        out
    }

    /// The last figures of a process no longer listed, as the snapshot joined them this
    /// tick: an OOM its writer reported as it died may arrive after NVML stopped listing
    /// it. They refresh the kept entry only; its grace runs from when it was last listed,
    /// and one not kept (gone before this server saw it, or past its grace) stays out.
    fn refresh_exited(&mut self, entry: ProcessEntry, unreadable: &[String]) {
        let key = entry.key();
        // An unreadable list is not an exit (`update`).
        if unreadable.contains(&key.0) {
            return;
        }
        let Some(kept) = self.kept.get_mut(&key) else {
            return;
        };
        let labels = kept.entry.labels.filled_from(&entry.labels);
        let allocator = entry.allocator.or(kept.entry.allocator);
        kept.entry = ProcessEntry {
            labels,
            allocator,
            ..entry
        };
    }

    /// Forgets the longest-gone exited processes beyond `MAX_EXITED`.
    fn bound_exited(&mut self, out: &mut Vec<ProcessEntry>) {
        let mut exited: Vec<(u64, Key)> = self
            .kept
            .iter()
            .filter(|(_, k)| !k.entry.running)
            .map(|(key, k)| (k.last_seen_ms, key.clone()))
            .collect();
        if exited.len() <= MAX_EXITED {
            return;
        }
        exited.sort();
        let dropped: HashSet<Key> = exited[..exited.len() - MAX_EXITED]
            .iter()
            .map(|(_, key)| key.clone())
            .collect();
        self.kept.retain(|key, _| !dropped.contains(key));
        out.retain(|e| e.running || !dropped.contains(&e.key()));
    }

    /// How many processes are remembered, running or exited.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.kept.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::processes::{AllocatorFigures, ProcessLabels};

    fn entry(pid: u32, host_known: bool) -> ProcessEntry {
        ProcessEntry {
            labels: ProcessLabels {
                gpu: 0,
                uuid: "GPU-0".into(),
                pid,
                user: host_known.then(|| "alice".into()),
                command: host_known.then(|| "python train.py".into()),
                pod: None,
                namespace: None,
                container: None,
                rank: None,
                local_rank: None,
                job: None,
            },
            running: true,
            host_known,
            used_bytes: Some(100),
            sm_util_percent: None,
            host_rss_bytes: None,
            allocator: Some(AllocatorFigures {
                allocated: Some(10),
                ooms: Some(2),
                ..AllocatorFigures::default()
            }),
        }
    }

    fn pids(entries: &[ProcessEntry]) -> Vec<(u32, bool)> {
        entries.iter().map(|e| (e.labels.pid, e.running)).collect()
    }

    #[test]
    fn an_exited_process_stays_for_the_grace_period_with_its_final_counts() {
        let mut r = Retention::new(Duration::from_secs(60));
        let out = r.update(vec![entry(1, true), entry(2, true)], &[], 1_000);
        assert_eq!(pids(&out), [(1, true), (2, true)]);
        let out = r.update(vec![entry(1, true)], &[], 2_000);
        assert_eq!(pids(&out), [(1, true), (2, false)]);
        let gone = &out[1];
        assert_eq!(gone.used_bytes, None);
        assert_eq!(gone.allocator.unwrap().allocated, None);
        assert_eq!(gone.allocator.unwrap().ooms, Some(2));
        // Last listed at 1 s: kept until 61 s.
        let out = r.update(vec![entry(1, true)], &[], 61_000);
        assert_eq!(pids(&out), [(1, true), (2, false)]);
        let out = r.update(vec![entry(1, true)], &[], 61_001);
        assert_eq!(pids(&out), [(1, true)]);
        assert_eq!(r.len(), 1);
    }

    #[test]
    fn an_exited_rows_last_figures_refresh_the_kept_entry_but_not_its_grace() {
        let mut r = Retention::new(Duration::from_secs(60));
        let mut listed = entry(1, true);
        listed.allocator = None;
        r.update(vec![listed], &[], 1_000);
        // NVML lists it no more; its writer's OOM and rank arrive with its exited row.
        let mut gone = entry(1, true);
        gone.running = false;
        gone.labels.rank = Some(3);
        gone.allocator = Some(AllocatorFigures {
            ooms: Some(1),
            ..AllocatorFigures::default()
        });
        let out = r.update(vec![gone.clone()], &[], 2_000);
        assert_eq!(pids(&out), [(1, false)]);
        assert_eq!(out[0].labels.rank, Some(3));
        assert_eq!(out[0].allocator.unwrap().ooms, Some(1));
        // Its grace runs from when it was last listed, however long its row is kept.
        assert_eq!(
            pids(&r.update(vec![gone.clone()], &[], 61_000)),
            [(1, false)]
        );
        assert!(r.update(vec![gone.clone()], &[], 61_001).is_empty());
        // One this server never saw running is not exported at all.
        let mut fresh = Retention::new(Duration::from_secs(60));
        assert!(fresh.update(vec![gone], &[], 0).is_empty());
    }

    #[test]
    fn a_new_process_waits_for_its_host_facts_but_not_for_ever() {
        let mut r = Retention::new(Duration::from_secs(60));
        assert!(r.update(vec![entry(7, false)], &[], 0).is_empty());
        assert_eq!(pids(&r.update(vec![entry(7, true)], &[], 500)), [(7, true)]);
        let both = || vec![entry(7, true), entry(8, false)];
        assert_eq!(pids(&r.update(both(), &[], 1_000)), [(7, true)]);
        assert_eq!(
            pids(&r.update(both(), &[], 1_000 + SETTLE_MS)),
            [(7, true), (8, true)]
        );
    }

    #[test]
    fn an_unreadable_process_list_is_not_an_exit() {
        let mut r = Retention::new(Duration::from_secs(60));
        r.update(vec![entry(1, true)], &[], 0);
        let out = r.update(vec![], &["GPU-0".to_string()], 1_000);
        assert_eq!(pids(&out), [(1, true)]);
        assert_eq!(out[0].used_bytes, Some(100));
        let out = r.update(vec![], &[], 2_000);
        assert_eq!(pids(&out), [(1, false)]);
    }

    #[test]
    fn exited_processes_are_bounded() {
        let mut r = Retention::new(Duration::from_secs(3600));
        let many: Vec<ProcessEntry> = (0..MAX_EXITED as u32 + 10)
            .map(|p| entry(p, true))
            .collect();
        r.update(many, &[], 0);
        let out = r.update(vec![], &[], 1);
        assert_eq!(out.len(), MAX_EXITED);
        assert_eq!(r.len(), MAX_EXITED);
        assert!(!r.is_empty());
    }
}
