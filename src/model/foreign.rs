//! Which strings of the model come from outside (see `crate::text`), and their cleaning.
//! Every sampler event passes through `ForeignText::clean_text` as the state owner ingests
//! it and as a recording is read, so no output needs to clean again.
//!
//! The absence reasons of figures are vramscope's own words when sampled live; in a
//! recording they are the file's, and are cleaned as they are read (`recording::wire`).

use super::absent::{Absent, Reading};
use super::allocator::{AllocatorDevice, AllocatorEvent, ChannelBatch, WriterIdentity};
use super::device::{DeviceInfo, DeviceSample, DriverInfo};
use super::host::{HostProcess, HostSample, PodInfo};
use super::problem::NvmlProblem;
use crate::text::{clean_in_place, is_clean};
use std::sync::Arc;

/// A model value holding text someone else wrote.
pub trait ForeignText {
    /// Makes every such string safe to show (`crate::text::clean`).
    fn clean_text(&mut self);
}

impl ForeignText for String {
    fn clean_text(&mut self) {
        clean_in_place(self);
    }
}

impl<T: ForeignText> ForeignText for Option<T> {
    fn clean_text(&mut self) {
        if let Some(value) = self {
            value.clean_text();
        }
    }
}

impl<T: ForeignText> ForeignText for Vec<T> {
    fn clean_text(&mut self) {
        self.iter_mut().for_each(T::clean_text);
    }
}

impl ForeignText for Absent {
    fn clean_text(&mut self) {
        if let Absent::Error(words) | Absent::MissingFunction(words) = self {
            words.clean_text();
        }
    }
}

impl ForeignText for Reading<String> {
    fn clean_text(&mut self) {
        match self {
            Ok(text) => text.clean_text(),
            Err(why) => why.clean_text(),
        }
    }
}

impl ForeignText for DriverInfo {
    fn clean_text(&mut self) {
        self.driver_version.clean_text();
        self.nvml_version.clean_text();
    }
}

impl ForeignText for DeviceInfo {
    fn clean_text(&mut self) {
        self.name.clean_text();
        self.uuid.clean_text();
        self.pci_bus_id.clean_text();
    }
}

/// A sample's figures are numbers; its MIG instances carry NVML's strings (UUID, profile).
impl ForeignText for DeviceSample {
    fn clean_text(&mut self) {
        let Some(Ok(instances)) = self.mig.as_mut().map(|m| &mut m.instances) else {
            return;
        };
        for instance in instances {
            instance.uuid.clean_text();
            instance.profile.clean_text();
        }
    }
}

impl ForeignText for NvmlProblem {
    fn clean_text(&mut self) {
        if let NvmlProblem::LibraryNotFound(words) | NvmlProblem::Other(words) = self {
            words.clean_text();
        }
    }
}

impl ForeignText for HostProcess {
    fn clean_text(&mut self) {
        self.user.clean_text();
        self.command.clean_text();
        self.container.clean_text();
        self.pod.clean_text();
    }
}

impl ForeignText for PodInfo {
    fn clean_text(&mut self) {
        self.uid.clean_text();
        self.qos.clean_text();
        self.container_id.clean_text();
        self.namespace.clean_text();
        self.name.clean_text();
        self.container.clean_text();
    }
}

impl ForeignText for HostSample {
    fn clean_text(&mut self) {
        self.processes.clean_text();
    }
}

impl ForeignText for WriterIdentity {
    fn clean_text(&mut self) {
        let WriterIdentity {
            file,
            kind,
            framework,
            job_id,
            command,
            allocator_config,
            ..
        } = self;
        for text in [file, kind, framework, job_id, command, allocator_config] {
            text.clean_text();
        }
    }
}

fn identity_is_clean(id: &WriterIdentity) -> bool {
    [
        &id.file,
        &id.kind,
        &id.framework,
        &id.job_id,
        &id.command,
        &id.allocator_config,
    ]
    .into_iter()
    .all(|text| is_clean(text))
}

impl ForeignText for AllocatorDevice {
    fn clean_text(&mut self) {
        self.uuid.clean_text();
        self.pci_bus_id.clean_text();
    }
}

impl ForeignText for AllocatorEvent {
    fn clean_text(&mut self) {
        self.label.clean_text();
        self.phase.clean_text();
    }
}

