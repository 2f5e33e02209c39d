//! Recordings hold every user's command lines and job ids: the file is its owner's alone
//! (0600) whether `record` creates it or `--force` replaces one, and whatever the umask.

mod common;

use common::{GIB, Scenario, h100};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).expect("stat").permissions().mode() & 0o777
}

fn record(scenario: &Scenario, file: &Path, extra: &[&str]) {
    let out = scenario
        .command()
        .env("VRAMSCOPE_DIR", scenario.dir().join("no-channels"))
        .args(["--interval", "100ms", "record", "--duration", "0.3s", "-o"])
        .arg(file)
        .args(extra)
        .output()
        .expect("run vramscope record");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn recordings_are_created_and_replaced_private() {
    let mut gpu = h100(0);
    gpu["processes"] =
        json!([{ "t": 0, "compute": [{ "pid": std::process::id(), "used_memory": GIB }] }]);
    let scenario = Scenario::new(&json!({ "devices": [gpu] }));
    for name in ["new.jsonl", "new.jsonl.zst"] {
        let file = scenario.dir().join(name);
        record(&scenario, &file, &[]);
        assert_eq!(mode(&file), 0o600, "{name} created");
    }
    let replaced = scenario.dir().join("old.jsonl.zst");
    std::fs::write(&replaced, "an older recording").expect("write");
    std::fs::set_permissions(&replaced, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    record(&scenario, &replaced, &["--force"]);
    assert_eq!(mode(&replaced), 0o600, "replaced with --force");
}

/// Issue 28: as root a recording is made through `safe_fs`. A folder a real other user owns,
/// their symlink in a shared sticky folder and a hard link to root's file there are each
/// refused in one line with status 2, and nothing is written through them.
#[test]
fn as_root_a_recording_into_a_users_folder_or_through_their_links_is_refused() {
    let Some(user) = common::users::TestUser::create() else {
        eprintln!("SKIPPED: needs root and useradd to plant as a real other user");
        return;
    };
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let top_dir = tempfile::tempdir().expect("tempdir");
    let top = top_dir.path();
    std::fs::set_permissions(top, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let target = top.join("precious");
    std::fs::write(&target, "root's own").expect("write");
    let theirs = top.join("theirs");
    std::fs::create_dir(&theirs).expect("mkdir");
    user.give(&theirs);
    let shared = top.join("shared");
    std::fs::create_dir(&shared).expect("mkdir");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    let link = shared.join("link.jsonl");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    user.give(&link);
    let hard = shared.join("hard.jsonl");
    std::fs::hard_link(&target, &hard).expect("hard link");

    for (file, force, why) in [
        (
            theirs.join("run.jsonl"),
            false,
            format!("belongs to uid {}", user.uid),
        ),
        (
            link.clone(),
            true,
            "link.jsonl is a symlink, not followed".into(),
        ),
        (hard.clone(), true, "hard.jsonl has 2 hard links".into()),
    ] {
        let out = scenario
            .command()
            .env("VRAMSCOPE_DIR", scenario.dir().join("no-channels"))
            .args(["record", "--duration", "0.2s", "-o"])
            .arg(&file)
            .args(force.then_some("--force"))
            .output()
            .expect("run vramscope record");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {err}", file.display());
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with(&format!("vramscope: cannot record to {}: ", file.display()))
                && err.trim_end().ends_with(&why),
            "wanted {why:?}: {err}"
        );
    }
    assert!(!theirs.join("run.jsonl").exists());
    assert_eq!(
        std::fs::read_to_string(&target).expect("read"),
        "root's own"
    );
}
