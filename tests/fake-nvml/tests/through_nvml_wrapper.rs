//! Loads the built `libfake_nvml.so` through nvml-wrapper, exactly as
//! vramscope does: a copy in a temp dir with a sidecar scenario.

use std::path::{Path, PathBuf};

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use serde_json::json;
use std::sync::Mutex;

/// One test at a time: each loads and unloads its own copies of the library, and glibc
/// (2.36 here) races a thread's `__tls_get_addr` in one copy against another thread's
/// `dlclose` of another copy (the unloading frees the TLS slot map the lookup walks): about
/// 1 run in 20 of this file's tests in parallel died of SIGSEGV in `tls_get_addr_tail`. One
/// process never loads NVML twice at once (vramscope loads it once), so the tests take turns.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs `test` on a thread of its own, started and joined while the turn is held: the
/// thread's exit (its thread-local destructors, run after the test's body, when a guard
/// held in the body was already released) is over before the next test loads or unloads a
/// copy. With the guard in the body alone, a loaded CI run still died once of SIGSEGV.
fn in_turn(test: impl FnOnce() + Send + 'static) {
    // A test that failed while holding it poisons it; the next still runs.
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Err(panic) = std::thread::spawn(test).join() {
        std::panic::resume_unwind(panic);
    }
}

/// `target/<profile>/deps/libfake_nvml.so` (or the profile dir itself).
fn built_library() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("deps dir");
    let candidates = [
        deps.join("libfake_nvml.so"),
        deps.parent()
            .map(|p| p.join("libfake_nvml.so"))
            .unwrap_or_default(),
    ];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .unwrap_or_else(|| panic!("libfake_nvml.so not found in {candidates:?}"))
}

/// Copies the library into `dir` as `libnvidia-ml.so.1` next to `scenario`.
fn install(dir: &Path, scenario: &serde_json::Value) -> PathBuf {
    let lib = dir.join("libnvidia-ml.so.1");
    std::fs::copy(built_library(), &lib).expect("copy library");
    std::fs::write(dir.join("fake_nvml_scenario.json"), scenario.to_string()).expect("scenario");
    lib
}

fn scenario(name: &str) -> serde_json::Value {
    json!({
        "driver_version": "550.54.15",
        "cuda_version": 12040,
        "devices": [{
            "name": name,
            "uuid": "GPU-12345678-1234-1234-1234-123456789abc",
            "pci_bus_id": "00000000:18:00.0",
            "memory_total": 85_520_809_984u64,
            "memory_reserved": 566_231_040u64,
            "max_sm_clock": 1980,
            "timeline": [{"t": 0, "memory_used": 4_000_000_000u64, "temperature": 41,
                          "sm_clock": 1755}],
            "processes": [{"t": 0,
                "compute": [{"pid": 1234, "used_memory": 3_000_000_000u64},
                            {"pid": 4321, "used_memory": null}],
                "graphics": []}],
            "process_utilization": [
                {"t": 0, "pid": 1234, "sm": 40, "mem": 10},
                {"t": 0, "pid": 4321, "sm": 5, "mem": 1, "enc": 2, "dec": 3}],
        }],
        "faults": [{"function": "nvmlDeviceGetPowerUsage", "error": "NotSupported"}],
    })
}

fn open(lib: &Path) -> Nvml {
    Nvml::builder()
        .lib_path(lib.as_os_str())
        .init()
        .expect("init fake NVML")
}

