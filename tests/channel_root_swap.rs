//! Root reads every user's channels, and asks their writers for snapshots (the one write a
//! reader makes: 8 bytes in the control block). A user who swaps their channel directory for
//! a symlink to a folder of root's must not get root to read, or write into, root's channel
//! there: the directory is opened once without following, checked on its descriptor, and the
//! file opened relative to it. Run as root against a user the test makes.

#[path = "common/users.rs"]
mod users;

use std::fs;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use users::TestUser;
use vramscope::channel::layout::{control, flags};
use vramscope::channel::{Capacities, Channel, Policy, Writer, WriterConfig, discover};

fn writer(dir: &Path) -> Writer {
    Writer::create(WriterConfig {
        flags: flags::SITES,
        dir: Some(dir.to_path_buf()),
        capacities: Capacities {
            devices: 1,
            strings: 4,
            samples: 8,
            events: 4,
        },
        ..WriterConfig::default()
    })
    .expect("writer")
}

fn requests(path: &Path) -> u64 {
    let mut word = [0u8; 8];
    fs::File::open(path)
        .expect("open")
        .read_exact_at(&mut word, control::SNAPSHOT_REQUESTS as u64)
        .expect("read");
    u64::from_le_bytes(word)
}

struct Setup {
    _top: tempfile::TempDir,
    user: TestUser,
    /// `vramscope-<uid>`, the user's; and root's folder beside it.
    theirs: std::path::PathBuf,
    roots: std::path::PathBuf,
    /// The channel's name, the same in both folders.
    name: std::ffi::OsString,
    _writers: (Writer, Writer),
}

/// A sticky shared folder like /dev/shm, with the user's channel directory and a root-owned
/// one, each holding a live channel of the same name.
fn setup() -> Option<Setup> {
    let user = TestUser::create()?;
    let top = tempfile::Builder::new()
        .prefix("vsc-swap-")
        .tempdir()
        .expect("tempdir");
    fs::set_permissions(top.path(), fs::Permissions::from_mode(0o1777)).expect("chmod");
    let roots = top.path().join("roots");
    fs::create_dir(&roots).expect("mkdir");
    fs::set_permissions(&roots, fs::Permissions::from_mode(0o700)).expect("chmod");
    let root_writer = writer(&roots);
    let name = root_writer.path().file_name().expect("name").to_os_string();
    let theirs = top.path().join(format!("vramscope-{}", user.uid));
    fs::create_dir(&theirs).expect("mkdir");
    fs::set_permissions(&theirs, fs::Permissions::from_mode(0o700)).expect("chmod");
    // The same name in the user's folder: a copy of root's file, then given to them.
    let user_writer = writer(&theirs);
    fs::rename(user_writer.path(), theirs.join(&name)).expect("rename");
    user.give(&theirs.join(&name));
    user.give(&theirs);
    Some(Setup {
        _top: top,
        user,
        theirs,
        roots,
        name,
        _writers: (root_writer, user_writer),
    })
}

fn root() -> Policy {
    Policy {
        euid: 0,
        from_start: false,
    }
}

#[test]
fn a_channel_directory_swapped_for_a_symlink_is_refused() {
    let Some(s) = setup() else {
        eprintln!("SKIPPED: needs root and useradd");
        return;
    };
    let path = s.theirs.join(&s.name);
    assert!(
        Channel::open(&path, &root()).is_ok(),
        "the user's own channel"
    );
    fs::rename(&s.theirs, s.theirs.with_extension("real")).expect("rename");
    std::os::unix::fs::symlink(&s.roots, &s.theirs).expect("symlink");
    let refused = Channel::open(&path, &root()).err().expect("refused");
    assert!(
        refused.reason.ends_with("is a symlink"),
        "{}",
        refused.reason
    );
    let err = vramscope::channel::request_snapshot(&path, 0).expect_err("refused");
    assert!(err.ends_with("is a symlink"), "{err}");
    let err = discover::list(&s.theirs, 0).expect_err("refused");
    assert!(err.ends_with("is a symlink"), "{err}");
    assert_eq!(requests(&s.roots.join(&s.name)), 0, "root's file untouched");
}

/// The user flips their directory between itself and a symlink to root's folder as fast as a
/// shell can, for a bounded time, while root opens the channel and asks for snapshots.
#[test]
fn a_directory_flipped_in_a_loop_never_leads_root_to_its_own_file() {
    let Some(s) = setup() else {
        eprintln!("SKIPPED: needs root and useradd");
        return;
    };
    let top = s.theirs.parent().expect("parent");
    let mine = s
        .theirs
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    let script = format!(
        "cd {top} && end=$(( $(date +%s) + 20 )); while [ $(date +%s) -lt $end ]; do \
         mv {mine} {mine}.real; ln -s roots {mine}; rm {mine}; mv {mine}.real {mine}; done",
        top = top.display()
    );
    let mut flipper: Child = s
        .user
        .command("sh")
        .args(["-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("flipper");
    let root_file = s.roots.join(&s.name);
    let root_id = {
        let m = fs::metadata(&root_file).expect("stat");
        (m.dev(), m.ino())
    };
    let path = s.theirs.join(&s.name);
    let (mut opened, mut asked, mut refused) = (0, 0, 0);
    // A fixed time rather than a count: the swapped state is a small part of the loop.
    let deadline = Instant::now() + Duration::from_secs(4);
    while Instant::now() < deadline {
        match Channel::open(&path, &root()) {
            Ok(channel) => {
                let (_, file) = channel.file_id();
                assert_ne!(
                    file, root_id,
                    "root opened its own channel through the user's symlink"
                );
                opened += 1;
            }
            Err(_) => refused += 1,
        }
        if vramscope::channel::request_snapshot(&path, 0).is_ok() {
            asked += 1;
        }
    }
    let _ = flipper.kill();
    let _ = flipper.wait();
    assert_eq!(requests(&root_file), 0, "root wrote into its own file");
    // The race was run: root reached the user's own file many times, and met the swap.
    assert!(
        opened > 0 && asked > 0 && refused > 0,
        "opened {opened}, asked {asked}, refused {refused}"
    );
    // Wherever the flipper left it (not through the symlink it may have left in its place).
    let theirs = if fs::symlink_metadata(&s.theirs).is_ok_and(|m| m.is_dir()) {
        s.theirs.join(&s.name)
    } else {
        s.theirs.with_extension("real").join(&s.name)
    };
    assert_eq!(
        requests(&theirs),
        asked,
        "each request landed in the user's file"
    );
}
