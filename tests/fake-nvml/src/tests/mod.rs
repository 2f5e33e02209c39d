//! In-process unit tests calling the exported C functions directly.
//!
//! All tests share the library's statics, so each one takes `LOCK` through
//! [`Fake`], which also gives it its own scenario file and a frozen clock.

mod counters;
mod faults;
mod memory;
mod metrics;
mod mig;
mod peers;
mod processes;
mod system;
mod timeline;

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::exports::system::{nvmlInit_v2, nvmlShutdown};
use crate::ffi::NvmlDevice;

static LOCK: Mutex<()> = Mutex::new(());

/// One test's fake: exclusive access, a scenario file, frozen time.
pub struct Fake {
    _guard: MutexGuard<'static, ()>,
    pub dir: TempDir,
    pub path: PathBuf,
}

impl Fake {
    /// Writes `scenario`, resets the library, points it at the file, time = 0.
    pub fn new(scenario: &Value) -> Fake {
        let guard = LOCK.lock().unwrap_or_else(PoisonError::into_inner);
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("scenario.json");
        crate::reset_for_tests();
        let fake = Fake {
            _guard: guard,
            dir,
            path,
        };
        fake.write(scenario);
        crate::set_scenario_path_for_tests(Some(&fake.path));
        crate::set_fixed_time_for_tests(Some(0.0));
        fake
    }

    /// `new` plus a successful `nvmlInit_v2`.
    pub fn init(scenario: &Value) -> Fake {
        let fake = Fake::new(scenario);
        assert_eq!(nvmlInit_v2(), 0, "nvmlInit_v2");
        fake
    }

    /// Replaces the scenario file atomically (temp file + rename).
    pub fn write(&self, scenario: &Value) {
        self.write_text(&scenario.to_string());
    }

    pub fn write_text(&self, text: &str) {
        let tmp = self.dir.path().join("scenario.json.tmp");
        std::fs::write(&tmp, text).expect("write scenario");
        std::fs::rename(&tmp, &self.path).expect("rename scenario");
    }

    pub fn at(&self, t: f64) {
        crate::set_fixed_time_for_tests(Some(t));
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        while nvmlShutdown() == 0 {}
        crate::reset_for_tests();
    }
}

pub fn handle(index: usize) -> NvmlDevice {
    (index + 1) as NvmlDevice
}

/// A device with the required fields and `extra` merged in.
pub fn device(extra: Value) -> Value {
    let mut d = json!({
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-11111111-2222-3333-4444-555555555555",
        "pci_bus_id": "00000000:18:00.0",
    });
    if let (Some(obj), Value::Object(extra)) = (d.as_object_mut(), extra) {
        obj.extend(extra);
    }
    d
}

/// A scenario with the given devices.
pub fn with_devices(devices: Vec<Value>) -> Value {
    json!({ "devices": devices })
}
