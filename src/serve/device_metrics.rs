//! Per-GPU families. Where dcgm-exporter has an equivalent, its name, unit and labels are
//! kept (MiB, %, °C, W, MHz), so existing dashboards and alerts work unchanged; the rest is
//! `vramscope_gpu_*` in base units, labelled in snake_case (`gpu`, `uuid`, ...) like the
//! per-process families.
//!
//! A stale GPU (a driver call hanging) or a lost one exports no sampled figures: they would
//! be old values presented as current. `vramscope_gpu_stale` and `vramscope_gpu_lost` say why.

use super::families::{Family, Labels, Metric, Number, bytes, counter, gauge};
use super::fresh::fresh;
use super::published::Published;
use crate::model::figures::device as gpu;
use crate::model::{DeviceSnapshot, MemoryInfo, Reading};
use std::sync::Arc;

type D = DeviceSnapshot;

const MIB: u64 = 1 << 20;
/// NVML reports PCIe throughput in KB/s.
const KIB: u64 = 1 << 10;

/// dcgm-exporter's families, with its help texts.
const DCGM: &[Metric<D>] = &[
    gauge(
        gpu::MEMORY_USED.dcgm_family(),
        "Framebuffer memory used (in MiB).",
        |d| mib(d, |m| m.used),
    ),
    gauge(
        gpu::MEMORY_FREE.dcgm_family(),
        "Framebuffer memory free (in MiB).",
        |d| mib(d, |m| m.free),
    ),
    gauge(
        gpu::MEMORY_TOTAL.dcgm_family(),
        "Framebuffer memory total (in MiB).",
        |d| mib(d, |m| m.total),
    ),
    gauge(
        gpu::MEMORY_RESERVED.dcgm_family(),
        "Framebuffer memory reserved by the driver (in MiB).",
        |d| {
            let reserved = memory(d)?.reserved?;
            Some(Number::Int(reserved / MIB))
        },
    ),
    gauge(
        gpu::GPU_UTIL.dcgm_family(),
        "GPU utilization (in %).",
        |d| int(&fresh(d)?.gpu_util),
    ),
    gauge(
        gpu::MEM_UTIL.dcgm_family(),
        "Memory utilization (in %).",
        |d| int(&fresh(d)?.mem_util),
    ),
    gauge(
        gpu::ENCODER_UTIL.dcgm_family(),
        "Encoder utilization (in %).",
        |d| int(&fresh(d)?.encoder_util),
    ),
    gauge(
        gpu::DECODER_UTIL.dcgm_family(),
        "Decoder utilization (in %).",
        |d| int(&fresh(d)?.decoder_util),
    ),
    gauge(
        gpu::TEMPERATURE_C.dcgm_family(),
        "GPU temperature (in C).",
        |d| int(&fresh(d)?.temperature_c),
    ),
    gauge(gpu::POWER_MW.dcgm_family(), "Power draw (in W).", |d| {
        watts(&fresh(d)?.power_mw)
    }),
    gauge(
        gpu::POWER_LIMIT_MW.dcgm_family(),
        "Enforced power limit (in W).",
        |d| watts(&fresh(d)?.power_limit_mw),
    ),
    gauge(
        gpu::SM_CLOCK_MHZ.dcgm_family(),
        "SM clock frequency (in MHz).",
        |d| int(&fresh(d)?.sm_clock_mhz),
    ),
    gauge(
        gpu::MEM_CLOCK_MHZ.dcgm_family(),
        "Memory clock frequency (in MHz).",
        |d| int(&fresh(d)?.mem_clock_mhz),
    ),
    gauge(gpu::FAN_PERCENT.dcgm_family(), "Fan speed (in %).", |d| {
        int(&fresh(d)?.fan_percent)
    }),
    gauge(
        gpu::PSTATE.dcgm_family(),
        "Performance state (0 fastest to 15 slowest).",
        |d| int(&fresh(d)?.pstate),
    ),
    gauge(
        gpu::THROTTLE_REASONS.dcgm_family(),
        "Current clock throttle reasons (NVML bitmask).",
        |d| int(&fresh(d)?.throttle_reasons),
    ),
];

