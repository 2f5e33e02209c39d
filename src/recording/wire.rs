//! How the model's types look in a recording (docs/recording-v1.md). Each `*Def` is a serde
//! shadow of a model type (`#[serde(remote)]`), so the format is spelled out here, apart
//! from the model's own `Serialize` (which `--json` does not use either), and a field added
//! to a model type fails to compile here until the format says how it is recorded.
//!
//! A figure that may be absent (`Reading<T>`) is its value when read, and an object
//! `{"absent": "<reason>"}` (with `"detail"` for the reasons that carry words) when not:
//! every recorded value is a number, a string or an array, so an object is always an absence.

use crate::model::{
    Absent, AllocatorDevice, AllocatorEvent, DeviceInfo, DeviceSample, DriverInfo, EventKind,
    GpuProcess, HostMemory, HostProcess, HostSample, ListGaps, MemoryInfo, MemoryPeak, NvmlProblem,
    PodInfo, ProcessKind, Reading, WriterIdentity, WriterLiveness,
};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::wire_reading::{AbsentOut, AbsentWire, memory, optional_reading, reading};

/// The fast memory sampling's peak as `[used, at_ms]`; left out where it was off. What was
/// read of the processes at it goes beside the device record (`peak_holders`), where readers
/// from before it skip it.
mod memory_peak {
    use super::*;
    use crate::model::peak_owner::PeakHolders;

    pub fn serialize<S: Serializer>(value: &Option<MemoryPeak>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(p) => [p.used, p.at_ms].serialize(s),
            None => s.serialize_none(),
        }
    }

    /// Its holders are the record's `peak_holders`, set by the reader (`holders_of`); until
    /// then the sample's own.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<MemoryPeak>, D::Error> {
        let value: Option<[u64; 2]> = Option::deserialize(d)?;
        Ok(value.map(|[used, at_ms]| MemoryPeak {
            used,
            at_ms,
            holders: PeakHolders::TheSample,
        }))
    }
}

/// A peak's holders beside its device record: `[[pid, used], ...]` (the compute list read at
/// the peak), `{"rise": bytes}` (under the rise that reads the list) or an absence (the list
/// could not be read). Left out where the peak is the sample's own reading.
pub mod peak_holders {
    use super::*;
    use crate::model::peak_owner::{HeldBy, NotAttributed, PeakHolders};

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Wire<W> {
        Read(Vec<[u64; 2]>),
        SmallRise { rise: u64 },
        ListUnread(W),
    }

    /// What a device record carries beside it: `None` for a peak that is the sample's own
    /// reading (or none at all).
    pub fn of(sample: &DeviceSample) -> Option<Out<'_>> {
        match &sample.memory_peak.as_ref()?.holders {
            PeakHolders::TheSample | PeakHolders::NotRead(NotAttributed::NotRecorded) => None,
            holders => Some(Out(holders)),
        }
    }

    pub struct Out<'a>(&'a PeakHolders);

    impl Serialize for Out<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let wire = match self.0 {
                PeakHolders::Read(list) => {
                    Wire::Read(list.iter().map(|h| [u64::from(h.pid), h.used]).collect())
                }
                PeakHolders::NotRead(NotAttributed::SmallRise { rise }) => {
                    Wire::SmallRise { rise: *rise }
                }
                PeakHolders::NotRead(NotAttributed::ListUnread(why)) => {
                    Wire::ListUnread(AbsentOut::from(why))
                }
                // `of` never gives these.
                PeakHolders::TheSample | PeakHolders::NotRead(NotAttributed::NotRecorded) => {
                    return s.serialize_none();
                }
            };
            wire.serialize(s)
        }
    }

    /// As read: the holders, cleaned of nothing (numbers and an absence, whose words the
    /// absence's reader cleans).
    pub struct In(pub PeakHolders);

    impl<'de> Deserialize<'de> for In {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            Ok(In(match Wire::<AbsentWire>::deserialize(d)? {
                Wire::Read(list) => PeakHolders::Read(
                    list.into_iter()
                        // A pid beyond u32 is no process of NVML's: left out.
                        .filter_map(|[pid, used]| {
                            Some(HeldBy {
                                pid: u32::try_from(pid).ok()?,
                                used,
                            })
                        })
                        .collect(),
                ),
                Wire::SmallRise { rise } => PeakHolders::NotRead(NotAttributed::SmallRise { rise }),
                Wire::ListUnread(why) => {
                    PeakHolders::NotRead(NotAttributed::ListUnread(why.into()))
                }
            }))
        }
    }
}

