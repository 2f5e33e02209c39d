use std::ptr;

use serde_json::json;

use super::{Fake, device, handle, with_devices};
use crate::exports::process::{
    nvmlDeviceGetComputeRunningProcesses_v3, nvmlDeviceGetGraphicsRunningProcesses_v3,
    nvmlDeviceGetProcessUtilization,
};
use crate::ffi::{ProcessInfo, ProcessUtilizationSample};

fn scenario() -> serde_json::Value {
    with_devices(vec![
        device(json!({
            "processes": [
                {"t": 0,
                 "compute": [{"pid": 1234, "used_memory": 1000},
                             {"pid": 77, "used_memory": 2000, "gpu_instance_id": 1, "compute_instance_id": 0}],
                 "graphics": [{"pid": 1234, "used_memory": null}]},
                {"t": 3, "compute": [{"pid": 5, "used_memory": 42}]},
                {"t": 4, "compute": [], "graphics": []},
            ],
            "process_utilization": [
                {"t": 0.5, "pid": 1234, "sm": 40, "mem": 10},
                {"t": 1.0, "pid": 1234, "sm": 50, "mem": 20, "enc": 3, "dec": 4},
                {"t": 2.0, "pid": 77, "sm": 90, "mem": 30},
            ],
        })),
        device(json!({})),
    ])
}

fn compute(capacity: u32) -> (u32, u32, Vec<ProcessInfo>) {
    let mut buf = vec![ProcessInfo::default(); capacity as usize];
    let mut count = capacity;
    let rc = nvmlDeviceGetComputeRunningProcesses_v3(handle(0), &mut count, buf.as_mut_ptr());
    buf.truncate(count.min(capacity) as usize);
    (rc, count, buf)
}

#[test]
fn process_list_probe_protocol() {
    let _f = Fake::init(&scenario());
    // NULL probe -> INSUFFICIENT_SIZE with the count.
    let mut count = 0;
    let rc = nvmlDeviceGetComputeRunningProcesses_v3(handle(0), &mut count, ptr::null_mut());
    assert_eq!((rc, count), (7, 2));
    // NULL buffer even with a large count.
    let mut count = 10;
    let rc = nvmlDeviceGetComputeRunningProcesses_v3(handle(0), &mut count, ptr::null_mut());
    assert_eq!((rc, count), (7, 2));
    // Too small.
    assert_eq!(compute(1).0, 7);
    assert_eq!(compute(1).1, 2);
    // Enough room (headroom like the wrapper's +5).
    let (rc, count, list) = compute(7);
    assert_eq!((rc, count), (0, 2));
    assert_eq!(
        list,
        vec![
            ProcessInfo {
                pid: 1234,
                used_gpu_memory: 1000,
                gpu_instance_id: u32::MAX,
                compute_instance_id: u32::MAX,
            },
            ProcessInfo {
                pid: 77,
                used_gpu_memory: 2000,
                gpu_instance_id: 1,
                compute_instance_id: 0,
            },
        ]
    );
    // Graphics: used_memory null -> NVML_VALUE_NOT_AVAILABLE.
    let mut buf = [ProcessInfo::default(); 2];
    let mut count = 2;
    let rc = nvmlDeviceGetGraphicsRunningProcesses_v3(handle(0), &mut count, buf.as_mut_ptr());
    assert_eq!((rc, count, buf[0].pid), (0, 1, 1234));
    assert_eq!(buf[0].used_gpu_memory, u64::MAX);
    // NULL count pointer.
    let rc = nvmlDeviceGetComputeRunningProcesses_v3(handle(0), ptr::null_mut(), ptr::null_mut());
    assert_eq!(rc, 2);
}

#[test]
fn process_lists_are_step_wise() {
    let f = Fake::init(&scenario());
    f.at(3.0);
    let (rc, count, list) = compute(5);
    assert_eq!(
        (rc, count, list[0].pid, list[0].used_gpu_memory),
        (0, 1, 5, 42)
    );
    // Graphics list was absent at t=3: inherited.
    let mut count = 0;
    let rc = nvmlDeviceGetGraphicsRunningProcesses_v3(handle(0), &mut count, ptr::null_mut());
    assert_eq!((rc, count), (7, 1));
    // Empty lists: SUCCESS with count 0, also for the NULL probe.
    f.at(4.0);
    let mut count = 0;
    let rc = nvmlDeviceGetComputeRunningProcesses_v3(handle(0), &mut count, ptr::null_mut());
    assert_eq!((rc, count), (0, 0));
    // A device without processes.
    let mut count = 3;
    let rc = nvmlDeviceGetComputeRunningProcesses_v3(handle(1), &mut count, ptr::null_mut());
    assert_eq!((rc, count), (0, 0));
}

