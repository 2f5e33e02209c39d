//! Which processes each tick exports. An exited process stays for a grace period, so that
//! the first scrape after it ended still sees its final OOM count, peak and step; then it
//! leaves, which keeps the number of series bounded. Exited processes are the snapshot's
//! exited rows (the monitor remembers them, for at least the grace: `Monitor::remembering`),
//! so nothing here remembers them a second time. What is kept here is about running ones:
//! a new process waits a moment for the host's facts (user, command), so that its series
//! start with their final labels rather than changing label set one tick later, and one on
//! a GPU whose process list could not be read this tick is carried as last seen.

use super::processes::ProcessEntry;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// How long a new process may wait for its host facts before it is exported without them.
const SETTLE_MS: u64 = 3_000;
/// Exited processes exported at most, whatever the grace period: a machine starting
/// thousands of short GPU processes a minute must not grow the output without bound.
const MAX_EXITED: usize = 1024;

type Key = (String, u32);

#[derive(Debug)]
struct Kept {
    entry: ProcessEntry,
    first_seen_ms: u64,
    last_seen_ms: u64,
}

/// Running processes seen recently, and the grace period exited ones are exported for.
#[derive(Debug)]
pub struct Retention {
    grace_ms: u64,
    running: HashMap<Key, Kept>,
}

impl Retention {
    pub fn new(grace: Duration) -> Self {
        Self {
            grace_ms: Self::grace_ms(grace),
            running: HashMap::new(),
        }
    }

    /// The grace period in ms, which the monitor must remember exited processes for.
    pub fn grace_ms(grace: Duration) -> u64 {
        u64::try_from(grace.as_millis()).unwrap_or(u64::MAX)
    }

    /// Takes the processes of this tick's snapshot, listed and exited
    /// (`processes::from_snapshot`), and returns those to export, in GPU then pid order.
    /// On GPUs in `unreadable` (keyed like `ProcessLabels::uuid`) the process list could
    /// not be read this tick: their processes are carried as last seen, not taken for
    /// exited.
    pub fn update(
        &mut self,
        current: Vec<ProcessEntry>,
        unreadable: &[String],
        now_ms: u64,
    ) -> Vec<ProcessEntry> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        let mut exited = Vec::new();
        for entry in current {
            let key = entry.key();
            if !entry.running {
                // An unreadable list is not an exit; past its grace it is no longer shown.
                let in_grace = entry
                    .last_listed_ms
                    .is_some_and(|at| now_ms.saturating_sub(at) <= self.grace_ms);
                if in_grace && !unreadable.contains(&key.0) {
                    exited.push(entry);
                }
                continue;
            }
            seen.insert(key.clone());
            let kept = self.running.entry(key).or_insert_with(|| Kept {
                entry: entry.clone(),
                first_seen_ms: now_ms,
                last_seen_ms: now_ms,
            });
            kept.entry = entry;
            kept.last_seen_ms = now_ms;
        }
        let grace_ms = self.grace_ms;
        // Off the list where the list was read: exited (its exited row speaks for it) or
        // gone from the GPU; either way a new process if the pid comes back.
        self.running.retain(|key, k| {
            seen.contains(key)
                || (unreadable.contains(&key.0)
                    && now_ms.saturating_sub(k.last_seen_ms) <= grace_ms)
        });
        for (key, kept) in &self.running {
            let settled = now_ms.saturating_sub(kept.first_seen_ms) >= SETTLE_MS;
            if !seen.contains(key) || kept.entry.host_known || settled {
                out.push(kept.entry.clone());
            }
        }
        // The longest gone first out beyond the bound.
        exited.sort_by_key(|e| std::cmp::Reverse(e.last_listed_ms));
        exited.truncate(MAX_EXITED);
        let running: HashSet<Key> = out.iter().map(ProcessEntry::key).collect();
        out.extend(exited.into_iter().filter(|e| !running.contains(&e.key())));
        out.sort_by_key(|e| (e.labels.gpu, e.labels.pid));
        out
    }

    /// How many running processes are remembered.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.running.len()
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
                mig_profile: None,
                mig_gi: None,
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
            last_listed_ms: None,
        }
    }

    /// The snapshot's exited row of `pid`, last listed at `at_ms`.
    fn gone(pid: u32, at_ms: u64) -> ProcessEntry {
        ProcessEntry {
            last_listed_ms: Some(at_ms),
            ..entry(pid, true).exited()
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
        let out = r.update(vec![entry(1, true), gone(2, 1_000)], &[], 2_000);
        assert_eq!(pids(&out), [(1, true), (2, false)]);
        let exited = &out[1];
        assert_eq!(exited.used_bytes, None);
        assert_eq!(exited.allocator.unwrap().allocated, None);
        assert_eq!(exited.allocator.unwrap().ooms, Some(2));
        // Nothing of it is remembered here: the snapshot's row is the one memory.
        assert_eq!(r.len(), 1);
        // Last listed at 1 s: exported until 61 s.
        let out = r.update(vec![entry(1, true), gone(2, 1_000)], &[], 61_000);
        assert_eq!(pids(&out), [(1, true), (2, false)]);
        let out = r.update(vec![entry(1, true), gone(2, 1_000)], &[], 61_001);
        assert_eq!(pids(&out), [(1, true)]);
    }

    #[test]
    fn a_pid_back_after_it_had_gone_is_a_new_process_settling_anew() {
        let mut r = Retention::new(Duration::from_secs(60));
        r.update(vec![entry(7, true)], &[], 0);
        r.update(vec![gone(7, 0)], &[], 1_000);
        assert_eq!(r.len(), 0);
        // Back without its host facts yet: it waits, as any new process does.
        assert!(r.update(vec![entry(7, false)], &[], 2_000).is_empty());
        assert_eq!(
            pids(&r.update(vec![entry(7, false)], &[], 2_000 + SETTLE_MS)),
            [(7, true)]
        );
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
        // The snapshot has no list for GPU-0: its process reads as exited there.
        let out = r.update(vec![gone(1, 0)], &["GPU-0".to_string()], 1_000);
        assert_eq!(pids(&out), [(1, true)]);
        assert_eq!(out[0].used_bytes, Some(100));
        let out = r.update(vec![gone(1, 0)], &[], 2_000);
        assert_eq!(pids(&out), [(1, false)]);
    }

    #[test]
    fn exited_processes_are_bounded_the_longest_gone_out_first() {
        let mut r = Retention::new(Duration::from_secs(3600));
        let many: Vec<ProcessEntry> = (0..MAX_EXITED as u32 + 10)
            .map(|p| gone(p, u64::from(p)))
            .collect();
        let out = r.update(many, &[], 5_000);
        assert_eq!(out.len(), MAX_EXITED);
        assert_eq!(out.first().map(|e| e.labels.pid), Some(10));
    }
}
