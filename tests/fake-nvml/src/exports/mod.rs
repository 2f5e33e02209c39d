//! The exported C symbols, split by area.

pub mod device;
pub mod gpm;
pub mod metrics;
pub mod mig;
pub mod process;
pub mod system;

/// Every NVML symbol this library exports (valid `function` names in
/// scenario faults and blocks). `fakeNvmlWriteCounts` is exported too but is
/// not an NVML function.
pub const EXPORTED_SYMBOLS: &[&str] = &[
    // system.rs
    "nvmlInit_v2",
    "nvmlInit",
    "nvmlInitWithFlags",
    "nvmlShutdown",
    "nvmlErrorString",
    "nvmlSystemGetDriverVersion",
    "nvmlSystemGetNVMLVersion",
    "nvmlSystemGetCudaDriverVersion",
    "nvmlSystemGetCudaDriverVersion_v2",
    "nvmlDeviceGetCount_v2",
    "nvmlDeviceGetHandleByIndex_v2",
    // device.rs
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetEnforcedPowerLimit",
    "nvmlDeviceGetPowerManagementLimit",
    "nvmlDeviceGetMaxClockInfo",
    "nvmlDeviceGetNumFans",
    "nvmlDeviceGetPersistenceMode",
    "nvmlDeviceGetIndex",
    "nvmlDeviceGetComputeMode",
    "nvmlDeviceGetDisplayMode",
    "nvmlDeviceGetDisplayActive",
    "nvmlDeviceGetMigMode",
    "nvmlDeviceIsMigDeviceHandle",
    "nvmlDeviceGetDriverModel",
    "nvmlDeviceGetDriverModel_v2",
    "nvmlDeviceGetConfComputeMemSizeInfo",
    // mig.rs
    "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceGetMigDeviceHandleByIndex",
    "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
    "nvmlDeviceGetGpuInstanceId",
    "nvmlDeviceGetComputeInstanceId",
    // gpm.rs
    "nvmlGpmSampleAlloc",
    "nvmlGpmSampleFree",
    "nvmlGpmMigSampleGet",
    "nvmlGpmMetricsGet",
    // metrics.rs
    "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetTemperatureV",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetFanSpeed_v2",
    "nvmlDeviceGetFanSpeed",
    "nvmlDeviceGetEncoderUtilization",
    "nvmlDeviceGetDecoderUtilization",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
    "nvmlDeviceGetTotalEccErrors",
    "nvmlDeviceGetPcieThroughput",
    "nvmlDeviceGetPerformanceState",
    // process.rs
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetGraphicsRunningProcesses_v3",
    "nvmlDeviceGetProcessUtilization",
    "nvmlDeviceGetMPSComputeRunningProcesses_v3",
    "nvmlDeviceGetRunningProcessDetailList",
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetGraphicsRunningProcesses_v2",
    "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetGraphicsRunningProcesses",
];
