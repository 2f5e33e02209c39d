//! What each GPU's latest sample lists: the pids of its processes and its MIG instances. The
//! one rule by which the live monitor and a recording's folds find the GPUs a writer runs on
//! (`WriterFold::resolve_gpus`), so a writer lands on the same GPU on every path.

use super::device::{DeviceSample, mig_uuids};
use super::mig::MigUuid;
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default)]
pub struct GpuLists {
    /// GPU index -> the pids its latest readable process list names.
    pids: BTreeMap<u32, Vec<u32>>,
    /// GPU index -> the MIG device UUIDs its latest sample lists.
    instances: BTreeMap<u32, Vec<MigUuid>>,
}

impl GpuLists {
    /// A GPU's new sample; whether what the GPU lists changed (a GPU's first sample does).
    /// A sample whose process list could not be read keeps the GPU's last lists, of pids and
    /// of MIG instances alike: a transient NVML error does not move a writer off its GPU.
    pub fn observe(&mut self, sample: &DeviceSample) -> bool {
        let Ok(processes) = &sample.processes else {
            return !self.pids.contains_key(&sample.index);
        };
        let pids: Vec<u32> = processes.iter().map(|p| p.pid).collect();
        let instances = mig_uuids(sample);
        let changed = self.pids.get(&sample.index) != Some(&pids)
            || self.instances.get(&sample.index) != Some(&instances);
        self.pids.insert(sample.index, pids);
        self.instances.insert(sample.index, instances);
        changed
    }

    /// The GPUs whose lists name `pid`, lowest index first.
    pub fn gpus_listing(&self, pid: u32) -> Vec<u32> {
        self.pids
            .iter()
            .filter(|(_, pids)| pids.contains(&pid))
            .map(|(gpu, _)| *gpu)
            .collect()
    }

    /// Every MIG instance the GPUs list.
    pub fn instances(&self) -> Vec<MigUuid> {
        self.instances.values().flatten().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Absent, GpuProcess, ProcessKind};

    fn listing(index: u32, pids: &[u32]) -> DeviceSample {
        let mut s = DeviceSample::unreadable(index, 1_000, Absent::NotAvailable);
        s.processes = Ok(pids
            .iter()
            .map(|&pid| GpuProcess {
                pid,
                kind: ProcessKind::Compute,
                used_memory: Ok(1 << 30),
                sm_util: Err(Absent::NotAvailable),
                mem_util: Err(Absent::NotAvailable),
                enc_util: Err(Absent::NotAvailable),
                dec_util: Err(Absent::NotAvailable),
            })
            .collect());
        s
    }

    #[test]
    fn an_unreadable_list_keeps_the_gpus_last_and_only_a_change_is_said() {
        let mut lists = GpuLists::default();
        assert!(lists.observe(&listing(0, &[7, 8])), "a GPU's first sample");
        assert!(lists.observe(&listing(1, &[8])));
        assert!(!lists.observe(&listing(0, &[7, 8])), "the same list again");
        assert_eq!(lists.gpus_listing(8), [0, 1]);
        // NVML could not read GPU 0's processes this time: pid 7 stays on it.
        let unreadable = DeviceSample::unreadable(0, 2_000, Absent::Error("timeout".into()));
        assert!(!lists.observe(&unreadable));
        assert!(
            lists.observe(&DeviceSample::unreadable(5, 2_000, Absent::NotAvailable)),
            "an unreadable first sample leaves the GPU to resolve"
        );
        assert_eq!(lists.gpus_listing(7), [0]);
        assert!(lists.observe(&listing(0, &[8])), "pid 7 left");
        assert!(lists.gpus_listing(7).is_empty());
        assert!(lists.instances().is_empty());
    }
}
