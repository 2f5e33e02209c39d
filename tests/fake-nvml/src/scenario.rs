//! The scenario file format (JSON) and its validation.
//!
//! See `README.md` for the documented format. Every struct denies unknown
//! fields so that a typo in a test scenario fails loudly at `nvmlInit_v2`.

use std::path::Path;

use serde::Deserialize;

use crate::errors::ErrorCode;
use crate::exports::EXPORTED_SYMBOLS;
use crate::mig::MigSpec;

/// A whole scenario: system values, devices, injected faults and blocks.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// `nvmlSystemGetDriverVersion`.
    #[serde(default = "default_driver_version")]
    pub driver_version: String,
    /// `nvmlSystemGetCudaDriverVersion(_v2)`, e.g. 12040 for CUDA 12.4.
    #[serde(default = "default_cuda_version")]
    pub cuda_version: i32,
    /// `nvmlSystemGetNVMLVersion`.
    #[serde(default = "default_nvml_version")]
    pub nvml_version: String,
    /// Devices in NVML index order.
    #[serde(default)]
    pub devices: Vec<DeviceSpec>,
    /// Error injection windows.
    #[serde(default)]
    pub faults: Vec<Fault>,
    /// Slow-call injection windows.
    #[serde(default)]
    pub blocks: Vec<Block>,
    /// When set, every `nvmlInit*` returns this error.
    #[serde(default)]
    pub init_error: Option<ErrorCode>,
}

/// One GPU. Static fields left out make their getters return `NotSupported`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceSpec {
    pub name: String,
    pub uuid: String,
    /// `"00000000:18:00.0"` (8 or 4 hex digit domain).
    pub pci_bus_id: String,
    #[serde(default)]
    pub pci_device_id: u32,
    #[serde(default)]
    pub pci_subsystem_id: u32,
    /// Bytes.
    #[serde(default)]
    pub memory_total: Option<u64>,
    /// Bytes reserved by the driver (v2 `reserved`; added to v1 `used`).
    #[serde(default)]
    pub memory_reserved: u64,
    /// MHz; defaults to `max_sm_clock`.
    #[serde(default)]
    pub max_graphics_clock: Option<u32>,
    /// MHz.
    #[serde(default)]
    pub max_sm_clock: Option<u32>,
    /// MHz.
    #[serde(default)]
    pub max_mem_clock: Option<u32>,
    /// MHz.
    #[serde(default)]
    pub max_video_clock: Option<u32>,
    /// mW; both the enforced and the management limit.
    #[serde(default)]
    pub power_limit: Option<u32>,
    #[serde(default)]
    pub num_fans: Option<u32>,
    #[serde(default)]
    pub persistence_mode: Option<bool>,
    /// `nvmlComputeMode_t`: 0 default, 1 exclusive thread, 2 prohibited, 3 exclusive process.
    #[serde(default)]
    pub compute_mode: Option<u32>,
    /// A display is connected (`nvmlDeviceGetDisplayMode`).
    #[serde(default)]
    pub display_mode: Option<bool>,
    /// A display is initialised (`nvmlDeviceGetDisplayActive`).
    #[serde(default)]
    pub display_active: Option<bool>,
    /// MIG mode, current = pending (`nvmlDeviceGetMigMode`).
    #[serde(default)]
    pub mig_mode: Option<bool>,
    /// MIG with instances (see `mig.rs`); excludes `mig_mode`.
    #[serde(default)]
    pub mig: Option<MigSpec>,
    /// Step-wise values over time.
    #[serde(default)]
    pub timeline: Vec<Point>,
    /// `timeline[i]` with every earlier point overlaid beneath it, built on load, so the
    /// values at any time are one binary search away instead of a replay of the timeline
    /// (which made each call slower the longer a scenario ran).
    #[serde(skip)]
    pub resolved: Vec<Point>,
    /// The `t` of each `resolved` point, apart: searching it touches a few cache lines
    /// where searching `resolved` touched one per probe, and the fake's cost counts
    /// against the client's in every benchmark.
    #[serde(skip)]
    pub resolved_t: Vec<f64>,
    /// Step-wise process lists over time.
    #[serde(default)]
    pub processes: Vec<ProcessLists>,
    /// Per-process utilisation samples.
    #[serde(default)]
    pub process_utilization: Vec<UtilSample>,
    /// The entries of `process_utilization` without `every` (sorted by `t`), built on load.
    #[serde(skip)]
    pub utilization_once: Vec<UtilSample>,
    /// The `t` of each `utilization_once` entry, for the same reason as `resolved_t`.
    #[serde(skip)]
    pub utilization_once_t: Vec<f64>,
    /// The entries with `every`, built on load.
    #[serde(skip)]
    pub utilization_every: Vec<UtilSample>,
}

