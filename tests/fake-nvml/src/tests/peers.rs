//! The exports that nvitop and gpustat (through nvidia-ml-py) call besides vramscope's.

use std::ffi::c_uint;
use std::ptr;

use serde_json::json;

use super::{Fake, device, handle, with_devices};
use crate::exports::device::*;
use crate::exports::metrics::nvmlDeviceGetTemperatureV;
use crate::exports::process::{
    nvmlDeviceGetMPSComputeRunningProcesses_v3, nvmlDeviceGetRunningProcessDetailList,
};
use crate::exports::system::{nvmlInit_v2, nvmlShutdown};
use crate::ffi::{
    ConfComputeMemSizeInfo, PROCESS_DETAIL_LIST_V1_VERSION, ProcessDetail, ProcessDetailList,
    ProcessInfo, TEMPERATURE_V1_VERSION, TemperatureV1,
};

fn scenario() -> serde_json::Value {
    with_devices(vec![
        device(json!({
            "compute_mode": 3, "display_mode": true, "display_active": false, "mig_mode": true,
            "timeline": [{"t": 0, "temperature": 61}, {"t": 2, "temperature": 70}],
            "processes": [
                {"t": 0,
                 "compute": [{"pid": 10, "used_memory": 1000},
                             {"pid": 11, "used_memory": null, "gpu_instance_id": 1,
                              "compute_instance_id": 2}],
                 "graphics": [{"pid": 12, "used_memory": 3000}],
                 "mps": [{"pid": 13, "used_memory": 4000}]},
                {"t": 5, "compute": []},
                {"t": 6, "mps": []},
            ],
        })),
        device(json!({"uuid": "GPU-2", "pci_bus_id": "00000000:3B:00.0"})),
    ])
}

fn get_u32(f: impl Fn(*mut c_uint) -> u32) -> (u32, u32) {
    let mut v = 77;
    (f(&mut v), v)
}

#[test]
fn index_of_a_handle() {
    let _f = Fake::init(&scenario());
    assert_eq!(get_u32(|p| nvmlDeviceGetIndex(handle(0), p)), (0, 0));
    assert_eq!(get_u32(|p| nvmlDeviceGetIndex(handle(1), p)), (0, 1));
    assert_eq!(get_u32(|p| nvmlDeviceGetIndex(handle(2), p)).0, 2);
    assert_eq!(nvmlDeviceGetIndex(handle(0), ptr::null_mut()), 2);
}

#[test]
fn compute_and_display_modes() {
    let _f = Fake::init(&scenario());
    assert_eq!(get_u32(|p| nvmlDeviceGetComputeMode(handle(0), p)), (0, 3));
    assert_eq!(get_u32(|p| nvmlDeviceGetDisplayMode(handle(0), p)), (0, 1));
    assert_eq!(
        get_u32(|p| nvmlDeviceGetDisplayActive(handle(0), p)),
        (0, 0)
    );
    // Left out of the scenario: NotSupported.
    assert_eq!(get_u32(|p| nvmlDeviceGetComputeMode(handle(1), p)).0, 3);
    assert_eq!(get_u32(|p| nvmlDeviceGetDisplayMode(handle(1), p)).0, 3);
    assert_eq!(get_u32(|p| nvmlDeviceGetDisplayActive(handle(1), p)).0, 3);
    assert_eq!(nvmlDeviceGetComputeMode(handle(0), ptr::null_mut()), 2);
}

#[test]
fn mig_mode_and_mig_handles() {
    let _f = Fake::init(&scenario());
    let (mut current, mut pending) = (9, 9);
    assert_eq!(
        nvmlDeviceGetMigMode(handle(0), &mut current, &mut pending),
        0
    );
    assert_eq!((current, pending), (1, 1));
    assert_eq!(
        nvmlDeviceGetMigMode(handle(1), &mut current, &mut pending),
        3
    );
    assert_eq!(
        nvmlDeviceGetMigMode(handle(0), &mut current, ptr::null_mut()),
        2
    );
    assert_eq!(
        get_u32(|p| nvmlDeviceIsMigDeviceHandle(handle(0), p)),
        (0, 0)
    );
    assert_eq!(get_u32(|p| nvmlDeviceIsMigDeviceHandle(handle(5), p)).0, 2);
}

