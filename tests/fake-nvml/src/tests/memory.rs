use std::ptr;

use serde_json::json;

use super::{Fake, device, handle, with_devices};
use crate::exports::device::{nvmlDeviceGetMemoryInfo, nvmlDeviceGetMemoryInfo_v2};
use crate::ffi::{MEMORY_V2_VERSION, Memory, MemoryV2};

fn scenario() -> serde_json::Value {
    with_devices(vec![device(json!({
        "memory_total": 85_520_809_984u64,
        "memory_reserved": 566_231_040u64,
        "timeline": [{"t": 0, "memory_used": 1_000_000}],
    }))])
}

#[test]
fn memory_v2_values() {
    let _f = Fake::init(&scenario());
    let mut m = MemoryV2 {
        version: MEMORY_V2_VERSION,
        ..MemoryV2::default()
    };
    assert_eq!(nvmlDeviceGetMemoryInfo_v2(handle(0), &mut m), 0);
    assert_eq!(m.version, MEMORY_V2_VERSION);
    assert_eq!(m.total, 85_520_809_984);
    assert_eq!(m.reserved, 566_231_040);
    assert_eq!(m.used, 1_000_000);
    assert_eq!(m.free, 85_520_809_984 - 566_231_040 - 1_000_000);
}

#[test]
fn memory_v2_version_check() {
    let _f = Fake::init(&scenario());
    for bad in [0, 1, 0x0100_0028, 0x0200_0020] {
        let mut m = MemoryV2 {
            version: bad,
            ..MemoryV2::default()
        };
        assert_eq!(
            nvmlDeviceGetMemoryInfo_v2(handle(0), &mut m),
            25,
            "{bad:#x}"
        );
        assert_eq!(m.total, 0, "nothing written on a version mismatch");
    }
}

#[test]
fn memory_v1_includes_reserved() {
    let _f = Fake::init(&scenario());
    let mut m = Memory::default();
    assert_eq!(nvmlDeviceGetMemoryInfo(handle(0), &mut m), 0);
    assert_eq!(m.total, 85_520_809_984);
    assert_eq!(m.used, 1_000_000 + 566_231_040);
    assert_eq!(m.free, 85_520_809_984 - 566_231_040 - 1_000_000);
}

#[test]
fn memory_free_saturates() {
    let s = with_devices(vec![device(json!({
        "memory_total": 1000, "memory_reserved": 300,
        "timeline": [{"t": 0, "memory_used": 900}],
    }))]);
    let _f = Fake::init(&s);
    let mut m = MemoryV2 {
        version: MEMORY_V2_VERSION,
        ..MemoryV2::default()
    };
    assert_eq!(nvmlDeviceGetMemoryInfo_v2(handle(0), &mut m), 0);
    assert_eq!((m.used, m.free), (900, 0));
}

#[test]
fn memory_bad_arguments_and_missing_values() {
    let f = Fake::init(&scenario());
    let mut m = MemoryV2 {
        version: MEMORY_V2_VERSION,
        ..MemoryV2::default()
    };
    assert_eq!(nvmlDeviceGetMemoryInfo_v2(handle(0), ptr::null_mut()), 2);
    assert_eq!(nvmlDeviceGetMemoryInfo_v2(ptr::null_mut(), &mut m), 2);
    assert_eq!(nvmlDeviceGetMemoryInfo_v2(handle(1), &mut m), 2);
    assert_eq!(
        nvmlDeviceGetMemoryInfo(handle(7), &mut Memory::default()),
        2
    );

    drop(f);

    // No memory_total / memory_used -> NotSupported.
    let _f = Fake::init(&with_devices(vec![device(json!({}))]));
    assert_eq!(nvmlDeviceGetMemoryInfo_v2(handle(0), &mut m), 3);
}
