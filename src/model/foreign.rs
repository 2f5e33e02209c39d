//! Which strings of the model come from outside (see `crate::text`), and their cleaning.
//! Every sampler event passes through `ForeignText::clean_text` as the state owner ingests
//! it and as a recording is read, so no output needs to clean again.
//!
//! The absence reasons of figures are vramscope's own words when sampled live; in a
//! recording they are the file's, and are cleaned as they are read (`record::wire`).

use super::absent::{Absent, Reading};
use super::allocator::{AllocatorDevice, AllocatorEvent, ChannelBatch, WriterIdentity};
use super::device::{DeviceInfo, DriverInfo};
use super::host::{HostProcess, HostSample};
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
    }
}

impl ForeignText for ChannelBatch {
    fn clean_text(&mut self) {
        for poll in &mut self.polls {
            poll.path.clean_text();
            // Shared by every poll of the channel: copied only if it must change, which a
            // channel decoded here never needs (the decoder cleans as it reads).
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
