use std::time::Duration;

use serde_json::json;

use super::{Fake, device, handle, with_devices};
use crate::exports::device::nvmlDeviceGetMemoryInfo_v2;
use crate::exports::metrics::{
    nvmlDeviceGetFanSpeed, nvmlDeviceGetPowerUsage, nvmlDeviceGetTemperature,
    nvmlDeviceGetUtilizationRates,
};
use crate::ffi::{MEMORY_V2_VERSION, MemoryV2, Utilization};

fn used() -> u64 {
    let mut m = MemoryV2 {
        version: MEMORY_V2_VERSION,
        ..MemoryV2::default()
    };
    assert_eq!(nvmlDeviceGetMemoryInfo_v2(handle(0), &mut m), 0);
    m.used
}

fn temp() -> (u32, u32) {
    let mut v = 0;
    let rc = nvmlDeviceGetTemperature(handle(0), 0, &mut v);
    (rc, v)
}

fn power() -> u32 {
    let mut v = 0;
    assert_eq!(nvmlDeviceGetPowerUsage(handle(0), &mut v), 0);
    v
}

#[test]
fn step_wise_inheritance() {
    let s = with_devices(vec![device(json!({
        "memory_total": 1_000_000,
        "timeline": [
            // Deliberately unsorted: the loader sorts by t.
            {"t": 5, "temperature": 80},
            {"t": 0, "memory_used": 1000, "temperature": 30, "power": 70000,
             "gpu_util": 5, "mem_util": 1},
            {"t": 2.5, "memory_used": 50000},
        ],
    }))]);
    let f = Fake::init(&s);
    assert_eq!((used(), temp(), power()), (1000, (0, 30), 70000));
    f.at(2.499);
    assert_eq!((used(), temp(), power()), (1000, (0, 30), 70000));
    f.at(2.5);
    assert_eq!((used(), temp(), power()), (50000, (0, 30), 70000));
    f.at(6.0);
    assert_eq!((used(), temp(), power()), (50000, (0, 80), 70000));
    let mut u = Utilization::default();
    assert_eq!(nvmlDeviceGetUtilizationRates(handle(0), &mut u), 0);
    assert_eq!((u.gpu, u.memory), (5, 1));
    // `fan` is absent from every point.
    assert_eq!(nvmlDeviceGetFanSpeed(handle(0), &mut 0), 3);
}

#[test]
fn before_first_point_is_not_supported() {
    let s = with_devices(vec![device(json!({
        "timeline": [{"t": 1, "temperature": 40}],
    }))]);
    let f = Fake::init(&s);
    assert_eq!(temp().0, 3);
    f.at(1.0);
    assert_eq!(temp(), (0, 40));
}

#[test]
fn scenario_file_is_reloaded_when_it_changes() {
    let s = |c: u32| {
        with_devices(vec![device(json!({
            "timeline": [{"t": 0, "temperature": c}],
        }))])
    };
    let f = Fake::init(&s(30));
    assert_eq!(temp(), (0, 30));
    f.write(&s(91));
    std::thread::sleep(Duration::from_millis(120));
    assert_eq!(temp(), (0, 91));
    // An unparsable rewrite keeps the previous scenario.
    f.write_text("{ not json");
    std::thread::sleep(Duration::from_millis(120));
    assert_eq!(temp(), (0, 91));
}

#[test]
fn real_clock_advances_scenario_time() {
    let s = with_devices(vec![device(json!({
        "timeline": [{"t": 0, "temperature": 30}, {"t": 0.15, "temperature": 60}],
    }))]);
    let _f = Fake::new(&s);
    crate::set_fixed_time_for_tests(None);
    assert_eq!(crate::exports::system::nvmlInit_v2(), 0);
    assert_eq!(temp(), (0, 30));
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(temp(), (0, 60));
}