/// Host memory as `[total, used, available, swap_total, swap_used]`.
mod host_memory {
    use super::*;

    pub fn serialize<S: Serializer>(value: &Reading<HostMemory>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Ok(m) => [m.total, m.used, m.available, m.swap_total, m.swap_used].serialize(s),
            Err(why) => AbsentOut::from(why).serialize(s),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Reading<HostMemory>, D::Error> {
        let value: Reading<[u64; 5]> = reading::deserialize(d)?;
        Ok(value.map(
            |[total, used, available, swap_total, swap_used]| HostMemory {
                total,
                used,
                available,
                swap_total,
                swap_used,
            },
        ))
    }
}

/// `with` modules for lists of a shadowed type (`Vec<T>`), and `Own`/`Ref` wrappers that
/// let a shadowed type be used on its own.
macro_rules! shadow_list {
    ($module:ident, $ty:ty, $def:ident) => {
        pub mod $module {
            use super::*;

            /// A borrowed value, serialised through its shadow.
            pub struct Ref<'a>(pub &'a $ty);

            impl Serialize for Ref<'_> {
                fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                    $def::serialize(self.0, s)
                }
            }

            /// An owned value, read through its shadow.
            pub struct Own(pub $ty);

            impl<'de> Deserialize<'de> for Own {
                fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                    $def::deserialize(d).map(Own)
                }
            }

            // `allow`, not `expect`: in the expansions whose list is recorded on its own the
            // function is used, and an `expect` there would be unfulfilled.
            #[allow(dead_code, reason = "not every list is recorded on its own")]
            pub fn serialize<S: Serializer>(list: &[$ty], s: S) -> Result<S::Ok, S::Error> {
                s.collect_seq(list.iter().map(Ref))
            }

            #[allow(dead_code, reason = "not every list is recorded on its own")]
            pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<$ty>, D::Error> {
                let list: Vec<Own> = Vec::deserialize(d)?;
                Ok(list.into_iter().map(|o| o.0).collect())
            }
        }
    };
}

shadow_list!(device_infos, DeviceInfo, DeviceInfoDef);
shadow_list!(driver, DriverInfo, DriverInfoDef);
shadow_list!(problem, NvmlProblem, NvmlProblemDef);
shadow_list!(device_sample, DeviceSample, DeviceSampleDef);
shadow_list!(host_sample, HostSample, HostSampleDef);
shadow_list!(host_processes, HostProcess, HostProcessDef);
shadow_list!(identity, WriterIdentity, WriterIdentityDef);
shadow_list!(allocator_devices, AllocatorDevice, AllocatorDeviceDef);
shadow_list!(allocator_events, AllocatorEvent, AllocatorEventDef);
shadow_list!(gpu_processes, GpuProcess, GpuProcessDef);
shadow_list!(pods, PodInfo, PodInfoDef);

/// A process's pod, left out for a process in none.
/// An optional reason, as `{"absent": ..., "detail": ...}` (cleaned when read, as every absence).
mod optional_absent {
    use super::*;

    pub fn serialize<S: Serializer>(value: &Option<Absent>, s: S) -> Result<S::Ok, S::Error> {
        value.as_ref().map(AbsentOut::from).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Absent>, D::Error> {
        Ok(Option::<AbsentWire>::deserialize(d)?.map(Absent::from))
    }
}

mod optional_pod {
    use super::*;

