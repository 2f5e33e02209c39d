//! Pure data shared by samplers, the state, the TUI, one-shot output, recording, replay, the
//! exporter and the offline reports. Below it are only `channel` (the format's event kinds,
//! whose one table the model's kinds read), `history` (its `Peak`) and `text`.
//! Nothing here touches the terminal, NVML or threads.

pub mod absent;
pub mod allocator;
pub mod allocator_stream;
pub mod device;
pub mod event;
pub mod figures;
pub mod foreign;
pub mod foresight;
#[cfg(test)]
mod foresight_tests;
pub mod gpu_lists;
pub mod held_sites;
pub mod host;
pub mod memory;
pub mod mig;
pub mod oom_explain;
pub mod oom_message;
pub mod peak_holders;
pub mod peak_owner;
pub mod period;
pub mod phase_peaks;
pub mod problem;
pub mod snapshot;
pub mod snapshot_drops;
pub mod step_origin;
pub mod time;
pub mod units;
pub mod writer_fold;

pub use absent::{Absent, NA, Reading, or_na};
pub use allocator::{
    AllocatorDevice, AllocatorEvent, AllocatorPoint, AllocatorSnapshot, ChannelBatch, ChannelPoll,
    EventKind, Gone, WriterIdentity, WriterLiveness,
};
pub use device::{
    DeviceInfo, DeviceSample, DriverInfo, GpuProcess, ListGaps, MemoryInfo, MemoryPeak, ProcessKind,
};
pub use event::SourceEvent;
pub use foreign::ForeignText;
pub use host::{HostLoad, HostMemory, HostProcess, HostSample, PodInfo};
pub use mig::{MigInstance, MigProcess, MigState};
pub use period::Periods;
pub use problem::NvmlProblem;
pub use snapshot::{DeviceSnapshot, ProcessAllocator, ProcessRow, Snapshot};
pub use step_origin::StepOrigin;
pub use time::now_ms;
