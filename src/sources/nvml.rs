//! The NVML session: loads the library once, reads static facts once, and samples one device
//! per call. Every figure is read independently so one failing call costs only that figure.

use super::nvml_errors::{absent, absent_ref, older_call_may_answer, problem};
use super::nvml_lists::{self, ListKind, ProcessList, SampleBuffer};
use super::nvml_memory::MemoryReader;
use super::nvml_mig::MigReader;
use crate::model::mig::{MigState, mig_util_absent};
use crate::model::peak_owner::{ATTRIBUTE_RISE, HeldBy, NotAttributed, PeakHolders};
use crate::model::{
    Absent, DeviceInfo, DeviceSample, DriverInfo, GpuProcess, ListGaps, MemoryInfo, MemoryPeak,
    NvmlProblem, ProcessKind, Reading, now_ms,
};
use nvml_wrapper::enum_wrappers::device::{
    Clock, EccCounter, MemoryError, PcieUtilCounter, TemperatureSensor,
};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::ProcessInfo;
use nvml_wrapper::{Device, Nvml};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a per-process utilisation sample stays the process's figure. NVML only publishes
/// samples while a process is active, so an older one says nothing about now.
const PROCESS_UTIL_TTL_MS: u64 = 5_000;

/// An initialised NVML library, kept for the life of the process.
struct NvmlSession {
    // Leaked on purpose: `Device` borrows `Nvml`, and sampler threads keep devices for the
    // whole run. One session per process, so the leak is bounded.
    nvml: &'static Nvml,
    /// Read once: the R535 check and every caller use the same answer.
    driver: DriverInfo,
    r535_process_bug: bool,
}

/// Sessions opened and not yet shut down. Each `Nvml` is leaked (devices borrow it), so its
/// `Drop`, which calls `nvmlShutdown`, never runs: `shutdown` does that at an orderly exit,
/// for a library that does its bookkeeping there.
static OPEN_SESSIONS: Mutex<Vec<&'static Nvml>> = Mutex::new(Vec::new());

/// Shuts down every NVML session this process opened (`nvmlShutdown` once per init, as NVML
/// counts them). Called at an orderly exit, once nothing samples any more; a call made by a
/// sampler thread still running gets NVML's "uninitialized" error, never a dangling handle:
/// the library stays loaded.
pub fn shutdown() {
    let sessions =
        std::mem::take(&mut *OPEN_SESSIONS.lock().unwrap_or_else(PoisonError::into_inner));
    for nvml in sessions {
        // SAFETY: nvmlShutdown takes no arguments and pairs with the init this session made;
        // the leaked `Nvml` keeps the library mapped for anything that calls it afterwards.
        unsafe { nvml.lib().nvmlShutdown() };
    }
}

/// NVML opened with every GPU's static facts and a sampler for each.
pub struct OpenedGpus {
    pub driver: DriverInfo,
    pub devices: Vec<DeviceInfo>,
    pub samplers: Vec<DeviceSampler>,
}

/// Opens NVML and every GPU; fails with the reason when NVML cannot be used at all.
/// `pcie_every` enables the slow PCIe throughput call at that period; `gpm` reads MIG
/// instances' SM utilisation through GPM.
pub fn open_gpus(
    lib: Option<&Path>,
    pcie_every: Option<Duration>,
    gpm: bool,
) -> Result<OpenedGpus, NvmlProblem> {
    let session = NvmlSession::open(lib)?;
    let count = session.device_count()?;
    let (devices, samplers) = (0..count)
        .map(|index| session.device(index, pcie_every, gpm))
        .unzip();
    Ok(OpenedGpus {
        driver: session.driver,
        devices,
        samplers,
    })
}

