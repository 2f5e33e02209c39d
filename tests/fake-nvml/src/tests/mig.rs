use std::ffi::{c_char, c_uint};
use std::ptr;

use serde_json::json;

use super::{Fake, device, handle, with_devices};
use crate::exports::device::{
    nvmlDeviceGetMemoryInfo_v2, nvmlDeviceGetMigMode, nvmlDeviceGetName, nvmlDeviceGetUUID,
    nvmlDeviceIsMigDeviceHandle,
};
use crate::exports::metrics::{nvmlDeviceGetTemperature, nvmlDeviceGetUtilizationRates};
use crate::exports::mig::{
    nvmlDeviceGetComputeInstanceId, nvmlDeviceGetDeviceHandleFromMigDeviceHandle,
    nvmlDeviceGetGpuInstanceId, nvmlDeviceGetMaxMigDeviceCount,
    nvmlDeviceGetMigDeviceHandleByIndex,
};
use crate::exports::process::{
    nvmlDeviceGetComputeRunningProcesses_v3, nvmlDeviceGetProcessUtilization,
};
use crate::ffi::{MEMORY_V2_VERSION, MemoryV2, NvmlDevice, ProcessInfo, Utilization};

const GIB: u64 = 1 << 30;

fn scenario() -> serde_json::Value {
    with_devices(vec![
        device(json!({
            "name": "NVIDIA A100-SXM4-80GB",
            "memory_total": 80 * GIB,
            "timeline": [{"t": 0, "memory_used": 5 * GIB, "gpu_util": 50, "mem_util": 5,
                          "temperature": 40}],
            "mig": {"current": true, "instances": [
                {"gpu_instance_id": 1, "compute_instance_id": 0, "profile": "3g.40gb",
                 "uuid": "MIG-aaaaaaaa-0000-0000-0000-000000000001", "memory_total": 40 * GIB,
                 "timeline": [{"t": 0, "memory_used": 4 * GIB}],
                 "processes": [{"t": 0, "compute": [{"pid": 100, "used_memory": 3 * GIB}]}]},
                {"gpu_instance_id": 2, "compute_instance_id": 0, "profile": "1g.10gb",
                 "uuid": "MIG-aaaaaaaa-0000-0000-0000-000000000002", "memory_total": 10 * GIB,
                 "until": 5,
                 "timeline": [{"t": 0, "memory_used": GIB}],
                 "processes": [{"t": 0, "compute": [{"pid": 200, "used_memory": GIB / 2}]}]},
                {"gpu_instance_id": 3, "compute_instance_id": 0, "profile": "1g.10gb",
                 "uuid": "MIG-aaaaaaaa-0000-0000-0000-000000000003", "memory_total": 10 * GIB,
                 "from": 5,
                 "timeline": [{"t": 5, "memory_used": 2 * GIB}]},
            ]},
        })),
        device(json!({"uuid": "GPU-22222222-2222-3333-4444-555555555555",
                      "mig": {"current": false, "pending": true}})),
        device(json!({"uuid": "GPU-33333333-2222-3333-4444-555555555555"})),
    ])
}

fn mig_handle(parent: usize, index: u32) -> (u32, NvmlDevice) {
    let mut h: NvmlDevice = ptr::null_mut();
    let rc = nvmlDeviceGetMigDeviceHandleByIndex(handle(parent), index, &mut h);
    (rc, h)
}

fn text(f: impl FnOnce(*mut c_char, c_uint) -> u32) -> String {
    let mut buf = [0 as c_char; 96];
    assert_eq!(f(buf.as_mut_ptr(), 96), 0);
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8(bytes).expect("utf8")
}

fn compute(h: NvmlDevice) -> Vec<ProcessInfo> {
    let mut buf = vec![ProcessInfo::default(); 8];
    let mut count = 8;
    assert_eq!(
        nvmlDeviceGetComputeRunningProcesses_v3(h, &mut count, buf.as_mut_ptr()),
        0
    );
    buf.truncate(count as usize);
    buf
}

