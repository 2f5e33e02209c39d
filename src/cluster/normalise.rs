//! One model from several exporters' spellings. vramscope's own families and
//! dcgm-exporter's (and Prometheus's renamings of their labels) become `GpuReading`s and
//! `ProcessReading`s keyed by scrape target, GPU and pid.
//!
//! Names and labels understood:
//! - a node's name: `hostname` (dcgm-exporter since May 2026, vramscope), `Hostname`
//!   (dcgm-exporter before), else the target's host;
//! - per GPU: `gpu` (index), `UUID`/`uuid`, `modelName`/`model_name`; memory from
//!   `vramscope_gpu_memory_{used,total}_bytes` to the byte where present, else dcgm-exporter's
//!   `DCGM_FI_DEV_FB_{USED,TOTAL}` (MiB; total as used + free where it has no total);
//!   `DCGM_FI_DEV_GPU_UTIL`; vramscope's `vramscope_gpu_{stale,lost}`; the single-node figures
//!   as both exporters spell them: `DCGM_FI_DEV_GPU_TEMP`, `DCGM_FI_DEV_POWER_USAGE`, the
//!   limit as `DCGM_FI_DEV_ENFORCED_POWER_LIMIT` (vramscope; dcgm-exporter optionally) or
//!   `DCGM_FI_DEV_POWER_MGMT_LIMIT` (dcgm-exporter), `DCGM_FI_DEV_{SM,MEM}_CLOCK`, and
//!   vramscope's `vramscope_gpu_processes`;
//! - Kubernetes: `exported_pod`/`exported_namespace`/`exported_container` first (Prometheus
//!   renames the workload's labels so when it scrapes without `honor_labels`, and `pod` is
//!   then the exporter's own pod), then `pod`/`namespace`/`container`, then the older
//!   `pod_name`/`pod_namespace`/`container_name`;
//! - per process: `vramscope_process_*` with `gpu`, `uuid`, `pid`, `rank`, `local_rank`,
//!   `job_id` (`exported_job_id` as Prometheus may rename it).
//!
//! Every family is matched by the figure it carries (`model::figures`), so a family renamed
//! there is renamed here. Absent is not zero: a figure no family gives stays `None`.

use super::series::Series;
use crate::model::figures::{device as gpu, process, slot};
use std::collections::{BTreeMap, HashMap};

const MIB: f64 = 1_048_576.0;

/// A GPU: (scrape target, GPU index).
pub type GpuKey = (String, u32);
/// A process on a GPU: (scrape target, GPU index, pid).
pub type ProcKey = (String, u32, u32);

#[derive(Clone, Debug, Default, PartialEq)]
pub struct GpuReading {
    pub node: String,
    pub uuid: Option<String>,
    pub model: Option<String>,
    pub used_bytes: Option<u64>,
    pub total_bytes: Option<u64>,
    pub util_percent: Option<f64>,
    pub stale: bool,
    pub lost: bool,
    pub pod: Option<String>,
    pub namespace: Option<String>,
    pub container: Option<String>,
    /// Some `vramscope_gpu_*` family names it: a vramscope exporter serves it, so a figure
    /// it leaves out is one NVML does not give on that GPU.
    pub from_vramscope: bool,
    /// The single-node screen's figures, read only for the nodes shown open
    /// (`prometheus::DETAIL`).
    pub temperature_c: Option<f64>,
    pub power_w: Option<f64>,
    pub power_limit_w: Option<f64>,
    pub sm_clock_mhz: Option<f64>,
    pub mem_clock_mhz: Option<f64>,
    /// Processes NVML lists on it (`vramscope_gpu_processes`; dcgm-exporter has none).
    pub processes: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcessReading {
    pub node: String,
    pub uuid: Option<String>,
    pub job: Option<String>,
    pub rank: Option<u32>,
    pub local_rank: Option<u32>,
    pub command: Option<String>,
    pub user: Option<String>,
    pub running: Option<bool>,
    pub used_bytes: Option<u64>,
    pub allocated: Option<u64>,
    pub reserved: Option<u64>,
    pub peak: Option<u64>,
    pub ooms: Option<u64>,
    pub step: Option<u64>,
    /// The step counts the steps since an attach, not the job's own.
    pub steps_since_attach: Option<bool>,
    pub oom_in_steps: Option<u64>,
}

/// dcgm-exporter's used, free and total MiB of one GPU.
type MibFigures = (Option<f64>, Option<f64>, Option<f64>);

/// Everything one answer held, normalised.
#[derive(Debug, Default)]
pub struct Readings {
    pub gpus: BTreeMap<GpuKey, GpuReading>,
    pub processes: BTreeMap<ProcKey, ProcessReading>,
    /// Each target's node name.
    pub nodes: BTreeMap<String, String>,
    /// When each vramscope exporter sampled what it served (Unix ms).
    pub sampled_ms: BTreeMap<String, u64>,
}

/// A node's name as the labels give it; `None` when they do not.
pub fn host_label(s: &Series) -> Option<&str> {
    s.any_label(&["hostname", "Hostname"])
}

/// The node of a target without a host label: the target's host.
pub fn host_of(instance: &str) -> String {
    let host = match instance.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(rest),
        None => instance.rsplit_once(':').map_or(instance, |(h, _)| h),
    };
    host.to_string()
}

