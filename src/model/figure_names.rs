//! The one name of each figure that more than one output writes: `--json`'s key, `--csv`'s
//! column (`output::fields`) and `export`'s metric are these constants, so no output can call
//! a figure by a name of its own. Units are in the name where the figure is not bytes, a
//! percentage or a count.

/// GPU memory in use, bytes (NVML's `used`).
pub const MEMORY_USED: &str = "memory_used";
/// GPU memory in all, bytes.
pub const MEMORY_TOTAL: &str = "memory_total";
/// The highest GPU memory in use between two samples, bytes.
pub const MEMORY_USED_PEAK: &str = "memory_used_peak";
/// GPU utilisation, percent.
pub const GPU_UTIL: &str = "gpu_util";
/// Memory controller utilisation, percent.
pub const MEM_UTIL: &str = "mem_util";
/// GPU temperature, degrees Celsius.
pub const TEMPERATURE_C: &str = "temperature_c";
/// Power draw, milliwatts.
pub const POWER_MW: &str = "power_mw";
/// SM clock, MHz.
pub const SM_CLOCK_MHZ: &str = "sm_clock_mhz";
/// Memory clock, MHz.
pub const MEM_CLOCK_MHZ: &str = "mem_clock_mhz";
/// A process's GPU memory as NVML counts it, bytes.
pub const USED_MEMORY: &str = "used_memory";
/// A process's SM utilisation, percent.
pub const SM_UTIL: &str = "sm_util";
/// A process's resident host memory, bytes.
pub const HOST_RSS: &str = "host_rss";
/// A process's CPU use, percent of one core.
pub const CPU_PERCENT: &str = "cpu_percent";
