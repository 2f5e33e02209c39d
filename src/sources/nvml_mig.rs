//! A GPU's MIG instances, read through their MIG device handles each tick.
//!
//! NVML hands out a MIG device handle per slot (`nvmlDeviceGetMigDeviceHandleByIndex` over
//! `0..nvmlDeviceGetMaxMigDeviceCount`). A handle stays valid only while its compute
//! instance lives: "Handles may be reused and their properties can change". So the slots are
//! walked every tick (one call each, seven on an A100 or H100), which finds created instances,
//! and each instance is known by its UUID: a slot whose UUID changed is a new instance and
//! its facts are read again. A handle refused as invalid in the middle of a tick means the
//! instance went away since the walk: the walk is made again at once, so a destroyed instance
//! never leaves a stale row and never shows as an error.
//!
//! Utilisation is not read from NVML's utilisation call: it does not support MIG mode (see
//! `model::mig`). With `--gpm`, each instance's SM utilisation comes from GPM instead
//! (Hopper and newer): a GPM sample of its GPU instance per tick, compared with the one
//! before. Off by default, since GPM sampling can contend with DCGM's profiling module.

use super::nvml_errors::absent;
use super::nvml_lists::{ListKind, ProcessList};
use super::nvml_memory::MemoryReader;
use crate::model::mig::{MigInstance, MigProcess, MigState, mig_util_absent, profile_from_name};
use crate::model::{Absent, Reading};
use nvml_wrapper::Device;
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::{NvmlError, nvml_sym, nvml_try};
use nvml_wrapper::gpm::{GpmSample, gpm_metrics_get};
use std::time::{Duration, Instant};

/// The mode changes only by an administrator's hand (and a reset): read it this often.
const MODE_EVERY: Duration = Duration::from_secs(10);
/// Walks per tick: the first, and one more after a handle turned out stale mid-tick.
const WALKS: usize = 2;

/// One GPU's MIG reader, owned by its device sampler.
#[derive(Default)]
pub struct MigReader {
    /// Read SM utilisation through GPM (`--gpm`).
    gpm: bool,
    /// GPM answered that this GPU has none: not asked again.
    gpm_unsupported: Option<Absent>,
    /// The GPU or the driver has no MIG: never asked again.
    unsupported: bool,
    mode_read_at: Option<Instant>,
    /// `(current, pending)` as last read.
    mode: Option<(bool, bool)>,
    known: Vec<Known>,
}

/// An instance seen before: its facts, read once, and its buffers.
struct Known {
    uuid: String,
    profile: Reading<String>,
    gpu_instance_id: Reading<u32>,
    compute_instance_id: Reading<u32>,
    memory: MemoryReader,
    compute: ProcessList,
    graphics: ProcessList,
    /// The previous GPM sample of its GPU instance (`--gpm`).
    gpm_last: Option<GpmSample<'static>>,
}

/// A stale handle (`InvalidArg`) or a slot emptied under us (`NotFound`).
fn went_away(e: &NvmlError) -> bool {
    matches!(e, NvmlError::InvalidArg | NvmlError::NotFound)
}

impl MigReader {
    /// A reader; `gpm`: read SM utilisation through GPM.
    pub fn new(gpm: bool) -> Self {
        Self {
            gpm,
            ..Self::default()
        }
    }

    /// The GPU's MIG state; `None` when it has no MIG, or MIG is off with nothing pending.
    pub fn read(&mut self, device: &Device<'static>) -> Option<MigState> {
        let (current, pending) = self.mode(device)?;
        if !current && !pending {
            self.known.clear();
            return None;
        }
        let instances = if current {
            self.instances(device)
        } else {
            self.known.clear();
            Ok(Vec::new())
        };
        Some(MigState {
            enabled: current,
            pending: (pending != current).then_some(pending),
            instances,
        })
    }

