//! Discovery (§1, §6): listing a channel directory, refusing untrusted ones, removing stale
//! files, finding a container's channels through `/proc/<pid>/root`, and mapping a channel's
//! namespace pid back to a host pid.

mod channel_support;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use channel_support::{poke_u64, private_dir, small, write_file, writer};
use vramscope::channel::cleaning::{self, Owners};
use vramscope::channel::discover::{self, ChannelFile};
use vramscope::channel::layout::header;
use vramscope::channel::{Exit, Policy, monotonic_ns};

fn euid() -> u32 {
    Policy::current().euid
}

/// A child process killed and reaped when dropped.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn listing_finds_channels_and_skips_dot_names_and_other_files() {
    let dir = private_dir();
    for name in [
        "12-34.vsc",
        ".12-34.tmp",
        ".hidden.vsc",
        "notes.txt",
        "odd.vsc",
        "5-6.vsc.bak",
    ] {
        write_file(dir.path(), name, b"x");
    }
    let found = discover::list(dir.path(), euid()).expect("list");
    assert_eq!(
        found,
        [
            ChannelFile {
                path: dir.path().join("12-34.vsc"),
                name: Some((12, 34)),
            },
            ChannelFile {
                path: dir.path().join("odd.vsc"),
                name: None,
            },
        ]
    );
}

#[test]
fn untrusted_directories_are_refused() {
    let base = private_dir();
    let loose = base.path().join("loose");
    fs::create_dir(&loose).expect("mkdir");
    fs::set_permissions(&loose, fs::Permissions::from_mode(0o775)).expect("chmod");
    let err = discover::list(&loose, euid()).expect_err("group-writable");
    assert!(
        err.ends_with("has mode 0775, allowing group/other access"),
        "{err}"
    );

    let link = base.path().join("link");
    std::os::unix::fs::symlink(base.path(), &link).expect("symlink");
    let err = discover::list(&link, euid()).expect_err("symlink");
    assert!(err.ends_with("is a symlink"), "{err}");

    let stranger = if euid() == 4242 { 4243 } else { 4242 };
    let err = discover::list(base.path(), stranger).expect_err("another owner");
    assert!(
        err.ends_with(&format!("is owned by uid {}, not {stranger}", euid())),
        "{err}"
    );

    // Readable by group and others but not writable: acceptable to read from.
    fs::set_permissions(&loose, fs::Permissions::from_mode(0o755)).expect("chmod");
    discover::list(&loose, euid()).expect("0755 is fine to read");
}

#[test]
fn stale_files_are_removed_only_when_ours_ended_and_old() {
    let dir = private_dir();
    let d = dir.path();
    // The machine may have booted less than an hour ago: a second of grace, beats 10 s old.
    let ttl = Duration::from_secs(1);
    let beat_10s_ago = monotonic_ns() - 10_000_000_000;

    let live = writer(d, small(1, 0, 8, 8));
    poke_u64(live.path(), header::HEARTBEAT, beat_10s_ago);
    let image = fs::read(live.path()).expect("image");
    let crashed_old = write_file(d, "1-1.vsc", &image);
    let crashed_fresh = write_file(d, "2-2.vsc", &image);
    poke_u64(&crashed_fresh, header::HEARTBEAT, monotonic_ns());
    let corrupt = write_file(d, "3-3.vsc", &image[..1000]);
    let temp_old = write_file(d, ".4-4.tmp", b"half made");
    let old = SystemTime::now() - Duration::from_secs(7200);
    fs::File::options()
        .write(true)
        .open(&temp_old)
        .expect("open")
        .set_modified(old)
        .expect("mtime");
    let temp_fresh = write_file(d, ".5-5.tmp", b"half made");
    let theirs = (euid() == 0).then(|| {
        let p = write_file(d, "6-6.vsc", &image);
        std::os::unix::fs::chown(&p, Some(65534), None).expect("chown");
        p
    });

    let mut removed = cleaning::remove_stale(d, euid(), ttl, Owners::Ours);
    removed.sort();
    assert_eq!(removed, [temp_old.clone(), crashed_old.clone()]);
    assert!(
        live.path().exists(),
        "a live writer's file stays, however old its heartbeat"
    );
    assert!(crashed_fresh.exists() && corrupt.exists() && temp_fresh.exists());
    if let Some(p) = &theirs {
        assert!(p.exists(), "another user's file stays, even for root");
        // Unless an administrator asks.
        let removed = cleaning::remove_stale(d, euid(), ttl, Owners::Everyone);
        assert_eq!(removed, std::slice::from_ref(p));
    }

    // With no grace at all, the recently crashed one and an error exit go too.
    let ended = writer(&d.join("sub"), small(1, 0, 8, 8));
    let kept = ended.path().to_path_buf();
    ended.finish(Exit::Error("boom".into())).expect("finish");
    let mut removed = cleaning::remove_stale(d, euid(), Duration::ZERO, Owners::Ours);
    removed.sort();
    assert_eq!(removed, [temp_fresh, crashed_fresh]);
    assert!(live.path().exists());
    let removed = cleaning::remove_stale(
        kept.parent().expect("dir"),
        euid(),
        Duration::ZERO,
        Owners::Ours,
    );
    assert_eq!(removed, [kept]);
    drop(live);
}

