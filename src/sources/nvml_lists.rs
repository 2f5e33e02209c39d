//! The three list reads of every tick (compute processes, graphics processes, per-process
//! utilisation samples), one NVML call each.
//!
//! nvml-wrapper reads each list with two calls: a NULL-buffer probe for the count, then the
//! fill into a fresh buffer. Here every list keeps its buffer between ticks, sized from the
//! largest count seen plus headroom, so a list that still fits costs one call. When it does
//! not, NVML answers INSUFFICIENT_SIZE with the count it needs; the buffer grows and the call
//! is made again, a bounded number of times.
//!
//! A process list is read by the newest call the driver answers: `_v3` from R510, `_v2` from
//! R450 (the same 24-byte entries), and before that the unversioned call with 16-byte entries.
//! Each list remembers the call that answered, so an old driver costs one call per tick too.

use super::nvml_errors::older_call_may_answer;
use nvml_wrapper::Device;
use nvml_wrapper::error::{NvmlError, nvml_sym, nvml_try};
use nvml_wrapper::struct_wrappers::device::{ProcessInfo, ProcessUtilizationSample};
use nvml_wrapper_sys::bindings::{
    nvmlDevice_t, nvmlProcessInfo_t, nvmlProcessInfo_v1_t, nvmlProcessUtilizationSample_t,
    nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE, nvmlReturn_t,
};
use std::ffi::c_uint;

// The layouts the driver writes through these calls (see the R535 note in nvml.rs): a
// different stride would make NVML write past the buffer.
const _: () = assert!(size_of::<nvmlProcessInfo_t>() == 24);
const _: () = assert!(size_of::<nvmlProcessInfo_v1_t>() == 16);
const _: () = assert!(size_of::<nvmlProcessUtilizationSample_t>() == 32);

/// Calls per read: the kept buffer; then one sized to the count NVML reported; then once more
/// for a list that grew again in between (what the old probe-then-fill retry allowed). An
/// INSUFFICIENT_SIZE past that is returned as the error, so a driver that keeps answering it
/// cannot hold the sampler.
const ATTEMPTS: usize = 3;
/// First size, so a first tick with a few processes needs no second call.
const INITIAL_ENTRIES: usize = 64;
/// No GPU runs this many processes or buffers this many samples; a larger count is treated as
/// a driver fault rather than allocated.
const MAX_ENTRIES: usize = 1 << 16;

/// A zeroed NVML entry to fill buffers with.
pub trait Entry: Copy {
    const EMPTY: Self;
}

impl Entry for nvmlProcessInfo_t {
    const EMPTY: Self = nvmlProcessInfo_t {
        pid: 0,
        usedGpuMemory: 0,
        gpuInstanceId: 0,
        computeInstanceId: 0,
    };
}

impl Entry for nvmlProcessInfo_v1_t {
    const EMPTY: Self = nvmlProcessInfo_v1_t {
        pid: 0,
        usedGpuMemory: 0,
    };
}

impl Entry for nvmlProcessUtilizationSample_t {
    const EMPTY: Self = nvmlProcessUtilizationSample_t {
        pid: 0,
        timeStamp: 0,
        smUtil: 0,
        memUtil: 0,
        encUtil: 0,
        decUtil: 0,
    };
}

/// A device's per-process utilisation sample buffer.
pub type SampleBuffer = ListBuffer<nvmlProcessUtilizationSample_t>;

/// One list's buffer, kept between ticks. It only grows, since shrinking would save a few
/// kilobytes at the price of a second call whenever the list grows back.
///
/// It holds a third more entries than the room it offers NVML. A driver with R535's bug
/// writes 32-byte process entries where 24 were asked for: 4/3 of the bytes. The
/// driver-version guard in nvml.rs keeps the process lists from being read on such a driver,
/// but it cannot tell when the version itself is unreadable; the slack keeps even that write
/// inside our memory (its entries then come out garbled, never out of bounds).
pub struct ListBuffer<T> {
    entries: Vec<T>,
    /// The room offered to NVML, in entries.
    offered: usize,
}

impl<T: Entry> Default for ListBuffer<T> {
    fn default() -> Self {
        let mut buffer = Self {
            entries: Vec::new(),
            offered: 0,
        };
        buffer.offer(INITIAL_ENTRIES);
        buffer
    }
}

