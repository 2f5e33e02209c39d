//! Device labels: dcgm-exporter's (`gpu`, `UUID`, `pci_bus_id`, `device`, `modelName`,
//! `Hostname` and `hostname`) and vramscope's snake_case ones, from the snapshot and from
//! facts about this node read once.
//!
//! The host name: dcgm-exporter labelled it `Hostname` and now spells it `hostname`. The
//! `DCGM_*` families carry both, with the same value, so dashboards and alerts written for
//! either spelling keep working; vramscope's own families carry `hostname` only, which is
//! what `vramscope cluster` reads first.

use crate::model::DeviceSnapshot;
use crate::model::host::host_name;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Where the driver describes each GPU, named by PCI bus id (`0000:18:00.0/information`).
const DRIVER_GPUS: &str = "/proc/driver/nvidia/gpus";

/// One device's labels. A fact that cannot be read leaves its label out rather than
/// inventing a value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceLabels {
    pub gpu: u32,
    pub uuid: Option<String>,
    pub pci_bus_id: Option<String>,
    /// `nvidia<minor>`: the device file's name, as dcgm-exporter gives it.
    pub device: Option<String>,
    pub model_name: Option<String>,
    pub hostname: Option<String>,
}

impl DeviceLabels {
    /// dcgm-exporter's label names, in its order, for the `DCGM_*` families: the host name
    /// under its old spelling `Hostname` and its new one `hostname`.
    pub fn dcgm_pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = self.named(&["UUID", "pci_bus_id", "device", "modelName", "Hostname"]);
        if let Some(host) = &self.hostname {
            pairs.push(("hostname", host.clone()));
        }
        pairs
    }

    /// snake_case names for the `vramscope_gpu_*` families; `gpu` and `uuid` as on the
    /// per-process families, so the two join on them, and `hostname` as dcgm-exporter now
    /// spells it, so that a node is named the same whoever scrapes it.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        self.named(&["uuid", "pci_bus_id", "device", "model_name", "hostname"])
    }

    /// `gpu`, then each fact present under the name at its place in `names` (uuid, PCI bus
    /// id, device, model, host name); facts beyond the names given are left out.
    fn named(&self, names: &[&'static str]) -> Vec<(&'static str, String)> {
        let values = [
            &self.uuid,
            &self.pci_bus_id,
            &self.device,
            &self.model_name,
            &self.hostname,
        ];
        let mut pairs = vec![("gpu", self.gpu.to_string())];
        for (name, value) in names.iter().zip(values) {
            if let Some(value) = value {
                pairs.push((*name, value.clone()));
            }
        }
        pairs
    }
}

/// This node's host name and its GPUs' minor numbers, read once each.
#[derive(Debug)]
pub struct Node {
    hostname: Option<String>,
    driver_gpus: PathBuf,
    minors: HashMap<String, Option<u32>>,
}

impl Node {
    /// This machine, named `hostname` when given (`serve --hostname`), else by its own
    /// host name.
    pub fn new(hostname: Option<String>) -> Self {
        Self::with(hostname.or_else(host_name), PathBuf::from(DRIVER_GPUS))
    }

    /// A node whose driver files live under `driver_gpus` (tests).
    pub fn with(hostname: Option<String>, driver_gpus: PathBuf) -> Self {
        Self {
            hostname,
            driver_gpus,
            minors: HashMap::new(),
        }
    }

    /// The node's name, when known.
    pub fn hostname(&self) -> Option<&str> {
        self.hostname.as_deref()
    }

    /// The labels of each device, in the snapshot's order.
    pub fn labels(&mut self, devices: &[DeviceSnapshot]) -> Vec<DeviceLabels> {
        devices
            .iter()
            .map(|d| {
                let pci = d.info.pci_bus_id.as_ref().ok().cloned();
                let device = pci
                    .as_deref()
                    .and_then(|p| self.minor(p))
                    .map(|m| format!("nvidia{m}"));
                DeviceLabels {
                    gpu: d.info.index,
                    uuid: d.info.uuid.as_ref().ok().cloned(),
                    pci_bus_id: pci,
                    device,
                    model_name: d.info.name.as_ref().ok().cloned(),
                    hostname: self.hostname.clone(),
                }
            })
            .collect()
    }

    fn minor(&mut self, pci_bus_id: &str) -> Option<u32> {
        let dir = &self.driver_gpus;
        *self
            .minors
            .entry(pci_bus_id.to_string())
            .or_insert_with(|| minor_number(dir, pci_bus_id))
    }
}

/// The `Device Minor:` line of the driver's description of the GPU at `pci_bus_id`
/// (NVML's `00000000:18:00.0`; the driver names the folder `0000:18:00.0`).
pub fn minor_number(driver_gpus: &Path, pci_bus_id: &str) -> Option<u32> {
    let (domain, rest) = pci_bus_id.split_once(':')?;
    let domain = domain.get(domain.len().saturating_sub(4)..)?;
    let folder = format!("{domain}:{rest}").to_ascii_lowercase();
    let text = std::fs::read_to_string(driver_gpus.join(folder).join("information")).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("Device Minor:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minor_numbers_come_from_the_drivers_description() {
        let dir = tempfile::tempdir().unwrap();
        let gpu = dir.path().join("0000:3b:00.0");
        std::fs::create_dir_all(&gpu).unwrap();
        std::fs::write(
            gpu.join("information"),
            "Model: \t\t NVIDIA H100\nIRQ:   \t\t 42\nDevice Minor: \t 3\n",
        )
        .unwrap();
        assert_eq!(minor_number(dir.path(), "00000000:3B:00.0"), Some(3));
        assert_eq!(minor_number(dir.path(), "00000000:3C:00.0"), None);
        assert_eq!(minor_number(dir.path(), "garbage"), None);
        assert_eq!(minor_number(dir.path(), "é:3B:00.0"), None);
    }

    #[test]
    fn absent_facts_leave_their_labels_out() {
        let labels = DeviceLabels {
            gpu: 2,
            uuid: Some("GPU-1".into()),
            pci_bus_id: None,
            device: None,
            model_name: Some("NVIDIA H100".into()),
            hostname: Some("node-a".into()),
        };
        let names: Vec<&str> = labels.dcgm_pairs().iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["gpu", "UUID", "modelName", "Hostname", "hostname"]);
        let names: Vec<&str> = labels.pairs().iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["gpu", "uuid", "model_name", "hostname"]);
        let unnamed = DeviceLabels {
            hostname: None,
            ..labels
        };
        let names: Vec<&str> = unnamed.dcgm_pairs().iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["gpu", "UUID", "modelName"]);
        assert!(host_name().is_some_and(|h| !h.is_empty()));
    }
}