fn samples(last_seen: u64, capacity: u32) -> (u32, u32, Vec<ProcessUtilizationSample>) {
    let mut buf = vec![ProcessUtilizationSample::default(); capacity as usize];
    let mut count = capacity;
    let rc = nvmlDeviceGetProcessUtilization(handle(0), buf.as_mut_ptr(), &mut count, last_seen);
    buf.truncate(count.min(capacity) as usize);
    (rc, count, buf)
}

#[test]
fn process_utilization_cursor() {
    let f = Fake::init(&scenario());
    // Nothing visible yet.
    f.at(0.2);
    let mut count = 0;
    let rc = nvmlDeviceGetProcessUtilization(handle(0), ptr::null_mut(), &mut count, 0);
    assert_eq!((rc, count), (6, 0));

    f.at(1.5);
    let mut count = 0;
    let rc = nvmlDeviceGetProcessUtilization(handle(0), ptr::null_mut(), &mut count, 0);
    assert_eq!((rc, count), (7, 2));
    assert_eq!(samples(0, 1).0, 7);
    let (rc, count, got) = samples(0, 2);
    assert_eq!((rc, count), (0, 2));
    assert_eq!(
        (got[0].pid, got[0].sm_util, got[0].mem_util),
        (1234, 40, 10)
    );
    assert_eq!(
        (
            got[1].sm_util,
            got[1].mem_util,
            got[1].enc_util,
            got[1].dec_util
        ),
        (50, 20, 3, 4)
    );
    assert_eq!(got[1].time_stamp - got[0].time_stamp, 500_000);
    // Timestamps are wall-clock µs: within a minute of now.
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0);
    assert!(got[0].time_stamp.abs_diff(now_us) < 60_000_000);

    // Cursor at the newest sample -> NOT_FOUND.
    let cursor = got[1].time_stamp;
    assert_eq!(samples(cursor, 4).0, 6);
    // Cursor between the two -> only the newer one.
    let (rc, count, got2) = samples(cursor - 1, 4);
    assert_eq!((rc, count, got2[0].sm_util), (0, 1, 50));

    f.at(2.0);
    let (rc, count, got3) = samples(cursor, 4);
    assert_eq!((rc, count), (0, 1));
    assert_eq!((got3[0].pid, got3[0].sm_util), (77, 90));
    assert_eq!(got3[0].time_stamp - cursor, 1_000_000);

    // A device without samples.
    let mut count = 0;
    let rc = nvmlDeviceGetProcessUtilization(handle(1), ptr::null_mut(), &mut count, 0);
    assert_eq!(rc, 6);
}

/// The older list calls serve the same lists: `_v2` in the 24-byte layout, the unversioned
/// ones in the 16-byte `nvmlProcessInfo_v1_t` layout, with the same probe protocol.
#[test]
fn older_list_calls_serve_the_same_lists_in_their_layouts() {
    use crate::exports::process::{
        nvmlDeviceGetComputeRunningProcesses, nvmlDeviceGetComputeRunningProcesses_v2,
        nvmlDeviceGetGraphicsRunningProcesses, nvmlDeviceGetGraphicsRunningProcesses_v2,
    };
    use crate::ffi::ProcessInfoV1;
    let _f = Fake::init(&scenario());

    let mut v2 = vec![ProcessInfo::default(); 4];
    let mut count = 4;
    let rc = nvmlDeviceGetComputeRunningProcesses_v2(handle(0), &mut count, v2.as_mut_ptr());
    assert_eq!((rc, count), (0, 2));
    assert_eq!(&v2[..2], &compute(7).2[..]);

    let mut count = 0;
    let rc = nvmlDeviceGetComputeRunningProcesses(handle(0), &mut count, ptr::null_mut());
    assert_eq!((rc, count), (7, 2));
    // Three 16-byte entries of room; a 24-byte stride would put the second pid at byte 24.
    let mut v1 = vec![ProcessInfoV1::default(); 3];
    let mut count = 3;
    let rc = nvmlDeviceGetComputeRunningProcesses(handle(0), &mut count, v1.as_mut_ptr());
    assert_eq!((rc, count), (0, 2));
    assert_eq!(
        v1,
        vec![
            ProcessInfoV1 {
                pid: 1234,
                used_gpu_memory: 1000
            },
            ProcessInfoV1 {
                pid: 77,
                used_gpu_memory: 2000
            },
            ProcessInfoV1::default(),
        ]
    );

    let mut count = 3;
    let rc = nvmlDeviceGetGraphicsRunningProcesses(handle(0), &mut count, v1.as_mut_ptr());
    assert_eq!((rc, count), (0, 1));
    assert_eq!(
        v1[0],
        ProcessInfoV1 {
            pid: 1234,
            used_gpu_memory: u64::MAX
        }
    );
    let mut count = 4;
    let rc = nvmlDeviceGetGraphicsRunningProcesses_v2(handle(0), &mut count, v2.as_mut_ptr());
    assert_eq!((rc, count, v2[0].pid), (0, 1, 1234));
}
