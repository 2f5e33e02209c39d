//! Which series vramscope keeps for each GPU and each GPU process.

use crate::history::{Series, SeriesConfig};
use crate::model::peak_owner::PeakOwner;
use std::sync::Arc;

/// History of one GPU.
#[derive(Clone, Default)]
pub struct DeviceSeries {
    pub memory_used: Series,
    pub gpu_util: Series,
    /// Who made `memory_used`'s all-time peak (`peak_owner::owner_of` of its sample).
    pub peak_owner: Option<PeakOwner>,
    /// Who made the latest sample's interval peak.
    pub interval_peak_owner: Option<PeakOwner>,
}

/// A process on a GPU: one pid can use several GPUs, each with its own VRAM.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProcessKey {
    pub pid: u32,
    /// Shared: every row and every tick names the same few GPUs.
    pub gpu_uuid: Arc<str>,
}

/// History of one process on one GPU. Kept a while after the process exits, because a crashed
/// run's peak is what the user came for.
#[derive(Clone)]
pub struct ProcessSeries {
    pub vram: Series,
    pub host_rss: Series,
    pub gpu_index: u32,
    /// Last command line seen, so an exited process still has a name.
    pub command: Option<String>,
    pub user: Option<String>,
    /// Its Kubernetes pod, last seen: an exited process still says where it ran.
    pub pod: Option<crate::model::PodInfo>,
    /// The MIG instance it last ran in, on a GPU in MIG mode: an exited process keeps the
    /// labels it was exported with.
    pub mig: Option<crate::model::mig::RowInstance>,
    /// The local pid and start time last read, so that a process no longer on a GPU's list
    /// can be told alive ("left GPU") from gone; `None` once a host pass found it gone.
    pub identity: Option<(u32, u64)>,
}

impl Default for ProcessSeries {
    fn default() -> Self {
        Self {
            vram: Series::new(SeriesConfig::process()),
            host_rss: Series::new(SeriesConfig::process()),
            gpu_index: 0,
            command: None,
            user: None,
            pod: None,
            mig: None,
            identity: None,
        }
    }
}
