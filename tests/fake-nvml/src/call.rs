//! The shared prologue of every export: count the call, catch panics, check
//! init, resolve the device handle, apply blocks and faults, then run the body.
//! Also the helpers that write through C out-pointers.

use std::ffi::c_char;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use crate::counters;
use crate::faults;
use crate::ffi::{
    INSUFFICIENT_SIZE, INVALID_ARGUMENT, NOT_SUPPORTED, NvmlDevice, NvmlReturn, SUCCESS, UNKNOWN,
};
use crate::mig::{self, MigInstanceSpec};
use crate::scenario::{DeviceSpec, Point};
use crate::state::{self, Snapshot};
use crate::timeline;

/// Result of an export body; `Err` carries the NVML error code.
pub type CallResult = Result<(), NvmlReturn>;

/// Counts the call and runs `f`, turning a panic into `UNKNOWN` (999).
pub fn guarded(name: &'static str, f: impl FnOnce() -> NvmlReturn) -> NvmlReturn {
    counters::record(name);
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(UNKNOWN)
}

/// What an export body sees.
pub struct Ctx {
    pub snap: Snapshot,
    device: Option<usize>,
    /// For a MIG device handle: the instance's position in its parent's `mig.instances`
    /// (`device` is then the parent).
    mig: Option<usize>,
}

impl Ctx {
    /// The device the call's handle refers to (validated before the body runs).
    pub fn device(&self) -> Result<&DeviceSpec, NvmlReturn> {
        self.device
            .and_then(|i| self.snap.scenario.devices.get(i))
            .ok_or(INVALID_ARGUMENT)
    }

    /// NVML index of the device the call's handle refers to.
    pub fn index(&self) -> Result<usize, NvmlReturn> {
        self.device.ok_or(INVALID_ARGUMENT)
    }

    /// The MIG instance a MIG device handle names; `None` for a GPU's own handle.
    pub fn mig_instance(&self) -> Option<&MigInstanceSpec> {
        let entry = self.mig?;
        self.device().ok()?.mig.as_ref()?.instances.get(entry)
    }

    /// The device's timeline values at the call's time.
    pub fn point(&self) -> Result<Point, NvmlReturn> {
        Ok(timeline::point_at(self.device()?, self.snap.t))
    }
}

/// How a call names its device (for validation and fault matching).
#[derive(Clone, Copy)]
pub enum Target {
    System,
    /// A GPU's handle; a live MIG device handle gets `NOT_SUPPORTED` (the call does not
    /// apply to MIG devices).
    Handle(NvmlDevice),
    /// A GPU's or a MIG device's handle.
    AnyHandle(NvmlDevice),
    Index(u32),
}

/// The device index of a valid handle and, for a MIG device handle, the instance entry; a
/// handle that names nothing, or an instance that no longer exists, is `INVALID_ARGUMENT`.
fn resolve(snap: &Snapshot, handle: NvmlDevice) -> Result<(usize, Option<usize>), NvmlReturn> {
    let devices = &snap.scenario.devices;
    if let Some((device, entry)) = mig::decode(handle as usize) {
        let live = devices
            .get(device)
            .and_then(|d| d.mig.as_ref())
            .is_some_and(|m| m.alive(entry, snap.t));
        return if live {
            Ok((device, Some(entry)))
        } else {
            Err(INVALID_ARGUMENT)
        };
    }
    let idx = (handle as usize).checked_sub(1).ok_or(INVALID_ARGUMENT)?;
    if idx < devices.len() {
        Ok((idx, None))
    } else {
        Err(INVALID_ARGUMENT)
    }
}

/// `resolve`, refusing a MIG device handle where the call takes only a GPU's.
fn resolve_target(
    snap: &Snapshot,
    handle: NvmlDevice,
    any: bool,
) -> Result<(usize, Option<usize>), NvmlReturn> {
    let (device, mig) = resolve(snap, handle)?;
    if mig.is_some() && !any {
        return Err(NOT_SUPPORTED);
    }
    Ok((device, mig))
}