#[test]
fn modes_and_slot_counts() {
    let _f = Fake::init(&scenario());
    let mode = |i| {
        let (mut cur, mut pend) = (9, 9);
        let rc = nvmlDeviceGetMigMode(handle(i), &mut cur, &mut pend);
        (rc, cur, pend)
    };
    assert_eq!(mode(0), (0, 1, 1));
    assert_eq!(mode(1), (0, 0, 1), "enabling waits for a reset");
    assert_eq!(mode(2).0, 3, "no MIG: not supported");
    let count = |i| {
        let mut n = 99;
        (nvmlDeviceGetMaxMigDeviceCount(handle(i), &mut n), n)
    };
    assert_eq!(count(0), (0, 7));
    assert_eq!(count(1), (0, 0), "pending only: zero slots");
    assert_eq!(count(2), (0, 0));
    assert_eq!(mig_handle(1, 0).0, 3);
    assert_eq!(mig_handle(0, 2).0, 6, "slot without an instance");
    assert_eq!(mig_handle(0, 7).0, 2, "past the last slot");
}

#[test]
fn a_mig_handle_names_its_instance() {
    let _f = Fake::init(&scenario());
    let (rc, h) = mig_handle(0, 1);
    assert_eq!(rc, 0);
    let mut is_mig = 9;
    assert_eq!(nvmlDeviceIsMigDeviceHandle(h, &mut is_mig), 0);
    assert_eq!(is_mig, 1);
    assert_eq!(nvmlDeviceIsMigDeviceHandle(handle(0), &mut is_mig), 0);
    assert_eq!(is_mig, 0);
    assert_eq!(
        text(|b, l| nvmlDeviceGetName(h, b, l)),
        "NVIDIA A100-SXM4-80GB MIG 1g.10gb"
    );
    assert_eq!(
        text(|b, l| nvmlDeviceGetUUID(h, b, l)),
        "MIG-aaaaaaaa-0000-0000-0000-000000000002"
    );
    let (mut gi, mut ci) = (0, 9);
    assert_eq!(nvmlDeviceGetGpuInstanceId(h, &mut gi), 0);
    assert_eq!(nvmlDeviceGetComputeInstanceId(h, &mut ci), 0);
    assert_eq!((gi, ci), (2, 0));
    assert_eq!(nvmlDeviceGetGpuInstanceId(handle(0), &mut gi), 3);
    let mut parent: NvmlDevice = ptr::null_mut();
    assert_eq!(
        nvmlDeviceGetDeviceHandleFromMigDeviceHandle(h, &mut parent),
        0
    );
    assert_eq!(parent, handle(0));
    assert_eq!(
        nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle(0), &mut parent),
        2
    );
    let mut m = MemoryV2 {
        version: MEMORY_V2_VERSION,
        ..MemoryV2::default()
    };
    assert_eq!(nvmlDeviceGetMemoryInfo_v2(h, &mut m), 0);
    assert_eq!((m.total, m.used, m.reserved), (10 * GIB, GIB, 0));
    assert_eq!(m.free, 9 * GIB);
    // The parent's own figures stay the GPU's.
    assert_eq!(nvmlDeviceGetMemoryInfo_v2(handle(0), &mut m), 0);
    assert_eq!((m.total, m.used), (80 * GIB, 5 * GIB));
}

#[test]
fn processes_carry_their_instance_and_the_parent_lists_them_all() {
    let _f = Fake::init(&scenario());
    let first = compute(mig_handle(0, 0).1);
    assert_eq!(first.len(), 1);
    assert_eq!(
        (
            first[0].pid,
            first[0].gpu_instance_id,
            first[0].compute_instance_id
        ),
        (100, 1, 0)
    );
    assert_eq!(first[0].used_gpu_memory, 3 * GIB);
    let all = compute(handle(0));
    let ids: Vec<(u32, u32)> = all.iter().map(|p| (p.pid, p.gpu_instance_id)).collect();
    assert_eq!(ids, vec![(100, 1), (200, 2)]);
}

