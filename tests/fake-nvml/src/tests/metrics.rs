use serde_json::json;

use super::{Fake, device, handle, with_devices};
use crate::exports::device::*;
use crate::exports::metrics::*;

#[test]
fn scalar_metrics_and_enums() {
    let s = with_devices(vec![
        device(json!({
            "max_sm_clock": 1980, "max_mem_clock": 2619, "max_video_clock": 1755,
            "power_limit": 700000, "num_fans": 2, "persistence_mode": true,
            "timeline": [{"t": 0, "power": 70000, "sm_clock": 345, "mem_clock": 2619,
                          "video_clock": 765, "fan": 30, "encoder": 7, "decoder": 8,
                          "throttle_reasons": 1, "ecc_corrected": 11, "ecc_uncorrected": 2,
                          "pstate": 0, "pcie_tx": 100, "pcie_rx": 200},
                         {"t": 1, "sm_clock": 1980, "graphics_clock": 1900, "pstate": 8}],
        })),
        device(
            json!({"uuid": "GPU-2", "num_fans": 0, "persistence_mode": false,
                      "timeline": [{"t": 0, "fan": 50}]}),
        ),
    ]);
    let f = Fake::init(&s);
    let h = handle(0);
    let get = |f: &dyn Fn(*mut u32) -> u32| {
        let mut v = 0;
        (f(&mut v), v)
    };
    assert_eq!(get(&|p| nvmlDeviceGetClockInfo(h, 0, p)), (0, 345));
    assert_eq!(get(&|p| nvmlDeviceGetClockInfo(h, 1, p)), (0, 345));
    assert_eq!(get(&|p| nvmlDeviceGetClockInfo(h, 2, p)), (0, 2619));
    assert_eq!(get(&|p| nvmlDeviceGetClockInfo(h, 3, p)), (0, 765));
    assert_eq!(get(&|p| nvmlDeviceGetClockInfo(h, 4, p)).0, 2);
    assert_eq!(get(&|p| nvmlDeviceGetMaxClockInfo(h, 0, p)), (0, 1980));
    assert_eq!(get(&|p| nvmlDeviceGetMaxClockInfo(h, 3, p)), (0, 1755));
    assert_eq!(get(&|p| nvmlDeviceGetEnforcedPowerLimit(h, p)), (0, 700000));
    assert_eq!(
        get(&|p| nvmlDeviceGetPowerManagementLimit(h, p)),
        (0, 700000)
    );
    assert_eq!(get(&|p| nvmlDeviceGetNumFans(h, p)), (0, 2));
    assert_eq!(get(&|p| nvmlDeviceGetFanSpeed_v2(h, 1, p)), (0, 30));
    assert_eq!(get(&|p| nvmlDeviceGetFanSpeed_v2(h, 2, p)).0, 2);
    assert_eq!(get(&|p| nvmlDeviceGetFanSpeed(h, p)), (0, 30));
    assert_eq!(get(&|p| nvmlDeviceGetPersistenceMode(h, p)), (0, 1));
    assert_eq!(get(&|p| nvmlDeviceGetPcieThroughput(h, 0, p)), (0, 100));
    assert_eq!(get(&|p| nvmlDeviceGetPcieThroughput(h, 1, p)), (0, 200));
    assert_eq!(get(&|p| nvmlDeviceGetPcieThroughput(h, 2, p)).0, 2);
    assert_eq!(get(&|p| nvmlDeviceGetPerformanceState(h, p)), (0, 0));
    let (mut util, mut period) = (0, 0);
    assert_eq!(
        nvmlDeviceGetEncoderUtilization(h, &mut util, &mut period),
        0
    );
    assert_eq!((util, period), (7, CODEC_SAMPLING_PERIOD_US));
    assert_eq!(
        nvmlDeviceGetDecoderUtilization(h, &mut util, &mut period),
        0
    );
    assert_eq!(util, 8);
    let mut v64 = 0u64;
    assert_eq!(nvmlDeviceGetCurrentClocksThrottleReasons(h, &mut v64), 0);
    assert_eq!(v64, 1);
    assert_eq!(nvmlDeviceGetTotalEccErrors(h, 0, 0, &mut v64), 0);
    assert_eq!(v64, 11);
    assert_eq!(nvmlDeviceGetTotalEccErrors(h, 1, 1, &mut v64), 0);
    assert_eq!(v64, 2);
    assert_eq!(nvmlDeviceGetTotalEccErrors(h, 2, 0, &mut v64), 2);
    // Temperature was never set; a non-GPU sensor is invalid.
    assert_eq!(get(&|p| nvmlDeviceGetTemperature(h, 0, p)).0, 3);
    assert_eq!(get(&|p| nvmlDeviceGetTemperature(h, 1, p)).0, 2);

    f.at(1.0);
    assert_eq!(get(&|p| nvmlDeviceGetClockInfo(h, 0, p)), (0, 1900));
    assert_eq!(get(&|p| nvmlDeviceGetClockInfo(h, 1, p)), (0, 1980));
    assert_eq!(get(&|p| nvmlDeviceGetPerformanceState(h, p)), (0, 8));

    // Device 1: no fans -> NotSupported even with a fan value; static fields absent.
    let h1 = handle(1);
    assert_eq!(get(&|p| nvmlDeviceGetFanSpeed(h1, p)).0, 3);
    assert_eq!(get(&|p| nvmlDeviceGetFanSpeed_v2(h1, 0, p)).0, 3);
    assert_eq!(get(&|p| nvmlDeviceGetPersistenceMode(h1, p)), (0, 0));
    assert_eq!(get(&|p| nvmlDeviceGetEnforcedPowerLimit(h1, p)).0, 3);
    assert_eq!(get(&|p| nvmlDeviceGetMaxClockInfo(h1, 1, p)).0, 3);
    assert_eq!(get(&|p| nvmlDeviceGetPowerUsage(h1, p)).0, 3);
}