/// vramscope's own per-GPU families.
const VRAMSCOPE: &[Metric<D>] = &[
    bytes(
        gpu::MEMORY_TOTAL.prometheus(),
        "GPU memory in total (DCGM_FI_DEV_FB_TOTAL to the byte, to divide per-process bytes by).",
        |d| d.memory_total().map(Number::Int),
    ),
    bytes(
        gpu::MEMORY_USED.prometheus(),
        "GPU memory used, excluding driver-reserved memory (DCGM_FI_DEV_FB_USED to the byte).",
        |d| memory(d).map(|m| Number::Int(m.used)),
    ),
    bytes(
        gpu::INSTRUMENTED_RESERVED.prometheus(),
        "Bytes held by the caching allocators of running instrumented processes on this GPU.",
        |d| d.instrumented_reserved.map(Number::Int),
    ),
    gauge(
        gpu::PROCESS_COUNT.prometheus(),
        "Processes NVML lists on this GPU.",
        |d| {
            let n = fresh(d)?.processes.as_ref().ok()?.len();
            Some(Number::Int(n as u64))
        },
    ),
    counter(
        gpu::ECC_CORRECTED.prometheus(),
        "Corrected (single-bit) ECC errors since the driver loaded.",
        |d| int(&fresh(d)?.ecc_corrected),
    ),
    counter(
        gpu::ECC_UNCORRECTED.prometheus(),
        "Uncorrected (double-bit) ECC errors since the driver loaded.",
        |d| int(&fresh(d)?.ecc_uncorrected),
    ),
    gauge(
        gpu::PCIE_TX_KBS.prometheus(),
        "PCIe transmit throughput (sampled only with --pcie).",
        |d| kib_per_second(fresh(d)?.pcie_tx_kbs.as_ref()?),
    ),
    gauge(
        gpu::PCIE_RX_KBS.prometheus(),
        "PCIe receive throughput (sampled only with --pcie).",
        |d| kib_per_second(fresh(d)?.pcie_rx_kbs.as_ref()?),
    ),
    gauge(
        gpu::STALE.prometheus(),
        "1 while a driver call for this GPU hangs: its sampled figures are left out until it answers.",
        |d| Some(Number::Int(u64::from(d.stale))),
    ),
    gauge(
        gpu::LOST.prometheus(),
        "1 when the GPU stopped answering (fell off the bus): its sampled figures are left out.",
        |d| {
            let lost = d.sample.as_ref().is_some_and(|s| s.lost);
            Some(Number::Int(u64::from(lost)))
        },
    ),
];

/// Every per-GPU family.
pub fn families(published: &Published) -> Vec<Family> {
    let devices = || {
        published
            .snapshot
            .devices
            .iter()
            .zip(&published.device_labels)
    };
    let dcgm: Vec<(Labels, &D)> = devices()
        .map(|(d, labels)| (Arc::from(labels.dcgm_pairs()), d))
        .collect();
    let own: Vec<(Labels, &D)> = devices()
        .map(|(d, labels)| (Arc::from(labels.pairs()), d))
        .collect();
    let dcgm_families = DCGM.iter().map(|m| {
        let mut family = m.family(&dcgm);
        family
            .samples
            .extend(super::mig_metrics::dcgm_samples(published, m.name));
        family
    });
    dcgm_families
        .chain(VRAMSCOPE.iter().map(|m| m.family(&own)))
        .chain(super::mig_metrics::families(published))
        .collect()
}

fn memory(d: &D) -> Option<MemoryInfo> {
    fresh(d)?.memory.as_ref().ok().copied()
}

/// Whole MiB, truncated, as dcgm-exporter gives them. A GPU in MIG mode has them per
/// instance instead (`mig_metrics`).
fn mib(d: &D, pick: fn(&MemoryInfo) -> u64) -> Option<Number> {
    if super::mig_metrics::per_instance(d) {
        return None;
    }
    memory(d).map(|m| Number::Int(pick(&m) / MIB))
}

fn int<T: Into<u64> + Copy>(r: &Reading<T>) -> Option<Number> {
    r.as_ref().ok().map(|v| Number::Int((*v).into()))
}

fn watts(r: &Reading<u32>) -> Option<Number> {
    r.as_ref()
        .ok()
        .map(|mw| Number::Float(f64::from(*mw) / 1000.0))
}

