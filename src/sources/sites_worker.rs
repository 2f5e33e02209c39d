//! The monitor's snapshot reducer: one thread, off the UI thread, that reads and reduces the
//! memory snapshots the owner of the state hands it, and sends each answer back as an owned
//! value. Bounded: one reduction runs at a time and one waits; a newer job takes the waiting
//! one's place, and the displaced one goes back to the owner, who may ask again later. A
//! reduction of a large trace takes seconds (docs/benchmarks.md: its cost): the screen never waits.

use super::sites::reduce;
use crate::model::held_sites::SitesJob;
use crate::model::held_sites::SitesState;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex};

/// What came of a job: for the channel `channel`, the snapshot file `path`.
#[derive(Clone, Debug, PartialEq)]
pub struct SitesDone {
    pub channel: String,
    pub path: String,
    pub sites: SitesState,
}

#[derive(Default)]
struct Queue {
    waiting: Option<SitesJob>,
    closed: bool,
}

type Shared = Arc<(Mutex<Queue>, Condvar)>;

/// The owner's handle; dropping it ends the thread once its current job is done.
pub struct SitesWorker {
    shared: Shared,
}

impl SitesWorker {
    /// Starts the thread; answers go to `tx` (the owner's event channel).
    pub fn start<E>(tx: Sender<E>) -> Result<SitesWorker, crate::threads::SpawnFailed>
    where
        E: From<SitesDone> + Send + 'static,
    {
        let shared: Shared = Arc::default();
        let theirs = Arc::clone(&shared);
        crate::threads::spawn("sites", move || work(&theirs, &tx))?;
        Ok(SitesWorker { shared })
    }

    /// Hands over a job. Returns the one it displaced, which the thread never took: the
    /// owner marks it unread again.
    #[must_use]
    pub fn submit(&self, job: SitesJob) -> Option<SitesJob> {
        let (lock, wake) = &*self.shared;
        let Ok(mut queue) = lock.lock() else {
            return Some(job);
        };
        let displaced = queue.waiting.replace(job);
        drop(queue);
        wake.notify_one();
        displaced
    }
}

impl Drop for SitesWorker {
    fn drop(&mut self) {
        let (lock, wake) = &*self.shared;
        if let Ok(mut queue) = lock.lock() {
            queue.closed = true;
        }
        wake.notify_one();
    }
}

fn work<E: From<SitesDone>>(shared: &Shared, tx: &Sender<E>) {
    let (lock, wake) = &**shared;
    loop {
        let job = {
            let Ok(mut queue) = lock.lock() else {
                return;
            };
            loop {
                if queue.closed {
                    return;
                }
                if let Some(job) = queue.waiting.take() {
                    break job;
                }
                queue = match wake.wait(queue) {
                    Ok(q) => q,
                    Err(_) => return,
                };
            }
        };
        let sites = reduce(&job);
        let done = SitesDone {
            channel: job.channel,
            path: job.path,
            sites,
        };
        if tx.send(E::from(done)).is_err() {
            return;
        }
    }
}