#[test]
fn windows_and_confidential_computing_calls_are_not_supported() {
    let _f = Fake::init(&scenario());
    let (mut current, mut pending) = (0, 0);
    for f in [nvmlDeviceGetDriverModel, nvmlDeviceGetDriverModel_v2] {
        assert_eq!(f(handle(0), &mut current, &mut pending), 3);
        assert_eq!(f(handle(0), &mut current, ptr::null_mut()), 3);
        assert_eq!(f(handle(0), ptr::null_mut(), ptr::null_mut()), 2);
        assert_eq!(f(handle(4), &mut current, &mut pending), 2);
    }
    let mut info = ConfComputeMemSizeInfo::default();
    assert_eq!(nvmlDeviceGetConfComputeMemSizeInfo(handle(0), &mut info), 3);
    assert_eq!(
        nvmlDeviceGetConfComputeMemSizeInfo(handle(0), ptr::null_mut()),
        2
    );
}

fn temperature_v(index: usize, version: u32, sensor: u32) -> (u32, i32) {
    let mut t = TemperatureV1 {
        version,
        sensor_type: sensor,
        temperature: -1,
    };
    let rc = nvmlDeviceGetTemperatureV(handle(index), &mut t);
    (rc, t.temperature)
}

#[test]
fn versioned_temperature() {
    let f = Fake::init(&scenario());
    assert_eq!(temperature_v(0, TEMPERATURE_V1_VERSION, 0), (0, 61));
    f.at(2.5);
    assert_eq!(temperature_v(0, TEMPERATURE_V1_VERSION, 0), (0, 70));
    assert_eq!(temperature_v(0, 0x0100_0008, 0), (25, -1));
    assert_eq!(temperature_v(0, 0, 0), (25, -1));
    assert_eq!(temperature_v(0, TEMPERATURE_V1_VERSION, 1), (2, -1));
    assert_eq!(temperature_v(1, TEMPERATURE_V1_VERSION, 0).0, 3);
    assert_eq!(nvmlDeviceGetTemperatureV(handle(0), ptr::null_mut()), 2);
}

fn mps(capacity: u32) -> (u32, u32, Vec<ProcessInfo>) {
    let mut buf = vec![ProcessInfo::default(); capacity as usize];
    let mut count = capacity;
    let rc = nvmlDeviceGetMPSComputeRunningProcesses_v3(handle(0), &mut count, buf.as_mut_ptr());
    buf.truncate(count.min(capacity) as usize);
    (rc, count, buf)
}

#[test]
fn mps_process_list() {
    let f = Fake::init(&scenario());
    let mut count = 0;
    let rc = nvmlDeviceGetMPSComputeRunningProcesses_v3(handle(0), &mut count, ptr::null_mut());
    assert_eq!((rc, count), (7, 1));
    let (rc, count, list) = mps(6);
    assert_eq!((rc, count), (0, 1));
    assert_eq!((list[0].pid, list[0].used_gpu_memory), (13, 4000));
    assert_eq!(list[0].gpu_instance_id, u32::MAX);
    // Kept by a later entry that does not name it, emptied by one that does.
    f.at(5.0);
    assert_eq!(mps(6).1, 1);
    f.at(6.0);
    let mut count = 0;
    let rc = nvmlDeviceGetMPSComputeRunningProcesses_v3(handle(0), &mut count, ptr::null_mut());
    assert_eq!((rc, count), (0, 0));
    let rc = nvmlDeviceGetMPSComputeRunningProcesses_v3(handle(1), &mut count, ptr::null_mut());
    assert_eq!((rc, count), (0, 0));
}

fn detail_list(mode: u32, room: u32, with_array: bool) -> (u32, u32, Vec<ProcessDetail>) {
    let mut buf = vec![ProcessDetail::default(); room as usize];
    let mut list = ProcessDetailList {
        version: PROCESS_DETAIL_LIST_V1_VERSION,
        mode,
        num_proc_array_entries: room,
        proc_array: if with_array {
            buf.as_mut_ptr()
        } else {
            ptr::null_mut()
        },
    };
    let rc = nvmlDeviceGetRunningProcessDetailList(handle(0), &mut list);
    buf.truncate(list.num_proc_array_entries.min(room) as usize);
    (rc, list.num_proc_array_entries, buf)
}