    pub fn serialize<S: Serializer>(value: &Option<PodInfo>, s: S) -> Result<S::Ok, S::Error> {
        value.as_ref().map(pods::Ref).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PodInfo>, D::Error> {
        Ok(Option::<pods::Own>::deserialize(d)?.map(|own| own.0))
    }
}

/// NVML's process list, or why it could not be read.
mod processes {
    use super::*;

    pub fn serialize<S: Serializer>(
        value: &Reading<Vec<GpuProcess>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Ok(list) => gpu_processes::serialize(list, s),
            Err(why) => AbsentOut::from(why).serialize(s),
        }
    }

    /// A process of a kind a later version added is left out and counted
    /// (`take_skipped_processes`): the rest of the list still reads.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Reading<Vec<GpuProcess>>, D::Error> {
        let value: Reading<Vec<GpuProcessIn>> = reading::deserialize(d)?;
        Ok(value.map(|list| list.into_iter().filter_map(GpuProcessIn::known).collect()))
    }
}

/// Every `kind` of `ProcessKindDef`: any other was added by a later version.
const PROCESS_KINDS: [(&str, ProcessKind); 3] = [
    ("compute", ProcessKind::Compute),
    ("graphics", ProcessKind::Graphics),
    ("compute_and_graphics", ProcessKind::ComputeAndGraphics),
];

thread_local! {
    /// GPU processes of a kind this version does not know, left out since last taken. Kept
    /// here because serde's `with` functions carry no state to count in; each reading thread
    /// takes its own count after every record.
    static SKIPPED_PROCESSES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many GPU processes of an unknown kind this thread's reading has left out since the
/// last call.
pub fn take_skipped_processes() -> u64 {
    SKIPPED_PROCESSES.with(|n| n.replace(0))
}

/// A recorded GPU process as read: `GpuProcessDef` with its kind read as a name, so that
/// a kind a later version added does not stop the reading.
#[derive(Deserialize)]
struct GpuProcessIn {
    pid: u32,
    kind: String,
    #[serde(with = "reading")]
    used_memory: Reading<u64>,
    #[serde(with = "reading")]
    sm_util: Reading<u32>,
    #[serde(with = "reading")]
    mem_util: Reading<u32>,
    #[serde(with = "reading")]
    enc_util: Reading<u32>,
    #[serde(with = "reading")]
    dec_util: Reading<u32>,
}

impl GpuProcessIn {
    /// The process; `None`, counted, when its kind is none this version knows.
    fn known(self) -> Option<GpuProcess> {
        let Some(&(_, kind)) = PROCESS_KINDS.iter().find(|(name, _)| *name == self.kind) else {
            SKIPPED_PROCESSES.with(|n| n.set(n.get() + 1));
            return None;
        };
        Some(GpuProcess {
            pid: self.pid,
            kind,
            used_memory: self.used_memory,
            sm_util: self.sm_util,
            mem_util: self.mem_util,
            enc_util: self.enc_util,
            dec_util: self.dec_util,
        })
    }
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "DriverInfo")]
pub struct DriverInfoDef {
    #[serde(with = "reading")]
    driver_version: Reading<String>,
    #[serde(with = "reading")]
    cuda_version: Reading<i32>,
    #[serde(with = "reading")]
    nvml_version: Reading<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "DeviceInfo")]
pub struct DeviceInfoDef {
    index: u32,
    #[serde(with = "reading")]
    name: Reading<String>,
    #[serde(with = "reading")]
    uuid: Reading<String>,
    #[serde(with = "reading")]
    pci_bus_id: Reading<String>,
    #[serde(with = "reading")]
    memory_total: Reading<u64>,
    #[serde(with = "reading")]
    power_limit_mw: Reading<u32>,
}