impl<T: Entry> ListBuffer<T> {
    /// Makes `call(count, buffer)` with the kept buffer and returns the entries NVML wrote.
    /// `call` must write at most `*count` entries and set `*count`, as NVML's list calls do.
    fn read(
        &mut self,
        mut call: impl FnMut(*mut c_uint, *mut T) -> nvmlReturn_t,
    ) -> Result<&[T], NvmlError> {
        let mut needed = 0;
        for _ in 0..ATTEMPTS {
            // At most MAX_ENTRIES, so it fits a c_uint.
            let mut count = self.offered as c_uint;
            let code = call(&mut count, self.entries.as_mut_ptr());
            needed = count as usize;
            if code == nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE {
                if needed > MAX_ENTRIES {
                    break;
                }
                // A count within the room offered (not what NVML does) is retried as it is,
                // rather than growing the buffer on every attempt.
                if needed > self.offered {
                    self.grow(needed);
                }
                continue;
            }
            nvml_try(code)?;
            // NVML writes at most the room it was offered; min() keeps a faulty count in bounds.
            let written = needed.min(self.offered);
            // Room for the next tick's growth without a second call.
            self.grow(written);
            return Ok(&self.entries[..written]);
        }
        Err(NvmlError::InsufficientSize(Some(needed)))
    }

    /// Makes room for `count` entries plus a quarter more and a few, never past MAX_ENTRIES.
    fn grow(&mut self, count: usize) {
        let room = (count + count / 4 + 8).min(MAX_ENTRIES);
        if room > self.offered {
            self.offer(room);
        }
    }

    /// Offers `room` entries, backed by a third more (see the type's docs).
    fn offer(&mut self, room: usize) {
        self.offered = room;
        self.entries.resize(room + room / 3 + 1, T::EMPTY);
    }
}

/// Which process list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListKind {
    Compute,
    Graphics,
}

/// The calls that read a process list, newest first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum ListCall {
    #[default]
    V3,
    V2,
    V1,
}

impl ListCall {
    fn older(self) -> Option<Self> {
        match self {
            ListCall::V3 => Some(ListCall::V2),
            ListCall::V2 => Some(ListCall::V1),
            ListCall::V1 => None,
        }
    }
}

/// One of a device's process lists: the call that answered last and the kept buffers.
pub struct ProcessList {
    kind: ListKind,
    call: ListCall,
    entries: ListBuffer<nvmlProcessInfo_t>,
    /// For the unversioned call's 16-byte entries; allocated only on a driver that needs it.
    v1_entries: Option<ListBuffer<nvmlProcessInfo_v1_t>>,
}

impl ProcessList {
    pub fn new(kind: ListKind) -> Self {
        Self {
            kind,
            call: ListCall::default(),
            entries: ListBuffer::default(),
            v1_entries: None,
        }
    }

