//! The one currency of sampled data: what samplers send to the state owner, what a recording
//! holds line by line, and what replay, `report`, `plot` and `export` read back. Here, below
//! both the samplers and the state, so neither imports the other.

use super::{
    ChannelBatch, DeviceInfo, DeviceSample, DriverInfo, ForeignText, HostSample, NvmlProblem,
};

/// What samplers send to the state owner.
#[derive(Clone, Debug)]
pub enum SourceEvent {
    /// NVML opened: static facts, sent once before any sample.
    Started {
        driver: DriverInfo,
        devices: Vec<DeviceInfo>,
    },
    /// NVML cannot be used at all; host sampling goes on.
    NvmlUnavailable(NvmlProblem),
    Device(Box<DeviceSample>),
    Host(Box<HostSample>),
    /// What instrumented programs published since the previous pass.
    Channels(Box<ChannelBatch>),
    /// The refresh period is `ms` from now on (the monitor's `+`/`-` keys). A recording's
    /// header holds the period it began at; this event, each change after.
    Interval {
        ms: u64,
    },
    /// One tick's samples, sent together so they cost the receiver one wakeup and one frame.
    Batch(Vec<SourceEvent>),
}

impl ForeignText for SourceEvent {
    fn clean_text(&mut self) {
        match self {
            SourceEvent::Started { driver, devices } => {
                driver.clean_text();
                devices.iter_mut().for_each(DeviceInfo::clean_text);
            }
            SourceEvent::NvmlUnavailable(problem) => problem.clean_text(),
            // NVML's per-tick figures are numbers; their absence reasons are our own words
            // (a recording's are cleaned where they are read, `recording::wire`). MIG instances
            // carry NVML's strings.
            SourceEvent::Device(sample) => sample.clean_text(),
            SourceEvent::Host(sample) => sample.clean_text(),
            SourceEvent::Channels(batch) => batch.clean_text(),
            SourceEvent::Batch(events) => events.iter_mut().for_each(SourceEvent::clean_text),
            SourceEvent::Interval { .. } => {}
        }
    }
}