#[test]
fn running_process_detail_list() {
    let f = Fake::init(&scenario());
    // Probe without an array, then too little room: the count and INSUFFICIENT_SIZE.
    assert_eq!(detail_list(0, 0, false).0, 7);
    assert_eq!(detail_list(0, 0, false).1, 2);
    assert_eq!(detail_list(0, 1, true).0, 7);
    let (rc, n, list) = detail_list(0, 4, true);
    assert_eq!((rc, n), (0, 2));
    assert_eq!(
        list,
        vec![
            ProcessDetail {
                pid: 10,
                used_gpu_memory: 1000,
                gpu_instance_id: u32::MAX,
                compute_instance_id: u32::MAX,
                used_gpu_cc_protected_memory: 0,
            },
            ProcessDetail {
                pid: 11,
                used_gpu_memory: u64::MAX,
                gpu_instance_id: 1,
                compute_instance_id: 2,
                used_gpu_cc_protected_memory: 0,
            },
        ]
    );
    let (rc, n, list) = detail_list(1, 4, true);
    assert_eq!(
        (rc, n, list[0].pid, list[0].used_gpu_memory),
        (0, 1, 12, 3000)
    );
    let (rc, n, list) = detail_list(2, 4, true);
    assert_eq!((rc, n, list[0].pid), (0, 1, 13));
    assert_eq!(detail_list(7, 4, true).0, 2, "unknown mode");
    // No processes: success with 0, also for the probe.
    f.at(5.0);
    assert_eq!(detail_list(0, 0, false), (0, 0, vec![]));

    // A version other than v1.
    let mut list = ProcessDetailList {
        version: 0x0100_0010,
        mode: 0,
        num_proc_array_entries: 0,
        proc_array: ptr::null_mut(),
    };
    assert_eq!(
        nvmlDeviceGetRunningProcessDetailList(handle(0), &mut list),
        25
    );
    assert_eq!(
        nvmlDeviceGetRunningProcessDetailList(handle(0), ptr::null_mut()),
        2
    );
}

#[test]
fn new_exports_are_counted() {
    let _f = Fake::init(&scenario());
    let mut v = 0;
    nvmlDeviceGetIndex(handle(0), &mut v);
    nvmlDeviceGetIndex(handle(9), &mut v);
    nvmlDeviceIsMigDeviceHandle(handle(0), &mut v);
    detail_list(0, 0, false);
    let counts = crate::call_counts();
    assert_eq!(counts.get("nvmlDeviceGetIndex"), Some(&2));
    assert_eq!(counts.get("nvmlDeviceIsMigDeviceHandle"), Some(&1));
    assert_eq!(
        counts.get("nvmlDeviceGetRunningProcessDetailList"),
        Some(&1)
    );
}

/// gpustat inits and shuts down on every refresh: a settled scenario file is parsed once, a
/// file written just before an init is always read again.
#[test]
fn init_keeps_a_settled_scenario_and_rereads_a_fresh_one() {
    let one = |uuid: &str| with_devices(vec![device(json!({ "uuid": uuid }))]);
    let f = Fake::new(&one("GPU-AAAA"));
    let uuid = || {
        let mut buf = [0 as std::ffi::c_char; 96];
        assert_eq!(nvmlDeviceGetUUID(handle(0), buf.as_mut_ptr(), 96), 0);
        // SAFETY: the fake always NUL-terminates.
        unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    };
    assert_eq!(nvmlInit_v2(), 0);
    assert_eq!(uuid(), "GPU-AAAA");
    assert_eq!(nvmlShutdown(), 0);
    // Rewritten right away with the same length: read again.
    f.write(&one("GPU-BBBB"));
    assert_eq!(nvmlInit_v2(), 0);
    assert_eq!(uuid(), "GPU-BBBB");
    assert_eq!(nvmlShutdown(), 0);

    // A file last modified long ago: parsed at this init...
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    let set_mtime = || {
        std::fs::File::options()
            .write(true)
            .open(&f.path)
            .and_then(|file| file.set_modified(old))
            .expect("set mtime")
    };
    f.write(&one("GPU-CCCC"));
    set_mtime();
    assert_eq!(nvmlInit_v2(), 0);
    assert_eq!(uuid(), "GPU-CCCC");
    assert_eq!(nvmlShutdown(), 0);
    // ...and kept at the next one while its inode, length and mtime stay the same (here
    // forged: rewritten in place, then the old mtime put back).
    let text = std::fs::read_to_string(&f.path).expect("read");
    std::fs::write(&f.path, text.replace("GPU-CCCC", "GPU-DDDD")).expect("write in place");
    set_mtime();
    assert_eq!(nvmlInit_v2(), 0);
    assert_eq!(uuid(), "GPU-CCCC");
}