impl ForeignText for ChannelBatch {
    fn clean_text(&mut self) {
        for poll in &mut self.polls {
            poll.path.clean_text();
            // Shared by every poll of the channel: copied only when it must change (the
            // channel decoder has cleaned its strings already; its file name it has not).
            if !identity_is_clean(&poll.identity) {
                Arc::make_mut(&mut poll.identity).clean_text();
            }
            poll.devices.clean_text();
            poll.label.clean_text();
            poll.events.clean_text();
        }
        for (path, _) in &mut self.gone {
            path.clean_text();
        }
        self.rejected.clean_text();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ChannelPoll, EventKind};
    use crate::model::{Gone, HostMemory, WriterLiveness};

    /// An escape, a bell, an override and a line break.
    const HOSTILE: &str = "a\u{1b}]0;t\u{7}\u{202e}b\nc";

    fn hostile() -> String {
        HOSTILE.to_string()
    }

    /// Debug output escapes every control and format character as `\u{..}`: none may be
    /// left once cleaned.
    fn assert_cleaned(value: &impl std::fmt::Debug) {
        let shown = format!("{value:?}");
        assert!(!shown.contains("\\u{") && !shown.contains("\\n"), "{shown}");
        assert!(
            shown.contains("a\u{FFFD}]0;t\u{FFFD}\u{FFFD}b c"),
            "{shown}"
        );
    }

    #[test]
    fn every_foreign_string_of_every_event_part_is_cleaned() {
        let mut driver = DriverInfo {
            driver_version: Ok(hostile()),
            cuda_version: Ok(12040),
            nvml_version: Err(Absent::Error(hostile())),
        };
        driver.clean_text();
        assert_cleaned(&driver);
        let mut device = DeviceInfo {
            index: 0,
            name: Ok(hostile()),
            uuid: Ok(hostile()),
            pci_bus_id: Err(Absent::MissingFunction(hostile())),
            memory_total: Ok(1),
            power_limit_mw: Ok(1),
        };
        device.clean_text();
        assert_cleaned(&device);
        let mut problem = NvmlProblem::Other(hostile());
        problem.clean_text();
        assert_cleaned(&problem);
        let mut host = HostSample {
            at_ms: 0,
            load: None,
            memory: Ok(HostMemory {
                total: 1,
                used: 1,
                available: 1,
                swap_total: 0,
                swap_used: 0,
            }),
            processes: vec![HostProcess {
                pid: 1,
                local_pid: Some(1),
                user: Ok(hostile()),
                command: Ok(hostile()),
                rss_bytes: Ok(1),
                cpu_percent: Ok(1.0),
                container: Some(hostile()),
                pod_unreadable: None,
                pod: Some(PodInfo {
                    uid: hostile(),
                    qos: Some(hostile()),
                    container_id: Some(hostile()),
                    namespace: Ok(hostile()),
                    name: Ok(hostile()),
                    container: Err(Absent::Error(hostile())),
                }),
                uid: Some(0),
                starttime: None,
            }],
        };
        host.clean_text();
        assert_cleaned(&host);
        let identity = WriterIdentity {
            file: hostile(),
            pid: 1,
            kind: hostile(),
            framework: hostile(),
            rank: None,
            local_rank: None,
            world_size: None,
            job_id: hostile(),
            command: hostile(),
            allocator_config: hostile(),
            exact_peaks: false,
            attached: false,
            sample_period_us: 1,
            sites: false,
        };
        let na = || Err(Absent::NotAvailable);
        let mut batch = ChannelBatch {
            at_ms: 0,
            polls: vec![ChannelPoll {
                path: hostile(),
                identity: Arc::new(identity),
                host_pid: None,
                liveness: WriterLiveness::Live,
                devices: vec![AllocatorDevice {
                    slot: 0,
                    ordinal: 0,
                    uuid: Some(hostile()),
                    pci_bus_id: Some(hostile()),
                    total: na(),
                    allocated: na(),
                    allocated_peak: na(),
                    reserved: na(),
                    reserved_peak: na(),
                    active: na(),
                    inactive_split: na(),
                    requested: na(),
                    alloc_retries: na(),
                    ooms: na(),
                    device_free: na(),
                    limit: na(),
                    interval_peak: na(),
                    step_peak: na(),
                }],
                step: None,
                label: hostile(),
                points: Vec::new(),
                events: vec![AllocatorEvent {
                    at_ms: 0,
                    kind: EventKind::Mark,
                    slot: None,
                    step: None,
                    label: hostile(),
                    phase: hostile(),
                }],
                lost_samples: 0,
                lost_events: 0,
            }],
            gone: vec![(hostile(), Gone::Removed)],
            rejected: vec![hostile()],
        };
        batch.clean_text();
        assert_cleaned(&batch);
    }
}
