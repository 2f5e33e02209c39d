//! Ended channels of other users, as root: the monitor reads them but removes only its own
//! user's; `vramscope clean --all-users` removes the rest and names each file. And a live
//! writer in a directory of junk is still shown. The binary looks for users' directories in
//! a folder of the test's own (`VRAMSCOPE_SHM`), never in the machine's /dev/shm.

mod channel_support;
mod common;

use channel_support::{poke_u64, small, write_file, writer};
use common::{Scenario, h100, stderr, stdout};
use serde_json::{Value, json};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use vramscope::channel::Policy;
use vramscope::channel::layout::header;

/// A nobody's uid, for "another user".
const THEIRS: u32 = 65534;

/// `<shm>/vramscope-<uid>`, 0700 and owned by `uid`.
fn user_dir(shm: &Path, uid: u32) -> PathBuf {
    let dir = shm.join(format!("vramscope-{uid}"));
    fs::create_dir_all(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&dir, Some(uid), Some(uid)).unwrap();
    dir
}

/// A copy of a live writer's file: no writer holds it, so it reads as crashed, and its
/// heartbeat is set past our clock (from before a reboot), the oldest a heartbeat can be.
fn ended_image(scratch: &Path) -> Vec<u8> {
    let live = writer(scratch, small(1, 0, 8, 8));
    poke_u64(live.path(), header::HEARTBEAT, u64::MAX / 2);
    fs::read(live.path()).unwrap()
}

#[test]
fn as_root_the_monitor_leaves_other_users_ended_files_and_clean_all_users_removes_them() {
    if Policy::current().euid != 0 {
        eprintln!("note: not root, the other-users case is not run");
        return;
    }
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let shm = scenario.dir().join("shm");
    let scratch = scenario.dir().join("scratch");
    let image = ended_image(&scratch);
    let theirs = write_file(&user_dir(&shm, THEIRS), "11-11.vsc", &image);
    std::os::unix::fs::chown(&theirs, Some(THEIRS), Some(THEIRS)).unwrap();
    let ours = write_file(&user_dir(&shm, 0), "22-22.vsc", &image);
    let run = |args: &[&str]| {
        let out = scenario
            .command()
            .env("VRAMSCOPE_SHM", &shm)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        stdout(&out)
    };

    // The monitor reads both (root reads every user's channels), and cleans up ours only.
    let doc: Value = serde_json::from_str(&run(&["--json"])).unwrap();
    let files: Vec<&str> = doc["allocators"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["file"].as_str())
        .collect();
    assert_eq!(files.len(), 2, "{doc}");
    assert!(theirs.exists(), "another user's ended file stays");
    assert!(!ours.exists(), "our own ended file goes");

    let ours = write_file(&shm.join("vramscope-0"), "22-22.vsc", &image);
    let text = run(&["clean"]);
    assert_eq!(
        text,
        format!(
            "removed {}\n1 ended channel file(s) of this user's removed\n",
            ours.display()
        )
    );
    assert!(theirs.exists(), "clean without --all-users leaves theirs");

    let text = run(&["clean", "--all-users"]);
    assert_eq!(
        text,
        format!(
            "removed {}\n1 ended channel file(s) of any user's removed\n",
            theirs.display()
        )
    );
    assert!(!theirs.exists());
}

#[test]
fn a_live_writer_among_thousands_of_junk_files_is_shown() {
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let channels = scenario.dir().join("channels");
    let live = writer(&channels, small(1, 0, 8, 8));
    for i in 0..5000 {
        write_file(&channels, &format!("junk-{i}"), b"");
    }
    // And more channel-named junk than one directory's share.
    for i in 0..4100 {
        write_file(&channels, &format!("junk-{i}.vsc"), b"");
    }
    let doc = scenario.json_reading(&channels);
    let file = live
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        doc["allocators"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["file"] == json!(file)),
        "the live writer is shown"
    );
    let rejected = doc["rejected_channels"].as_array().unwrap();
    let note = format!(
        "{}: 5 channel files not read (at most 4096 per directory)",
        channels.display()
    );
    assert_eq!(rejected[0], json!(note));
    drop(live);
}

