//! Translating nvml-wrapper errors into vramscope's words: `Absent` for one figure,
//! `NvmlProblem` for NVML as a whole.

use crate::model::{Absent, NvmlProblem};
use nvml_wrapper::error::NvmlError;

/// Why one figure could not be read.
pub fn absent(err: NvmlError) -> Absent {
    absent_ref(&err)
}

/// Same as `absent`, for errors we only borrow (a failed device handle kept for its reason).
pub fn absent_ref(err: &NvmlError) -> Absent {
    match err {
        NvmlError::NotSupported => Absent::NotSupported,
        NvmlError::NoPermission => Absent::NoPermission,
        NvmlError::NotFound | NvmlError::NoData => Absent::NotAvailable,
        NvmlError::GpuLost => Absent::GpuLost,
        NvmlError::Timeout => Absent::Timeout,
        NvmlError::Unknown => Absent::Error("unknown NVML error".into()),
        NvmlError::InsufficientSize(_) => Absent::Error("insufficient size".into()),
        NvmlError::FailedToLoadSymbol(text) => {
            Absent::MissingFunction(symbol_name(text).unwrap_or_else(|| text.clone()))
        }
        other => Absent::Error(other.to_string()),
    }
}

/// Whether an older call for the same figure may answer where this one did not: the symbol is
/// missing (a driver older than the call), the driver says it has no such function, or it does
/// not support this version of the call. Any other error is the device's answer, which an
/// older call would only repeat.
pub fn older_call_may_answer(err: &NvmlError) -> bool {
    matches!(
        err,
        NvmlError::FailedToLoadSymbol(_) | NvmlError::FunctionNotFound | NvmlError::NotSupported
    )
}

/// Why NVML cannot be used at all.
pub fn problem(err: NvmlError) -> NvmlProblem {
    match err {
        NvmlError::LibloadingError(e) => NvmlProblem::LibraryNotFound(e.to_string()),
        NvmlError::LibraryNotFound => NvmlProblem::LibraryNotFound("libnvidia-ml".into()),
        NvmlError::DriverNotLoaded => NvmlProblem::DriverNotLoaded,
        NvmlError::LibRmVersionMismatch => NvmlProblem::VersionMismatch,
        NvmlError::NoPermission => NvmlProblem::NoPermission,
        other => NvmlProblem::Other(other.to_string()),
    }
}

/// `nvmlDeviceGetFoo` out of libloading's "…: undefined symbol: nvmlDeviceGetFoo".
fn symbol_name(text: &str) -> Option<String> {
    let start = text.rfind("nvml")?;
    let name: String = text[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    Some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_symbols_are_named() {
        let a = absent(NvmlError::FailedToLoadSymbol(
            "/x/libnvidia-ml.so.1: undefined symbol: nvmlDeviceGetFanSpeed_v2".into(),
        ));
        assert_eq!(
            a,
            Absent::MissingFunction("nvmlDeviceGetFanSpeed_v2".into())
        );
    }

    #[test]
    fn only_a_missing_or_unsupported_call_tries_an_older_one() {
        assert!(older_call_may_answer(&NvmlError::FailedToLoadSymbol(
            "undefined symbol: nvmlDeviceGetMemoryInfo_v2".into()
        )));
        assert!(older_call_may_answer(&NvmlError::FunctionNotFound));
        assert!(older_call_may_answer(&NvmlError::NotSupported));
        for answer in [
            NvmlError::GpuLost,
            NvmlError::NoPermission,
            NvmlError::Unknown,
            NvmlError::Timeout,
        ] {
            assert!(!older_call_may_answer(&answer), "{answer:?}");
        }
    }

    #[test]
    fn error_classes_map_to_reasons() {
        assert_eq!(absent(NvmlError::NotSupported), Absent::NotSupported);
        assert_eq!(absent(NvmlError::GpuLost), Absent::GpuLost);
        assert_eq!(
            problem(NvmlError::DriverNotLoaded),
            NvmlProblem::DriverNotLoaded
        );
        assert_eq!(
            problem(NvmlError::LibRmVersionMismatch),
            NvmlProblem::VersionMismatch
        );
    }
}
