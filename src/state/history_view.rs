//! [`HistoryView`]: the monitor's histories as they stood at one snapshot's moment. The
//! charts of a screen read their series through it, so a paused screen (one kept snapshot)
//! draws nothing sampled after it, while sampling goes on into the same series underneath.
//! All-time peaks are not read here: the snapshot carries them as they stood then.

use super::{Monitor, ProcessKey};
use crate::history::Capped;

/// Every history the monitor keeps, read up to `at_ms`.
#[derive(Clone, Copy)]
pub struct HistoryView<'a> {
    monitor: &'a Monitor,
    at_ms: u64,
}

/// One GPU's charts.
pub struct DeviceHistory<'a> {
    pub memory_used: Capped<'a>,
    pub gpu_util: Capped<'a>,
}

/// One process's charts on one GPU.
pub struct ProcessHistory<'a> {
    pub vram: Capped<'a>,
    pub host_rss: Capped<'a>,
}

/// One writer's charts for one of its device slots.
pub struct SlotHistory<'a> {
    pub allocated: Capped<'a>,
    pub reserved: Capped<'a>,
}

impl<'a> HistoryView<'a> {
    /// `monitor`'s histories up to and including `at_ms` (a snapshot's `taken_at_ms`).
    pub fn at(monitor: &'a Monitor, at_ms: u64) -> Self {
        Self { monitor, at_ms }
    }

    /// The moment the view stops at.
    pub fn at_ms(&self) -> u64 {
        self.at_ms
    }

    /// The GPU keyed `key` (`DeviceInfo::key`).
    pub fn device(&self, key: &str) -> Option<DeviceHistory<'a>> {
        let series = self.monitor.device_series(key)?;
        Some(DeviceHistory {
            memory_used: series.memory_used.until(self.at_ms),
            gpu_util: series.gpu_util.until(self.at_ms),
        })
    }

    /// A process on a GPU, running or gone.
    pub fn process(&self, key: &ProcessKey) -> Option<ProcessHistory<'a>> {
        let series = self.monitor.process_series(key)?;
        Some(ProcessHistory {
            vram: series.vram.until(self.at_ms),
            host_rss: series.host_rss.until(self.at_ms),
        })
    }

    /// Slot `slot` of the channel read from `path` (`AllocatorSnapshot::path`).
    pub fn allocator_slot(&self, path: &str, slot: u16) -> Option<SlotHistory<'a>> {
        let channel = self.monitor.allocators().channel(path)?;
        let series = channel.slots.get(usize::from(slot))?;
        Some(SlotHistory {
            allocated: series.allocated.until(self.at_ms),
            reserved: series.reserved.until(self.at_ms),
        })
    }

    /// When each step of the channel read from `path` ended, up to the view's moment.
    pub fn step_ends(&self, path: &str) -> impl Iterator<Item = u64> + 'a {
        let at_ms = self.at_ms;
        self.monitor
            .allocators()
            .channel(path)
            .into_iter()
            .flat_map(|c| c.fold.step_ticks.iter())
            .map(|(at, _)| *at)
            .filter(move |at| *at <= at_ms)
    }
}
