//! Every NVML function vramscope calls, made to fail with each error class, leaves vramscope
//! running with that figure absent (null plus a reason) and every other figure intact.

mod common;

use common::{GIB, Scenario, h100, stderr};
use serde_json::{Value, json};

const ERRORS: [(&str, &str); 6] = [
    ("NotSupported", "not supported"),
    ("NoPermission", "no permission"),
    ("GpuIsLost", "GPU lost"),
    ("Unknown", "unknown"),
    ("Timeout", "timed out"),
    ("InsufficientSize", "insufficient size"),
];

/// (symbol, where the figure shows in the JSON: "device.FIELD", "process.FIELD" or "driver.FIELD")
const CALLS: [(&str, &[&str]); 21] = [
    (
        "nvmlDeviceGetMemoryInfo_v2",
        &[
            "device.memory_used",
            "device.memory_free",
            "device.memory_reserved",
        ],
    ),
    (
        "nvmlDeviceGetUtilizationRates",
        &["device.gpu_util", "device.mem_util"],
    ),
    ("nvmlDeviceGetTemperature", &["device.temperature_c"]),
    ("nvmlDeviceGetPowerUsage", &["device.power_mw"]),
    (
        "nvmlDeviceGetEnforcedPowerLimit",
        &["device.power_limit_mw"],
    ),
    (
        "nvmlDeviceGetClockInfo",
        &["device.sm_clock_mhz", "device.mem_clock_mhz"],
    ),
    ("nvmlDeviceGetFanSpeed_v2", &["device.fan_percent"]),
    ("nvmlDeviceGetEncoderUtilization", &["device.encoder_util"]),
    ("nvmlDeviceGetDecoderUtilization", &["device.decoder_util"]),
    (
        "nvmlDeviceGetCurrentClocksThrottleReasons",
        &["device.throttle_reasons"],
    ),
    ("nvmlDeviceGetPerformanceState", &["device.pstate"]),
    (
        "nvmlDeviceGetTotalEccErrors",
        &["device.ecc_corrected", "device.ecc_uncorrected"],
    ),
    (
        "nvmlDeviceGetPcieThroughput",
        &["device.pcie_tx_kbs", "device.pcie_rx_kbs"],
    ),
    (
        "nvmlDeviceGetProcessUtilization",
        &["process.sm_util", "process.mem_util"],
    ),
    ("nvmlDeviceGetName", &["device.name"]),
    ("nvmlDeviceGetUUID", &["device.uuid"]),
    ("nvmlDeviceGetPciInfo_v3", &["device.pci_bus_id"]),
    (
        "nvmlDeviceGetHandleByIndex_v2",
        &["device.name", "device.memory_used", "device.gpu_util"],
    ),
    ("nvmlSystemGetDriverVersion", &["driver.driver_version"]),
    (
        "nvmlSystemGetCudaDriverVersion_v2",
        &["driver.cuda_version"],
    ),
    ("nvmlSystemGetNVMLVersion", &["driver.nvml_version"]),
];

/// The calls vramscope falls back to when `symbol` is missing or refused: they fail too, so
/// the figure has no other way to be read.
fn older_calls(symbol: &str) -> &'static [&'static str] {
    match symbol {
        "nvmlDeviceGetMemoryInfo_v2" => &["nvmlDeviceGetMemoryInfo"],
        "nvmlDeviceGetComputeRunningProcesses_v3" => &[
            "nvmlDeviceGetComputeRunningProcesses_v2",
            "nvmlDeviceGetComputeRunningProcesses",
        ],
        "nvmlDeviceGetGraphicsRunningProcesses_v3" => &[
            "nvmlDeviceGetGraphicsRunningProcesses_v2",
            "nvmlDeviceGetGraphicsRunningProcesses",
        ],
        _ => &[],
    }
}

/// `error` from `symbol` and its older calls, on GPU 0 (driver-wide calls take no device).
fn faults(symbols: &[&str], error: &str) -> Value {
    let mut all = Vec::new();
    for symbol in symbols {
        for f in std::iter::once(symbol).chain(older_calls(symbol)) {
            all.push(if f.starts_with("nvmlSystem") {
                json!({ "function": f, "error": error })
            } else {
                json!({ "function": f, "error": error, "device": 0 })
            });
        }
    }
    json!(all)
}

fn scenario_with(faults: Value) -> Scenario {
    let me = std::process::id();
    let mut gpu = h100(0);
    gpu["processes"] = json!([{ "t": 0, "compute": [{ "pid": me, "used_memory": 2 * GIB }] }]);
    gpu["process_utilization"] = json!([{ "t": 0, "pid": me, "sm": 30, "mem": 5 }]);
    Scenario::new(&json!({ "devices": [gpu, h100(1)], "faults": faults }))
}

fn pick<'a>(doc: &'a Value, place: &str) -> (&'a Value, String) {
    let (scope, field) = place.split_once('.').unwrap();
    let object = match scope {
        "device" => &doc["devices"][0],
        "process" => &doc["processes"][0],
        _ => &doc["driver"],
    };
    (object, field.to_string())
}

