//! Why NVML as a whole is unusable, with a hint a person can act on.

use crate::text::clean;
use serde::Serialize;

/// A reason the GPU side cannot run at all. Each has one line of cause and one of hint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "detail")]
pub enum NvmlProblem {
    /// libnvidia-ml could not be loaded (no NVIDIA driver installed, or the path is wrong).
    LibraryNotFound(String),
    /// The library loaded but the kernel module is not loaded.
    DriverNotLoaded,
    /// Kernel module and user-space library differ (after a driver upgrade without reboot).
    VersionMismatch,
    NoPermission,
    /// NVML works but reports no GPU.
    NoDevices,
    /// Anything else, with the driver's words.
    Other(String),
}

impl NvmlProblem {
    /// One line naming the cause. The driver's (or loader's) words are cleaned here, not
    /// only where the monitor ingests them: `--once`, `record` and `run` say the problem
    /// before anything is ingested.
    pub fn cause(&self) -> String {
        match self {
            NvmlProblem::LibraryNotFound(detail) => {
                format!("NVIDIA management library not found ({})", clean(detail))
            }
            NvmlProblem::DriverNotLoaded => "the NVIDIA kernel driver is not loaded".into(),
            NvmlProblem::VersionMismatch => {
                "NVIDIA driver/library version mismatch (kernel module and libnvidia-ml differ)"
                    .into()
            }
            NvmlProblem::NoPermission => "no permission to open the NVIDIA devices".into(),
            NvmlProblem::NoDevices => "NVML reports no NVIDIA GPU on this machine".into(),
            NvmlProblem::Other(text) => format!("NVML failed: {}", clean(text)),
        }
    }

    /// One line saying what to do about it.
    pub fn hint(&self) -> &'static str {
        match self {
            NvmlProblem::LibraryNotFound(_) => {
                "install the NVIDIA driver, or point --nvml-lib at libnvidia-ml.so.1"
            }
            NvmlProblem::DriverNotLoaded => "load it with `sudo modprobe nvidia` or reboot",
            NvmlProblem::VersionMismatch => {
                "reboot, or reload the nvidia kernel modules, after a driver upgrade"
            }
            NvmlProblem::NoPermission => {
                "check the permissions of /dev/nvidia*, or that your user is in the video group"
            }
            NvmlProblem::NoDevices => {
                "check `nvidia-smi`, and in a container that the GPUs are passed through"
            }
            NvmlProblem::Other(_) => "check `nvidia-smi` and the kernel log (dmesg)",
        }
    }

    /// `cause; hint` on one line, for stderr and the status line.
    pub fn one_line(&self) -> String {
        format!("{} (hint: {})", self.cause(), self.hint())
    }
}