#[derive(Serialize, Deserialize)]
#[serde(
    remote = "NvmlProblem",
    rename_all = "snake_case",
    tag = "kind",
    content = "detail"
)]
pub enum NvmlProblemDef {
    LibraryNotFound(String),
    DriverNotLoaded,
    VersionMismatch,
    NoPermission,
    NoDevices,
    Other(String),
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "ProcessKind", rename_all = "snake_case")]
pub enum ProcessKindDef {
    Compute,
    Graphics,
    ComputeAndGraphics,
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "GpuProcess")]
pub struct GpuProcessDef {
    pid: u32,
    #[serde(with = "ProcessKindDef")]
    kind: ProcessKind,
    #[serde(with = "reading")]
    used_memory: Reading<u64>,
    #[serde(with = "reading")]
    sm_util: Reading<u32>,
    #[serde(with = "reading")]
    mem_util: Reading<u32>,
    #[serde(with = "reading")]
    enc_util: Reading<u32>,
    #[serde(with = "reading")]
    dec_util: Reading<u32>,
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "DeviceSample")]
pub struct DeviceSampleDef {
    index: u32,
    at_ms: u64,
    #[serde(with = "memory")]
    memory: Reading<MemoryInfo>,
    #[serde(with = "memory_peak", default, skip_serializing_if = "Option::is_none")]
    memory_peak: Option<MemoryPeak>,
    #[serde(with = "reading")]
    gpu_util: Reading<u32>,
    #[serde(with = "reading")]
    mem_util: Reading<u32>,
    #[serde(with = "reading")]
    temperature_c: Reading<u32>,
    #[serde(with = "reading")]
    power_mw: Reading<u32>,
    #[serde(with = "reading")]
    power_limit_mw: Reading<u32>,
    #[serde(with = "reading")]
    sm_clock_mhz: Reading<u32>,
    #[serde(with = "reading")]
    mem_clock_mhz: Reading<u32>,
    #[serde(with = "reading")]
    fan_percent: Reading<u32>,
    #[serde(with = "reading")]
    encoder_util: Reading<u32>,
    #[serde(with = "reading")]
    decoder_util: Reading<u32>,
    #[serde(with = "reading")]
    throttle_reasons: Reading<u64>,
    #[serde(with = "reading")]
    pstate: Reading<u32>,
    #[serde(with = "reading")]
    ecc_corrected: Reading<u64>,
    #[serde(with = "reading")]
    ecc_uncorrected: Reading<u64>,
    #[serde(
        with = "optional_reading",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pcie_tx_kbs: Option<Reading<u32>>,
    #[serde(
        with = "optional_reading",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pcie_rx_kbs: Option<Reading<u32>>,
    #[serde(with = "processes")]
    processes: Reading<Vec<GpuProcess>>,
    /// Not recorded: a replay shows the processes of a list read alone without saying which
    /// list was missing.
    #[serde(skip)]
    list_gaps: ListGaps,
    lost: bool,
    /// Left out for a GPU without MIG (and in recordings made before MIG was recorded).
    #[serde(
        with = "super::wire_mig::optional_mig",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    mig: Option<crate::model::MigState>,
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "HostProcess")]
pub struct HostProcessDef {
    pid: u32,
    local_pid: Option<u32>,
    #[serde(with = "reading")]
    user: Reading<String>,
    #[serde(with = "reading")]
    command: Reading<String>,
    #[serde(with = "reading")]
    rss_bytes: Reading<u64>,
    #[serde(with = "reading")]
    cpu_percent: Reading<f32>,
    container: Option<String>,
    /// The Kubernetes pod; left out for a process in none, and absent from recordings made
    /// before it was recorded.
    #[serde(
        with = "optional_pod",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pod: Option<PodInfo>,
    /// Why the pod could not be read (its cgroup unreadable): recorded so that a replay says
    /// n/a with the reason, as the live monitor did, rather than "in no pod". Left out when
    /// the cgroup was read, and in recordings made before it was recorded.
    #[serde(
        with = "optional_absent",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pod_unreadable: Option<crate::model::Absent>,
    uid: Option<u32>,
    /// Recorded so that replay and the report join a process to the channel its own writer
    /// wrote, as the live monitor does (same start time: not a reused pid). Never used to
    /// signal: replay refuses every signal whatever it holds (`tui::keys`). Absent from
    /// recordings made before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    starttime: Option<u64>,
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "PodInfo")]
pub struct PodInfoDef {
    uid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    qos: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    container_id: Option<String>,
    #[serde(with = "reading")]
    namespace: Reading<String>,
    #[serde(with = "reading")]
    name: Reading<String>,
    #[serde(with = "reading")]
    container: Reading<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "HostSample")]