#[test]
fn reads_everything_through_nvml_wrapper() {
    in_turn(|| {
        assert!(
            std::env::var_os("FAKE_NVML_SCENARIO").is_none(),
            "unset FAKE_NVML_SCENARIO: this test relies on sidecar scenarios"
        );
        let dir_a = tempfile::tempdir().expect("tempdir");
        let dir_b = tempfile::tempdir().expect("tempdir");
        let nvml = open(&install(dir_a.path(), &scenario("NVIDIA H100 80GB HBM3")));
        // A second copy is a separate object with its own statics and scenario.
        let nvml_b = open(&install(dir_b.path(), &scenario("NVIDIA A100-SXM4-40GB")));

        assert_eq!(nvml.sys_driver_version().expect("driver"), "550.54.15");
        assert_eq!(nvml.sys_cuda_driver_version().expect("cuda"), 12040);
        assert_eq!(nvml.device_count().expect("count"), 1);
        let dev = nvml.device_by_index(0).expect("device 0");
        assert!(matches!(
            nvml.device_by_index(1),
            Err(NvmlError::InvalidArg)
        ));
        assert_eq!(dev.name().expect("name"), "NVIDIA H100 80GB HBM3");
        let dev_b = nvml_b.device_by_index(0).expect("device 0 of copy b");
        assert_eq!(dev_b.name().expect("name"), "NVIDIA A100-SXM4-40GB");
        assert_eq!(
            dev.uuid().expect("uuid"),
            "GPU-12345678-1234-1234-1234-123456789abc"
        );
        let pci = dev.pci_info().expect("pci");
        assert_eq!((pci.bus_id.as_str(), pci.bus), ("00000000:18:00.0", 0x18));

        let mem = dev.memory_info().expect("memory_info (v2)");
        assert_eq!(mem.total, 85_520_809_984);
        assert_eq!(mem.reserved, 566_231_040);
        assert_eq!(mem.used, 4_000_000_000);
        assert_eq!(mem.free, 85_520_809_984 - 566_231_040 - 4_000_000_000);

        assert_eq!(dev.temperature(TemperatureSensor::Gpu).expect("temp"), 41);
        assert_eq!(dev.clock_info(Clock::SM).expect("sm clock"), 1755);
        assert_eq!(dev.max_clock_info(Clock::SM).expect("max sm"), 1980);
        assert!(matches!(dev.power_usage(), Err(NvmlError::NotSupported)));
        assert!(matches!(dev.fan_speed(0), Err(NvmlError::NotSupported)));

        let procs = dev.running_compute_processes().expect("compute processes");
        assert_eq!(procs.len(), 2);
        assert_eq!(procs[0].pid, 1234);
        assert!(matches!(
            procs[0].used_gpu_memory,
            UsedGpuMemory::Used(3_000_000_000)
        ));
        assert_eq!(procs[0].gpu_instance_id, None);
        assert_eq!(procs[1].pid, 4321);
        assert!(matches!(
            procs[1].used_gpu_memory,
            UsedGpuMemory::Unavailable
        ));
        assert!(
            dev.running_graphics_processes()
                .expect("graphics")
                .is_empty()
        );

        let samples = dev.process_utilization_stats(None).expect("samples");
        assert_eq!(samples.len(), 2);
        assert_eq!(
            (samples[0].pid, samples[0].sm_util, samples[0].mem_util),
            (1234, 40, 10)
        );
        assert_eq!((samples[1].enc_util, samples[1].dec_util), (2, 3));
        let cursor = samples.iter().map(|s| s.timestamp).max().unwrap_or(0);
        assert!(
            cursor > 1_600_000_000_000_000,
            "µs since the epoch: {cursor}"
        );
        assert!(matches!(
            dev.process_utilization_stats(cursor),
            Err(NvmlError::NotFound)
        ));

        drop(nvml_b);
        // The first copy is unaffected by the second one's shutdown.
        assert_eq!(
            dev.name().expect("name after b's shutdown"),
            "NVIDIA H100 80GB HBM3"
        );
        nvml.shutdown().expect("shutdown");
    });
}

#[test]
fn init_error_reaches_the_wrapper() {
    in_turn(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let lib = install(dir.path(), &json!({"init_error": "DriverNotLoaded"}));
        let err = Nvml::builder().lib_path(lib.as_os_str()).init().err();
        assert!(matches!(err, Some(NvmlError::DriverNotLoaded)), "{err:?}");
    });
}

/// A copy without the calls an R470 driver lacks behaves as that driver's library does to
/// nvml-wrapper: the missing functions are `FailedToLoadSymbol` naming the symbol, the older
/// ones they replace and every other call still work.
#[test]
fn a_copy_without_symbols_lacks_them_as_an_old_driver_does() {
    in_turn(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let full = install(dir.path(), &scenario("NVIDIA A100-SXM4-40GB"));
        let lib = dir.path().join("libnvidia-ml-r470.so.1");
        let missing = [
            "nvmlDeviceGetMemoryInfo_v2",
            "nvmlDeviceGetComputeRunningProcesses_v3",
        ];
        fake_nvml::copy_without_symbols(&full, &lib, &missing).expect("copy without symbols");
        let nvml = open(&lib);
        let dev = nvml.device_by_index(0).expect("device 0");
        match dev.memory_info() {
            Err(NvmlError::FailedToLoadSymbol(text)) => {
                assert!(text.contains("nvmlDeviceGetMemoryInfo_v2"), "{text}")
            }
            other => panic!("memory_info on a library without _v2: {other:?}"),
        }
        match dev.running_compute_processes() {
            Err(NvmlError::FailedToLoadSymbol(text)) => {
                assert!(
                    text.contains("nvmlDeviceGetComputeRunningProcesses_v3"),
                    "{text}"
                )
            }
            other => panic!("compute processes without _v3: {other:?}"),
        }
        assert_eq!(dev.name().expect("name"), "NVIDIA A100-SXM4-40GB");
        assert!(
            dev.running_graphics_processes()
                .expect("graphics _v3 is still there")
                .is_empty()
        );

        // The full copy beside it is untouched.
        let nvml_full = open(&full);
        let dev_full = nvml_full.device_by_index(0).expect("device 0");
        assert_eq!(
            dev_full.memory_info().expect("v2 memory").used,
            4_000_000_000
        );
    });
}