/// The process key of a per-process series.
pub fn proc_key(s: &Series) -> Option<ProcKey> {
    Some((
        s.instance.clone(),
        s.label("gpu")?.parse().ok()?,
        s.label("pid")?.parse().ok()?,
    ))
}

/// Normalises one answer.
pub fn normalise(series: &[Series]) -> Readings {
    let mut out = Readings::default();
    for s in series {
        if let Some(host) = host_label(s) {
            out.nodes
                .entry(s.instance.clone())
                .or_insert_with(|| host.to_string());
        }
    }
    let node_of = |instance: &str, nodes: &mut BTreeMap<String, String>| -> String {
        nodes
            .entry(instance.to_string())
            .or_insert_with(|| host_of(instance))
            .clone()
    };
    // dcgm-exporter's MiB figures, used only where vramscope's bytes are absent.
    let mut fb: HashMap<GpuKey, MibFigures> = HashMap::new();
    for s in series {
        if !s.value.is_finite() {
            continue;
        }
        if s.name == "vramscope_snapshot_timestamp_seconds" {
            out.sampled_ms
                .insert(s.instance.clone(), (s.value * 1000.0).max(0.0) as u64);
            continue;
        }
        if s.name.starts_with("vramscope_process_") {
            let Some(key) = proc_key(s) else { continue };
            let node = node_of(&s.instance, &mut out.nodes);
            let p = out.processes.entry(key).or_default();
            p.node = node;
            fill_identity(p, s);
            if let Some(set) = setter(&PROCESS_FIELDS, &s.name) {
                set(p, s.value);
            }
            continue;
        }
        let Some(index) = s.label("gpu").and_then(|g| g.parse::<u32>().ok()) else {
            continue;
        };
        let key = (s.instance.clone(), index);
        let gpu_field = s.name.strip_prefix("vramscope_gpu_");
        let dcgm_field = s.name.strip_prefix("DCGM_FI_DEV_");
        if gpu_field.is_none() && dcgm_field.is_none() {
            continue;
        }
        let node = node_of(&s.instance, &mut out.nodes);
        let g = out.gpus.entry(key.clone()).or_default();
        g.node = node;
        g.from_vramscope |= gpu_field.is_some();
        fill_gpu_identity(g, s);
        if let Some(set) = setter(&GPU_FIELDS, &s.name) {
            set(g, s.value);
        } else if let Some(set) = setter(&FB_FIELDS, &s.name) {
            set(fb.entry(key).or_default(), s.value);
        }
    }
    for (key, (used, free, total)) in fb {
        let Some(g) = out.gpus.get_mut(&key) else {
            continue;
        };
        if g.used_bytes.is_none() {
            g.used_bytes = used.and_then(|u| count(u * MIB));
        }
        if g.total_bytes.is_none() {
            let total = total.or(used.zip(free).map(|(u, f)| u + f));
            g.total_bytes = total.and_then(|t| count(t * MIB));
        }
    }
    // A process's GPU's UUID where its own series did not say it.
    for ((instance, gpu, _), p) in &mut out.processes {
        if p.uuid.is_none() {
            p.uuid = out
                .gpus
                .get(&(instance.clone(), *gpu))
                .and_then(|g| g.uuid.clone());
        }
    }
    out
}

fn fill_identity(p: &mut ProcessReading, s: &Series) {
    set_if_none(&mut p.uuid, s.any_label(&["uuid", "UUID"]));
    set_if_none(&mut p.job, s.any_label(&["job_id", "exported_job_id"]));
    set_if_none(&mut p.command, s.label("command"));
    set_if_none(&mut p.user, s.label("user"));
    if p.rank.is_none() {
        p.rank = s.label("rank").and_then(|r| r.parse().ok());
    }
    if p.local_rank.is_none() {
        p.local_rank = s.label("local_rank").and_then(|r| r.parse().ok());
    }
}