pub struct HostSampleDef {
    at_ms: u64,
    /// Not recorded: a replay's host line shows no CPU or load.
    #[serde(skip)]
    load: Option<crate::model::HostLoad>,
    #[serde(with = "host_memory")]
    memory: Reading<HostMemory>,
    #[serde(with = "host_processes")]
    processes: Vec<HostProcess>,
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "WriterIdentity")]
pub struct WriterIdentityDef {
    file: String,
    pid: u32,
    kind: String,
    framework: String,
    rank: Option<i32>,
    local_rank: Option<i32>,
    world_size: Option<i32>,
    job_id: String,
    command: String,
    allocator_config: String,
    exact_peaks: bool,
    /// Absent from recordings made before attach existed.
    #[serde(default)]
    attached: bool,
    sample_period_us: u32,
    // Absent from recordings made before writers could record allocation history.
    #[serde(default)]
    sites: bool,
}

/// Every `state` of `WriterLivenessDef`: any other was added by a later version.
pub const LIVENESS_STATES: [&str; 4] = ["live", "stalled", "ended", "unreadable"];

#[derive(Serialize, Deserialize)]
#[serde(remote = "WriterLiveness", rename_all = "snake_case", tag = "state")]
pub enum WriterLivenessDef {
    Live,
    Stalled { silent_ms: u64 },
    Ended { crashed: bool, error: bool },
    Unreadable,
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "AllocatorDevice")]
pub struct AllocatorDeviceDef {
    slot: u16,
    ordinal: u32,
    uuid: Option<String>,
    pci_bus_id: Option<String>,
    #[serde(with = "reading")]
    total: Reading<u64>,
    #[serde(with = "reading")]
    allocated: Reading<u64>,
    #[serde(with = "reading")]
    allocated_peak: Reading<u64>,
    #[serde(with = "reading")]
    reserved: Reading<u64>,
    #[serde(with = "reading")]
    reserved_peak: Reading<u64>,
    #[serde(with = "reading")]
    active: Reading<u64>,
    #[serde(with = "reading")]
    inactive_split: Reading<u64>,
    #[serde(with = "reading")]
    requested: Reading<u64>,
    #[serde(with = "reading")]
    alloc_retries: Reading<u64>,
    #[serde(with = "reading")]
    ooms: Reading<u64>,
    #[serde(with = "reading")]
    device_free: Reading<u64>,
    #[serde(with = "reading")]
    limit: Reading<u64>,
    // Written under its old name: recordings made before the rename read the same.
    #[serde(rename = "true_peak", with = "reading")]
    interval_peak: Reading<u64>,
    #[serde(with = "reading")]
    step_peak: Reading<u64>,
}

