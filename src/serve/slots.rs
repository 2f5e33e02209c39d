//! Bounded client connections. At the limit, a new connection closes the one whose last
//! request (or opening) is oldest: idle keep-alive connections, clients that never send a
//! request and clients that stopped reading go first, so connections that do nothing can
//! never lock a scraper out.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;
use tokio::sync::Notify;

/// The open connections.
#[derive(Debug)]
pub struct Slots {
    max: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    open: HashMap<u64, Open>,
}

#[derive(Debug)]
struct Open {
    active_at: Instant,
    close: Arc<Notify>,
}

/// One connection's place; freed when dropped.
#[derive(Debug)]
pub struct Slot {
    id: u64,
    slots: Arc<Slots>,
    /// Notified when a newer connection needs this one's place.
    pub close: Arc<Notify>,
}

impl Slots {
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            max: max.max(1),
            state: Mutex::new(State::default()),
        })
    }

    /// A place for a new connection, made by closing the least recently active one when all
    /// are taken.
    pub fn admit(self: &Arc<Self>, now: Instant) -> Slot {
        let mut state = self.lock();
        if state.open.len() >= self.max {
            let oldest = state
                .open
                .iter()
                .min_by_key(|(_, open)| open.active_at)
                .map(|(id, _)| *id);
            if let Some(open) = oldest.and_then(|id| state.open.remove(&id)) {
                // Stores a permit: the connection sees it even if it is not waiting yet.
                open.close.notify_one();
            }
        }
        let id = state.next_id;
        state.next_id += 1;
        let close = Arc::new(Notify::new());
        state.open.insert(
            id,
            Open {
                active_at: now,
                close: Arc::clone(&close),
            },
        );
        Slot {
            id,
            slots: Arc::clone(self),
            close,
        }
    }

    /// Tells every open connection to finish the response it is writing and close: the
    /// server is stopping.
    pub fn close_all(&self) {
        for open in self.lock().open.values() {
            open.close.notify_one();
        }
    }

    /// Connections holding a place.
    #[cfg(test)]
    pub fn open(&self) -> usize {
        self.lock().open.len()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Slot {
    /// The connection began a request.
    pub fn touch(&self, now: Instant) {
        if let Some(open) = self.slots.lock().open.get_mut(&self.id) {
            open.active_at = now;
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.lock().open.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Whether `slot` has been told to close.
    fn told_to_close(slot: &Slot) -> bool {
        let close = Arc::clone(&slot.close);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            tokio::time::timeout(Duration::from_millis(10), close.notified())
                .await
                .is_ok()
        })
    }

    #[test]
    fn at_the_limit_the_least_recently_active_connection_makes_way() {
        let slots = Slots::new(2);
        let t0 = Instant::now();
        let a = slots.admit(t0);
        let b = slots.admit(t0 + Duration::from_millis(1));
        // `a` served a request after `b` opened: `b` is now the idlest.
        a.touch(t0 + Duration::from_millis(2));
        let c = slots.admit(t0 + Duration::from_millis(3));
        assert_eq!(slots.open(), 2);
        assert!(told_to_close(&b));
        assert!(!told_to_close(&a));
        assert!(!told_to_close(&c));
        drop(b);
        assert_eq!(slots.open(), 2);
        drop(a);
        assert_eq!(slots.open(), 1);
        drop(c);
        assert_eq!(slots.open(), 0);
    }

    #[test]
    fn closing_all_tells_every_open_connection() {
        let slots = Slots::new(3);
        let t0 = Instant::now();
        let a = slots.admit(t0);
        let b = slots.admit(t0);
        assert!(!told_to_close(&a));
        slots.close_all();
        assert!(told_to_close(&a));
        assert!(told_to_close(&b));
    }
}