impl NvmlSession {
    /// Loads libnvidia-ml (from `lib` when given) and initialises it.
    fn open(lib: Option<&Path>) -> Result<Self, NvmlProblem> {
        // Without a path the builder loads libnvidia-ml.so.1 through the usual search.
        let mut builder = Nvml::builder();
        if let Some(path) = lib {
            builder.lib_path(path.as_os_str());
        }
        let nvml = builder.init().map_err(problem)?;
        let nvml: &'static Nvml = Box::leak(Box::new(nvml));
        OPEN_SESSIONS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(nvml);
        let driver = DriverInfo {
            driver_version: nvml.sys_driver_version().map_err(absent),
            cuda_version: nvml.sys_cuda_driver_version().map_err(absent),
            nvml_version: nvml.sys_nvml_version().map_err(absent),
        };
        let r535_process_bug = driver
            .driver_version
            .as_ref()
            .is_ok_and(|v| has_r535_process_bug(v));
        Ok(Self {
            nvml,
            driver,
            r535_process_bug,
        })
    }

    /// The number of GPUs; zero GPUs is a problem of its own, so the caller can say so.
    fn device_count(&self) -> Result<u32, NvmlProblem> {
        match self.nvml.device_count().map_err(problem)? {
            0 => Err(NvmlProblem::NoDevices),
            n => Ok(n),
        }
    }

    /// Opens device `index` and reads its static facts. A device that cannot be opened still
    /// gets a sampler, which reports every figure as absent with the reason.
    fn device(
        &self,
        index: u32,
        pcie_every: Option<Duration>,
        gpm: bool,
    ) -> (DeviceInfo, DeviceSampler) {
        let device = self.nvml.device_by_index(index);
        // Shared with the sampler, so the call found to answer here is the one it starts with.
        let mut memory = MemoryReader::default();
        let info = match &device {
            Ok(d) => read_info(index, d, &mut memory),
            Err(e) => unreadable_info(index, absent_ref(e)),
        };
        // Datacentre GPUs have no fan: asking every tick would only repeat NotSupported.
        let has_fan = !matches!(device.as_ref().map(|d| d.num_fans()), Ok(Ok(0)));
        let sampler = DeviceSampler {
            index,
            device: device.map_err(absent),
            has_fan,
            pcie_every,
            pcie_last: None,
            pcie_readings: (None, None),
            r535_process_bug: self.r535_process_bug,
            memory,
            peeks: None,
            refreshed_used: None,
            lists: ListBuffers::default(),
            util: UtilTracker::default(),
            slow: SlowFigures::default(),
            mig: MigReader::new(gpm),
        };
        (info, sampler)
    }
}

/// Samples one GPU. Owned by one sampler thread, so a blocking call stalls only this device.
pub struct DeviceSampler {
    index: u32,
    device: Result<Device<'static>, Absent>,
    has_fan: bool,
    pcie_every: Option<Duration>,
    pcie_last: Option<Instant>,
    // The last PCIe readings (transmit, receive), carried between their slower reads as the
    // slow figures are, so every sample says what the link last did instead of nothing.
    pcie_readings: (Option<Reading<u32>>, Option<Reading<u32>>),
    r535_process_bug: bool,
    memory: MemoryReader,
    /// `None` while the fast memory sampling is off; else the highest used memory it read
    /// since the previous sample (`Some(None)`: nothing read yet).
    peeks: Option<Option<MemoryPeak>>,
    /// Used memory at the last sample that read it: a peek's rise is measured from here.
    refreshed_used: Option<u64>,
    lists: ListBuffers,
    util: UtilTracker,
    slow: SlowFigures,
    mig: MigReader,
}

/// The process lists, kept between ticks so each list costs one call.
struct ListBuffers {
    compute: ProcessList,
    graphics: ProcessList,
}

impl Default for ListBuffers {
    fn default() -> Self {
        Self {
            compute: ProcessList::new(ListKind::Compute),
            graphics: ProcessList::new(ListKind::Graphics),
        }
    }
}

/// Figures that change only by an administrator's hand (the enforced power limit) or by
/// rare hardware events (ECC error counts): read every `SLOW_EVERY`, not every tick. They
/// were three of a GPU's twenty NVML calls per tick, and ECC queries are among the slower
/// ones on real hardware.
#[derive(Default)]
struct SlowFigures {
    read_at: Option<Instant>,
    power_limit_mw: Option<Reading<u32>>,
    ecc_corrected: Option<Reading<u64>>,
    ecc_uncorrected: Option<Reading<u64>>,
}