#[test]
fn a_containers_channel_directories_are_found_through_proc_root() {
    let outside = private_dir();
    let runtime = private_dir();
    fs::create_dir(runtime.path().join("vramscope")).expect("mkdir");
    let child = Command::new("sleep")
        .arg("30")
        .env("VRAMSCOPE_DIR", outside.path())
        .env("XDG_RUNTIME_DIR", runtime.path())
        .stdout(Stdio::null())
        .spawn()
        .expect("sleep");
    let child = Reaped(child);
    let pid = child.0.id();
    let root = PathBuf::from(format!("/proc/{pid}/root"));
    let inside = |p: &Path| root.join(p.strip_prefix("/").expect("absolute"));
    // Right after spawn the kernel may not have set up the new environment yet.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !fs::read_to_string(format!("/proc/{pid}/environ"))
        .is_ok_and(|e| e.contains("VRAMSCOPE_DIR="))
    {
        assert!(
            Instant::now() < deadline,
            "child environment never appeared"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let dirs = discover::container_dirs(pid);
    let from_env = [
        inside(outside.path()),
        inside(&runtime.path().join("vramscope")),
    ];
    for d in &from_env {
        assert!(dirs.contains(d), "{} missing from {dirs:?}", d.display());
    }
    // Everything else is the container's own /dev/shm/vramscope-*.
    let shm = root.join("dev/shm");
    for d in dirs.iter().filter(|d| !from_env.contains(d)) {
        let named = d
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("vramscope-"));
        assert!(
            d.parent() == Some(shm.as_path()) && named,
            "{}",
            d.display()
        );
    }
}

#[test]
fn a_pid_in_a_child_namespace_maps_back_to_its_host_pid() {
    let me = std::process::id();
    let own = discover::nspids(me).expect("own NSpid");
    assert_eq!(own.last(), Some(&u64::from(me)));

    let sleeper = Reaped(Command::new("sleep").arg("30").spawn().expect("sleep"));
    let pid = sleeper.0.id();
    let our_ns = fs::metadata("/proc/self/ns/pid").expect("ns").ino();
    let ns_pid = *discover::nspids(pid).expect("NSpid").last().expect("pid");
    assert_eq!(discover::host_pid(our_ns, ns_pid, [me, pid]), Some(pid));
    assert_eq!(
        discover::host_pid(our_ns, ns_pid + 1_000_000, [me, pid]),
        None
    );

    // A real pid namespace, when we may make one: the writer calls itself 1 there.
    let unshared = Command::new("unshare")
        .args(["--pid", "--fork", "sleep", "30"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let Ok(unshared) = unshared else {
        eprintln!("note: no unshare, the pid namespace case is not run");
        return;
    };
    let unshared = Reaped(unshared);
    let deadline = Instant::now() + Duration::from_secs(10);
    let inner = loop {
        let children = fs::read_to_string(format!(
            "/proc/{}/task/{}/children",
            unshared.0.id(),
            unshared.0.id()
        ))
        .unwrap_or_default();
        if let Some(p) = children
            .split_whitespace()
            .next()
            .and_then(|p| p.parse::<u32>().ok())
        {
            break Some(p);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let Some(inner) = inner else {
        eprintln!("note: unshare --pid is not permitted here, the namespace case is not run");
        return;
    };
    let inner_ns = fs::metadata(format!("/proc/{inner}/ns/pid"))
        .expect("ns")
        .ino();
    assert_ne!(inner_ns, our_ns);
    assert_eq!(
        discover::nspids(inner).expect("NSpid"),
        [u64::from(inner), 1]
    );
    assert_eq!(
        discover::host_pid(inner_ns, 1, [me, pid, inner]),
        Some(inner)
    );
    assert_eq!(discover::host_pid(our_ns, 1, [inner]), None);
    // Killing unshare leaves its child to init; make sure it goes too.
    // SAFETY: sends SIGKILL to the namespace's init, our grandchild.
    unsafe { libc::kill(inner as i32, libc::SIGKILL) };
}

#[test]
fn as_root_every_users_shm_directory_is_watched() {
    if euid() != 0 {
        eprintln!("note: not root, the all-users case is not run");
        return;
    }
    let pid = std::process::id();
    let real = PathBuf::from(format!("/dev/shm/vramscope-test-{pid}"));
    let link = PathBuf::from(format!("/dev/shm/vramscope-link-{pid}"));
    fs::create_dir(&real).expect("mkdir");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    let dirs = discover::channel_dirs(0);
    let _ = fs::remove_file(&link);
    let _ = fs::remove_dir(&real);
    assert!(dirs.contains(&real), "{dirs:?}");
    assert!(
        !dirs.contains(&link),
        "symlinks are never followed: {dirs:?}"
    );
}

#[test]
fn a_directory_full_of_junk_hides_no_channel_and_says_what_it_left_out() {
    let dir = private_dir();
    let d = dir.path();
    let live = writer(d, small(1, 0, 8, 8));
    // Junk that is no channel at all costs only its reading from the directory.
    for i in 0..5000 {
        write_file(d, &format!("junk-{i}"), b"");
    }
    let listing = discover::list_all(d, euid()).expect("list");
    let paths: Vec<&Path> = listing.files.iter().map(|f| f.path.as_path()).collect();
    assert_eq!(paths, [live.path()]);
    assert_eq!((listing.skipped, listing.skipped_note(d)), (0, None));

    // More `.vsc` files than are read: the live writer's is among those kept, the rest said.
    for i in 0..discover::MAX_FILES {
        write_file(d, &format!("junk-{i}.vsc"), b"");
    }
    let listing = discover::list_all(d, euid()).expect("list");
    assert_eq!(listing.files.len(), discover::MAX_FILES);
    assert!(listing.files.iter().any(|f| f.path == live.path()));
    assert_eq!(listing.skipped, 1);
    assert_eq!(
        listing.skipped_note(d),
        Some(format!(
            "{}: 1 channel files not read (at most {} per directory)",
            d.display(),
            discover::MAX_FILES
        ))
    );
    drop(live);
}
