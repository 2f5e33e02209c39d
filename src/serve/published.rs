//! What the state thread hands to the HTTP handlers: one immutable `Published` per tick,
//! swapped into `Latest`. Handlers only clone the `Arc`; each format is encoded by the first
//! scrape that asks for it and shared by every later one until the next tick.

use super::node::DeviceLabels;
use super::processes::ProcessEntry;
use crate::model::Snapshot;
use crate::state::{Monitor, StaleAfter};
use bytes::Bytes;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// Everything one scrape exports.
#[derive(Debug)]
pub struct Published {
    /// The joined state, the same type the TUI and `--json` read.
    pub snapshot: Arc<Snapshot>,
    /// dcgm-exporter's labels of each device in `snapshot.devices`, in the same order.
    pub device_labels: Vec<DeviceLabels>,
    /// Processes to export: those running and those that exited within the grace period.
    pub processes: Vec<ProcessEntry>,
    /// This node's name, the `hostname` label of the per-process families.
    pub hostname: Option<String>,
    /// Each format's encoding, made by the first scrape that asks (`scrape`).
    pub(super) text: OnceLock<Bytes>,
    pub(super) openmetrics: OnceLock<Bytes>,
}

impl Published {
    pub fn new(
        snapshot: Arc<Snapshot>,
        device_labels: Vec<DeviceLabels>,
        processes: Vec<ProcessEntry>,
    ) -> Self {
        Self {
            snapshot,
            device_labels,
            processes,
            hostname: None,
            text: OnceLock::new(),
            openmetrics: OnceLock::new(),
        }
    }

    /// The same, its processes labelled with the node's name.
    pub fn with_hostname(mut self, hostname: Option<String>) -> Self {
        self.hostname = hostname;
        self
    }

    /// Before the first tick: nothing sampled yet.
    pub fn empty() -> Self {
        let snapshot = Monitor::new(0).snapshot(0, StaleAfter::NEVER);
        Self::new(Arc::new(snapshot), Vec::new(), Vec::new())
    }
}

/// The slot the state thread writes and handlers read. A lock held only to clone or swap an
/// `Arc` is never held long enough to matter.
#[derive(Debug)]
pub struct Latest {
    slot: Mutex<Arc<Published>>,
}

impl Default for Latest {
    fn default() -> Self {
        Self {
            slot: Mutex::new(Arc::new(Published::empty())),
        }
    }
}

impl Latest {
    pub fn get(&self) -> Arc<Published> {
        // A panic elsewhere while holding the lock leaves a valid Arc behind: keep serving.
        Arc::clone(&self.slot.lock().unwrap_or_else(PoisonError::into_inner))
    }

    pub fn set(&self, published: Published) {
        *self.slot.lock().unwrap_or_else(PoisonError::into_inner) = Arc::new(published);
    }
}