// `EventKindDef`'s tags and field names are the table's (`channel::EventKind`); a kind with
// another tag was added by a later version. `the_recorded_kinds_are_the_tables` holds them.
#[derive(Serialize, Deserialize)]
#[serde(remote = "EventKind", rename_all = "snake_case", tag = "kind")]
pub enum EventKindDef {
    Oom {
        #[serde(with = "reading")]
        requested: Reading<u64>,
        #[serde(with = "reading")]
        device_free: Reading<u64>,
        #[serde(with = "reading")]
        device_total: Reading<u64>,
        #[serde(with = "reading")]
        allocated: Reading<u64>,
        #[serde(with = "reading")]
        reserved: Reading<u64>,
        #[serde(with = "reading")]
        retries: Reading<u64>,
    },
    OomError {
        #[serde(with = "reading")]
        requested: Reading<u64>,
    },
    PhaseBegin,
    PhaseEnd {
        #[serde(with = "reading")]
        peak: Reading<u64>,
    },
    StepEnd {
        #[serde(with = "reading")]
        peak_allocated: Reading<u64>,
        #[serde(with = "reading")]
        peak_reserved: Reading<u64>,
        #[serde(with = "reading")]
        duration_ns: Reading<u64>,
    },
    Mark,
    NewHighWater {
        #[serde(with = "reading")]
        peak: Reading<u64>,
        #[serde(with = "reading")]
        previous: Reading<u64>,
    },
    AllocRetry {
        #[serde(with = "reading")]
        retries: Reading<u64>,
    },
    Exit {
        error: bool,
    },
    // Recordings made before snapshots carried their figures read them as not available.
    SnapshotWritten {
        #[serde(default = "not_recorded", with = "reading")]
        path: Reading<String>,
        #[serde(default = "not_recorded", with = "reading")]
        size: Reading<u64>,
        #[serde(default = "not_recorded", with = "reading")]
        peak: Reading<u64>,
        #[serde(default = "not_recorded", with = "reading")]
        reason: Reading<u64>,
        #[serde(default = "not_recorded", with = "reading")]
        allocated: Reading<u64>,
        #[serde(default = "not_recorded", with = "reading")]
        max_entries: Reading<u64>,
        #[serde(default = "not_recorded", with = "reading")]
        deleted: Reading<u64>,
    },
    ForeignPeakReset {
        #[serde(with = "reading")]
        before: Reading<u64>,
        #[serde(with = "reading")]
        after: Reading<u64>,
    },
    EmptyCache {
        #[serde(with = "reading")]
        before: Reading<u64>,
        #[serde(with = "reading")]
        after: Reading<u64>,
    },
    MemoryKinds {
        #[serde(with = "reading")]
        parameters: Reading<u64>,
        #[serde(with = "reading")]
        buffers: Reading<u64>,
        #[serde(with = "reading")]
        gradients: Reading<u64>,
        #[serde(with = "reading")]
        optimizer_state: Reading<u64>,
    },
    Unknown {
        code: u16,
    },
}