fn run_inner(
    name: &'static str,
    target: Target,
    body: impl FnOnce(&Ctx) -> CallResult,
) -> CallResult {
    let mut snap = state::snapshot()?;
    let handle = match target {
        Target::Handle(h) => Some((h, false)),
        Target::AnyHandle(h) => Some((h, true)),
        Target::System | Target::Index(_) => None,
    };
    let (device, mig, fault_device) = match (target, handle) {
        (_, Some((h, any))) => {
            let (i, mig) = resolve_target(&snap, h, any)?;
            (Some(i), mig, u32::try_from(i).ok())
        }
        (Target::Index(i), None) => (None, None, Some(i)),
        _ => (None, None, None),
    };
    let sleep = faults::block_seconds(&snap.scenario, name, fault_device, snap.t);
    if sleep > 0.0 {
        std::thread::sleep(Duration::from_secs_f64(sleep));
        snap = state::snapshot()?;
        if let Some((h, any)) = handle {
            resolve_target(&snap, h, any)?;
        }
    }
    if let Some(code) = faults::fault_for(&snap.scenario, name, fault_device, snap.t) {
        return Err(code);
    }
    body(&Ctx { snap, device, mig })
}

/// Runs an export body with the full prologue.
pub fn run(
    name: &'static str,
    target: Target,
    body: impl FnOnce(&Ctx) -> CallResult,
) -> NvmlReturn {
    guarded(name, || match run_inner(name, target, body) {
        Ok(()) => SUCCESS,
        Err(code) => code,
    })
}

/// Shorthand for a call on a device handle.
pub fn on_device(
    name: &'static str,
    handle: NvmlDevice,
    body: impl FnOnce(&Ctx, &DeviceSpec) -> CallResult,
) -> NvmlReturn {
    run(name, Target::Handle(handle), |ctx| body(ctx, ctx.device()?))
}

/// Shorthand for a call that takes a GPU's or a MIG device's handle
/// (`Ctx::mig_instance` tells which).
pub fn on_any(
    name: &'static str,
    handle: NvmlDevice,
    body: impl FnOnce(&Ctx, &DeviceSpec) -> CallResult,
) -> NvmlReturn {
    run(name, Target::AnyHandle(handle), |ctx| {
        body(ctx, ctx.device()?)
    })
}

/// A value that may be absent from the scenario: absent -> `NOT_SUPPORTED`.
pub fn supported<T>(v: Option<T>) -> Result<T, NvmlReturn> {
    v.ok_or(NOT_SUPPORTED)
}

/// Writes `value` through a C out-pointer; NULL -> `INVALID_ARGUMENT`.
pub fn put<T>(out: *mut T, value: T) -> CallResult {
    if out.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    // SAFETY: the C caller passes a valid, aligned pointer to a `T` (NVML contract).
    unsafe { out.write(value) };
    Ok(())
}

/// Reads a C in/out count; NULL -> `INVALID_ARGUMENT`.
pub fn get<T: Copy>(inout: *const T) -> Result<T, NvmlReturn> {
    if inout.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    // SAFETY: the C caller passes a valid, aligned pointer to a `T` (NVML contract).
    Ok(unsafe { inout.read() })
}

/// Copies `s` plus a NUL into `buf` of `len` bytes; too small -> `INSUFFICIENT_SIZE`.
pub fn put_str(buf: *mut c_char, len: u32, s: &str) -> CallResult {
    if buf.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    let bytes = s.as_bytes();
    if (len as usize) < bytes.len() + 1 {
        return Err(INSUFFICIENT_SIZE);
    }
    // SAFETY: the caller's buffer holds `len` bytes and we write at most
    // `bytes.len() + 1 <= len` of them.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), bytes.len());
        buf.add(bytes.len()).write(0);
    }
    Ok(())
}

/// Copies `items` into a C array of at least `items.len()` elements.
pub fn put_slice<T: Copy>(buf: *mut T, items: &[T]) -> CallResult {
    if items.is_empty() {
        return Ok(());
    }
    if buf.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    // SAFETY: the caller promised room for `items.len()` elements (checked
    // against its in/out count before this is called).
    unsafe { std::ptr::copy_nonoverlapping(items.as_ptr(), buf, items.len()) };
    Ok(())
}

/// The NVML list protocol shared by the process list and process utilisation
/// functions: `n == 0` -> count 0 and `empty`; a NULL buffer or `*count < n`
/// -> `*count = n` and `INSUFFICIENT_SIZE`; else copy, `*count = n`, success.
pub fn put_list<T: Copy>(
    count: *mut u32,
    buf: *mut T,
    items: &[T],
    empty: CallResult,
) -> CallResult {
    let room = get(count)?;
    let n = u32::try_from(items.len()).map_err(|_| UNKNOWN)?;
    if n == 0 {
        put(count, 0)?;
        return empty;
    }
    if buf.is_null() || room < n {
        put(count, n)?;
        return Err(INSUFFICIENT_SIZE);
    }
    put_slice(buf, items)?;
    put(count, n)
}