#[test]
fn each_call_failing_with_each_error_leaves_only_its_figures_absent() {
    let mut checked = 0;
    for (symbol, places) in CALLS {
        for (error, reason) in ERRORS {
            let scenario = scenario_with(faults(&[symbol], error));
            let out = scenario.run(&["--json", "--pcie"]);
            let context = format!("{symbol} -> {error}: {}", stderr(&out));
            let doc: Value = serde_json::from_slice(&out.stdout).expect(&context);
            // A GPU marked lost (its memory call or handle says so) gives exit status 4,
            // after the full output; any other failure leaves the status 0.
            let lost = doc["devices"][0]["lost"] == true;
            assert!(!lost || error == "GpuIsLost", "{context}");
            assert_eq!(
                out.status.code(),
                Some(if lost { 4 } else { 0 }),
                "{context}"
            );
            for place in places {
                let (object, field) = pick(&doc, place);
                assert_eq!(
                    object[&field],
                    Value::Null,
                    "{place} should be absent: {context}"
                );
                let why = object["unavailable"][&field].as_str().unwrap_or("");
                // A lost handle lookup leaves the device unreadable; the reason names the error.
                assert!(
                    why.contains(reason),
                    "{place}: reason {why:?} should say {reason:?}: {context}"
                );
            }
            // The second GPU is untouched whatever happens to the first.
            assert_eq!(doc["devices"][1]["memory_used"], 10 * GIB, "{context}");
            assert_eq!(doc["devices"][1]["temperature_c"], 64, "{context}");
            checked += 1;
        }
    }
    assert_eq!(checked, CALLS.len() * ERRORS.len());
}

#[test]
fn a_failing_process_list_is_absent_not_empty() {
    for (error, reason) in ERRORS {
        let scenario = scenario_with(faults(
            &[
                "nvmlDeviceGetComputeRunningProcesses_v3",
                "nvmlDeviceGetGraphicsRunningProcesses_v3",
            ],
            error,
        ));
        let out = scenario.run(&["--json"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["devices"][0]["process_count"], Value::Null, "{error}");
        let why = doc["devices"][0]["unavailable"]["process_count"]
            .as_str()
            .unwrap();
        assert!(why.contains(reason), "{error}: {why}");
        assert_eq!(doc["devices"][0]["memory_used"], 10 * GIB);
    }
}

#[test]
fn a_gpu_lost_mid_run_is_marked_lost_while_the_other_goes_on() {
    let mut gpu1 = h100(1);
    gpu1["timeline"] =
        json!([{ "t": 0, "memory_used": GIB }, { "t": 0.6, "memory_used": 2 * GIB }]);
    let scenario = Scenario::new(&json!({
        "devices": [h100(0), gpu1],
        "faults": [{ "function": "*", "error": "GpuIsLost", "device": 0, "from": 0.3 }]
    }));
    let mut child = scenario
        .command()
        .args(["--json", "--loop", "0.1"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1_000));
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    let docs: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let first = &docs[0]["devices"];
    let last = &docs[docs.len() - 1]["devices"];
    assert_eq!(first[0]["lost"], false);
    assert_eq!(first[0]["memory_used"], 10 * GIB);
    assert_eq!(last[0]["lost"], true, "GPU 0 marked lost");
    assert_eq!(last[0]["memory_used"], Value::Null);
    assert_eq!(last[0]["unavailable"]["memory_used"], "GPU lost");
    assert_eq!(last[1]["lost"], false);
    assert_eq!(last[1]["memory_used"], 2 * GIB, "GPU 1 still sampled");
}

#[test]
fn one_process_list_failing_is_reported_not_silently_dropped() {
    let scenario = scenario_with(json!([
        { "function": "nvmlDeviceGetComputeRunningProcesses_v3", "error": "NoPermission", "device": 0 }
    ]));
    let doc: Value = serde_json::from_slice(&scenario.run(&["--json"]).stdout).unwrap();
    assert_eq!(doc["devices"][0]["process_count"], Value::Null);
    assert_eq!(
        doc["devices"][0]["unavailable"]["process_count"],
        "no permission"
    );
    // NotSupported graphics lists are normal on compute-only GPUs: compute still counts,
    // and the graphics list says why it is missing.
    let scenario = scenario_with(faults(
        &["nvmlDeviceGetGraphicsRunningProcesses_v3"],
        "NotSupported",
    ));
    let doc: Value = serde_json::from_slice(&scenario.run(&["--json"]).stdout).unwrap();
    assert_eq!(doc["devices"][0]["process_count"], 1);
    assert_eq!(doc["devices"][0]["compute_process_count"], 1);
    assert_eq!(doc["devices"][0]["graphics_process_count"], Value::Null);
    assert_eq!(
        doc["devices"][0]["unavailable"]["graphics_process_count"],
        "not supported"
    );
}
