//! A GPU's MIG (Multi-Instance GPU) state as one sample reads it: the mode, a mode change
//! waiting for a reset, and each instance with its profile, memory and processes.
//!
//! NVML does not support device utilisation in MIG mode, neither on the GPU nor on an
//! instance (nvml.h: "On MIG-enabled GPUs, querying device utilization rates is not currently
//! supported"), so a MIG GPU's utilisation is absent with that reason, never a zero.

use super::absent::{Absent, Reading};
use super::memory::MemoryInfo;
use serde::Serialize;

/// The absence a MIG GPU's utilisation figures carry.
pub fn mig_util_absent() -> Absent {
    Absent::MigMode
}

/// MIG on one GPU. Only GPUs with MIG enabled, or with a change of mode pending, carry one.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MigState {
    /// MIG mode now.
    pub enabled: bool,
    /// MIG mode after the next GPU reset, where it differs from `enabled`.
    pub pending: Option<bool>,
    /// The instances (a GPU instance and a compute instance each), MIG device index order;
    /// empty while MIG is off.
    pub instances: Reading<Vec<MigInstance>>,
    /// Why the mode could not be read (`nvmlDeviceGetMigMode` refused: no permission...):
    /// then `enabled` says only whether instances were found by walking them anyway, and
    /// every output gives the mode as n/a with this reason rather than "disabled".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode_unread: Option<Absent>,
}

impl MigState {
    /// Why the mode is unknown, in words for every output: `MIG mode unreadable: no
    /// permission`.
    pub fn mode_unread_reason(&self) -> Option<Absent> {
        self.mode_unread
            .as_ref()
            .map(|why| Absent::Error(format!("MIG mode unreadable: {}", why.reason())))
    }

    /// The pending change in words, for every output: `MIG pending: reset the GPU to turn it
    /// on`.
    pub fn pending_note(&self) -> Option<String> {
        let to = self.pending?;
        let what = if to { "on" } else { "off" };
        Some(format!("MIG pending: reset the GPU to turn it {what}"))
    }

    /// The instance whose processes include `pid`.
    pub fn instance_of_pid(&self, pid: u32) -> Option<&MigInstance> {
        self.instances.as_ref().ok()?.iter().find(|i| {
            i.processes
                .as_ref()
                .is_ok_and(|p| p.iter().any(|p| p.pid == pid))
        })
    }

    /// The instance with MIG device UUID `uuid`.
    pub fn instance_by_uuid(&self, uuid: &str) -> Option<&MigInstance> {
        self.instances
            .as_ref()
            .ok()?
            .iter()
            .find(|i| i.uuid.as_deref() == Ok(uuid))
    }
}

/// One MIG device: a compute instance inside a GPU instance.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MigInstance {
    pub gpu_instance_id: Reading<u32>,
    pub compute_instance_id: Reading<u32>,
    /// `MIG-<uuid>`: what CUDA_VISIBLE_DEVICES names and what a writer publishes.
    pub uuid: Reading<String>,
    /// The profile, `1g.10gb`, from the MIG device's name (`"<GPU> MIG 1g.10gb"`).
    pub profile: Reading<String>,
    pub memory: Reading<MemoryInfo>,
    /// Processes in this instance, from the MIG device's own process lists.
    pub processes: Reading<Vec<MigProcess>>,
    /// Busy share of the instance's SMs; absent unless GPM supplies it.
    pub sm_util: Reading<u32>,
}

impl MigInstance {
    /// `GI 1 / CI 0`-style label, `n/a` parts where an id was unreadable.
    pub fn ids_label(&self) -> String {
        let id = |r: &Reading<u32>| {
            r.as_ref()
                .map_or_else(|_| "n/a".to_string(), u32::to_string)
        };
        format!(
            "GI {} CI {}",
            id(&self.gpu_instance_id),
            id(&self.compute_instance_id)
        )
    }
}

/// The MIG instance a process row runs in: the instance's identity without its figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RowInstance {
    pub gpu_instance_id: Reading<u32>,
    pub compute_instance_id: Reading<u32>,
    pub profile: Reading<String>,
    pub uuid: Reading<String>,
    /// The instance's memory: what a process in it can use, so what its VRAM share is of.
    #[serde(skip)]
    pub memory_total: Reading<u64>,
}

impl From<&MigInstance> for RowInstance {
    fn from(i: &MigInstance) -> Self {
        RowInstance {
            gpu_instance_id: i.gpu_instance_id.clone(),
            compute_instance_id: i.compute_instance_id.clone(),
            profile: i.profile.clone(),
            uuid: i.uuid.clone(),
            memory_total: i.memory.as_ref().map(|m| m.total).map_err(Clone::clone),
        }
    }
}

/// A process as a MIG device's process list reports it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MigProcess {
    pub pid: u32,
    pub used_memory: Reading<u64>,
}

/// A MIG device UUID NVML lists now, with the index of its GPU: how a writer that names its
/// CUDA device by a `MIG-...` UUID is joined to the GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigUuid {
    pub uuid: String,
    pub gpu: u32,
}

/// The parent GPU's UUID in a legacy MIG device name, `MIG-GPU-<uuid>/<GI>/<CI>` (drivers
/// before R470 named MIG devices so in `CUDA_VISIBLE_DEVICES`).
pub fn legacy_parent_uuid(uuid: &str) -> Option<&str> {
    let rest = uuid
        .get(..8)
        .filter(|p| p.eq_ignore_ascii_case("MIG-GPU-"))
        .map(|_| &uuid[4..])?;
    rest.split('/').next()
}

/// The profile in a MIG device's name: the word after `MIG ` (`"NVIDIA A100-SXM4-40GB MIG
/// 1g.5gb"` -> `1g.5gb`); `None` when the name has none.
pub fn profile_from_name(name: &str) -> Option<String> {
    let (_, rest) = name.rsplit_once("MIG ")?;
    let profile = rest.split_whitespace().next()?;
    (!profile.is_empty()).then(|| profile.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_is_the_word_after_mig() {
        assert_eq!(
            profile_from_name("NVIDIA A100-SXM4-40GB MIG 1g.5gb").as_deref(),
            Some("1g.5gb")
        );
        assert_eq!(
            profile_from_name("NVIDIA H100 80GB HBM3 MIG 3g.40gb+me").as_deref(),
            Some("3g.40gb+me")
        );
        assert_eq!(profile_from_name("NVIDIA H100 80GB HBM3"), None);
        assert_eq!(profile_from_name("x MIG "), None);
    }

    #[test]
    fn a_legacy_mig_name_names_its_gpu() {
        assert_eq!(
            legacy_parent_uuid("MIG-GPU-5c6b9d3e-0000-1111-2222-333344445555/1/0"),
            Some("GPU-5c6b9d3e-0000-1111-2222-333344445555")
        );
        assert_eq!(
            legacy_parent_uuid("MIG-5c6b9d3e-0000-1111-2222-333344445555"),
            None
        );
        assert_eq!(legacy_parent_uuid("GPU-5c6b"), None);
        assert_eq!(legacy_parent_uuid("MIG-"), None);
    }

    #[test]
    fn a_pending_change_says_to_reset() {
        let state = MigState {
            enabled: false,
            pending: Some(true),
            instances: Ok(Vec::new()),
            mode_unread: None,
        };
        assert_eq!(
            state.pending_note().as_deref(),
            Some("MIG pending: reset the GPU to turn it on")
        );
        let settled = MigState {
            pending: None,
            ..state
        };
        assert_eq!(settled.pending_note(), None);
    }
}