const SLOW_EVERY: Duration = Duration::from_secs(10);

impl SlowFigures {
    fn refresh(&mut self, device: &Device<'static>) {
        if self.read_at.is_some_and(|at| at.elapsed() < SLOW_EVERY) {
            return;
        }
        self.read_at = Some(Instant::now());
        self.power_limit_mw = Some(device.enforced_power_limit().map_err(absent));
        self.ecc_corrected = Some(
            device
                .total_ecc_errors(MemoryError::Corrected, EccCounter::Volatile)
                .map_err(absent),
        );
        self.ecc_uncorrected = Some(
            device
                .total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile)
                .map_err(absent),
        );
    }
}

fn carried<T: Clone>(figure: &Option<Reading<T>>) -> Reading<T> {
    figure.clone().unwrap_or(Err(Absent::NotAvailable))
}

/// Per-process utilisation state carried between ticks.
#[derive(Default)]
struct UtilTracker {
    /// Newest timestamp seen: passing it back asks the driver only for newer samples.
    cursor: u64,
    by_pid: HashMap<u32, ProcessUtil>,
    samples: SampleBuffer,
}

#[derive(Clone, Copy)]
struct ProcessUtil {
    seen_ms: u64,
    timestamp: u64,
    sm: u32,
    mem: u32,
    enc: u32,
    dec: u32,
}

impl DeviceSampler {
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Turns the fast memory sampling's bookkeeping on: from now on each sample carries the
    /// highest used memory since the previous one (`DeviceSample::memory_peak`).
    pub fn keep_memory_peaks(&mut self) {
        self.peeks.get_or_insert(None);
    }

    /// The fast path: reads used memory alone (one NVML call) and keeps it when it is the
    /// highest since the previous sample. A failed read is left to the next sample to report.
    /// A new high `ATTRIBUTE_RISE` or more above the last refresh's reading is a spike: the
    /// compute list is read right then (one more call), so the fold can name its owner.
    pub fn peek_memory(&mut self) {
        let (Ok(device), Some(highest)) = (&self.device, &mut self.peeks) else {
            return;
        };
        // The clock is read only for a new high: most peeks read no more than the last.
        let Ok(m) = self.memory.read(device) else {
            return;
        };
        if highest.as_ref().is_some_and(|h| m.used <= h.used) {
            return;
        }
        let rise = m.used.saturating_sub(self.refreshed_used.unwrap_or(m.used));
        let holders = if rise >= ATTRIBUTE_RISE {
            match self.lists.compute.read(device) {
                Ok(list) => PeakHolders::Read(
                    list.iter()
                        .filter_map(|p| match p.used_gpu_memory {
                            UsedGpuMemory::Used(used) => Some(HeldBy { pid: p.pid, used }),
                            UsedGpuMemory::Unavailable => None,
                        })
                        .collect(),
                ),
                Err(e) => PeakHolders::NotRead(NotAttributed::ListUnread(absent(e))),
            }
        } else {
            PeakHolders::NotRead(NotAttributed::SmallRise { rise })
        };
        *highest = Some(MemoryPeak {
            used: m.used,
            at_ms: now_ms(),
            holders,
        });
    }

