//! The writers of a recording, folded: report, plot, export and replay's marks each keep one
//! `RecordedFolds` and feed it the recording's events, so every offline output reads the
//! same `WriterFold` answers (GPU, true peak with its step and phase, one OOM per failure)
//! as the live monitor does. GPUs are resolved after each channel batch by the monitor's
//! rule: the recording's devices, and the GPUs the last device samples list the pid on.

use crate::model::device::mig_uuids;
use crate::model::mig::MigUuid;
use crate::model::writer_fold::{Oom, SlotFold, WriterFold};
use crate::model::{ChannelBatch, ChannelPoll, DeviceInfo, DeviceSample};
use std::collections::BTreeMap;

#[derive(Default)]
pub struct RecordedFolds {
    devices: Vec<DeviceInfo>,
    /// GPU index -> pids its latest sample lists.
    listed: BTreeMap<u32, Vec<u32>>,
    /// GPU index -> the MIG device UUIDs its latest sample lists.
    instances: BTreeMap<u32, Vec<MigUuid>>,
    /// Channel path -> its writer's fold.
    pub writers: BTreeMap<String, WriterFold>,
}

impl RecordedFolds {
    pub fn started(&mut self, devices: &[DeviceInfo]) {
        self.devices = devices.to_vec();
    }

    pub fn devices(&self) -> &[DeviceInfo] {
        &self.devices
    }

    /// Which pids the GPU lists now; a sample without a readable list keeps the last one.
    pub fn device(&mut self, sample: &DeviceSample) {
        self.instances.insert(sample.index, mig_uuids(sample));
        if let Ok(processes) = &sample.processes {
            self.listed
                .insert(sample.index, processes.iter().map(|p| p.pid).collect());
        }
    }

    /// Folds one poll (the caller may read its raw points first) without resolving GPUs:
    /// `resolve` once the batch is in.
    pub fn poll(&mut self, poll: ChannelPoll, at_ms: u64) -> &WriterFold {
        let fold = self.writers.entry(poll.path.clone()).or_default();
        fold.ingest(poll, at_ms);
        fold
    }

    /// A whole batch: its polls, the channels gone, then the GPUs resolved.
    pub fn batch(&mut self, batch: ChannelBatch) {
        let at_ms = batch.at_ms;
        for poll in batch.polls {
            self.poll(poll, at_ms);
        }
        self.gone(&batch.gone);
        self.resolve();
    }

    pub fn gone(&mut self, gone: &[(String, crate::model::Gone)]) {
        for (path, why) in gone {
            if let Some(fold) = self.writers.get_mut(path) {
                fold.gone(*why);
            }
        }
    }

    /// Resolves every writer's slots to NVML's GPUs, as the monitor does after each batch.
    pub fn resolve(&mut self) {
        let listed = &self.listed;
        let instances: Vec<MigUuid> = self.instances.values().flatten().cloned().collect();
        for fold in self.writers.values_mut() {
            let on: Vec<u32> = fold.host_pid.map_or_else(Vec::new, |pid| {
                listed
                    .iter()
                    .filter(|(_, pids)| pids.contains(&pid))
                    .map(|(gpu, _)| *gpu)
                    .collect()
            });
            fold.resolve_gpus(&self.devices, &instances, &on);
        }
    }
}

/// The GPU of the slot an OOM names; without a slot, the writer's only resolved GPU.
pub fn oom_gpu(fold: &WriterFold, oom: &Oom) -> Option<u32> {
    match oom.slot {
        Some(slot) => fold.slots.get(usize::from(slot)).and_then(|s| s.gpu),
        None => {
            let mut gpus = fold.slots.iter().filter_map(|s| s.gpu);
            let first = gpus.next();
            first.filter(|g| gpus.all(|other| other == *g))
        }
    }
}

/// The slot of `fold` on `gpu`, or its one slot when that one could not be joined to any.
pub fn slot_on(fold: &WriterFold, gpu: u32) -> Option<(usize, &SlotFold)> {
    fold.slots
        .iter()
        .enumerate()
        .find(|(_, s)| s.gpu == Some(gpu))
        .or_else(|| match fold.slots.as_slice() {
            [only] if only.gpu.is_none() => Some((0, only)),
            _ => None,
        })
}