fn utilization(last_seen: u64) -> (u32, Vec<crate::ffi::ProcessUtilizationSample>) {
    use crate::exports::process::nvmlDeviceGetProcessUtilization;
    let mut count = 0;
    let rc = nvmlDeviceGetProcessUtilization(handle(0), ptr::null_mut(), &mut count, last_seen);
    if rc != 7 {
        return (rc, vec![]);
    }
    let mut buf = vec![crate::ffi::ProcessUtilizationSample::default(); count as usize];
    let rc = nvmlDeviceGetProcessUtilization(handle(0), buf.as_mut_ptr(), &mut count, last_seen);
    buf.truncate(count as usize);
    (rc, buf)
}

/// `every` repeats a sample (what a benchmark with hundreds of processes needs without a
/// scenario of megabytes); `until` ends the repeats. Mixed with one-off samples in time order.
#[test]
fn periodic_process_utilization_samples() {
    let f = Fake::init(&with_devices(vec![device(json!({
        "process_utilization": [
            {"t": 0, "pid": 1, "sm": 40, "every": 0.5},
            {"t": 0.25, "pid": 2, "sm": 60, "mem": 5, "every": 1, "until": 2.25},
            {"t": 0.75, "pid": 3, "sm": 90},
        ],
    }))]));
    let (rc, all) = utilization(0);
    assert_eq!((rc, all.len()), (0, 1), "only pid 1 at t = 0");
    f.at(1.0);
    let (rc, all) = utilization(0);
    assert_eq!(rc, 0);
    let seen: Vec<(u32, u32)> = all.iter().map(|s| (s.pid, s.sm_util)).collect();
    assert_eq!(seen, [(1, 40), (2, 60), (1, 40), (3, 90), (1, 40)]);
    let t0 = all[0].time_stamp;
    let offsets: Vec<u64> = all.iter().map(|s| s.time_stamp - t0).collect();
    assert_eq!(offsets, [0, 250_000, 500_000, 750_000, 1_000_000]);
    // The cursor: only what is newer.
    let (rc, newer) = utilization(t0 + 500_000);
    assert_eq!(rc, 0);
    let offsets: Vec<u64> = newer.iter().map(|s| s.time_stamp - t0).collect();
    assert_eq!(offsets, [750_000, 1_000_000]);
    assert_eq!(utilization(t0 + 1_000_000).0, 6, "nothing newer: NOT_FOUND");
    // Pid 2 repeats at 0.25, 1.25 and stops before 2.25.
    f.at(10.0);
    let (_, later) = utilization(t0 + 1_000_000);
    let pid2: Vec<u64> = later
        .iter()
        .filter(|s| s.pid == 2)
        .map(|s| s.time_stamp - t0)
        .collect();
    assert_eq!(pid2, [1_250_000]);
    assert_eq!(later.iter().filter(|s| s.pid == 1).count(), 18);
    assert_eq!(later.last().map(|s| s.time_stamp - t0), Some(10_000_000));
}

#[test]
fn periodic_samples_are_validated() {
    let bad = |u: serde_json::Value| {
        crate::Scenario::from_json(
            &with_devices(vec![device(json!({ "process_utilization": [u] }))]).to_string(),
        )
        .is_err()
    };
    assert!(bad(json!({"t": 0, "pid": 1, "every": 0})));
    assert!(bad(json!({"t": 0, "pid": 1, "every": -1})));
    assert!(bad(json!({"t": 0, "pid": 1, "until": 3})));
    assert!(!bad(json!({"t": 0, "pid": 1, "every": 0.1, "until": 3})));
}
