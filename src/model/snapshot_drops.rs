//! The memory snapshots a writer deleted to keep its bound on disk (docs/channel-v1.md §8:
//! it keeps its newest few and counts what it deleted in each announcement's `a5`), named:
//! the files gone are the oldest it wrote, so they are the oldest announcements this reader
//! saw, once the dumps made before it began watching are set aside. Those, it never saw
//! announced, it cannot name; it counts them.

use super::absent::Reading;
use super::held_sites::SnapshotName;
use serde::Serialize;
use std::collections::VecDeque;

/// Names kept per writer: the newest announcements; an older deleted one is counted.
const KEPT_NAMES: usize = 32;

/// What the fold follows of a writer's own snapshot announcements.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SnapshotDrops {
    /// The names announced, oldest first (the newest `KEPT_NAMES`).
    names: VecDeque<String>,
    /// Announcements seen in all.
    seen: u64,
    /// The writer's sequence number of the first one seen: the dumps before it were made
    /// before this reader watched (or failed, which the reader cannot tell apart; either
    /// way they are not named).
    first_seq: Option<u64>,
    /// The writer's count of deleted files, from its announcements.
    deleted: u64,
}

/// The deleted snapshots, as every output gives them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Dropped {
    /// How many the writer deleted, in all.
    pub total: u64,
    /// The names of those this reader saw announced, oldest first.
    pub names: Vec<String>,
    /// Deleted ones it cannot name: announced before it watched the channel.
    pub unnamed: u64,
}

impl SnapshotDrops {
    /// Folds one announcement: `deleted` is its `a5`, absent for a snapshot the program
    /// dumped itself (which the writer never deletes).
    pub fn announced(&mut self, name: &str, deleted: &Reading<u64>) {
        let Ok(deleted) = deleted else {
            return;
        };
        if self.first_seq.is_none() {
            self.first_seq = Some(SnapshotName::parse(name).map_or(1, |n| n.seq.max(1)));
        }
        self.seen += 1;
        if self.names.len() == KEPT_NAMES {
            self.names.pop_front();
        }
        self.names.push_back(name.to_string());
        self.deleted = self.deleted.max(*deleted);
    }

    /// The deleted ones; `None` before any announcement of the writer's own (nothing told).
    pub fn dropped(&self) -> Option<Dropped> {
        self.first_seq?;
        let before = self.first_seq.map_or(0, |s| s - 1);
        // The oldest `deleted` dumps are gone: `before` of them were never seen here.
        let seen_gone = self.seen.min(self.deleted.saturating_sub(before));
        let forgotten = self.seen - self.names.len() as u64;
        let named = usize::try_from(seen_gone.saturating_sub(forgotten)).unwrap_or(usize::MAX);
        let names: Vec<String> = self.names.iter().take(named).cloned().collect();
        Some(Dropped {
            total: self.deleted,
            unnamed: self.deleted - names.len() as u64,
            names,
        })
    }
}

impl Dropped {
    /// `the writer deleted 3 older snapshots (it keeps its newest few): a, b; 1 more
    /// announced before this reader watched`; `None` when it deleted none.
    pub fn words(&self) -> Option<String> {
        if self.total == 0 {
            return None;
        }
        let plural = if self.total == 1 { "" } else { "s" };
        let mut text = format!(
            "the writer deleted {} older snapshot{plural} (it keeps its newest few)",
            self.total
        );
        if !self.names.is_empty() {
            text.push_str(": ");
            text.push_str(&self.names.join(", "));
        }
        if self.unnamed > 0 {
            let sep = if self.names.is_empty() { ": " } else { "; " };
            let more = if self.names.is_empty() { "" } else { " more" };
            text.push_str(&format!(
                "{sep}{}{more} announced before this reader watched, unnamed",
                self.unnamed
            ));
        }
        Some(text)
    }
}

impl Dropped {
    /// `words` for a narrow pane: each name without its channel's part and `.pickle`
    /// (`snap-1-peak`: the file `<channel>.snap-1-peak.pickle` beside the channel).
    pub fn short_words(&self) -> Option<String> {
        if self.total == 0 {
            return None;
        }
        let short: Vec<String> = self
            .names
            .iter()
            .map(|n| match SnapshotName::parse(n) {
                Some(p) => format!("snap-{}-{}", p.seq, p.reason),
                None => n.clone(),
            })
            .collect();
        let text = if short.is_empty() {
            format!(
                "deleted by the writer (keeps its newest few): {}, announced before this monitor watched, unnamed",
                self.total
            )
        } else if self.unnamed > 0 {
            format!(
                "deleted by the writer (keeps its newest few): {}, +{} unnamed",
                short.join(", "),
                self.unnamed
            )
        } else {
            format!(
                "deleted by the writer (keeps its newest few): {}",
                short.join(", ")
            )
        };
        Some(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(seq: u64) -> String {
        format!("7-9.vsc.snap-{seq}-peak.pickle")
    }

    #[test]
    fn the_oldest_announced_are_the_deleted_and_those_never_seen_are_counted() {
        let mut drops = SnapshotDrops::default();
        assert_eq!(drops.dropped(), None);
        // A program's own dump (no count) says nothing of the writer's.
        drops.announced("/tmp/mine.pickle", &Err(super::super::Absent::NotAvailable));
        assert_eq!(drops.dropped(), None);
        // Seen from the writer's third dump on, keeping 3: dumps 1 and 2 were never seen.
        for (seq, deleted) in [(3, 0), (4, 1), (5, 2), (6, 3), (7, 4)] {
            drops.announced(&name(seq), &Ok(deleted));
        }
        let d = drops.dropped().unwrap();
        assert_eq!((d.total, d.unnamed), (4, 2));
        assert_eq!(d.names, [name(3), name(4)]);
        let words = d.words().unwrap();
        assert!(
            words.starts_with("the writer deleted 4 older snapshots (it keeps its newest few): 7-9.vsc.snap-3-peak.pickle, 7-9.vsc.snap-4-peak.pickle; 2 more announced before"),
            "{words}"
        );
        assert_eq!(
            d.short_words().unwrap(),
            "deleted by the writer (keeps its newest few): snap-3-peak, snap-4-peak, +2 unnamed"
        );
        // Nothing deleted: no words.
        let mut fresh = SnapshotDrops::default();
        fresh.announced(&name(1), &Ok(0));
        assert_eq!(fresh.dropped().unwrap().words(), None);
    }

    #[test]
    fn names_beyond_those_kept_are_counted_not_lost() {
        let mut drops = SnapshotDrops::default();
        for seq in 1..=100u64 {
            drops.announced(&name(seq), &Ok(seq.saturating_sub(3)));
        }
        let d = drops.dropped().unwrap();
        assert_eq!(d.total, 97);
        // The newest names kept, of which the oldest 29 are among the deleted.
        assert_eq!(d.names.len(), 29);
        assert_eq!(d.names[0], name(69));
        assert_eq!(d.names[28], name(97));
        assert_eq!(d.unnamed, 97 - 29);
    }
}