    /// The mode, read at most every `MODE_EVERY`.
    fn mode(&mut self, device: &Device<'static>) -> Option<(bool, bool)> {
        if self.unsupported {
            return None;
        }
        if self
            .mode_read_at
            .is_none_or(|at| at.elapsed() >= MODE_EVERY)
        {
            self.mode_read_at = Some(Instant::now());
            match device.mig_mode() {
                Ok(m) => self.mode = Some((m.current != 0, m.pending != 0)),
                Err(NvmlError::NotSupported | NvmlError::FailedToLoadSymbol(_)) => {
                    self.unsupported = true;
                    self.mode = None;
                }
                // Unreadable this time: what was read before stands.
                Err(_) => {}
            }
        }
        self.mode
    }

    fn instances(&mut self, device: &Device<'static>) -> Reading<Vec<MigInstance>> {
        for _ in 0..WALKS {
            match self.walk(device) {
                Ok(Some(instances)) => return Ok(instances),
                Ok(None) => {}
                Err(e) => return Err(absent(e)),
            }
        }
        // Instances kept going away under two walks in a row: unknown this tick rather than
        // stale; the next tick walks again.
        Err(Absent::NotAvailable)
    }

    /// One walk over the slots; `Ok(None)` when a handle went stale during it.
    fn walk(&mut self, device: &Device<'static>) -> Result<Option<Vec<MigInstance>>, NvmlError> {
        let slots = device.mig_device_count()?;
        let mut handles = Vec::new();
        for slot in 0..slots {
            match device.mig_device_by_index(slot) {
                Ok(h) => handles.push(h),
                // An unprovisioned slot.
                Err(NvmlError::NotFound | NvmlError::InvalidArg | NvmlError::NotSupported) => {}
                Err(e) => return Err(e),
            }
        }
        let mut known = std::mem::take(&mut self.known);
        let mut out = Vec::with_capacity(handles.len());
        for handle in &handles {
            let uuid = match handle.uuid() {
                Ok(u) => u,
                Err(e) if went_away(&e) => return Ok(None),
                Err(e) => return Err(e),
            };
            let mut entry = match known.iter().position(|k| k.uuid == uuid) {
                Some(i) => known.swap_remove(i),
                None => Known::read(handle, uuid),
            };
            match entry.sample(handle) {
                Ok(mut instance) => {
                    if self.gpm {
                        instance.sm_util = entry.gpm_sm_util(device, &mut self.gpm_unsupported);
                    }
                    out.push(instance);
                }
                Err(e) if went_away(&e) => return Ok(None),
                Err(e) => return Err(e),
            }
            self.known.push(entry);
        }
        Ok(Some(out))
    }
}

impl Known {
    /// The facts of an instance first seen: they hold while its UUID does.
    fn read(handle: &Device<'static>, uuid: String) -> Self {
        Known {
            uuid,
            profile: handle.name().map_err(absent).and_then(|name| {
                profile_from_name(&name)
                    .ok_or_else(|| Absent::Error(format!("no profile in {name:?}")))
            }),
            gpu_instance_id: instance_id(handle, Id::Gpu).map_err(absent),
            compute_instance_id: instance_id(handle, Id::Compute).map_err(absent),
            memory: MemoryReader::default(),
            compute: ProcessList::new(ListKind::Compute),
            graphics: ProcessList::new(ListKind::Graphics),
            gpm_last: None,
        }
    }

    /// This tick's figures. A stale handle anywhere is returned as the error, for the walk to
    /// start again; other failures make only that figure absent.
    fn sample(&mut self, handle: &Device<'static>) -> Result<MigInstance, NvmlError> {
        let memory = match self.memory.read(handle) {
            Err(e) if went_away(&e) => return Err(e),
            other => other.map_err(absent),
        };
        let processes = match (self.compute.read(handle), self.graphics.read(handle)) {
            (Err(e), _) | (_, Err(e)) if went_away(&e) => return Err(e),
            (Ok(c), Ok(g)) => Ok(merge(c.into_iter().chain(g))),
            // A list NVML does not offer on a MIG device (graphics on compute-only
            // profiles) leaves the other.
            (Ok(c), Err(NvmlError::NotSupported)) => Ok(merge(c)),
            (Err(NvmlError::NotSupported), Ok(g)) => Ok(merge(g)),
            (Err(e), _) | (_, Err(e)) => Err(absent(e)),
        };
        Ok(MigInstance {
            gpu_instance_id: self.gpu_instance_id.clone(),
            compute_instance_id: self.compute_instance_id.clone(),
            uuid: Ok(self.uuid.clone()),
            profile: self.profile.clone(),
            memory,
            processes,
            sm_util: Err(mig_util_absent()),
        })
    }
}

