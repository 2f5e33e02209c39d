//! The exporter names a process only by a pid the channel sampler verified: a channel file
//! that another user writes, claiming a root process's pid (and its real start time), is
//! never exported under that pid, as `--json` and the TUI never join it.

mod common;
mod serve_support;

use common::*;
use serve_support::*;
use std::os::unix::fs::chown;
use std::process::Command;
use std::time::Duration;
use vramscope::channel::DeviceFigures;

/// The uid the hostile file is given: `nobody` on Debian and Red Hat alike.
const NOBODY: u32 = 65_534;

#[test]
fn a_channel_claiming_another_users_pid_is_not_exported_under_it() {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: only root can give the channel file to another user");
        return;
    }
    let work = tempfile::tempdir().expect("tempdir");
    let channels = work.path().join("channels");
    // This test process (root) writes it, so pid and start time are root's own, then hands
    // the file to nobody: exactly what nobody could write by reading /proc/<pid>/stat.
    let mut writer = rank_writer(&channels);
    writer.publish_device(
        0,
        &DeviceFigures {
            allocated: Some(20 * GIB),
            reserved: Some(24 * GIB),
            ooms: Some(5),
            ..DeviceFigures::default()
        },
    );
    writer.status(Some(3), "attack");
    chown(writer.path(), Some(NOBODY), Some(NOBODY)).expect("chown the channel file");

    // NVML lists a root sleeper on GPU 0 and nothing for our pid: the path where a
    // channel is exported for a GPU without its NVML row.
    let mut sleeper = Command::new("sleep").arg("120").spawn().expect("sleep");
    let scenario = Scenario::new(&two_gpus(sleeper.id(), None));
    let served = Served::start(
        &scenario,
        &["--interval", "250ms"],
        &[("VRAMSCOPE_DIR", &channels)],
    );
    // The claim is readable: `--json` on the same directory lists it, under no pid.
    let out = scenario
        .command()
        .env("VRAMSCOPE_DIR", &channels)
        .arg("--json")
        .output()
        .expect("vramscope --json");
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("--json");
    assert_eq!(doc["allocators"][0]["job_id"], "job-42", "{doc}");
    assert_eq!(
        doc["allocators"][0]["pid"],
        serde_json::Value::Null,
        "{doc}"
    );
    served.scrape_until(Duration::from_secs(20), |text| {
        value(
            &samples(text),
            "vramscope_process_running",
            &[("pid", &sleeper.id().to_string())],
        )
        .is_some()
    });
    // The channel sampler reads the directory on the same tick clock; a few more ticks
    // leave the server every chance to have read the claim.
    std::thread::sleep(Duration::from_secs(1));
    let text = served.scrape();
    // Its reserve counts toward no GPU's share: its pid is not verified, and the pid it
    // claims is not its own.
    assert_eq!(
        value(
            &samples(&text),
            "vramscope_gpu_instrumented_reserved_bytes",
            &[("gpu", "0")],
        ),
        None,
        "{text}"
    );
    let ours = std::process::id().to_string();
    let claimed: Vec<_> = samples(&text)
        .into_iter()
        .filter(|l| l.label("pid") == Some(ours.as_str()))
        .collect();
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert!(
        claimed.is_empty(),
        "exported under the claimed pid: {claimed:#?}"
    );
    assert!(
        !text.contains("job-42"),
        "the claim's job label leaked:\n{text}"
    );
    drop(writer);
}
