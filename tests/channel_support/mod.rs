//! Shared by the channel tests: private channel directories, writers with small rings, and
//! raw edits of channel files (a test owns its files and may rewrite any byte).

#![allow(
    dead_code,
    reason = "shared by several test crates, each of which uses a different part"
)]

use std::fs::{self, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use vramscope::channel::{Capacities, Policy, Writer, WriterConfig};

/// A fresh 0700 directory, on tmpfs when there is one (as channels normally are).
pub fn private_dir() -> tempfile::TempDir {
    let base = if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let dir = tempfile::Builder::new()
        // Not "vramscope-": a root monitor watches every /dev/shm/vramscope-* directory.
        .prefix("vsc-test-")
        .tempdir_in(base)
        .expect("temporary directory");
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700)).expect("chmod 0700");
    dir
}

/// Field 22 of `/proc/<pid>/stat`, parsed here rather than by the crate so a writer's header
/// is checked against an independent reading.
pub fn proc_starttime(pid: u32) -> u64 {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let rest = &stat[stat.rfind(')').expect(")") + 1..];
    rest.split_whitespace()
        .nth(19)
        .expect("field 22")
        .parse()
        .expect("number")
}

pub fn config(dir: &Path) -> WriterConfig {
    WriterConfig {
        dir: Some(dir.to_path_buf()),
        ..WriterConfig::default()
    }
}

pub fn small(devices: u32, strings: u32, samples: u32, events: u32) -> Capacities {
    Capacities {
        devices,
        strings,
        samples,
        events,
    }
}

/// A writer in `dir` with the given capacities.
pub fn writer(dir: &Path, caps: Capacities) -> Writer {
    Writer::create(WriterConfig {
        capacities: caps,
        ..config(dir)
    })
    .expect("writer")
}

pub fn from_start() -> Policy {
    Policy {
        from_start: true,
        ..Policy::current()
    }
}

/// Overwrites bytes of a channel file in place, as a buggy or hostile writer would.
pub fn poke(path: &Path, off: u64, bytes: &[u8]) {
    let f = OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open for poke");
    f.write_all_at(bytes, off).expect("poke");
}

pub fn poke_u64(path: &Path, off: usize, v: u64) {
    poke(path, off as u64, &v.to_le_bytes());
}

pub fn poke_u32(path: &Path, off: usize, v: u32) {
    poke(path, off as u64, &v.to_le_bytes());
}

/// Writes `bytes` as a new 0600 file `name` in `dir` (no writer holds its lock).
pub fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    let _ = fs::remove_file(&path);
    let f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .expect("create file");
    f.write_all_at(bytes, 0).expect("write file");
    path
}
