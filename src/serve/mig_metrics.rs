//! MIG instances in the exposition, labelled as dcgm-exporter labels them: a GPU in MIG mode
//! has its framebuffer families (`DCGM_FI_DEV_FB_USED`, `_FREE`, `_TOTAL`) per GPU instance,
//! with `GPU_I_PROFILE` and `GPU_I_ID` after `modelName`, and no whole-GPU sample of them, so
//! a `sum()` over a node counts each byte once. vramscope's own per-instance families carry
//! the same two labels beside `gpu` and `uuid`, and the instance's `mig_uuid` (what
//! `CUDA_VISIBLE_DEVICES` names).
//!
//! Utilisation has no per-instance sample: NVML does not support it in MIG mode.

use super::families::{Family, Labels, Metric, Number, Sample, bytes, gauge};
use super::fresh::fresh;
use super::published::Published;
use crate::model::figures::device as gpu;
use crate::model::{DeviceSnapshot, MemoryInfo, MigInstance};
use std::sync::Arc;

const MIB: u64 = 1 << 20;

/// A framebuffer family's name and the figure it exports.
type FbFamily = (&'static str, fn(&MemoryInfo) -> u64);

/// dcgm-exporter's framebuffer families (MiB), per instance.
const DCGM_FB: &[FbFamily] = &[
    (gpu::MEMORY_USED.dcgm_family(), |m| m.used),
    (gpu::MEMORY_FREE.dcgm_family(), |m| m.free),
    (gpu::MEMORY_TOTAL.dcgm_family(), |m| m.total),
];

/// The instance figures a family reads.
pub struct InstanceItem {
    memory: Option<MemoryInfo>,
    processes: Option<u64>,
    sm_util: Option<u32>,
}

const OWN: &[Metric<InstanceItem>] = &[
    bytes(
        "vramscope_mig_memory_used_bytes",
        "Memory used in the MIG instance.",
        |i| i.memory.map(|m| Number::Int(m.used)),
    ),
    bytes(
        "vramscope_mig_memory_total_bytes",
        "Memory of the MIG instance in total.",
        |i| i.memory.map(|m| Number::Int(m.total)),
    ),
    gauge(
        "vramscope_mig_sm_utilization_ratio",
        "Share of time the MIG instance's SMs were busy (0 to 1), from GPM; only with --gpm on a GPU that has GPM (Hopper or newer).",
        |i| i.sm_util.map(|v| Number::Float(f64::from(v) / 100.0)),
    ),
    gauge(
        "vramscope_mig_processes",
        "Processes the MIG instance's own lists name.",
        |i| i.processes.map(Number::Int),
    ),
];

/// Whether `d`'s framebuffer is exported per instance instead of for the whole GPU.
pub fn per_instance(d: &DeviceSnapshot) -> bool {
    instances(d).is_some()
}

/// The instances of a GPU in MIG mode, when they could be read and the sample is fresh.
fn instances(d: &DeviceSnapshot) -> Option<&[MigInstance]> {
    let sample = fresh(d)?;
    sample.mig_enabled()?.instances.as_deref().ok()
}

/// `pairs` with `GPU_I_PROFILE` and `GPU_I_ID` placed before `Hostname` (dcgm-exporter's
/// order), or at the end.
fn with_instance(
    mut pairs: Vec<(&'static str, String)>,
    instance: &MigInstance,
) -> Vec<(&'static str, String)> {
    let at = pairs
        .iter()
        .position(|(name, _)| *name == "Hostname")
        .unwrap_or(pairs.len());
    let mut extra = Vec::new();
    if let Ok(profile) = &instance.profile {
        extra.push(("GPU_I_PROFILE", profile.clone()));
    }
    if let Ok(id) = &instance.gpu_instance_id {
        extra.push(("GPU_I_ID", id.to_string()));
    }
    pairs.splice(at..at, extra);
    pairs
}

/// The per-instance samples of dcgm-exporter's framebuffer family `name`.
pub fn dcgm_samples(published: &Published, name: &str) -> Vec<Sample> {
    let Some(&(_, pick)) = DCGM_FB.iter().find(|(n, _)| *n == name) else {
        return Vec::new();
    };
    let mut samples = Vec::new();
    for (d, labels) in published
        .snapshot
        .devices
        .iter()
        .zip(&published.device_labels)
    {
        for instance in instances(d).unwrap_or_default() {
            if let Ok(m) = &instance.memory {
                samples.push(Sample {
                    labels: Arc::from(with_instance(labels.dcgm_pairs(), instance)),
                    value: Number::Int(pick(m) / MIB),
                });
            }
        }
    }
    samples
}

/// vramscope's per-instance families.
pub fn families(published: &Published) -> Vec<Family> {
    let mut items: Vec<(Labels, InstanceItem)> = Vec::new();
    for (d, labels) in published
        .snapshot
        .devices
        .iter()
        .zip(&published.device_labels)
    {
        for instance in instances(d).unwrap_or_default() {
            let mut pairs = with_instance(labels.pairs(), instance);
            if let Ok(uuid) = &instance.uuid {
                pairs.push(("mig_uuid", uuid.clone()));
            }
            let item = InstanceItem {
                memory: instance.memory.as_ref().ok().copied(),
                processes: instance.processes.as_ref().ok().map(|p| p.len() as u64),
                sm_util: instance.sm_util.as_ref().ok().copied(),
            };
            items.push((Arc::from(pairs), item));
        }
    }
    let refs: Vec<(Labels, &InstanceItem)> = items
        .iter()
        .map(|(labels, item)| (Arc::clone(labels), item))
        .collect();
    let mut families: Vec<Family> = OWN.iter().map(|m| m.family(&refs)).collect();
    families.push(Family {
        name: "vramscope_gpu_mig_pending",
        help: "1 while a change of the GPU's MIG mode waits for a GPU reset.",
        kind: super::families::Kind::Gauge,
        unit: None,
        samples: published
            .snapshot
            .devices
            .iter()
            .zip(&published.device_labels)
            .filter_map(|(d, labels)| {
                let mig = fresh(d)?.mig.as_ref()?;
                Some(Sample {
                    labels: Arc::from(labels.pairs()),
                    value: Number::Int(u64::from(mig.pending.is_some())),
                })
            })
            .collect(),
    });
    families
}