#[test]
fn utilisation_is_not_supported_in_mig_mode() {
    let _f = Fake::init(&scenario());
    let mut u = Utilization::default();
    assert_eq!(nvmlDeviceGetUtilizationRates(handle(0), &mut u), 3);
    assert_eq!(nvmlDeviceGetUtilizationRates(mig_handle(0, 0).1, &mut u), 3);
    assert_eq!(
        nvmlDeviceGetUtilizationRates(handle(2), &mut u),
        3,
        "no timeline"
    );
    let mut count = 0;
    let rc = nvmlDeviceGetProcessUtilization(handle(0), ptr::null_mut(), &mut count, 0);
    assert_eq!(rc, 3);
    // Calls that do not apply to a MIG device refuse its handle; the GPU still answers.
    let mut temp = 0;
    assert_eq!(
        nvmlDeviceGetTemperature(mig_handle(0, 0).1, 0, &mut temp),
        3
    );
    assert_eq!(nvmlDeviceGetTemperature(handle(0), 0, &mut temp), 0);
    assert_eq!(temp, 40);
}

#[test]
fn a_destroyed_instance_invalidates_its_handle_and_a_new_one_takes_the_slot() {
    let f = Fake::init(&scenario());
    let (_, old) = mig_handle(0, 1);
    f.at(5.0);
    let mut gi = 0;
    assert_eq!(nvmlDeviceGetGpuInstanceId(old, &mut gi), 2, "stale handle");
    let mut m = MemoryV2 {
        version: MEMORY_V2_VERSION,
        ..MemoryV2::default()
    };
    assert_eq!(nvmlDeviceGetMemoryInfo_v2(old, &mut m), 2);
    let (rc, new) = mig_handle(0, 1);
    assert_eq!(rc, 0);
    assert_ne!(new, old, "a new instance gets a new handle");
    assert_eq!(nvmlDeviceGetGpuInstanceId(new, &mut gi), 0);
    assert_eq!(gi, 3);
    assert_eq!(nvmlDeviceGetMemoryInfo_v2(new, &mut m), 0);
    assert_eq!(m.used, 2 * GIB);
    assert!(compute(new).is_empty());
    let ids: Vec<u32> = compute(handle(0)).iter().map(|p| p.pid).collect();
    assert_eq!(ids, vec![100], "the destroyed instance's process is gone");
}

#[test]
fn a_rewritten_scenario_destroys_instances_too() {
    let f = Fake::init(&scenario());
    let (_, h) = mig_handle(0, 0);
    let mut s = scenario();
    s["devices"][0]["mig"]["instances"] = json!([]);
    f.write(&s);
    // The reload check runs at most every 50 ms without a watch, 5 s with one: re-init.
    assert_eq!(crate::exports::system::nvmlInit_v2(), 0);
    let mut gi = 0;
    assert_eq!(nvmlDeviceGetGpuInstanceId(h, &mut gi), 2);
    assert_eq!(mig_handle(0, 0).0, 6);
}

#[test]
fn scenario_checks_mig() {
    let both = with_devices(vec![device(
        json!({"mig_mode": true, "mig": {"current": true}}),
    )]);
    let err = crate::Scenario::from_json(&both.to_string()).unwrap_err();
    assert!(err.contains("not both"), "{err}");
    let bad_time = with_devices(vec![device(json!({"mig": {"current": true, "instances": [
        {"gpu_instance_id": 1, "compute_instance_id": 0, "profile": "1g.10gb",
         "uuid": "MIG-x", "memory_total": 1, "from": -1}]}}))]);
    assert!(crate::Scenario::from_json(&bad_time.to_string()).is_err());
    let typo = with_devices(vec![device(
        json!({"mig": {"current": true, "instance": []}}),
    )]);
    assert!(crate::Scenario::from_json(&typo.to_string()).is_err());
}