/// A figure an older recording did not keep.
fn not_recorded<T>() -> Reading<T> {
    Err(Absent::NotAvailable)
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "AllocatorEvent")]
pub struct AllocatorEventDef {
    at_ms: u64,
    #[serde(rename = "event", with = "EventKindDef")]
    kind: EventKind,
    slot: Option<u16>,
    step: Option<u64>,
    label: String,
    // Absent from recordings made before events carried their phase.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    phase: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorded_kinds_are_the_tables() {
        use crate::channel::EventKind as RawKind;
        let raws = RawKind::KNOWN.iter().copied().chain([RawKind::Unknown(99)]);
        for raw in raws {
            let kind = EventKind::from_record(raw, [7; 6], || Ok("s.pickle".into()));
            assert_eq!(kind.raw(), raw);
            let written = EventKindDef::serialize(&kind, serde_json::value::Serializer).unwrap();
            let live = serde_json::to_value(&kind).unwrap();
            for (how, value) in [("recorded", &written), ("--json", &live)] {
                assert_eq!(value["kind"], raw.tag(), "{how} {raw:?}");
                let mut keys: Vec<&str> = value
                    .as_object()
                    .unwrap()
                    .keys()
                    .map(String::as_str)
                    .filter(|k| *k != "kind" && *k != "path")
                    .collect();
                let mut named: Vec<&str> = kind.figures().iter().map(|(n, _)| *n).collect();
                keys.sort_unstable();
                named.sort_unstable();
                assert_eq!(keys, named, "{how} {raw:?}");
            }
            assert_eq!(EventKindDef::deserialize(written).unwrap(), kind);
        }
    }

    #[test]
    fn why_a_pod_could_not_be_read_is_recorded_and_read_back_cleaned() {
        let mut process = HostProcess::unreadable(7, Some(7), Absent::NotAvailable, None);
        process.pod_unreadable = Some(Absent::Error(
            "cgroup unreadable: No such file \u{1b}[31m".into(),
        ));
        let written = HostProcessDef::serialize(&process, serde_json::value::Serializer).unwrap();
        assert_eq!(
            written["pod_unreadable"],
            serde_json::json!({"absent": "error", "detail": "cgroup unreadable: No such file \u{1b}[31m"})
        );
        let read = HostProcessDef::deserialize(written).unwrap();
        let Some(Absent::Error(text)) = read.pod_unreadable else {
            panic!("read back as {:?}", read.pod_unreadable);
        };
        assert!(
            text.starts_with("cgroup unreadable: No such file"),
            "{text}"
        );
        assert!(!text.contains('\u{1b}'), "{text:?}");

        // A process whose cgroup was read leaves the field out; older files lack it.
        process.pod_unreadable = None;
        let written = HostProcessDef::serialize(&process, serde_json::value::Serializer).unwrap();
        assert!(written.get("pod_unreadable").is_none(), "{written}");
        assert_eq!(
            HostProcessDef::deserialize(written).unwrap().pod_unreadable,
            None
        );
    }

    #[test]
    fn a_peak_s_holders_go_beside_its_bare_pair_and_read_back() {
        use crate::model::peak_owner::{HeldBy, NotAttributed, PeakHolders};
        let mut sample = DeviceSample::unreadable(0, 2_000, Absent::NotAvailable);
        let cases = [
            (
                PeakHolders::Read(vec![HeldBy { pid: 7, used: 3 }]),
                serde_json::json!([[7, 3]]),
            ),
            (
                PeakHolders::NotRead(NotAttributed::SmallRise { rise: 4 }),
                serde_json::json!({"rise": 4}),
            ),
            (
                PeakHolders::NotRead(NotAttributed::ListUnread(Absent::Timeout)),
                serde_json::json!({"absent": "timeout"}),
            ),
        ];
        for (holders, json) in cases {
            sample.memory_peak = Some(MemoryPeak {
                used: 10,
                at_ms: 1_500,
                holders: holders.clone(),
            });
            let written =
                DeviceSampleDef::serialize(&sample, serde_json::value::Serializer).unwrap();
            // The pair stays what readers before holders read.
            assert_eq!(written["memory_peak"], serde_json::json!([10, 1_500]));
            let beside = serde_json::to_value(peak_holders::of(&sample)).unwrap();
            assert_eq!(beside, json);
            let read: peak_holders::In = serde_json::from_value(beside).unwrap();
            assert_eq!(read.0, holders);
        }
        // The sample's own reading has nothing beside it.
        sample.memory_peak = Some(MemoryPeak {
            used: 10,
            at_ms: 2_000,
            holders: PeakHolders::TheSample,
        });
        assert!(peak_holders::of(&sample).is_none());
        // A pid beyond u32 is left out, and a malformed list is damage, not a zero.
        let read: peak_holders::In =
            serde_json::from_value(serde_json::json!([[u64::MAX, 3], [8, 1]])).unwrap();
        assert_eq!(read.0, PeakHolders::Read(vec![HeldBy { pid: 8, used: 1 }]));
        assert!(serde_json::from_value::<peak_holders::In>(serde_json::json!("lots")).is_err());
    }

    #[test]
    fn the_process_kinds_read_by_name_are_those_written() {
        for (name, kind) in PROCESS_KINDS {
            let written = ProcessKindDef::serialize(&kind, serde_json::value::Serializer).unwrap();
            assert_eq!(written, serde_json::Value::from(name));
        }
    }
}
