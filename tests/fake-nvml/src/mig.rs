//! MIG (Multi-Instance GPU) in a scenario: a device's mode and its instances over time, and
//! the MIG device handles that name them.
//!
//! A MIG handle encodes its parent's index and the instance's position in the scenario, so a
//! handle names one instance for ever: once the instance is destroyed (its `until` passed, or
//! the scenario was rewritten without it) the handle is refused with 2 `INVALID_ARGUMENT`, as
//! a real driver's stale handle would be, and a client must enumerate again.

use serde::Deserialize;

use crate::scenario::{DeviceSpec, ProcessLists, check_time};

/// A device's MIG configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigSpec {
    /// MIG mode now (`nvmlDeviceGetMigMode`'s `currentMode`).
    pub current: bool,
    /// MIG mode after the next GPU reset; absent = `current`.
    #[serde(default)]
    pub pending: Option<bool>,
    /// `nvmlDeviceGetMaxMigDeviceCount` while MIG is enabled (7 on an A100 or H100).
    #[serde(default = "default_max_devices")]
    pub max_devices: u32,
    /// GPM (Hopper and newer) answers per GPU instance (`nvmlGpmMigSampleGet`); false: it
    /// answers 3 `NOT_SUPPORTED`, as on an A100.
    #[serde(default)]
    pub gpm: bool,
    /// Instances (GPU instance + compute instance pairs), each alive from `from` until
    /// `until`. Only while `current` is true do they exist.
    #[serde(default)]
    pub instances: Vec<MigInstanceSpec>,
}

/// One MIG device (a compute instance inside a GPU instance).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigInstanceSpec {
    pub gpu_instance_id: u32,
    pub compute_instance_id: u32,
    /// The profile as nvidia-smi names it, e.g. `1g.10gb`; the MIG device's name is
    /// `"<parent name> MIG <profile>"`, as NVML names it.
    pub profile: String,
    /// `MIG-<uuid>`.
    pub uuid: String,
    /// Bytes.
    pub memory_total: u64,
    /// Scenario seconds from which the instance exists.
    #[serde(default)]
    pub from: f64,
    /// Scenario seconds from which it no longer exists (absent = for ever).
    #[serde(default)]
    pub until: Option<f64>,
    /// Step-wise used memory.
    #[serde(default)]
    pub timeline: Vec<MigPoint>,
    /// Step-wise process lists, as a device's; an entry without instance ids gets this
    /// instance's.
    #[serde(default)]
    pub processes: Vec<ProcessLists>,
}

/// A point of an instance's timeline.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigPoint {
    pub t: f64,
    /// Bytes used in the instance.
    #[serde(default)]
    pub memory_used: Option<u64>,
    /// GPM's `NVML_GPM_METRIC_SM_UTIL` over an interval ending here, percent.
    #[serde(default)]
    pub sm_util: Option<f64>,
}

fn default_max_devices() -> u32 {
    7
}

/// MIG handles start here: far above any parent handle (`index + 1`).
const MIG_HANDLE_BASE: usize = 1 << 32;
/// Room per parent device for instance entries.
const ENTRIES_PER_DEVICE: usize = 1 << 16;

/// The handle of instance `entry` (its position in `mig.instances`) of device `device`.
pub fn handle_of(device: usize, entry: usize) -> usize {
    MIG_HANDLE_BASE + device * ENTRIES_PER_DEVICE + entry
}

/// `(device, entry)` from a MIG handle value; `None` when it is not one.
pub fn decode(handle: usize) -> Option<(usize, usize)> {
    let offset = handle.checked_sub(MIG_HANDLE_BASE)?;
    Some((offset / ENTRIES_PER_DEVICE, offset % ENTRIES_PER_DEVICE))
}

impl MigSpec {
    /// The pending mode (the current one unless a change waits for a reset).
    pub fn pending(&self) -> bool {
        self.pending.unwrap_or(self.current)
    }

    /// Whether instance `entry` exists at `t`.
    pub fn alive(&self, entry: usize, t: f64) -> bool {
        self.current
            && self
                .instances
                .get(entry)
                .is_some_and(|i| i.from <= t && i.until.is_none_or(|u| t < u))
    }

    /// The entries of the instances alive at `t`, in scenario order: MIG device index `k` is
    /// the `k`-th of them.
    pub fn alive_entries(&self, t: f64) -> Vec<usize> {
        (0..self.instances.len())
            .filter(|&e| self.alive(e, t))
            .collect()
    }

    pub(crate) fn validate(&mut self, what: &str) -> Result<(), String> {
        if self.instances.len() >= ENTRIES_PER_DEVICE {
            return Err(format!("{what}.instances: too many"));
        }
        for (i, inst) in self.instances.iter_mut().enumerate() {
            let what = format!("{what}.instances[{i}]");
            check_time(&what, inst.from)?;
            if let Some(until) = inst.until {
                check_time(&what, until)?;
            }
            for (field, v) in [("profile", &inst.profile), ("uuid", &inst.uuid)] {
                if v.len() >= 80 || v.contains('\0') {
                    return Err(format!("{what}.{field}: must be < 80 bytes without NUL"));
                }
            }
            for p in &inst.timeline {
                check_time(&format!("{what}.timeline"), p.t)?;
            }
            for p in &inst.processes {
                check_time(&format!("{what}.processes"), p.t)?;
            }
            inst.timeline.sort_by(|a, b| a.t.total_cmp(&b.t));
            inst.processes.sort_by(|a, b| a.t.total_cmp(&b.t));
        }
        Ok(())
    }
}

impl MigInstanceSpec {
    /// GPM's SM utilisation at `t`: the last point up to `t` that sets it.
    pub fn sm_util_at(&self, t: f64) -> Option<f64> {
        self.timeline
            .iter()
            .take_while(|p| p.t <= t)
            .filter_map(|p| p.sm_util)
            .last()
    }

    /// Used memory at `t`: the last point up to `t` that sets it.
    pub fn memory_used_at(&self, t: f64) -> Option<u64> {
        self.timeline
            .iter()
            .take_while(|p| p.t <= t)
            .filter_map(|p| p.memory_used)
            .last()
    }
}

/// Whether MIG mode is on now on `d` (by `mig` or the older `mig_mode`).
pub fn mig_enabled(d: &DeviceSpec) -> bool {
    d.mig
        .as_ref()
        .map_or(d.mig_mode == Some(true), |m| m.current)
}