mod gpm {
    use super::*;
    use crate::exports::gpm::{
        nvmlGpmMetricsGet, nvmlGpmMigSampleGet, nvmlGpmSampleAlloc, nvmlGpmSampleFree,
    };
    use crate::ffi::{GPM_METRIC_SM_UTIL, GpmMetricsGet};
    use std::ffi::c_void;

    fn with_gpm() -> serde_json::Value {
        let mut s = scenario();
        s["devices"][0]["mig"]["gpm"] = json!(true);
        s["devices"][0]["mig"]["instances"][0]["timeline"] = json!([{"t": 0, "memory_used": 4 * GIB, "sm_util": 40.0},
                   {"t": 2, "sm_util": 75.5}]);
        s
    }

    fn alloc() -> *mut c_void {
        let mut h: *mut c_void = ptr::null_mut();
        assert_eq!(nvmlGpmSampleAlloc(&mut h), 0);
        h
    }

    fn metrics(a: *mut c_void, b: *mut c_void, ids: &[u32]) -> (u32, Box<GpmMetricsGet>) {
        // SAFETY: all-zero is a valid GpmMetricsGet (integers, floats, null pointers).
        let mut request: Box<GpmMetricsGet> = Box::new(unsafe { std::mem::zeroed() });
        request.version = 1;
        request.num_metrics = ids.len() as u32;
        request.sample1 = a;
        request.sample2 = b;
        for (m, id) in request.metrics.iter_mut().zip(ids) {
            m.metric_id = *id;
        }
        let rc = nvmlGpmMetricsGet(&mut *request);
        (rc, request)
    }

    #[test]
    fn two_samples_give_the_instances_sm_utilisation() {
        let f = Fake::init(&with_gpm());
        let (a, b) = (alloc(), alloc());
        assert_eq!(nvmlGpmMigSampleGet(handle(0), 1, a), 0);
        f.at(2.5);
        assert_eq!(nvmlGpmMigSampleGet(handle(0), 1, b), 0);
        let (rc, got) = metrics(a, b, &[GPM_METRIC_SM_UTIL, 1]);
        assert_eq!(rc, 0);
        assert_eq!(
            (got.metrics[0].nvml_return, got.metrics[0].value),
            (0, 75.5)
        );
        assert_eq!(
            got.metrics[1].nvml_return, 3,
            "other metrics: not supported"
        );
        // Unknown GPU instance, a MIG handle, a freed sample.
        assert_eq!(nvmlGpmMigSampleGet(handle(0), 9, a), 2);
        assert_eq!(nvmlGpmMigSampleGet(mig_handle(0, 0).1, 1, a), 3);
        assert_eq!(nvmlGpmSampleFree(a), 0);
        assert_eq!(nvmlGpmSampleFree(a), 2);
        assert_eq!(metrics(a, b, &[GPM_METRIC_SM_UTIL]).0, 2);
        assert_eq!(nvmlGpmSampleFree(b), 0);
    }

    #[test]
    fn without_gpm_the_gpu_says_not_supported() {
        let _f = Fake::init(&scenario());
        let a = alloc();
        assert_eq!(nvmlGpmMigSampleGet(handle(0), 1, a), 3);
        assert_eq!(nvmlGpmMigSampleGet(handle(2), 1, a), 3, "no MIG at all");
        assert_eq!(nvmlGpmSampleFree(a), 0);
    }

    #[test]
    fn samples_of_two_instances_do_not_compare() {
        let _f = Fake::init(&with_gpm());
        let (a, b) = (alloc(), alloc());
        assert_eq!(nvmlGpmMigSampleGet(handle(0), 1, a), 0);
        assert_eq!(nvmlGpmMigSampleGet(handle(0), 2, b), 0);
        assert_eq!(metrics(a, b, &[GPM_METRIC_SM_UTIL]).0, 2);
        let (rc, mut req) = metrics(a, a, &[GPM_METRIC_SM_UTIL]);
        assert_eq!(rc, 0);
        req.version = 2;
        assert_eq!(nvmlGpmMetricsGet(&mut *req), 25);
    }
}
