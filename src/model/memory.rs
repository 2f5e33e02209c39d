//! A GPU's (or a MIG instance's) memory figures: read by `device` and `mig`, below both.

use serde::Serialize;

/// Device memory with the v2 semantics nvidia-smi uses: `used` excludes driver-reserved memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MemoryInfo {
    pub total: u64,
    /// `None` where the driver counts it in `used` (the original memory call, all drivers
    /// before R510 have): unknown, not zero.
    pub reserved: Option<u64>,
    pub used: u64,
    pub free: u64,
}