fn fill_gpu_identity(g: &mut GpuReading, s: &Series) {
    set_if_none(&mut g.uuid, s.any_label(&["UUID", "uuid"]));
    set_if_none(&mut g.model, s.any_label(&["modelName", "model_name"]));
    set_if_none(
        &mut g.pod,
        s.any_label(&["exported_pod", "pod", "pod_name"]),
    );
    set_if_none(
        &mut g.namespace,
        s.any_label(&["exported_namespace", "namespace", "pod_namespace"]),
    );
    set_if_none(
        &mut g.container,
        s.any_label(&["exported_container", "container", "container_name"]),
    );
}

fn set_if_none(slot: &mut Option<String>, value: Option<&str>) {
    if slot.is_none() {
        *slot = value.map(str::to_string);
    }
}

/// A family (named by its figure, `model::figures`) and the field its value sets.
type Setter<R> = (Option<&'static str>, fn(&mut R, f64));

/// The setter of the family `name`, if this model reads it.
fn setter<R>(table: &[Setter<R>], name: &str) -> Option<fn(&mut R, f64)> {
    table
        .iter()
        .find(|(family, _)| *family == Some(name))
        .map(|(_, set)| *set)
}

const PROCESS_FIELDS: [Setter<ProcessReading>; 9] = [
    (Some("vramscope_process_running"), |p, v| {
        p.running = Some(v > 0.0)
    }),
    (process::USED_MEMORY.family, |p, v| p.used_bytes = count(v)),
    (process::STEP.family, |p, v| p.step = count(v)),
    (process::STEPS_FROM.family, |p, v| {
        p.steps_since_attach = Some(v > 0.0)
    }),
    (process::ALLOCATED.family, |p, v| p.allocated = count(v)),
    (process::RESERVED.family, |p, v| p.reserved = count(v)),
    (process::TRUE_PEAK.family, |p, v| p.peak = count(v)),
    (slot::OOMS.family, |p, v| p.ooms = count(v)),
    (
        Some("vramscope_process_allocator_oom_forecast_steps"),
        |p, v| p.oom_in_steps = count(v),
    ),
];

/// vramscope's families in base units, dcgm-exporter's in its own (watts, %, MHz).
const GPU_FIELDS: [Setter<GpuReading>; 12] = [
    (gpu::MEMORY_USED.family, |g, v| g.used_bytes = count(v)),
    (gpu::MEMORY_TOTAL.family, |g, v| g.total_bytes = count(v)),
    (gpu::STALE.family, |g, v| g.stale = v > 0.0),
    (gpu::LOST.family, |g, v| g.lost = v > 0.0),
    (gpu::PROCESS_COUNT.family, |g, v| g.processes = count(v)),
    (gpu::TEMPERATURE_C.dcgm, |g, v| {
        g.temperature_c = not_negative(v)
    }),
    (gpu::POWER_MW.dcgm, |g, v| g.power_w = not_negative(v)),
    // The enforced limit wins over dcgm-exporter's default management limit, as NVML's
    // does, whichever comes first; either may be in its counters file.
    (gpu::POWER_LIMIT_MW.dcgm, |g, v| {
        g.power_limit_w = not_negative(v)
    }),
    (gpu::POWER_LIMIT_MW.dcgm_default, |g, v| {
        g.power_limit_w = g.power_limit_w.or(not_negative(v));
    }),
    (gpu::SM_CLOCK_MHZ.dcgm, |g, v| {
        g.sm_clock_mhz = not_negative(v)
    }),
    (gpu::MEM_CLOCK_MHZ.dcgm, |g, v| {
        g.mem_clock_mhz = not_negative(v)
    }),
    (gpu::GPU_UTIL.dcgm, |g, v| {
        g.util_percent = Some(v.clamp(0.0, 100.0))
    }),
];

/// dcgm-exporter's MiB figures, used only where vramscope's bytes are absent.
const FB_FIELDS: [Setter<MibFigures>; 3] = [
    (gpu::MEMORY_USED.dcgm, |m, v| m.0 = Some(v)),
    (gpu::MEMORY_FREE.dcgm, |m, v| m.1 = Some(v)),
    (gpu::MEMORY_TOTAL.dcgm, |m, v| m.2 = Some(v)),
];

fn not_negative(v: f64) -> Option<f64> {
    Some(v).filter(|v| *v >= 0.0)
}

/// A count or byte figure: finite, not negative, rounded.
fn count(v: f64) -> Option<u64> {
    (v.is_finite() && v >= 0.0).then(|| v.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(name: &str, labels: &[(&str, &str)], value: f64, instance: &str) -> Series {
        Series::new(
            name,
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            value,
            instance,
        )
    }

    #[test]
    fn dcgm_spellings_old_and_new_and_pod_aliases() {
        let r = normalise(&[
            s(
                "DCGM_FI_DEV_FB_USED",
                &[
                    ("gpu", "0"),
                    ("Hostname", "old-node"),
                    ("UUID", "GPU-a"),
                    ("pod", "dcgm-exporter-x"),
                    ("exported_pod", "train-0"),
                    ("exported_namespace", "ml"),
                ],
                1024.0,
                "10.0.0.1:9400",
            ),
            s(
                "DCGM_FI_DEV_FB_FREE",
                &[("gpu", "0")],
                3072.0,
                "10.0.0.1:9400",
            ),
            s(
                "DCGM_FI_DEV_GPU_UTIL",
                &[("gpu", "0")],
                87.0,
                "10.0.0.1:9400",
            ),
            s(
                "DCGM_FI_DEV_FB_USED",
                &[
                    ("gpu", "1"),
                    ("hostname", "new-node"),
                    ("pod_name", "old-style"),
                    ("pod_namespace", "ns"),
                ],
                2.0,
                "10.0.0.2:9400",
            ),
            s("DCGM_FI_DEV_FB_USED", &[("gpu", "0")], 5.0, "10.0.0.3:9400"),
        ]);
        let g = &r.gpus[&("10.0.0.1:9400".to_string(), 0)];
        assert_eq!(g.node, "old-node");
        assert_eq!(g.used_bytes, Some(1024 << 20));
        assert_eq!(g.total_bytes, Some(4096 << 20));
        assert_eq!(g.util_percent, Some(87.0));
        assert_eq!(g.pod.as_deref(), Some("train-0"));
        assert_eq!(g.namespace.as_deref(), Some("ml"));
        let g = &r.gpus[&("10.0.0.2:9400".to_string(), 1)];
        assert_eq!(g.node, "new-node");
        assert_eq!(
            (g.pod.as_deref(), g.namespace.as_deref()),
            (Some("old-style"), Some("ns"))
        );
        // No total, no free: absent, not zero; no utilisation either.
        assert_eq!((g.total_bytes, g.util_percent), (None, None));
        assert_eq!(r.gpus[&("10.0.0.3:9400".to_string(), 0)].node, "10.0.0.3");
    }

    #[test]
    fn vramscope_bytes_win_over_mib_and_processes_take_their_node() {
        let i = "127.0.0.1:9401";
        let r = normalise(&[
            s(
                "DCGM_FI_DEV_FB_USED",
                &[("gpu", "0"), ("hostname", "n1")],
                1.0,
                i,
            ),
            s(
                "vramscope_gpu_memory_used_bytes",
                &[("gpu", "0"), ("uuid", "GPU-x")],
                1_500_000.0,
                i,
            ),
            s("vramscope_gpu_memory_total_bytes", &[("gpu", "0")], 8e9, i),
            s(
                "vramscope_process_allocator_allocated_bytes",
                &[("gpu", "0"), ("pid", "42"), ("rank", "3"), ("job_id", "j")],
                9e9,
                i,
            ),
            s(
                "vramscope_process_allocator_ooms_total",
                &[("gpu", "0"), ("pid", "42")],
                1.0,
                i,
            ),
            s(
                "vramscope_process_step",
                &[("gpu", "0"), ("pid", "42")],
                40.0,
                i,
            ),
            s(
                "vramscope_process_step",
                &[("gpu", "0"), ("pid", "x")],
                40.0,
                i,
            ),
            s(
                "vramscope_snapshot_timestamp_seconds",
                &[],
                1_700_000_000.25,
                i,
            ),
        ]);
        let g = &r.gpus[&(i.to_string(), 0)];
        assert_eq!(
            (g.used_bytes, g.total_bytes),
            (Some(1_500_000), Some(8_000_000_000))
        );
        let p = &r.processes[&(i.to_string(), 0, 42)];
        assert_eq!(p.node, "n1");
        assert_eq!((p.rank, p.job.as_deref()), (Some(3), Some("j")));
        assert_eq!(
            (p.allocated, p.ooms, p.step),
            (Some(9_000_000_000), Some(1), Some(40))
        );
        assert_eq!(p.uuid.as_deref(), Some("GPU-x"));
        assert_eq!(p.reserved, None);
        assert_eq!(r.processes.len(), 1);
        assert_eq!(r.sampled_ms[i], 1_700_000_000_250);
    }
}