macro_rules! point_fields {
    ($($(#[$doc:meta])* $field:ident : $ty:ty),* $(,)?) => {
        /// A timeline point: values that hold from `t` until a later point changes them.
        #[derive(Debug, Clone, Default, Deserialize, PartialEq)]
        #[serde(deny_unknown_fields)]
        pub struct Point {
            /// Scenario seconds.
            pub t: f64,
            $($(#[$doc])* #[serde(default)] pub $field: Option<$ty>,)*
        }

        impl Point {
            /// Overlays the fields `later` sets onto `self` (and takes its `t`).
            pub fn overlay(&mut self, later: &Point) {
                self.t = later.t;
                $(if later.$field.is_some() { self.$field = later.$field; })*
            }
        }
    };
}

point_fields! {
    /// Bytes (v2 `used`, excluding `memory_reserved`).
    memory_used: u64,
    /// %.
    gpu_util: u32,
    /// % of time the memory controller was busy.
    mem_util: u32,
    /// °C (sensor GPU).
    temperature: u32,
    /// mW.
    power: u32,
    /// MHz; defaults to `sm_clock`.
    graphics_clock: u32,
    /// MHz.
    sm_clock: u32,
    /// MHz.
    mem_clock: u32,
    /// MHz.
    video_clock: u32,
    /// % (every fan).
    fan: u32,
    /// %.
    encoder: u32,
    /// %.
    decoder: u32,
    /// `nvmlClocksThrottleReason*` bitmask.
    throttle_reasons: u64,
    /// Corrected ECC error count (volatile and aggregate).
    ecc_corrected: u64,
    /// Uncorrected ECC error count (volatile and aggregate).
    ecc_uncorrected: u64,
    /// 0..=15, 32 = unknown.
    pstate: u32,
    /// KB/s.
    pcie_tx: u32,
    /// KB/s.
    pcie_rx: u32,
}

/// Process lists from `t` on. A list that is present replaces the previous
/// one completely; a list that is absent keeps the previous one.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessLists {
    pub t: f64,
    #[serde(default)]
    pub compute: Option<Vec<Process>>,
    #[serde(default)]
    pub graphics: Option<Vec<Process>>,
    /// MPS compute processes (`nvmlDeviceGetMPSComputeRunningProcesses_v3`).
    #[serde(default)]
    pub mps: Option<Vec<Process>>,
}

/// One entry of a process list.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Process {
    pub pid: u32,
    /// Bytes; `null` or absent = not available (`u64::MAX` on the wire).
    #[serde(default)]
    pub used_memory: Option<u64>,
    /// Absent = no MIG instance (`0xFFFFFFFF`).
    #[serde(default)]
    pub gpu_instance_id: Option<u32>,
    #[serde(default)]
    pub compute_instance_id: Option<u32>,
}

/// One per-process utilisation sample, visible from scenario time `t` on.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UtilSample {
    pub t: f64,
    pub pid: u32,
    #[serde(default)]
    pub sm: u32,
    #[serde(default)]
    pub mem: u32,
    #[serde(default)]
    pub enc: u32,
    #[serde(default)]
    pub dec: u32,
    /// Seconds > 0: the sample repeats at `t + k * every` (k = 0, 1, ...) with the same values.
    #[serde(default)]
    pub every: Option<f64>,
    /// With `every`: no repeats at or after this time (absent = forever).
    #[serde(default)]
    pub until: Option<f64>,
}

/// Makes `function` fail with `error` while `from <= t < until`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    /// An exported symbol name, or `"*"` for every `nvmlDevice*` function.
    pub function: String,
    pub error: ErrorCode,
    /// Device index; absent = any device (and device-less calls).
    #[serde(default)]
    pub device: Option<u32>,
    #[serde(default)]
    pub from: f64,
    #[serde(default)]
    pub until: Option<f64>,
}

/// Makes each call of `function` sleep `seconds` (wall clock) while
/// `from <= t < until`, then proceed normally.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Block {
    pub function: String,
    #[serde(default)]
    pub device: Option<u32>,
    #[serde(default)]
    pub from: f64,
    #[serde(default)]
    pub until: Option<f64>,
    pub seconds: f64,
}

fn default_driver_version() -> String {
    "550.54.15".to_owned()
}
fn default_cuda_version() -> i32 {
    12040
}
fn default_nvml_version() -> String {
    "12.550.54.15".to_owned()
}

/// PCI location parsed from `pci_bus_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PciLocation {
    pub domain: u32,
    pub bus: u32,
    pub device: u32,
    pub function: u32,
}