fn kib_per_second(r: &Reading<u32>) -> Option<Number> {
    r.as_ref().ok().map(|v| Number::Int(u64::from(*v) * KIB))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SourceEvent;
    use crate::model::{Absent, DeviceInfo, DeviceSample, DriverInfo};
    use crate::serve::node::Node;
    use crate::state::{Monitor, StaleAfter};

    fn sample(at_ms: u64, temperature: Reading<u32>) -> DeviceSample {
        DeviceSample {
            index: 0,
            at_ms,
            memory: Ok(MemoryInfo {
                total: 80 << 30,
                reserved: Some(1 << 29),
                used: (10 << 30) + 12345,
                free: (80 << 30) - (1 << 29) - (10 << 30) - 12345,
            }),
            gpu_util: Ok(87),
            mem_util: Ok(41),
            temperature_c: temperature,
            power_mw: Ok(412_345),
            power_limit_mw: Ok(700_000),
            sm_clock_mhz: Ok(1755),
            mem_clock_mhz: Ok(2619),
            fan_percent: Err(Absent::NotSupported),
            encoder_util: Ok(0),
            decoder_util: Ok(0),
            throttle_reasons: Ok(4),
            pstate: Ok(0),
            ecc_corrected: Ok(1),
            ecc_uncorrected: Ok(0),
            pcie_tx_kbs: None,
            pcie_rx_kbs: None,
            processes: Ok(vec![]),
            list_gaps: Default::default(),
            memory_peak: None,
            lost: false,
            mig: None,
        }
    }

    /// The families of one GPU sampled at `at_ms`, exported at `now_ms`.
    fn exported(at_ms: u64, now_ms: u64, temperature: Reading<u32>) -> Vec<Family> {
        let mut monitor = Monitor::new(0);
        monitor.ingest(SourceEvent::Started {
            driver: DriverInfo {
                driver_version: Ok("550.54.15".into()),
                cuda_version: Ok(12040),
                nvml_version: Ok("12.550.54.15".into()),
            },
            devices: vec![DeviceInfo {
                index: 0,
                name: Ok("NVIDIA H100 80GB HBM3".into()),
                uuid: Ok("GPU-0".into()),
                pci_bus_id: Ok("00000000:18:00.0".into()),
                memory_total: Ok(80 << 30),
                power_limit_mw: Ok(700_000),
            }],
        });
        monitor.ingest(SourceEvent::Device(Box::new(sample(at_ms, temperature))));
        let snapshot = monitor.snapshot(now_ms, StaleAfter::interval(1000));
        let mut node = Node::with(Some("node-a".into()), "/nonexistent".into());
        let labels = node.labels(&snapshot.devices);
        let published = Published::new(Arc::new(snapshot), labels, vec![]);
        families(&published)
            .into_iter()
            .filter(|f| !f.samples.is_empty())
            .collect()
    }

    fn value(families: &[Family], name: &str) -> Option<Number> {
        let family = families.iter().find(|f| f.name == name)?;
        assert_eq!(family.samples.len(), 1, "{name}");
        Some(family.samples[0].value)
    }

    #[test]
    fn dcgm_units_and_absent_figures() {
        let f = exported(1_000, 1_500, Err(Absent::NotSupported));
        assert_eq!(
            value(&f, "DCGM_FI_DEV_FB_USED"),
            Some(Number::Int(10 * 1024))
        );
        assert_eq!(
            value(&f, "DCGM_FI_DEV_POWER_USAGE"),
            Some(Number::Float(412.345))
        );
        assert_eq!(
            value(&f, "vramscope_gpu_memory_used_bytes"),
            Some(Number::Int((10 << 30) + 12345))
        );
        assert_eq!(
            value(&f, "vramscope_gpu_ecc_corrected_errors_total"),
            Some(Number::Int(1))
        );
        // Not supported: left out, not 0.
        assert_eq!(value(&f, "DCGM_FI_DEV_GPU_TEMP"), None);
        assert_eq!(value(&f, "DCGM_FI_DEV_FAN_SPEED"), None);
        assert_eq!(value(&f, "vramscope_gpu_pcie_tx_bytes_per_second"), None);
        let fb = f.iter().find(|f| f.name == "DCGM_FI_DEV_FB_USED").unwrap();
        let names: Vec<&str> = fb.samples[0].labels.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "gpu",
                "UUID",
                "pci_bus_id",
                "modelName",
                "Hostname",
                "hostname"
            ]
        );
        let own = f.iter().find(|f| f.name == "vramscope_gpu_stale").unwrap();
        let names: Vec<&str> = own.samples[0].labels.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            ["gpu", "uuid", "pci_bus_id", "model_name", "hostname"]
        );
    }

    #[test]
    fn a_stale_gpu_exports_no_old_figures_and_says_it_is_stale() {
        let f = exported(1_000, 60_000, Ok(64));
        assert_eq!(value(&f, "vramscope_gpu_stale"), Some(Number::Int(1)));
        assert_eq!(value(&f, "DCGM_FI_DEV_FB_USED"), None);
        assert_eq!(value(&f, "DCGM_FI_DEV_GPU_TEMP"), None);
        assert_eq!(value(&f, "vramscope_gpu_memory_used_bytes"), None);
        // The total does not change while the GPU is plugged in.
        assert_eq!(
            value(&f, "vramscope_gpu_memory_total_bytes"),
            Some(Number::Int(80 << 30))
        );
        let fresh = exported(1_000, 1_500, Ok(64));
        assert_eq!(value(&fresh, "vramscope_gpu_stale"), Some(Number::Int(0)));
        assert_eq!(value(&fresh, "DCGM_FI_DEV_GPU_TEMP"), Some(Number::Int(64)));
    }
}