    /// Reads every figure of this device once.
    pub fn sample(&mut self) -> DeviceSample {
        let at_ms = now_ms();
        let pcie_due = self.pcie_due();
        let device = match &self.device {
            Ok(d) => d,
            Err(why) => return DeviceSample::unreadable(self.index, at_ms, why.clone()),
        };
        let memory = self.memory.read(device).map_err(absent);
        let memory_peak = take_memory_peak(&mut self.peeks, &memory, at_ms);
        // What the next peeks' rises are measured from; a failed read keeps the last one.
        if let Ok(m) = &memory {
            self.refreshed_used = Some(m.used);
        }
        let mig = self.mig.read(device);
        let utilization = in_mig_mode(device.utilization_rates().map_err(absent), mig.as_ref());
        let throttle = device.current_throttle_reasons().map_err(absent);
        if pcie_due {
            self.pcie_readings = (
                Some(
                    device
                        .pcie_throughput(PcieUtilCounter::Send)
                        .map_err(absent),
                ),
                Some(
                    device
                        .pcie_throughput(PcieUtilCounter::Receive)
                        .map_err(absent),
                ),
            );
        }
        let (pcie_tx_kbs, pcie_rx_kbs) = self.pcie_readings.clone();
        let (processes, list_gaps) = processes(
            device,
            &mut self.lists,
            &mut self.util,
            self.r535_process_bug,
            at_ms,
        );
        let processes = match mig.as_ref().filter(|m| m.enabled) {
            Some(m) => with_instance_processes(processes, m),
            None => processes,
        };
        let lost = matches!(memory, Err(Absent::GpuLost));
        self.slow.refresh(device);
        DeviceSample {
            index: self.index,
            at_ms,
            memory,
            memory_peak,
            gpu_util: utilization.clone().map(|u| u.gpu),
            mem_util: utilization.map(|u| u.memory),
            temperature_c: device.temperature(TemperatureSensor::Gpu).map_err(absent),
            power_mw: device.power_usage().map_err(absent),
            power_limit_mw: carried(&self.slow.power_limit_mw),
            sm_clock_mhz: device.clock_info(Clock::SM).map_err(absent),
            mem_clock_mhz: device.clock_info(Clock::Memory).map_err(absent),
            fan_percent: if self.has_fan {
                device.fan_speed(0).map_err(absent)
            } else {
                Err(Absent::NotSupported)
            },
            encoder_util: device
                .encoder_utilization()
                .map_err(absent)
                .map(|u| u.utilization),
            decoder_util: device
                .decoder_utilization()
                .map_err(absent)
                .map(|u| u.utilization),
            throttle_reasons: throttle.map(|t| t.bits()),
            pstate: device.performance_state().map_err(absent).map(|p| p.as_c()),
            ecc_corrected: carried(&self.slow.ecc_corrected),
            ecc_uncorrected: carried(&self.slow.ecc_uncorrected),
            pcie_tx_kbs,
            pcie_rx_kbs,
            processes,
            list_gaps,
            lost,
            mig,
        }
    }

    /// PCIe throughput blocks ~20 ms per direction, so it runs on its own slower period.
    fn pcie_due(&mut self) -> bool {
        let Some(every) = self.pcie_every else {
            return false;
        };
        let due = self.pcie_last.is_none_or(|last| last.elapsed() >= every);
        if due {
            self.pcie_last = Some(Instant::now());
        }
        due
    }
}

/// A figure NVML refuses in MIG mode says why: not the device's lack but the mode's; where
/// the mode could not be read, that it may be the mode's.
fn in_mig_mode<T>(reading: Reading<T>, mig: Option<&MigState>) -> Reading<T> {
    match (reading, mig) {
        (Err(Absent::NotSupported), Some(m)) if m.enabled => Err(mig_util_absent()),
        (Err(Absent::NotSupported), Some(m)) => match m.mode_unread_reason() {
            Some(why) => Err(Absent::Error(format!("not supported ({})", why.reason()))),
            None => Err(Absent::NotSupported),
        },
        (other, _) => other,
    }
}

/// A MIG GPU's processes: the GPU's own lists (which NVML fills only for a privileged
/// caller), completed by each instance's lists, which anyone may read. A process only an
/// instance lists is added; where the GPU's lists could not be read at all, the instances'
/// processes are the list. Per-process utilisation is not supported in MIG mode.
fn with_instance_processes(
    processes: Reading<Vec<GpuProcess>>,
    mig: &MigState,
) -> Reading<Vec<GpuProcess>> {
    let Ok(instances) = &mig.instances else {
        return processes;
    };
    let mut rows = match processes {
        Ok(rows) => rows,
        Err(_) if !instances.is_empty() => Vec::new(),
        Err(why) => return Err(why),
    };
    for p in instances
        .iter()
        .filter_map(|i| i.processes.as_ref().ok())
        .flatten()
    {
        if rows.iter().any(|r| r.pid == p.pid) {
            continue;
        }
        rows.push(GpuProcess {
            pid: p.pid,
            kind: ProcessKind::Compute,
            used_memory: p.used_memory.clone(),
            sm_util: Err(mig_util_absent()),
            mem_util: Err(mig_util_absent()),
            enc_util: Err(mig_util_absent()),
            dec_util: Err(mig_util_absent()),
        });
    }
    for row in &mut rows {
        for util in [
            &mut row.sm_util,
            &mut row.mem_util,
            &mut row.enc_util,
            &mut row.dec_util,
        ] {
            if matches!(util, Err(Absent::NotSupported)) {
                *util = Err(mig_util_absent());
            }
        }
    }
    rows.sort_by_key(|p| p.pid);
    Ok(rows)
}