impl Known {
    /// The instance's SM utilisation since the previous tick, from two GPM samples of its GPU
    /// instance on `parent`. The first tick has no interval yet; a GPU without GPM says so
    /// once and is not asked again (`unsupported`).
    fn gpm_sm_util(
        &mut self,
        parent: &Device<'static>,
        unsupported: &mut Option<Absent>,
    ) -> Reading<u32> {
        if let Some(why) = unsupported {
            return Err(why.clone());
        }
        let gi = self.gpu_instance_id.clone()?;
        let sample = match parent.gpm_mig_sample(gi) {
            Ok(s) => s,
            Err(NvmlError::NotSupported | NvmlError::FailedToLoadSymbol(_)) => {
                let why = Absent::Error("no GPM on this GPU (Hopper or newer has it)".into());
                *unsupported = Some(why.clone());
                return Err(why);
            }
            Err(e) => {
                self.gpm_last = None;
                return Err(absent(e));
            }
        };
        let Some(previous) = self.gpm_last.replace(sample) else {
            return Err(Absent::NotAvailable);
        };
        let Some(latest) = &self.gpm_last else {
            return Err(Absent::NotAvailable);
        };
        let results = gpm_metrics_get(parent.nvml(), &previous, latest, &[GpmMetricId::SmUtil])
            .map_err(absent)?;
        match results.into_iter().next() {
            Some(Ok(m)) if m.value.is_finite() && (0.0..=100.0).contains(&m.value) => {
                Ok(m.value.round() as u32)
            }
            Some(Ok(m)) => Err(Absent::Error(format!("GPM gave {} %", m.value))),
            Some(Err(e)) => Err(absent(e)),
            None => Err(Absent::NotAvailable),
        }
    }
}

/// The processes of an instance's lists, one per pid (a process in both lists is one
/// context: its memory is counted once), pid order.
fn merge(
    list: impl IntoIterator<Item = nvml_wrapper::struct_wrappers::device::ProcessInfo>,
) -> Vec<MigProcess> {
    let mut out: Vec<MigProcess> = Vec::new();
    for p in list {
        let used_memory = match p.used_gpu_memory {
            UsedGpuMemory::Used(bytes) => Ok(bytes),
            UsedGpuMemory::Unavailable => Err(Absent::NotAvailable),
        };
        match out.iter_mut().find(|q| q.pid == p.pid) {
            Some(q) if q.used_memory.is_err() => q.used_memory = used_memory,
            Some(_) => {}
            None => out.push(MigProcess {
                pid: p.pid,
                used_memory,
            }),
        }
    }
    out.sort_by_key(|p| p.pid);
    out
}

#[derive(Clone, Copy)]
enum Id {
    Gpu,
    Compute,
}

/// `nvmlDeviceGetGpuInstanceId` / `nvmlDeviceGetComputeInstanceId`, which nvml-wrapper 0.13
/// does not wrap.
fn instance_id(handle: &Device<'static>, which: Id) -> Result<u32, NvmlError> {
    let lib = handle.nvml().lib();
    let sym = match which {
        Id::Gpu => nvml_sym(lib.nvmlDeviceGetGpuInstanceId.as_ref())?,
        Id::Compute => nvml_sym(lib.nvmlDeviceGetComputeInstanceId.as_ref())?,
    };
    let mut id = 0;
    // SAFETY: the handle is only passed to NVML while `handle` (and the leaked `Nvml` it
    // borrows) is alive; `id` is a live c_uint the call writes.
    nvml_try(unsafe { sym(handle.handle(), &mut id) })?;
    Ok(id)
}