#[test]
fn only_exported_functions_other_than_init_can_be_left_out() {
    in_turn(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let full = install(dir.path(), &scenario("x"));
        let to = dir.path().join("copy.so");
        for name in ["nvmlInit_v2", "nvmlShutdown", "nvmlDeviceGetNothing"] {
            let err = fake_nvml::copy_without_symbols(&full, &to, &[name]).expect_err(name);
            assert!(err.to_string().contains(name), "{err}");
        }
        let err = fake_nvml::copy_without_symbols(
            &dir.path().join("fake_nvml_scenario.json"),
            &to,
            &["nvmlDeviceGetName"],
        )
        .expect_err("not an ELF file");
        assert!(err.to_string().contains("ELF"), "{err}");
    });
}

#[test]
fn mig_instances_through_nvml_wrapper() {
    in_turn(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut s = scenario("NVIDIA H100 80GB HBM3");
        s["devices"][0]["mig"] = json!({"current": true, "gpm": true, "instances": [
            {"gpu_instance_id": 5, "compute_instance_id": 0, "profile": "1g.10gb",
             "uuid": "MIG-11111111-2222-3333-4444-555555555555", "memory_total": 10u64 << 30,
             "timeline": [{"t": 0, "memory_used": 1u64 << 30, "sm_util": 33.0}],
             "processes": [{"t": 0, "compute": [{"pid": 77, "used_memory": 1u64 << 29}]}]}]});
        s["devices"][0]["processes"] = json!([]);
        s["devices"][0]["process_utilization"] = json!([]);
        let nvml = open(&install(dir.path(), &s));
        let gpu = nvml.device_by_index(0).expect("device 0");
        let mode = gpu.mig_mode().expect("mig mode");
        assert_eq!((mode.current, mode.pending), (1, 1));
        assert_eq!(gpu.mig_device_count().expect("slots"), 7);
        assert!(matches!(
            gpu.mig_device_by_index(1),
            Err(NvmlError::NotFound)
        ));
        let mig = gpu.mig_device_by_index(0).expect("MIG device 0");
        assert!(mig.mig_is_mig_device_handle().expect("is MIG"));
        assert!(!gpu.mig_is_mig_device_handle().expect("is MIG"));
        assert_eq!(
            mig.name().expect("name"),
            "NVIDIA H100 80GB HBM3 MIG 1g.10gb"
        );
        assert_eq!(
            mig.uuid().expect("uuid"),
            "MIG-11111111-2222-3333-4444-555555555555"
        );
        let parent = mig.mig_parent_device().expect("parent");
        assert_eq!(parent.uuid().expect("uuid"), gpu.uuid().expect("uuid"));
        let mem = mig.memory_info().expect("MIG memory");
        assert_eq!((mem.total, mem.used), (10 << 30, 1 << 30));
        let procs = mig.running_compute_processes().expect("MIG processes");
        assert_eq!(procs.len(), 1);
        assert_eq!(
            (
                procs[0].pid,
                procs[0].gpu_instance_id,
                procs[0].compute_instance_id
            ),
            (77, Some(5), Some(0))
        );
        assert!(matches!(
            gpu.utilization_rates(),
            Err(NvmlError::NotSupported)
        ));
        // GPM through the wrapper's own sample handling (alloc, fill, compare, free on drop).
        let first = gpu.gpm_mig_sample(5).expect("first GPM sample");
        let second = gpu.gpm_mig_sample(5).expect("second GPM sample");
        let got = nvml_wrapper::gpm::gpm_metrics_get(
            &nvml,
            &first,
            &second,
            &[nvml_wrapper::enums::gpm::GpmMetricId::SmUtil],
        )
        .expect("metrics");
        assert_eq!(got[0].as_ref().expect("SM util").value, 33.0);
    });
}