/// The highest used memory since the previous sample, this sample's `memory` included, and a
/// fresh start for the next interval; `None` while the fast sampling is off.
fn take_memory_peak(
    peeks: &mut Option<Option<MemoryPeak>>,
    memory: &Reading<MemoryInfo>,
    at_ms: u64,
) -> Option<MemoryPeak> {
    let highest = peeks.as_mut()?;
    if let Ok(m) = memory {
        note_highest(highest, m.used, at_ms);
    }
    highest.take()
}

/// Keeps `used` read at `at_ms` when it is above the highest so far; a tie keeps the earlier.
/// Read by the sample itself, its holders are the sample's own lists.
fn note_highest(highest: &mut Option<MemoryPeak>, used: u64, at_ms: u64) {
    if highest.as_ref().is_none_or(|h| used > h.used) {
        *highest = Some(MemoryPeak {
            used,
            at_ms,
            holders: PeakHolders::TheSample,
        });
    }
}

fn processes(
    device: &Device<'static>,
    lists: &mut ListBuffers,
    util: &mut UtilTracker,
    r535_process_bug: bool,
    now: u64,
) -> (Reading<Vec<GpuProcess>>, ListGaps) {
    if r535_process_bug {
        let why = Absent::Error(
            "driver 535.43-535.9x misreports process lists; upgrade to 535.98 or later".into(),
        );
        return (Err(why), ListGaps::default());
    }
    // One call per list; a list that grew past the kept buffer is retried inside, and one
    // the driver reads only by an older call falls back inside.
    let compute = lists.compute.read(device);
    let graphics = lists.graphics.read(device);
    // One list the driver cannot give at all (NotSupported, as graphics on some compute-only
    // GPUs, or no call for it) while the other works shows the other's processes and says
    // which list is missing. Any other failure could hide processes that still run, so the
    // whole list is reported absent instead.
    let mut gaps = ListGaps::default();
    let (compute, graphics) = match (compute, graphics) {
        (Err(e), Err(_)) => return (Err(absent(e)), gaps),
        (Err(e), Ok(_)) | (Ok(_), Err(e)) if !older_call_may_answer(&e) => {
            return (Err(absent(e)), gaps);
        }
        (Err(e), Ok(g)) => {
            gaps.compute = Some(absent(e));
            (Vec::new(), g)
        }
        (Ok(c), Err(e)) => {
            gaps.graphics = Some(absent(e));
            (c, Vec::new())
        }
        (Ok(c), Ok(g)) => (c, g),
    };
    let util_status = util.refresh(device, now);
    let mut merged: Vec<GpuProcess> = Vec::new();
    for (info, kind) in compute
        .iter()
        .map(|p| (p, ProcessKind::Compute))
        .chain(graphics.iter().map(|p| (p, ProcessKind::Graphics)))
    {
        let memory = used_memory(info);
        if let Some(existing) = merged.iter_mut().find(|p| p.pid == info.pid) {
            existing.kind = ProcessKind::ComputeAndGraphics;
            // The same context can appear in both lists; its memory is counted once.
            if existing.used_memory.is_err() {
                existing.used_memory = memory;
            }
            continue;
        }
        merged.push(util.process_row(info.pid, kind, memory, &util_status, now));
    }
    merged.sort_by_key(|p| p.pid);
    let live: Vec<u32> = merged.iter().map(|p| p.pid).collect();
    util.by_pid.retain(|pid, _| live.contains(pid));
    (Ok(merged), gaps)
}

