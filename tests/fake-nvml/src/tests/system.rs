use std::ffi::{CStr, c_char};
use std::ptr;

use serde_json::json;

use super::{Fake, device, handle, with_devices};
use crate::exports::device::{nvmlDeviceGetName, nvmlDeviceGetPciInfo_v3, nvmlDeviceGetUUID};
use crate::exports::system::*;
use crate::ffi::{NvmlDevice, PciInfo};

fn text(buf: &[c_char]) -> String {
    // SAFETY: the fake always NUL-terminates.
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

#[test]
fn init_is_ref_counted() {
    let _f = Fake::new(&with_devices(vec![device(json!({}))]));
    let mut n = 0;
    assert_eq!(nvmlDeviceGetCount_v2(&mut n), 1);
    assert_eq!(nvmlShutdown(), 1);
    assert_eq!(nvmlInit_v2(), 0);
    assert_eq!(nvmlInitWithFlags(0), 0);
    assert_eq!(nvmlShutdown(), 0);
    assert_eq!(nvmlDeviceGetCount_v2(&mut n), 0);
    assert_eq!(n, 1);
    assert_eq!(nvmlShutdown(), 0);
    assert_eq!(nvmlDeviceGetCount_v2(&mut n), 1);
    let mut v = [0 as c_char; 80];
    assert_eq!(nvmlSystemGetDriverVersion(v.as_mut_ptr(), 80), 1);
    assert_eq!(nvmlShutdown(), 1);
}

#[test]
fn system_strings_and_versions() {
    let s = json!({"driver_version": "535.104.05", "cuda_version": 12020,
                   "nvml_version": "12.535.104.05", "devices": []});
    let _f = Fake::init(&s);
    let mut v = [0x55 as c_char; 80];
    assert_eq!(nvmlSystemGetDriverVersion(v.as_mut_ptr(), 80), 0);
    assert_eq!(text(&v), "535.104.05");
    assert_eq!(nvmlSystemGetNVMLVersion(v.as_mut_ptr(), 80), 0);
    assert_eq!(text(&v), "12.535.104.05");
    // Exactly len + 1 fits; len does not.
    assert_eq!(nvmlSystemGetDriverVersion(v.as_mut_ptr(), 11), 0);
    assert_eq!(nvmlSystemGetDriverVersion(v.as_mut_ptr(), 10), 7);
    assert_eq!(nvmlSystemGetDriverVersion(ptr::null_mut(), 80), 2);
    let mut cuda = 0;
    assert_eq!(nvmlSystemGetCudaDriverVersion_v2(&mut cuda), 0);
    assert_eq!(cuda, 12020);
    assert_eq!(nvmlSystemGetCudaDriverVersion(&mut cuda), 0);
    assert_eq!(cuda, 12020);
    let mut n = 9;
    assert_eq!(nvmlDeviceGetCount_v2(&mut n), 0);
    assert_eq!(n, 0);
    // SAFETY: static NUL-terminated strings.
    let msg = |c| unsafe { CStr::from_ptr(nvmlErrorString(c)) }.to_string_lossy();
    assert_eq!(msg(3), "Not Supported");
    assert_eq!(msg(12345), "Unknown Error");
}

#[test]
fn handles_names_and_pci() {
    let s = with_devices(vec![
        device(json!({"pci_device_id": 0x2330_10DEu32, "pci_subsystem_id": 0x16C1_10DEu32})),
        device(
            json!({"name": "NVIDIA A100-SXM4-40GB", "uuid": "GPU-b", "pci_bus_id": "0001:3b:00.1"}),
        ),
    ]);
    let _f = Fake::init(&s);
    let mut h: NvmlDevice = ptr::null_mut();
    assert_eq!(nvmlDeviceGetHandleByIndex_v2(1, &mut h), 0);
    assert_eq!(h, handle(1));
    assert_eq!(nvmlDeviceGetHandleByIndex_v2(2, &mut h), 2);
    assert_eq!(nvmlDeviceGetHandleByIndex_v2(0, ptr::null_mut()), 2);

    let mut name = [0 as c_char; 96];
    assert_eq!(nvmlDeviceGetName(handle(1), name.as_mut_ptr(), 96), 0);
    assert_eq!(text(&name), "NVIDIA A100-SXM4-40GB");
    assert_eq!(nvmlDeviceGetName(handle(1), name.as_mut_ptr(), 5), 7);
    assert_eq!(nvmlDeviceGetUUID(handle(0), name.as_mut_ptr(), 96), 0);
    assert_eq!(text(&name), "GPU-11111111-2222-3333-4444-555555555555");

    let mut pci = PciInfo::default();
    assert_eq!(nvmlDeviceGetPciInfo_v3(handle(0), &mut pci), 0);
    assert_eq!((pci.domain, pci.bus, pci.device), (0, 0x18, 0));
    assert_eq!(
        (pci.pci_device_id, pci.pci_sub_system_id),
        (0x2330_10DE, 0x16C1_10DE)
    );
    assert_eq!(text(&pci.bus_id), "00000000:18:00.0");
    assert_eq!(text(&pci.bus_id_legacy), "0000:18:00.0");
    assert_eq!(nvmlDeviceGetPciInfo_v3(handle(1), &mut pci), 0);
    assert_eq!((pci.domain, pci.bus, pci.device), (1, 0x3b, 0));
    assert_eq!(text(&pci.bus_id), "0001:3b:00.1");
    assert_eq!(text(&pci.bus_id_legacy), "0001:3B:00.1");
}

#[test]
fn exported_symbol_list_is_complete() {
    assert_eq!(crate::EXPORTED_SYMBOLS.len(), 61);
    let mut sorted = crate::EXPORTED_SYMBOLS.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), 61, "no duplicates");
}

#[test]
fn readme_example_scenario_is_valid() {
    let readme = include_str!("../../README.md");
    let start = readme.find("```json\n").expect("json block") + "```json\n".len();
    let len = readme[start..].find("```").expect("block end");
    let s = crate::Scenario::from_json(&readme[start..start + len]).expect("README example");
    assert_eq!(s.devices.len(), 1);
    assert_eq!(s.devices[0].timeline.len(), 2);
    assert_eq!(s.devices[0].timeline[1].memory_used, Some(50000));
    assert_eq!(s.init_error, Some(crate::ErrorCode(9)));
    assert_eq!(s.faults[0].error, crate::ErrorCode(3));
    assert_eq!(s.blocks[0].seconds, 5.0);
}
