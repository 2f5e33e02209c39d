use std::time::{Duration, Instant};

use serde_json::json;

use super::{Fake, device, handle, with_devices};
use crate::exports::device::nvmlDeviceGetName;
use crate::exports::metrics::{nvmlDeviceGetPowerUsage, nvmlDeviceGetTemperature};
use crate::exports::system::{
    nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2, nvmlInit, nvmlInit_v2, nvmlInitWithFlags,
    nvmlSystemGetDriverVersion,
};

fn two_devices(extra: serde_json::Value) -> serde_json::Value {
    let point = json!([{"t": 0, "temperature": 50, "power": 100000}]);
    let mut s = with_devices(vec![
        device(json!({"timeline": point})),
        device(json!({"uuid": "GPU-2", "pci_bus_id": "00000000:3B:00.0", "timeline": point})),
    ]);
    if let (Some(obj), serde_json::Value::Object(extra)) = (s.as_object_mut(), extra) {
        obj.extend(extra);
    }
    s
}

fn temp(dev: usize) -> (u32, u32) {
    let mut v = 0;
    let rc = nvmlDeviceGetTemperature(handle(dev), 0, &mut v);
    (rc, v)
}

#[test]
fn fault_window() {
    let s = two_devices(json!({"faults": [
        {"function": "nvmlDeviceGetTemperature", "error": "NotSupported", "device": 0,
         "from": 1, "until": 2},
        {"function": "*", "error": "GpuIsLost", "device": 1, "from": 3},
        {"function": "nvmlSystemGetDriverVersion", "error": 4, "from": 5, "until": 6},
    ]}));
    let f = Fake::init(&s);
    assert_eq!((temp(0), temp(1)), ((0, 50), (0, 50)));
    f.at(1.0);
    assert_eq!((temp(0), temp(1)), ((3, 0), (0, 50)));
    f.at(1.999);
    assert_eq!(temp(0).0, 3);
    // Other functions on the faulted device are unaffected.
    let mut p = 0;
    assert_eq!(nvmlDeviceGetPowerUsage(handle(0), &mut p), 0);
    f.at(2.0);
    assert_eq!(temp(0), (0, 50));
    // "*" hits every device function of device 1, forever.
    f.at(3.0);
    assert_eq!((temp(0), temp(1)), ((0, 50), (15, 0)));
    assert_eq!(nvmlDeviceGetPowerUsage(handle(1), &mut p), 15);
    let mut buf = [0 as std::ffi::c_char; 96];
    assert_eq!(nvmlDeviceGetName(handle(1), buf.as_mut_ptr(), 96), 15);
    let mut h = std::ptr::null_mut();
    assert_eq!(nvmlDeviceGetHandleByIndex_v2(1, &mut h), 15);
    assert_eq!(nvmlDeviceGetHandleByIndex_v2(0, &mut h), 0);
    // Device-less calls are not hit by a device-specific fault.
    let mut n = 0;
    assert_eq!(nvmlDeviceGetCount_v2(&mut n), 0);
    assert_eq!(n, 2);
    f.at(1000.0);
    assert_eq!(temp(1).0, 15);
    // System function with a raw integer error.
    let mut v = [0 as std::ffi::c_char; 80];
    f.at(5.5);
    assert_eq!(nvmlSystemGetDriverVersion(v.as_mut_ptr(), 80), 4);
    f.at(6.0);
    assert_eq!(nvmlSystemGetDriverVersion(v.as_mut_ptr(), 80), 0);
}

#[test]
fn init_error_by_name_and_number() {
    let f = Fake::new(&two_devices(json!({"init_error": "DriverNotLoaded"})));
    assert_eq!(nvmlInit_v2(), 9);
    assert_eq!(nvmlInit(), 9);
    assert_eq!(nvmlInitWithFlags(0), 9);
    let mut n = 0;
    assert_eq!(nvmlDeviceGetCount_v2(&mut n), 1, "still uninitialised");
    f.write(&two_devices(json!({"init_error": 18})));
    assert_eq!(nvmlInit_v2(), 18);
    f.write(&two_devices(json!({})));
    assert_eq!(nvmlInit_v2(), 0);
    assert_eq!(nvmlDeviceGetCount_v2(&mut n), 0);
}

#[test]
fn block_sleeps_inside_the_window_then_proceeds() {
    let s = two_devices(json!({"blocks": [
        {"function": "nvmlDeviceGetTemperature", "device": 1, "from": 3.0, "until": 3.1,
         "seconds": 0.2},
    ]}));
    let f = Fake::init(&s);
    f.at(3.05);
    let start = Instant::now();
    assert_eq!(temp(1), (0, 50));
    assert!(start.elapsed() >= Duration::from_millis(200));
    // Other device, or outside the window: no delay.
    let start = Instant::now();
    assert_eq!(temp(0), (0, 50));
    f.at(3.1);
    assert_eq!(temp(1), (0, 50));
    assert!(start.elapsed() < Duration::from_millis(150));
}

#[test]
fn bad_scenarios_fail_init_with_unknown() {
    let cases = [
        json!({"devices": [], "typo_field": 1}),
        json!({"devices": [{"name": "x", "uuid": "u", "pci_bus_id": "00000000:18:00.0", "memory_totl": 1}]}),
        json!({"devices": [{"name": "x", "uuid": "u", "pci_bus_id": "garbage"}]}),
        json!({"faults": [{"function": "nvmlDeviceGetTemprature", "error": "NotSupported"}]}),
        json!({"faults": [{"function": "*", "error": "NoSuchError"}]}),
        json!({"blocks": [{"function": "*", "seconds": -1}]}),
        json!({"devices": [{"name": "x", "uuid": "u", "pci_bus_id": "00000000:18:00.0",
                            "timeline": [{"t": 0, "memory_usd": 1}]}]}),
    ];
    for case in cases {
        let _f = Fake::new(&case);
        assert_eq!(nvmlInit_v2(), 999, "{case}");
        let mut n = 0;
        assert_eq!(nvmlDeviceGetCount_v2(&mut n), 1);
    }
    let f = Fake::new(&json!({}));
    f.write_text("{ not json");
    assert_eq!(nvmlInit_v2(), 999);
    crate::set_scenario_path_for_tests(Some(&f.dir.path().join("missing.json")));
    assert_eq!(nvmlInit_v2(), 999);
}

#[test]
fn panics_become_unknown() {
    let rc = crate::call::guarded("nvmlDeviceGetName", || panic!("test panic"));
    assert_eq!(rc, 999);
}
