//! NVML error codes by name, as accepted in scenarios, and `nvmlErrorString` texts.

use std::ffi::CStr;

use serde::Deserialize;

use crate::ffi::NvmlReturn;

/// `(scenario name, code, nvmlErrorString text)`.
const CODES: &[(&str, NvmlReturn, &CStr)] = &[
    ("Success", 0, c"Success"),
    ("Uninitialized", 1, c"Uninitialized"),
    ("InvalidArgument", 2, c"Invalid Argument"),
    ("NotSupported", 3, c"Not Supported"),
    ("NoPermission", 4, c"Insufficient Permissions"),
    ("AlreadyInitialized", 5, c"Already Initialized"),
    ("NotFound", 6, c"Not Found"),
    ("InsufficientSize", 7, c"Insufficient Size"),
    ("InsufficientPower", 8, c"Insufficient External Power"),
    ("DriverNotLoaded", 9, c"Driver Not Loaded"),
    ("Timeout", 10, c"Timeout"),
    ("IrqIssue", 11, c"Interrupt request issue"),
    ("LibraryNotFound", 12, c"NVML Shared Library Not Found"),
    ("FunctionNotFound", 13, c"Function Not Found"),
    ("CorruptedInforom", 14, c"Corrupted infoROM"),
    ("GpuIsLost", 15, c"GPU is lost"),
    ("ResetRequired", 16, c"GPU requires restart"),
    (
        "OperatingSystem",
        17,
        c"The operating system has blocked the request.",
    ),
    (
        "LibRmVersionMismatch",
        18,
        c"RM has detected an NVML/RM version mismatch.",
    ),
    ("InUse", 19, c"In use by another client"),
    ("Memory", 20, c"Insufficient Memory"),
    ("NoData", 21, c"No data"),
    (
        "VgpuEccNotSupported",
        22,
        c"The requested vgpu operation is not available on target device, becasue ECC is enabled",
    ),
    ("InsufficientResources", 23, c"Insufficient resources"),
    ("FreqNotSupported", 24, c"Frequency not supported"),
    ("ArgumentVersionMismatch", 25, c"Argument version mismatch"),
    ("Deprecated", 26, c"Deprecated"),
    ("NotReady", 27, c"Not Ready"),
    ("GpuNotFound", 28, c"GPU not found"),
    ("InvalidState", 29, c"Invalid state"),
    ("Unknown", 999, c"Unknown Error"),
];

/// Names accepted for errors in scenario files.
pub fn error_names() -> impl Iterator<Item = &'static str> {
    CODES.iter().map(|(name, _, _)| *name)
}

/// The code for a scenario error name (exact, case-sensitive).
pub fn code_by_name(name: &str) -> Option<NvmlReturn> {
    CODES
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, c, _)| *c)
}

/// The static text `nvmlErrorString` returns for `code`.
pub fn error_string(code: NvmlReturn) -> &'static CStr {
    CODES
        .iter()
        .find(|(_, c, _)| *c == code)
        .map(|(_, _, s)| *s)
        .unwrap_or(c"Unknown Error")
}

/// An NVML error code in a scenario: a name such as `"NotSupported"` or a raw integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "ErrorRepr")]
pub struct ErrorCode(pub NvmlReturn);

#[derive(Deserialize)]
#[serde(untagged)]
enum ErrorRepr {
    Code(NvmlReturn),
    Name(String),
}

impl TryFrom<ErrorRepr> for ErrorCode {
    type Error = String;

    fn try_from(value: ErrorRepr) -> Result<Self, Self::Error> {
        match value {
            ErrorRepr::Code(c) => Ok(ErrorCode(c)),
            ErrorRepr::Name(name) => code_by_name(&name).map(ErrorCode).ok_or_else(|| {
                let known: Vec<_> = error_names().collect();
                format!(
                    "unknown NVML error name {name:?} (known: {})",
                    known.join(", ")
                )
            }),
        }
    }
}