/// Parses `DDDDDDDD:BB:DD.F` (or a 4-digit domain).
pub fn parse_pci_bus_id(s: &str) -> Result<PciLocation, String> {
    let bad = || format!("bad pci_bus_id {s:?}, expected \"00000000:18:00.0\"");
    let mut parts = s.split(':');
    let (Some(domain), Some(bus), Some(rest), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    let (device, function) = rest.split_once('.').ok_or_else(bad)?;
    let hex = |v: &str, max_len: usize| {
        if v.is_empty() || v.len() > max_len {
            return Err(bad());
        }
        u32::from_str_radix(v, 16).map_err(|_| bad())
    };
    let loc = PciLocation {
        domain: hex(domain, 8)?,
        bus: hex(bus, 2)?,
        device: hex(device, 2)?,
        function: hex(function, 1)?,
    };
    if s.len() >= 32 {
        return Err(bad());
    }
    Ok(loc)
}

pub(crate) fn check_time(what: &str, t: f64) -> Result<(), String> {
    if t.is_finite() && t >= 0.0 {
        Ok(())
    } else {
        Err(format!("{what}: time {t} must be finite and >= 0"))
    }
}

fn check_function(what: &str, function: &str) -> Result<(), String> {
    if function == "*" || EXPORTED_SYMBOLS.contains(&function) {
        Ok(())
    } else {
        Err(format!(
            "{what}: unknown function {function:?} (use an exported nvml* symbol or \"*\")"
        ))
    }
}

fn by_t<T>(items: &mut [T], t: impl Fn(&T) -> f64) {
    items.sort_by(|a, b| t(a).total_cmp(&t(b)));
}

/// Running overlays of a sorted timeline.
fn resolve(timeline: &[Point]) -> Vec<Point> {
    let mut state = Point::default();
    timeline
        .iter()
        .map(|p| {
            state.overlay(p);
            state.clone()
        })
        .collect()
}

impl Scenario {
    /// Parses and validates scenario JSON; sorts timelines by `t`.
    pub fn from_json(text: &str) -> Result<Scenario, String> {
        let mut s: Scenario = serde_json::from_str(text).map_err(|e| e.to_string())?;
        s.validate()?;
        Ok(s)
    }

    /// Reads and parses a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Scenario::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    fn validate(&mut self) -> Result<(), String> {
        for (i, d) in self.devices.iter_mut().enumerate() {
            let what = format!("devices[{i}]");
            parse_pci_bus_id(&d.pci_bus_id).map_err(|e| format!("{what}: {e}"))?;
            for (field, v) in [("name", &d.name), ("uuid", &d.uuid)] {
                if v.len() >= 96 || v.contains('\0') {
                    return Err(format!("{what}.{field}: must be < 96 bytes without NUL"));
                }
            }
            for p in &d.timeline {
                check_time(&format!("{what}.timeline"), p.t)?;
            }
            for p in &d.processes {
                check_time(&format!("{what}.processes"), p.t)?;
            }
            for p in &d.process_utilization {
                let what = format!("{what}.process_utilization");
                check_time(&what, p.t)?;
                if let Some(until) = p.until {
                    check_time(&what, until)?;
                }
                if p.every.is_some_and(|e| !(e.is_finite() && e > 0.0)) {
                    return Err(format!("{what}: every must be finite and > 0"));
                }
                if p.until.is_some() && p.every.is_none() {
                    return Err(format!("{what}: until needs every"));
                }
            }
            if let Some(mig) = &mut d.mig {
                if d.mig_mode.is_some() {
                    return Err(format!("{what}: give mig_mode or mig, not both"));
                }
                mig.validate(&format!("{what}.mig"))?;
            }
            by_t(&mut d.timeline, |p| p.t);
            d.resolved = resolve(&d.timeline);
            d.resolved_t = d.resolved.iter().map(|p| p.t).collect();
            by_t(&mut d.processes, |p| p.t);
            by_t(&mut d.process_utilization, |p| p.t);
            (d.utilization_every, d.utilization_once) = d
                .process_utilization
                .iter()
                .cloned()
                .partition(|p| p.every.is_some());
            d.utilization_once_t = d.utilization_once.iter().map(|p| p.t).collect();
        }
        for (i, f) in self.faults.iter().enumerate() {
            let what = format!("faults[{i}]");
            check_function(&what, &f.function)?;
            check_time(&what, f.from)?;
        }
        for (i, b) in self.blocks.iter().enumerate() {
            let what = format!("blocks[{i}]");
            check_function(&what, &b.function)?;
            check_time(&what, b.from)?;
            if !(b.seconds.is_finite() && b.seconds >= 0.0) {
                return Err(format!("{what}: seconds must be finite and >= 0"));
            }
        }
        for (what, v) in [
            ("driver_version", &self.driver_version),
            ("nvml_version", &self.nvml_version),
        ] {
            if v.len() >= 80 || v.contains('\0') {
                return Err(format!("{what}: must be < 80 bytes without NUL"));
            }
        }
        Ok(())
    }
}
