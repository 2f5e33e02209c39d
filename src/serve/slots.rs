//! Bounded client connections. At the limit, a new connection takes the place of one that
//! has never sent a complete request (the oldest such first): idle connections and clients
//! trickling their headers make way, however fast they reconnect. A connection that sent a
//! request within `recent` is never closed to make room, so a scraper's kept-alive
//! connection survives any storm of them; one whose last request is older than that while
//! still open has stopped reading its response (an idle one is closed by the header
//! timeout first), and may be closed. When every place is held by a recent client, the new
//! connection is the one refused.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// The open connections.
#[derive(Debug)]
pub struct Slots {
    max: usize,
    recent: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    /// By id, which is the order they opened in.
    open: BTreeMap<u64, Open>,
}

#[derive(Debug)]
struct Open {
    /// When its last complete request arrived; `None` until one has.
    requested_at: Option<Instant>,
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
    /// At most `max` connections; one that sent a request within `recent` keeps its place.
    pub fn new(max: usize, recent: Duration) -> Arc<Self> {
        Arc::new(Self {
            max: max.max(1),
            recent,
            state: Mutex::new(State::default()),
        })
    }

    /// A place for a new connection, made when all are taken by closing the oldest that
    /// never sent a request, else the one whose last request is oldest if that is older
    /// than `recent`; `None` (refuse the newcomer) when every place is held by a client
    /// that sent one more recently.
    pub fn admit(self: &Arc<Self>, now: Instant) -> Option<Slot> {
        let mut state = self.lock();
        if state.open.len() >= self.max {
            let victim = state
                .open
                .iter()
                .find(|(_, open)| open.requested_at.is_none())
                .or_else(|| {
                    state
                        .open
                        .iter()
                        .filter_map(|(id, open)| Some((id, open, open.requested_at?)))
                        .min_by_key(|(_, _, at)| *at)
                        .filter(|(_, _, at)| now.saturating_duration_since(*at) > self.recent)
                        .map(|(id, open, _)| (id, open))
                })
                .map(|(id, _)| *id)?;
            if let Some(open) = state.open.remove(&victim) {
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
                requested_at: None,
                close: Arc::clone(&close),
            },
        );
        Some(Slot {
            id,
            slots: Arc::clone(self),
            close,
        })
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
    /// The connection sent a complete request.
    pub fn requested(&self, now: Instant) {
        if let Some(open) = self.slots.lock().open.get_mut(&self.id) {
            open.requested_at = Some(now);
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

    const RECENT: Duration = Duration::from_secs(10);

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

    fn ms(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    #[test]
    fn at_the_limit_the_oldest_connection_without_a_request_makes_way() {
        let slots = Slots::new(3, RECENT);
        let t0 = Instant::now();
        let scraper = slots.admit(t0).unwrap();
        let idle = slots.admit(ms(t0, 1)).unwrap();
        let newer_idle = slots.admit(ms(t0, 2)).unwrap();
        scraper.requested(ms(t0, 3));
        // The scraper is the oldest and idle longest, but it sent a request.
        let next = slots.admit(ms(t0, 4)).unwrap();
        assert_eq!(slots.open(), 3);
        assert!(told_to_close(&idle));
        assert!(!told_to_close(&scraper));
        assert!(!told_to_close(&newer_idle));
        drop(idle);
        assert_eq!(slots.open(), 3);
        // A storm of newcomers that never send anything closes only each other.
        let mut previous = newer_idle;
        let mut last = next;
        for i in 0..100 {
            let newcomer = slots.admit(ms(t0, 5 + i)).unwrap();
            assert!(told_to_close(&previous), "newcomer {i}");
            assert!(!told_to_close(&scraper), "newcomer {i}");
            drop(previous);
            previous = last;
            last = newcomer;
        }
        assert_eq!(slots.open(), 3);
        drop((scraper, previous, last));
        assert_eq!(slots.open(), 0);
    }

    #[test]
    fn recent_clients_keep_their_places_and_the_newcomer_is_refused() {
        let slots = Slots::new(2, RECENT);
        let t0 = Instant::now();
        let a = slots.admit(t0).unwrap();
        let b = slots.admit(t0).unwrap();
        a.requested(ms(t0, 1));
        b.requested(ms(t0, 2));
        assert!(slots.admit(ms(t0, 3)).is_none());
        assert_eq!(slots.open(), 2);
        assert!(!told_to_close(&a));
        assert!(!told_to_close(&b));
        // Once `a`'s last request is older than `recent` while it is still open (it stopped
        // reading), it is the one that makes way.
        let c = slots.admit(t0 + RECENT + Duration::from_millis(2)).unwrap();
        assert!(told_to_close(&a));
        assert!(!told_to_close(&b));
        assert!(!told_to_close(&c));
    }

    #[test]
    fn closing_all_tells_every_open_connection() {
        let slots = Slots::new(3, RECENT);
        let t0 = Instant::now();
        let a = slots.admit(t0).unwrap();
        let b = slots.admit(t0).unwrap();
        assert!(!told_to_close(&a));
        slots.close_all();
        assert!(told_to_close(&a));
        assert!(told_to_close(&b));
    }
}
