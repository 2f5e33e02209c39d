//! [`Lingering`]: state for entities that come and go (processes), kept for a
//! while after they were last seen so the UI can still show an exited
//! process and its peak, then dropped so churn cannot grow memory forever.

use std::collections::BTreeMap;

#[derive(Clone, Debug)]
struct Entry<V> {
    value: V,
    last_seen_ms: u64,
}

/// A keyed store where liveness is inferred from `touch` times rather than
/// explicit exit events, since a sampler only ever observes presence.
#[derive(Clone, Debug)]
pub struct Lingering<K, V> {
    // Ordered so that iteration (and thus on-screen order) is stable.
    entries: BTreeMap<K, Entry<V>>,
    linger_ms: u64,
    max_entries: usize,
}

impl<K: Ord + Clone, V> Default for Lingering<K, V> {
    fn default() -> Self {
        Lingering::new(Self::DEFAULT_LINGER_MS, Self::DEFAULT_MAX_ENTRIES)
    }
}

impl<K: Ord + Clone, V> Lingering<K, V> {
    pub const DEFAULT_LINGER_MS: u64 = 10 * 60 * 1000;
    pub const DEFAULT_MAX_ENTRIES: usize = 4096;

    /// `max_entries` below 1 is raised to 1 so `touch` always has a slot.
    pub fn new(linger_ms: u64, max_entries: usize) -> Self {
        Lingering {
            entries: BTreeMap::new(),
            linger_ms,
            max_entries: max_entries.max(1),
        }
    }

    /// Marks `key` as seen at `now_ms`, creating its state if new. A new key
    /// arriving at the cap displaces the longest-unseen entry.
    pub fn touch(&mut self, key: K, now_ms: u64) -> &mut V
    where
        V: Default,
    {
        if !self.entries.contains_key(&key) {
            while self.entries.len() >= self.max_entries {
                if !self.drop_stalest() {
                    break;
                }
            }
        }
        let entry = self.entries.entry(key).or_insert_with(|| Entry {
            value: V::default(),
            last_seen_ms: now_ms,
        });
        // A wall clock stepping back must not make a live key look older.
        entry.last_seen_ms = entry.last_seen_ms.max(now_ms);
        &mut entry.value
    }

    fn drop_stalest(&mut self) -> bool {
        let stalest = self
            .entries
            .iter()
            .min_by_key(|(_, e)| e.last_seen_ms)
            .map(|(k, _)| k.clone());
        stalest.is_some_and(|k| self.entries.remove(&k).is_some())
    }

    /// Drops keys unseen for longer than the linger time, then trims to the
    /// cap; returns how many were dropped.
    pub fn evict(&mut self, now_ms: u64) -> usize {
        let before = self.entries.len();
        let linger = self.linger_ms;
        self.entries
            .retain(|_, e| now_ms.saturating_sub(e.last_seen_ms) <= linger);
        while self.entries.len() > self.max_entries {
            if !self.drop_stalest() {
                break;
            }
        }
        before - self.entries.len()
    }

    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: std::borrow::Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.entries.get(key).map(|e| &e.value)
    }

    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        self.entries.get_mut(key).map(|e| &mut e.value)
    }

    /// All retained entries, alive or lingering, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.entries.iter().map(|(k, e)| (k, &e.value))
    }

    /// `iter` with when each key was last seen.
    pub fn iter_seen(&self) -> impl Iterator<Item = (&K, &V, u64)> {
        self.entries
            .iter()
            .map(|(k, e)| (k, &e.value, e.last_seen_ms))
    }

    /// Mutable access to every entry, for updates that arrive keyed differently (host samples).
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&K, &mut V)> {
        self.entries.iter_mut().map(|(k, e)| (k, &mut e.value))
    }

    pub fn last_seen(&self, key: &K) -> Option<u64> {
        self.entries.get(key).map(|e| e.last_seen_ms)
    }

    /// Whether `key` was seen within `alive_within_ms` of `now_ms`; typically
    /// a couple of sample intervals, so one missed sample doesn't flicker.
    pub fn is_alive(&self, key: &K, now_ms: u64, alive_within_ms: u64) -> bool {
        self.last_seen(key)
            .is_some_and(|seen| now_ms.saturating_sub(seen) <= alive_within_ms)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn linger_ms(&self) -> u64 {
        self.linger_ms
    }

    pub fn max_entries(&self) -> usize {
        self.max_entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lingers_then_evicts() {
        let mut r: Lingering<u32, u64> = Lingering::new(1_000, 16);
        *r.touch(7, 100) = 42;
        r.touch(8, 100);
        r.touch(8, 900);
        assert!(r.is_alive(&8, 950, 100));
        assert!(!r.is_alive(&7, 950, 100), "7 has exited but still lingers");
        assert_eq!(r.get(&7), Some(&42));
        assert_eq!(r.evict(1_100), 0, "exactly linger_ms old is kept");
        assert_eq!(r.evict(1_101), 1);
        assert_eq!(r.get(&7), None);
        assert_eq!(r.last_seen(&8), Some(900));
        assert_eq!(r.evict(1_901), 1);
        assert!(r.is_empty());
    }

    #[test]
    fn touch_keeps_state_and_refreshes() {
        let mut r: Lingering<u32, Vec<u8>> = Lingering::default();
        r.touch(1, 10).push(1);
        r.touch(1, 20).push(2);
        assert_eq!(r.get(&1), Some(&vec![1, 2]));
        assert_eq!(r.last_seen(&1), Some(20));
        r.touch(1, 5);
        assert_eq!(
            r.last_seen(&1),
            Some(20),
            "clock stepping back keeps the newer time"
        );
        assert_eq!(r.linger_ms(), 600_000);
        assert_eq!(r.max_entries(), 4096);
    }

    #[test]
    fn cap_displaces_longest_unseen() {
        let mut r: Lingering<u32, ()> = Lingering::new(u64::MAX, 3);
        r.touch(1, 30);
        r.touch(2, 10);
        r.touch(3, 20);
        r.touch(1, 40);
        assert_eq!(r.len(), 3);
        r.touch(4, 50);
        let keys: Vec<u32> = r.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, vec![1, 3, 4], "key 2 was unseen longest");
        r.touch(5, 60);
        let keys: Vec<u32> = r.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, vec![1, 4, 5]);
    }

    #[test]
    fn zero_cap_still_holds_one() {
        let mut r: Lingering<u32, u8> = Lingering::new(0, 0);
        *r.touch(1, 0) = 5;
        *r.touch(2, 0) = 6;
        assert_eq!(r.len(), 1);
        assert_eq!(r.get(&2), Some(&6));
        assert_eq!(r.evict(0), 0);
        assert_eq!(r.evict(1), 1);
        assert!(!r.is_alive(&2, 1, 0));
    }
}