    /// The list, from the call that answered last, or else from the older ones in turn where
    /// that call is missing or refused (see `older_call_may_answer`); the one that answers is
    /// remembered. When none does, the reason is the first that is more than a missing symbol,
    /// and the next read starts again from the remembered call.
    pub fn read(&mut self, device: &Device<'static>) -> Result<Vec<ProcessInfo>, NvmlError> {
        let mut call = self.call;
        let mut reason: Option<NvmlError> = None;
        loop {
            match self.read_with(device, call) {
                Ok(list) => {
                    self.call = call;
                    return Ok(list);
                }
                Err(e) if older_call_may_answer(&e) => {
                    if reason
                        .as_ref()
                        .is_none_or(|r| matches!(r, NvmlError::FailedToLoadSymbol(_)))
                    {
                        reason = Some(e);
                    }
                    match call.older() {
                        Some(older) => call = older,
                        None => return Err(reason.unwrap_or(NvmlError::NotSupported)),
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The list by one call, in one NVML call when it fits the kept buffer.
    fn read_with(
        &mut self,
        device: &Device<'static>,
        call: ListCall,
    ) -> Result<Vec<ProcessInfo>, NvmlError> {
        let lib = device.nvml().lib();
        let (newer, v1) = match self.kind {
            ListKind::Compute => (
                match call {
                    ListCall::V3 => &lib.nvmlDeviceGetComputeRunningProcesses_v3,
                    _ => &lib.nvmlDeviceGetComputeRunningProcesses_v2,
                },
                &lib.nvmlDeviceGetComputeRunningProcesses,
            ),
            ListKind::Graphics => (
                match call {
                    ListCall::V3 => &lib.nvmlDeviceGetGraphicsRunningProcesses_v3,
                    _ => &lib.nvmlDeviceGetGraphicsRunningProcesses_v2,
                },
                &lib.nvmlDeviceGetGraphicsRunningProcesses,
            ),
        };
        if call != ListCall::V1 {
            let sym = nvml_sym(newer.as_ref())?;
            return process_list(device, &mut self.entries, *sym);
        }
        let sym = nvml_sym(v1.as_ref())?;
        let buffer = self.v1_entries.get_or_insert_with(ListBuffer::default);
        // SAFETY: as in `process_list`.
        let handle = unsafe { device.handle() };
        // SAFETY: `read` passes a buffer of at least `*count` 16-byte entries, the
        // `nvmlProcessInfo_v1_t` layout the unversioned call writes, and NVML writes at most
        // `*count` of them.
        let entries = buffer.read(|count, infos| unsafe { sym(handle, count, infos) })?;
        Ok(entries
            .iter()
            .map(|e| ProcessInfo::from(widened(e)))
            .collect())
    }
}

/// A 16-byte entry as the 24-byte layout: the unversioned call predates MIG instances, so
/// they are "none" (0xFFFFFFFF, which nvml-wrapper reads as `None`).
fn widened(entry: &nvmlProcessInfo_v1_t) -> nvmlProcessInfo_t {
    nvmlProcessInfo_t {
        pid: entry.pid,
        usedGpuMemory: entry.usedGpuMemory,
        gpuInstanceId: u32::MAX,
        computeInstanceId: u32::MAX,
    }
}

/// The signature the `_v3` and `_v2` process lists share, with their 24-byte entry layout.
type ProcessListFn =
    unsafe extern "C" fn(nvmlDevice_t, *mut c_uint, *mut nvmlProcessInfo_t) -> nvmlReturn_t;

/// One `_v3` or `_v2` process list in one call.
fn process_list(
    device: &Device<'static>,
    buffer: &mut ListBuffer<nvmlProcessInfo_t>,
    sym: ProcessListFn,
) -> Result<Vec<ProcessInfo>, NvmlError> {
    // SAFETY: the handle is only passed to NVML while `device` (and the leaked `Nvml` it
    // borrows) is alive; `handle()` is unsafe only to make raw use deliberate.
    let handle = unsafe { device.handle() };
    // SAFETY: `read` passes a buffer of at least `*count` 24-byte entries, the layout `_v3`
    // and `_v2` write, and NVML writes at most `*count` of them. R535's 32-byte stride is kept
    // away by the driver-version guard in nvml.rs, and where that guard cannot see the
    // version, the buffer's slack (4/3 of `*count` entries) still holds such a write.
    let entries = buffer.read(|count, infos| unsafe { sym(handle, count, infos) })?;
    Ok(entries.iter().copied().map(ProcessInfo::from).collect())
}

/// `process_utilization_stats(since)` in one NVML call. NVML answers NOT_FOUND
/// (`NvmlError::NotFound`) when no sample is newer than `since`, as before.
pub fn process_utilization(
    device: &Device<'static>,
    buffer: &mut SampleBuffer,
    since: u64,
) -> Result<Vec<ProcessUtilizationSample>, NvmlError> {
    let lib = device.nvml().lib();
    let sym = nvml_sym(lib.nvmlDeviceGetProcessUtilization.as_ref())?;
    // SAFETY: as in `process_list`.
    let handle = unsafe { device.handle() };
    // SAFETY: `read` passes a buffer of `*count` 32-byte samples, the layout this call
    // writes, and NVML writes at most `*count` of them.
    let samples = buffer.read(|count, samples| unsafe { sym(handle, samples, count, since) })?;
    Ok(samples
        .iter()
        .copied()
        .map(ProcessUtilizationSample::from)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvml_wrapper_sys::bindings::{
        nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST, nvmlReturn_enum_NVML_SUCCESS,
    };

    /// NVML's list protocol over `list`: too little room gives the count and
    /// INSUFFICIENT_SIZE, else the entries are written. Counts its calls.
    fn driver(
        list: &[u32],
        calls: &mut usize,
    ) -> impl FnMut(*mut c_uint, *mut nvmlProcessInfo_t) -> nvmlReturn_t {
        move |count, infos| {
            *calls += 1;
            // SAFETY: `read` passes a valid count and a buffer of `*count` entries.
            unsafe {
                if (*count as usize) < list.len() {
                    *count = list.len() as c_uint;
                    return nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE;
                }
                for (i, pid) in list.iter().enumerate() {
                    infos.add(i).write(nvmlProcessInfo_t {
                        pid: *pid,
                        ..nvmlProcessInfo_t::EMPTY
                    });
                }
                *count = list.len() as c_uint;
            }
            nvmlReturn_enum_NVML_SUCCESS
        }
    }

    fn pids(entries: &[nvmlProcessInfo_t]) -> Vec<u32> {
        entries.iter().map(|e| e.pid).collect()
    }

    #[test]
    fn a_list_that_fits_costs_one_call() {
        let mut buffer = ListBuffer::default();
        let mut calls = 0;
        let read = buffer.read(driver(&[1, 2], &mut calls)).unwrap();
        assert_eq!(pids(read), vec![1, 2]);
        assert_eq!(calls, 1);
    }

    #[test]
    fn a_list_past_the_buffer_grows_it_and_comes_back_whole() {
        let mut buffer = ListBuffer::default();
        let mut calls = 0;
        buffer.read(driver(&[1, 2], &mut calls)).unwrap();
        let many: Vec<u32> = (1..=100).collect();
        let mut calls = 0;
        assert_eq!(pids(buffer.read(driver(&many, &mut calls)).unwrap()), many);
        assert_eq!(calls, 2, "kept buffer, then one sized to the count");
        // The grown buffer is kept: the next tick is one call again, with some growth.
        let more: Vec<u32> = (1..=110).collect();
        let mut calls = 0;
        assert_eq!(pids(buffer.read(driver(&more, &mut calls)).unwrap()), more);
        assert_eq!(calls, 1);
    }

    #[test]
    fn a_persistent_insufficient_size_gives_up() {
        let mut buffer = ListBuffer::<nvmlProcessInfo_t>::default();
        let mut calls = 0;
        let result = buffer.read(|_, _| {
            calls += 1;
            nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE
        });
        assert!(matches!(result, Err(NvmlError::InsufficientSize(_))));
        assert_eq!(calls, ATTEMPTS);
    }

    #[test]
    fn an_absurd_count_is_not_allocated() {
        let mut buffer = ListBuffer::<nvmlProcessInfo_t>::default();
        let result = buffer.read(|count, _| {
            // SAFETY: `read` passes a valid count.
            unsafe { *count = c_uint::MAX };
            nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE
        });
        assert!(matches!(result, Err(NvmlError::InsufficientSize(_))));
        assert_eq!(buffer.offered, INITIAL_ENTRIES);
    }

    #[test]
    fn a_list_that_shrinks_comes_back_without_the_old_entries() {
        let mut buffer = ListBuffer::default();
        let many: Vec<u32> = (1..=100).collect();
        buffer.read(driver(&many, &mut 0)).unwrap();
        let read = buffer.read(driver(&[7, 8], &mut 0)).unwrap();
        assert_eq!(pids(read), vec![7, 8]);
    }

    #[test]
    fn a_count_past_the_room_offered_is_clamped() {
        let mut buffer = ListBuffer::<nvmlProcessInfo_t>::default();
        let read = buffer
            .read(|count, _| {
                // SAFETY: `read` passes a valid count.
                unsafe { *count += 50 };
                nvmlReturn_enum_NVML_SUCCESS
            })
            .unwrap();
        assert_eq!(read.len(), INITIAL_ENTRIES);
    }

    #[test]
    fn an_insufficient_size_within_the_room_does_not_grow_it() {
        let mut buffer = ListBuffer::<nvmlProcessInfo_t>::default();
        let mut calls = 0;
        let result = buffer.read(|count, _| {
            calls += 1;
            // SAFETY: `read` passes a valid count.
            unsafe { *count = 3 };
            nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE
        });
        assert!(matches!(result, Err(NvmlError::InsufficientSize(Some(3)))));
        assert_eq!(calls, ATTEMPTS);
        assert_eq!(buffer.offered, INITIAL_ENTRIES);
    }

    #[test]
    fn a_32_byte_stride_fits_inside_the_buffer() {
        // What a driver with R535's bug does: `*count` entries of 32 bytes into a buffer of
        // 24-byte ones. The bytes it may write must lie inside the allocation.
        for room in [INITIAL_ENTRIES, 65, 96, 100, 1000, MAX_ENTRIES] {
            let mut buffer = ListBuffer::<nvmlProcessInfo_t>::default();
            buffer.offer(room);
            let bytes = buffer.entries.len() * size_of::<nvmlProcessInfo_t>();
            assert!(bytes >= 32 * buffer.offered, "room {room}: {bytes} bytes");
        }
    }

    #[test]
    fn other_errors_pass_through_unretried() {
        let mut buffer = ListBuffer::<nvmlProcessInfo_t>::default();
        let mut calls = 0;
        let result = buffer.read(|_, _| {
            calls += 1;
            nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST
        });
        assert!(matches!(result, Err(NvmlError::GpuLost)));
        assert_eq!(calls, 1);
    }
}