impl UtilTracker {
    fn process_row(
        &self,
        pid: u32,
        kind: ProcessKind,
        used_memory: Reading<u64>,
        util_status: &Result<(), Absent>,
        now: u64,
    ) -> GpuProcess {
        let util = match util_status {
            Err(why) => Err(why.clone()),
            Ok(()) => self
                .by_pid
                .get(&pid)
                .filter(|u| now.saturating_sub(u.seen_ms) <= PROCESS_UTIL_TTL_MS)
                .copied()
                .ok_or(Absent::NotAvailable),
        };
        GpuProcess {
            pid,
            kind,
            used_memory,
            sm_util: util.clone().map(|u| u.sm),
            mem_util: util.clone().map(|u| u.mem),
            enc_util: util.clone().map(|u| u.enc),
            dec_util: util.map(|u| u.dec),
        }
    }

    /// Pulls samples newer than the cursor. NotFound means nothing new, which is not an error.
    fn refresh(&mut self, device: &Device<'static>, now: u64) -> Result<(), Absent> {
        let since = self.cursor;
        match nvml_lists::process_utilization(device, &mut self.samples, since) {
            Ok(samples) => {
                for s in samples {
                    // Drivers have returned impossible percentages and replayed old samples.
                    // Compare with the cursor as it was before this batch: the driver stamps
                    // every process of one sampling instant with the same time.
                    if s.timestamp <= since || s.sm_util > 100 || s.mem_util > 100 {
                        continue;
                    }
                    self.cursor = self.cursor.max(s.timestamp);
                    // With cursor 0 the driver returns its whole buffer in no set order.
                    let newer = self
                        .by_pid
                        .get(&s.pid)
                        .is_none_or(|old| old.timestamp <= s.timestamp);
                    if newer {
                        self.by_pid.insert(
                            s.pid,
                            ProcessUtil {
                                seen_ms: now,
                                timestamp: s.timestamp,
                                sm: s.sm_util,
                                mem: s.mem_util,
                                enc: s.enc_util,
                                dec: s.dec_util,
                            },
                        );
                    }
                }
                Ok(())
            }
            Err(NvmlError::NotFound) => Ok(()),
            Err(e) => Err(absent(e)),
        }
    }
}

fn used_memory(info: &ProcessInfo) -> Reading<u64> {
    match info.used_gpu_memory {
        UsedGpuMemory::Used(bytes) => Ok(bytes),
        UsedGpuMemory::Unavailable => Err(Absent::NotAvailable),
    }
}

fn read_info(index: u32, d: &Device<'static>, memory: &mut MemoryReader) -> DeviceInfo {
    DeviceInfo {
        index,
        name: d.name().map_err(absent),
        uuid: d.uuid().map_err(absent),
        pci_bus_id: d.pci_info().map(|p| p.bus_id).map_err(absent),
        memory_total: memory.read(d).map(|m| m.total).map_err(absent),
        power_limit_mw: d.power_management_limit().map_err(absent),
    }
}

fn unreadable_info(index: u32, why: Absent) -> DeviceInfo {
    DeviceInfo {
        index,
        name: Err(why.clone()),
        uuid: Err(why.clone()),
        pci_bus_id: Err(why.clone()),
        memory_total: Err(why.clone()),
        power_limit_mw: Err(why),
    }
}

/// Drivers 535.43.02 to 535.86.x write a 32-byte process struct through the 24-byte `_v3`
/// call, swapping pids and memory when more than one process runs.
fn has_r535_process_bug(version: &str) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    major == 535 && (43..98).contains(&minor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r535_window_is_exactly_the_buggy_releases() {
        assert!(has_r535_process_bug("535.43.02"));
        assert!(has_r535_process_bug("535.86.10"));
        assert!(!has_r535_process_bug("535.98"));
        assert!(!has_r535_process_bug("535.104.05"));
        assert!(!has_r535_process_bug("550.54.15"));
        assert!(!has_r535_process_bug("garbage"));
    }
}
