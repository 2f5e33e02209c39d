//! Why a figure could not be read. An unreadable figure is never shown as zero:
//! every reading is a `Result<T, Absent>` and renders as `n/a` with this reason.

use serde::Serialize;

/// The reason a figure is missing.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "detail")]
pub enum Absent {
    /// The device or driver does not offer this figure (consumer GPU, datacentre fan, ...).
    NotSupported,
    /// The caller lacks the privilege to read it.
    NoPermission,
    /// The driver reported the value as not available (WDDM, WSL2, no sample yet).
    NotAvailable,
    /// The GPU fell off the bus or stopped answering.
    GpuLost,
    /// The call timed out inside the driver.
    Timeout,
    /// NVML does not offer it in MIG mode (device and per-process utilisation): a property
    /// of the mode, not a fault.
    MigMode,
    /// The loaded library lacks the function (old driver).
    MissingFunction(String),
    /// Any other error, with the driver's words.
    Error(String),
}

/// A figure that may be absent.
pub type Reading<T> = Result<T, Absent>;

/// What every unreadable figure shows, in every output.
pub const NA: &str = "n/a";

/// A reading formatted by `f`, or `n/a`.
pub fn or_na<T>(value: &Reading<T>, f: impl FnOnce(&T) -> String) -> String {
    match value {
        Ok(v) => f(v),
        Err(_) => NA.to_string(),
    }
}

impl Absent {
    /// Short words for the status line and JSON (`not supported`, `no permission`, ...).
    pub fn reason(&self) -> String {
        match self {
            Absent::NotSupported => "not supported".into(),
            Absent::NoPermission => "no permission".into(),
            Absent::NotAvailable => "not available".into(),
            Absent::GpuLost => "GPU lost".into(),
            Absent::Timeout => "timed out".into(),
            Absent::MigMode => "NVML does not support it in MIG mode".into(),
            Absent::MissingFunction(name) => format!("driver lacks {name}"),
            Absent::Error(text) => text.clone(),
        }
    }

    /// Whether this absence is a normal property of the device rather than a fault worth a warning.
    pub fn is_expected(&self) -> bool {
        matches!(
            self,
            Absent::NotSupported | Absent::NotAvailable | Absent::MigMode
        )
    }
}

impl std::fmt::Display for Absent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason())
    }
}
