//! A process's figures on one GPU, in the order `--json` and `--csv` give them; a label is the
//! process table's column header where the table has the figure.

use super::{Figure, Unit};

pub const GPU_INDEX: Figure = Figure::new("gpu_index", Unit::Id, "GPU");
pub const GPU_UUID: Figure = Figure::new("gpu_uuid", Unit::Text, "GPU UUID");
/// The pid NVML names (the host's).
pub const PID: Figure = Figure::new("pid", Unit::Id, "PID");
/// The same process's pid in vramscope's own pid namespace, where it can see it.
pub const LOCAL_PID: Figure = Figure::new("local_pid", Unit::Id, "local PID");
/// `C`, `G` or `C+G`: which of NVML's lists name it.
pub const TYPE: Figure = Figure::new("type", Unit::Text, "TYPE");
/// GPU memory NVML accounts to the process on this GPU.
pub const USED_MEMORY: Figure = Figure::new("used_memory", Unit::Bytes, "VRAM")
    .in_family("vramscope_process_memory_used_bytes");
/// The all-time peak of that, spikes the fast sampling attributed to it included.
pub const USED_MEMORY_PEAK: Figure = Figure::new("used_memory_peak", Unit::Bytes, "PEAK");
pub const SM_UTIL: Figure = Figure::new("sm_util", Unit::Percent, "SM%")
    .in_family("vramscope_process_sm_utilization_ratio");
pub const MEM_UTIL: Figure = Figure::new("mem_util", Unit::Percent, "MEM%");
pub const ENC_UTIL: Figure = Figure::new("enc_util", Unit::Percent, "ENC%");
pub const DEC_UTIL: Figure = Figure::new("dec_util", Unit::Percent, "DEC%");
pub const USER: Figure = Figure::new("user", Unit::Text, "USER");
pub const COMMAND: Figure = Figure::new("command", Unit::Text, "COMMAND");
/// Resident host memory.
pub const HOST_RSS: Figure =
    Figure::new("host_rss", Unit::Bytes, "RSS").in_family("vramscope_process_host_rss_bytes");
/// CPU use, percent of one core.
pub const CPU_PERCENT: Figure = Figure::new("cpu_percent", Unit::Percent, "CPU%");
/// The container id (within version 1 of `--json`; dcgm-exporter's `container` is
/// `container_name` here).
pub const CONTAINER: Figure = Figure::new("container", Unit::Text, "container");
pub const POD: Figure = Figure::new("pod", Unit::Text, "POD");
pub const NAMESPACE: Figure = Figure::new("namespace", Unit::Text, "namespace");
pub const CONTAINER_NAME: Figure = Figure::new("container_name", Unit::Text, "container name");
pub const POD_UID: Figure = Figure::new("pod_uid", Unit::Text, "pod uid");
pub const POD_QOS: Figure = Figure::new("pod_qos", Unit::Text, "pod QoS");
/// Bytes in live tensors, as the process's allocator publishes them.
pub const ALLOCATED: Figure = Figure::new("allocated", Unit::Bytes, "ALLOC")
    .in_family("vramscope_process_allocator_allocated_bytes");
/// Bytes its caching allocator holds from the driver.
pub const RESERVED: Figure = Figure::new("reserved", Unit::Bytes, "RESV")
    .in_family("vramscope_process_allocator_reserved_bytes");
/// The highest allocated bytes of any allocator sample, spikes between polls included.
pub const TRUE_PEAK: Figure = Figure::new("true_peak", Unit::Bytes, "A.PEAK")
    .in_family("vramscope_process_allocator_peak_bytes");
pub const STEP: Figure =
    Figure::new("step", Unit::Count, "STEP").in_family("vramscope_process_step");
/// What `step` counts from: `job` (the job's own steps) or `attach` (the steps since
/// `vramscope attach`, where the job kept no count the writer could read). Its family is
/// 1 where the steps are since the attach, 0 where they are the job's.
pub const STEPS_FROM: Figure = Figure::new("steps_from", Unit::Text, "steps from")
    .in_family("vramscope_process_steps_since_attach");
pub const PHASE: Figure = Figure::new("phase", Unit::Text, "phase");
/// The writer's liveness: running, exited, killed...
pub const WRITER: Figure = Figure::new("writer", Unit::Text, "writer");
pub const MIG_PROFILE: Figure = Figure::new("mig_profile", Unit::Text, "MIG profile");
pub const GPU_INSTANCE_ID: Figure = Figure::new("gpu_instance_id", Unit::Id, "GI");
pub const COMPUTE_INSTANCE_ID: Figure = Figure::new("compute_instance_id", Unit::Id, "CI");
pub const MIG_UUID: Figure = Figure::new("mig_uuid", Unit::Text, "MIG UUID");

/// Every figure of a process on one GPU, in output order.
pub const ALL: &[&Figure] = &[
    &GPU_INDEX,
    &GPU_UUID,
    &PID,
    &LOCAL_PID,
    &TYPE,
    &USED_MEMORY,
    &USED_MEMORY_PEAK,
    &SM_UTIL,
    &MEM_UTIL,
    &ENC_UTIL,
    &DEC_UTIL,
    &USER,
    &COMMAND,
    &HOST_RSS,
    &CPU_PERCENT,
    &CONTAINER,
    &POD,
    &NAMESPACE,
    &CONTAINER_NAME,
    &POD_UID,
    &POD_QOS,
    &ALLOCATED,
    &RESERVED,
    &TRUE_PEAK,
    &STEP,
    &STEPS_FROM,
    &PHASE,
    &WRITER,
    &MIG_PROFILE,
    &GPU_INSTANCE_ID,
    &COMPUTE_INSTANCE_ID,
    &MIG_UUID,
];
