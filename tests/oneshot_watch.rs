//! A one-shot run reads the channel directories once and sets up no watch on them (closing
//! an inotify descriptor waits on the kernel, up to milliseconds); `--loop` watches them.
//! One test in this file: it sets the environment the fake NVML and the sampler read.

mod common;

use common::{ISOLATED_SHM, Scenario, fake_nvml, h100};
use serde_json::json;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use vramscope::model::SourceEvent;
use vramscope::sources::oneshot::OneShot;

/// How many GPU samples one tick's batch holds.
fn devices_in(batch: &SourceEvent) -> usize {
    match batch {
        SourceEvent::Batch(events) => events
            .iter()
            .filter(|e| matches!(e, SourceEvent::Device(_)))
            .count(),
        other => panic!("a tick is one batch: {other:?}"),
    }
}

/// Whether an inotify descriptor of this process watches the directory `dir` (`ino:` in
/// `/proc/self/fdinfo` is the watched inode, in hex).
fn watched(dir: &Path) -> bool {
    let ino = format!(" ino:{:x} ", std::fs::metadata(dir).unwrap().ino());
    std::fs::read_dir("/proc/self/fdinfo")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .any(|info| {
            info.lines()
                .any(|l| l.starts_with("inotify ") && l.contains(&ino))
        })
}

#[test]
fn a_single_take_lists_the_channel_directories_without_watching_them() {
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let channels = scenario.dir().join("channels");
    std::fs::create_dir(&channels).unwrap();
    // SAFETY: the only test in this binary, before any thread reads the environment.
    unsafe {
        std::env::set_var("FAKE_NVML_SCENARIO", &scenario.path);
        std::env::set_var("VRAMSCOPE_DIR", &channels);
        std::env::set_var(ISOLATED_SHM.0, scenario.dir().join(ISOLATED_SHM.1));
        std::env::remove_var("XDG_RUNTIME_DIR");
    }
    let lib = fake_nvml();
    let (mut once, started) = OneShot::open(Some(&lib), None, false, None, false).unwrap();
    assert!(matches!(&started, SourceEvent::Started { devices, .. } if devices.len() == 1));
    assert_eq!(devices_in(&once.once()), 1);
    assert!(!watched(&channels), "a one-shot run watches nothing");
    drop(once);

    let (mut repeated, _) = OneShot::open(Some(&lib), None, true, None, false).unwrap();
    assert_eq!(devices_in(&repeated.once()), 1);
    assert!(watched(&channels), "--loop watches its directories");
}
