use std::collections::BTreeMap;
use std::ptr;

use serde_json::json;

use super::{Fake, device, handle, with_devices};
use crate::exports::device::nvmlDeviceGetName;
use crate::exports::system::{fakeNvmlWriteCounts, nvmlDeviceGetCount_v2, nvmlShutdown};

fn read_counts(path: &std::path::Path) -> BTreeMap<String, u64> {
    let text = std::fs::read_to_string(path).expect("counts file");
    serde_json::from_str(&text).expect("counts JSON")
}

#[test]
fn counts_every_call_including_failures() {
    let f = Fake::init(&with_devices(vec![device(json!({}))]));
    let mut n = 0;
    for _ in 0..3 {
        assert_eq!(nvmlDeviceGetCount_v2(&mut n), 0);
    }
    let mut buf = [0 as std::ffi::c_char; 96];
    assert_eq!(nvmlDeviceGetName(handle(0), buf.as_mut_ptr(), 96), 0);
    assert_eq!(nvmlDeviceGetName(handle(5), ptr::null_mut(), 96), 2);
    let counts = crate::call_counts();
    let expected: BTreeMap<String, u64> = [
        ("nvmlInit_v2", 1),
        ("nvmlDeviceGetCount_v2", 3),
        ("nvmlDeviceGetName", 2),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(counts, expected);

    let out = f.dir.path().join("counts.json");
    crate::write_call_counts(&out).expect("write counts");
    assert_eq!(read_counts(&out), expected);

    crate::reset_call_counts();
    assert!(crate::call_counts().is_empty());
}

#[test]
fn the_counts_file_is_rewritten_in_place_with_the_same_layout() {
    let _f = Fake::init(&with_devices(vec![device(json!({}))]));
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("counts.json");
    let mut n = 0;
    assert_eq!(nvmlDeviceGetCount_v2(&mut n), 0);
    crate::write_call_counts(&out).expect("write counts");
    let first = std::fs::read_to_string(&out).expect("counts file");
    for _ in 0..999 {
        nvmlDeviceGetCount_v2(&mut n);
    }
    crate::write_call_counts(&out).expect("write counts");
    let second = std::fs::read_to_string(&out).expect("counts file");
    assert_eq!(first.len(), second.len(), "{first}\n{second}");
    let differing: Vec<usize> = (0..first.len())
        .filter(|&i| first.as_bytes()[i] != second.as_bytes()[i])
        .collect();
    assert!(
        differing
            .iter()
            .all(|&i| second.as_bytes()[i].is_ascii_digit()),
        "only digits change: {first}\n{second}"
    );
    assert_eq!(read_counts(&out)["nvmlDeviceGetCount_v2"], 1000);

    // Removed by someone else: written anew, not into the unlinked file.
    std::fs::remove_file(&out).expect("remove");
    crate::write_call_counts(&out).expect("write counts");
    assert_eq!(read_counts(&out)["nvmlDeviceGetCount_v2"], 1000);

    // Fewer functions after a reset: the file shrinks to the new text, no stale tail.
    crate::reset_call_counts();
    nvmlDeviceGetCount_v2(&mut n);
    crate::write_call_counts(&out).expect("write counts");
    let expected: BTreeMap<String, u64> = [("nvmlDeviceGetCount_v2".to_owned(), 1)].into();
    assert_eq!(read_counts(&out), expected);
}

#[test]
fn counts_file_from_env() {
    let f = Fake::init(&with_devices(vec![device(json!({}))]));
    let out = f.dir.path().join("env-counts.json");
    // SAFETY: tests in this binary are serialised by `Fake`'s lock and no
    // other thread reads the environment concurrently.
    unsafe { std::env::set_var(crate::COUNTS_ENV, &out) };
    let mut n = 0;
    assert_eq!(nvmlDeviceGetCount_v2(&mut n), 0);
    assert_eq!(fakeNvmlWriteCounts(), 0);
    let counts = read_counts(&out);
    assert_eq!(counts.get("nvmlDeviceGetCount_v2"), Some(&1));
    assert_eq!(counts.get("nvmlInit_v2"), Some(&1));
    assert_eq!(counts.get("fakeNvmlWriteCounts"), None);
    // Shutdown writes too, and counts itself.
    assert_eq!(nvmlShutdown(), 0);
    let counts = read_counts(&out);
    assert_eq!(counts.get("nvmlShutdown"), Some(&1));
    // SAFETY: as above.
    unsafe { std::env::remove_var(crate::COUNTS_ENV) };
    assert_eq!(fakeNvmlWriteCounts(), 6);
    // Written in place: no temp file beside it, then or now.
    let leftovers = std::fs::read_dir(f.dir.path())
        .expect("read_dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .count();
    assert_eq!(leftovers, 0);
}
