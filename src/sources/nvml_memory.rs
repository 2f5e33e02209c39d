//! A device's memory figures from whichever call its driver answers: `nvmlDeviceGetMemoryInfo_v2`
//! (R510 and later, which splits out driver-reserved memory) or the original call, which drivers
//! before R510 offer alone and which a newer driver may still answer where `_v2` is refused.

use super::nvml_errors::older_call_may_answer;
use crate::model::MemoryInfo;
use nvml_wrapper::Device;
use nvml_wrapper::error::{NvmlError, nvml_sym, nvml_try};
use nvml_wrapper_sys::bindings::nvmlMemory_t;

/// The call that answered last; the next read starts there, so a driver without `_v2` costs
/// one call per tick, not a refused one and then the old one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum MemoryCall {
    #[default]
    V2,
    V1,
}

/// Reads one device's memory, remembering which call works.
#[derive(Default)]
pub struct MemoryReader {
    call: MemoryCall,
}

impl MemoryReader {
    /// The device's memory: `_v2`, or the original call where `_v2` is missing or refused.
    /// When both fail, the reason is the older call's answer, unless that too only says the
    /// call is missing or refused and `_v2` said more than that its symbol is missing.
    pub fn read(&mut self, device: &Device<'static>) -> Result<MemoryInfo, NvmlError> {
        if self.call == MemoryCall::V2 {
            match device.memory_info() {
                Ok(m) => {
                    return Ok(MemoryInfo {
                        total: m.total,
                        reserved: Some(m.reserved),
                        used: m.used,
                        free: m.free,
                    });
                }
                Err(e) if older_call_may_answer(&e) => {
                    return match v1(device) {
                        Ok(m) => {
                            self.call = MemoryCall::V1;
                            Ok(m)
                        }
                        Err(older)
                            if older_call_may_answer(&older)
                                && !matches!(e, NvmlError::FailedToLoadSymbol(_)) =>
                        {
                            Err(e)
                        }
                        Err(older) => Err(older),
                    };
                }
                Err(e) => return Err(e),
            }
        }
        match v1(device) {
            // Refused now although it answered before: `_v2` gets its chance again next time.
            Err(e) if older_call_may_answer(&e) => {
                self.call = MemoryCall::V2;
                Err(e)
            }
            result => result,
        }
    }
}

/// `nvmlDeviceGetMemoryInfo`. Its `used` includes the memory the driver reserves, which this
/// call does not tell apart, so `reserved` is unknown here and `used` is `total - free`.
fn v1(device: &Device<'static>) -> Result<MemoryInfo, NvmlError> {
    let sym = nvml_sym(device.nvml().lib().nvmlDeviceGetMemoryInfo.as_ref())?;
    // SAFETY: the handle is only passed to NVML while `device` (and the leaked `Nvml` it
    // borrows) is alive; `handle()` is unsafe only to make raw use deliberate.
    let handle = unsafe { device.handle() };
    let mut memory = nvmlMemory_t {
        total: 0,
        free: 0,
        used: 0,
    };
    // SAFETY: `memory` is a live `nvmlMemory_t`, the 24-byte struct this call writes.
    nvml_try(unsafe { sym(handle, &mut memory) })?;
    Ok(MemoryInfo {
        total: memory.total,
        reserved: None,
        used: memory.used,
        free: memory.free,
    })
}