/// Memory snapshots (issue 14) are tens of MB each, in `/dev/shm` host memory: once their
/// channel is gone and an hour has passed, `clean` (and the monitor) removes them; a fresh
/// one stays for `vramscope sites` and the report, as does one whose writer still has its
/// channel, and a symlink under a snapshot's name is never followed nor removed.
#[test]
fn clean_removes_old_snapshots_of_gone_channels_only() {
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let shm = scenario.dir().join("shm");
    let euid = Policy::current().euid;
    let dir = user_dir(&shm, euid);
    let live = writer(&dir, small(1, 0, 8, 8));
    let live_name = live
        .path()
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(2 * 3600);
    let snapshot = |name: &str, old: bool| {
        let path = write_file(&dir, name, b"not read: only its name and age count");
        if old {
            fs::File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(hour_ago)
                .unwrap();
        }
        path
    };
    let orphan_old = snapshot("33-33.vsc.snap-1-peak.pickle", true);
    let orphan_new = snapshot("44-44.vsc.snap-2-oom.pickle", false);
    let of_live = snapshot(&format!("{live_name}.snap-1-request.pickle"), true);
    let target = scenario.dir().join("precious");
    fs::write(&target, "x").unwrap();
    let link = dir.join("55-55.vsc.snap-1-peak.pickle");
    std::os::unix::fs::symlink(&target, &link).unwrap();

    let out = scenario
        .command()
        .env("VRAMSCOPE_SHM", &shm)
        .arg("clean")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        format!(
            "removed {}\n0 ended channel file(s) and 1 memory snapshot(s) of ended writers of this user's removed\n",
            orphan_old.display()
        )
    );
    assert!(!orphan_old.exists());
    assert!(orphan_new.exists(), "a fresh snapshot stays for an hour");
    assert!(of_live.exists(), "a live writer's snapshot stays");
    assert!(fs::symlink_metadata(&link).is_ok() && target.exists());
    drop(live);
}

/// Issue 28 §1.5: `clean --all-users` listed and unlinked through each user's directory by
/// path, so a user who kept swapping their `vramscope-<uid>` for a symlink got root to delete
/// a root-owned channel-shaped file elsewhere. Here a real other user flips it in a loop
/// while root cleans again and again: root's file must survive every run.
#[test]
fn as_root_clean_all_users_never_follows_a_users_swapped_directory() {
    let Some(user) = common::users::TestUser::create() else {
        eprintln!("SKIPPED: needs root and useradd to race a real other user");
        return;
    };
    if !common::cc_available() {
        eprintln!("SKIPPED: needs cc for the flipper");
        return;
    }
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let top_dir = tempfile::tempdir().unwrap();
    let top = top_dir.path();
    fs::set_permissions(top, fs::Permissions::from_mode(0o755)).unwrap();
    let image = ended_image(&top.join("scratch"));
    // /dev/shm's own shape: root's, sticky, anyone may make a folder in it.
    let shm = top.join("shm");
    fs::create_dir(&shm).unwrap();
    fs::set_permissions(&shm, fs::Permissions::from_mode(0o1777)).unwrap();
    // Root's folder with a file a clean would remove were it in the user's directory.
    let roots = top.join("roots");
    fs::create_dir(&roots).unwrap();
    fs::set_permissions(&roots, fs::Permissions::from_mode(0o700)).unwrap();
    let precious = write_file(&roots, "11-11.vsc", &image);
    // The user's real directory, swapped in and out under their `vramscope-<uid>` name.
    let name = shm.join(format!("vramscope-{}", user.uid));
    let held = shm.join(format!(".vramscope-{}.held", user.uid));
    fs::create_dir(&held).unwrap();
    fs::set_permissions(&held, fs::Permissions::from_mode(0o700)).unwrap();
    user.give(&held);
    let clean = || {
        let out = scenario
            .command()
            .env("VRAMSCOPE_SHM", &shm)
            .args(["clean", "--all-users"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };

    let flipper = common::race::flipper(top);
    let mut flip = common::race::Flip::start(&user, &flipper, &name, &held, &roots, 3);
    let mut runs = 0;
    while flip.running() {
        let said = clean();
        runs += 1;
        assert!(
            precious.exists(),
            "run {runs} removed root's file through the user's symlink: {said}"
        );
    }
    let rounds = flip.finish();
    eprintln!("clean --all-users: {runs} runs as root while the user flipped {rounds} times");
    assert!(rounds > 0 && runs >= 3, "the race ran");

    // Their real directory is cleaned as before: their ended file there goes.
    let theirs = write_file(&name, "22-22.vsc", &image);
    user.give(&theirs);
    assert_eq!(
        clean(),
        format!(
            "removed {}\n1 ended channel file(s) of any user's removed\n",
            theirs.display()
        )
    );
    assert!(precious.exists());
}
