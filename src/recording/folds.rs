//! The writers of a recording, folded: report, plot, export and replay's marks each keep one
//! `RecordedFolds` and feed it the recording's events, so every offline output reads the
//! same `WriterFold` answers (GPU, true peak with its step and phase, one OOM per failure)
//! as the live monitor does. GPUs are resolved after each channel batch by the monitor's
//! rule: the recording's devices, and the GPUs the last device samples list the pid on.

use crate::model::gpu_lists::GpuLists;
use crate::model::writer_fold::WriterFold;
use crate::model::{ChannelBatch, ChannelPoll, DeviceInfo, DeviceSample};
use std::collections::BTreeMap;

#[derive(Default)]
pub struct RecordedFolds {
    devices: Vec<DeviceInfo>,
    /// What each GPU's latest sample lists, by the monitor's rule.
    lists: GpuLists,
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

    /// Which pids the GPU lists now (`GpuLists::observe`).
    pub fn device(&mut self, sample: &DeviceSample) {
        self.lists.observe(sample);
    }

    /// Whether GPU `gpu`'s latest readable list holds `pid`: a row the monitor shows as
    /// listed, else as exited.
    pub fn lists(&self, pid: u32, gpu: u32) -> bool {
        self.lists.gpus_listing(pid).contains(&gpu)
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
        let instances = self.lists.instances();
        for fold in self.writers.values_mut() {
            let on = fold
                .host_pid
                .map_or_else(Vec::new, |pid| self.lists.gpus_listing(pid));
            fold.resolve_gpus(&self.devices, &instances, &on);
        }
    }
}
