//! Configuration by environment variables, through nvml-wrapper. Its own test
//! binary (process) because the variables are process-global; one test only.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
use nvml_wrapper::error::NvmlError;
use serde_json::json;

fn built_library() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("deps dir");
    [Some(deps), deps.parent()]
        .into_iter()
        .flatten()
        .map(|d| d.join("libfake_nvml.so"))
        .find(|p| p.is_file())
        .expect("libfake_nvml.so next to the test binary")
}

fn copy_library(dir: &Path) -> PathBuf {
    let lib = dir.join("libnvidia-ml.so.1");
    std::fs::copy(built_library(), &lib).expect("copy library");
    lib
}

fn init(lib: &Path) -> Result<Nvml, NvmlError> {
    Nvml::builder().lib_path(lib.as_os_str()).init()
}

#[test]
fn scenario_time_scale_and_counts_from_env() {
    let dir = tempfile::tempdir().expect("tempdir");

    // No env var and no sidecar: init fails with Unknown (and one stderr line).
    assert!(std::env::var_os("FAKE_NVML_SCENARIO").is_none());
    let bare = tempfile::tempdir().expect("tempdir");
    assert!(matches!(
        init(&copy_library(bare.path())),
        Err(NvmlError::Unknown)
    ));

    let scenario = dir.path().join("elsewhere.json");
    let counts = dir.path().join("counts.json");
    let s = json!({"devices": [{
        "name": "GPU", "uuid": "GPU-1", "pci_bus_id": "00000000:01:00.0",
        "timeline": [{"t": 0, "temperature": 30}, {"t": 10, "temperature": 90}],
    }]});
    std::fs::write(&scenario, s.to_string()).expect("scenario");
    // SAFETY: the only test in this binary; no other thread reads the environment.
    unsafe {
        std::env::set_var("FAKE_NVML_SCENARIO", &scenario);
        std::env::set_var("FAKE_NVML_TIME_SCALE", "100");
        std::env::set_var("FAKE_NVML_COUNTS", &counts);
    }

    let lib_dir = tempfile::tempdir().expect("tempdir");
    let nvml = init(&copy_library(lib_dir.path())).expect("init from FAKE_NVML_SCENARIO");
    let dev = nvml.device_by_index(0).expect("device");
    assert_eq!(dev.temperature(TemperatureSensor::Gpu).expect("temp"), 30);
    // 150 ms real = 15 s of scenario time at scale 100.
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(dev.temperature(TemperatureSensor::Gpu).expect("temp"), 90);
    nvml.shutdown().expect("shutdown");

    let text = std::fs::read_to_string(&counts).expect("counts file written at shutdown");
    let map: BTreeMap<String, u64> = serde_json::from_str(&text).expect("counts JSON");
    assert_eq!(map.get("nvmlInit_v2"), Some(&1));
    assert_eq!(map.get("nvmlDeviceGetHandleByIndex_v2"), Some(&1));
    assert_eq!(map.get("nvmlDeviceGetTemperature"), Some(&2));
    assert_eq!(map.get("nvmlShutdown"), Some(&1));
}
