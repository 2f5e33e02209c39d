//! A fake `libnvidia-ml.so` for tests, driven by a JSON scenario.
//!
//! Built as a `cdylib` (`libfake_nvml.so`) it is loaded by nvml-wrapper via
//! `Nvml::builder().lib_path(path).init()`. As an `rlib` it offers in-process
//! helpers: call counters and test hooks. See `README.md` for the format.

mod call;
mod clock;
mod counters;
mod errors;
pub mod exports;
mod faults;
pub mod ffi;
mod hide;
pub mod mig;
pub mod scenario;
mod state;
mod timeline;
mod watch;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use clock::TIME_SCALE_ENV;
pub use counters::COUNTS_ENV;
pub use errors::{ErrorCode, code_by_name, error_names};
pub use exports::EXPORTED_SYMBOLS;
pub use hide::copy_without_symbols;
pub use scenario::Scenario;
pub use state::{SCENARIO_ENV, SIDECAR_NAME};

/// Calls per exported function so far in this copy of the library.
pub fn call_counts() -> BTreeMap<String, u64> {
    counters::call_counts()
}

/// Zeroes the call counters.
pub fn reset_call_counts() {
    counters::reset();
}

/// Writes the call counts as a JSON object to `path`, in place (see the README).
pub fn write_call_counts(path: &Path) -> std::io::Result<()> {
    counters::write_counts_to(path)
}

/// Uses `path` as the scenario at the next `nvmlInit*`, ahead of
/// `FAKE_NVML_SCENARIO` and the sidecar (`None` removes the override).
pub fn set_scenario_path_for_tests(path: Option<&Path>) {
    state::set_scenario_path(path.map(Path::to_path_buf));
}

/// Freezes scenario time at `t` seconds (`None`: back to the real clock).
pub fn set_fixed_time_for_tests(t: Option<f64>) {
    state::set_fixed_time(t);
}

/// Forgets everything: init ref-count, time origin, loaded scenario, test
/// overrides and call counts.
pub fn reset_for_tests() {
    state::reset();
    counters::reset();
}

/// The file this code was loaded from (found with `dladdr`); the sidecar
/// scenario is looked for in its directory.
pub fn library_path() -> Option<PathBuf> {
    state::own_library_path()
}
