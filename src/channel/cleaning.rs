//! Removing the files of writers long gone (§6): ended channels, leftovers of creations that
//! died half-way, and memory snapshots whose channel is gone.
//!
//! Root removes files in directories users own (`clean --all-users`, and its own files in
//! them for the monitor), so nothing here goes by path after a check: each channel directory
//! is opened once (a user's `vramscope-<uid>` relative to the `/dev/shm` descriptor, never
//! through a symlink), its owner and mode are checked on that descriptor, and every look,
//! open and unlink is relative to it. A user who swaps their directory for a symlink to
//! another folder meanwhile changes nothing: the descriptor still names the folder checked,
//! and an unlink there can remove only names in it.

use super::dir::{SHM_DIR_PREFIX, shm_root};
use super::discover::{MAX_FILES, candidate_dirs, parse_name};
use super::layout::{EXTENSION, TEMP_EXTENSION};
use super::model::Liveness;
use super::reader::{Channel, Policy};
use super::sys::{self, LockProbe};
use crate::safe_fs::{self, Dir, Kind, Stat, Trust};
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Whose ended channel files a cleaning pass removes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owners {
    /// Only those owned by the user cleaning: a monitor run as root reads every user's files
    /// but removes none of theirs.
    Ours,
    /// Every user's, for root when an administrator asks (`vramscope clean --all-users`).
    Everyone,
}

/// How old an ended writer's files are when `remove_stale` removes them, for the monitor and
/// `vramscope clean` alike (§6: the spec's default).
pub const STALE_AFTER: Duration = Duration::from_secs(3600);

const GROUP_OR_OTHER_WRITE: u32 = 0o022;

/// Why a channel directory's descriptor may not be cleaned in, if it may not: not a
/// directory, not `owner`'s (when one is required), or writable by group or others.
fn untrusted(st: &Stat, owner: Option<u32>) -> Option<String> {
    if st.kind != Kind::Dir {
        return Some("is not a directory".into());
    }
    if let Some(owner) = owner.filter(|o| *o != st.uid) {
        return Some(format!("is owned by uid {}, not {owner}", st.uid));
    }
    (st.mode & GROUP_OR_OTHER_WRITE != 0)
        .then(|| format!("has mode {:04o}, allowing group/other writes", st.mode))
}

/// Opens the channel directory `path` once and checks it on its descriptor: as root the
/// folders above it are walked from `/` and checked, and it is opened relative to its parent
/// without following it; for another user the kernel resolves the folders (the user's own),
/// and the last is not followed. Its owner must be `euid` unless that is root, who cleans in
/// every user's directory.
pub fn open_channel_dir(path: &Path, euid: u32) -> io::Result<Dir> {
    let dir = if euid == 0 {
        let (parent, name) = safe_fs::walk_parent(path, Trust::OwnedBy(0))?;
        parent.sub(&name)?
    } else {
        Dir::open(path)?
    };
    match untrusted(&dir.stat()?, (euid != 0).then_some(euid)) {
        None => Ok(dir),
        Some(why) => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} {why}", path.display()),
        )),
    }
}

/// The directories a cleaning pass by `euid` works in, each opened once and checked: the
/// candidates (`$VRAMSCOPE_DIR`, `<shm>/vramscope-<euid>`, `$XDG_RUNTIME_DIR/vramscope`), and
/// for root every user's `<shm>/vramscope-<uid>`, opened relative to `<shm>`'s descriptor and
/// owned by that uid. One directory is listed once however it was reached.
pub fn cleaning_dirs(euid: u32) -> Vec<Dir> {
    let mut dirs: Vec<Dir> = Vec::new();
    let mut seen: Vec<(u64, u64)> = Vec::new();
    let mut add = |dir: Dir| {
        if let Ok(st) = dir.stat()
            && !seen.contains(&(st.dev, st.ino))
        {
            seen.push((st.dev, st.ino));
            dirs.push(dir);
        }
    };
    for path in candidate_dirs(euid) {
        if let Ok(dir) = open_channel_dir(&path, euid) {
            add(dir);
        }
    }
    if euid == 0 {
        users_shm_dirs(&shm_root()).into_iter().for_each(add);
    }
    dirs
}

/// Every `vramscope-<uid>` directory of `shm` that `uid` owns, opened relative to `shm`'s own
/// descriptor (`shm` walked and checked from `/`), sorted by name; at most `MAX_FILES`.
fn users_shm_dirs(shm: &Path) -> Vec<Dir> {
    let Ok(shm) = safe_fs::walk(shm, Trust::OwnedBy(0)) else {
        return Vec::new();
    };
    let Ok(entries) = shm.entries(usize::MAX) else {
        return Vec::new();
    };
    let mut named: Vec<(std::ffi::OsString, u32)> = entries
        .into_iter()
        .filter_map(|e| {
            let uid = e
                .name
                .as_bytes()
                .strip_prefix(SHM_DIR_PREFIX.as_bytes())
                .and_then(|n| std::str::from_utf8(n).ok())
                .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|n| n.parse().ok())?;
            Some((e.name, uid))
        })
        .take(MAX_FILES)
        .collect();
    named.sort();
    named
        .into_iter()
        .filter_map(|(name, uid)| {
            let dir = shm.sub(&name).ok()?;
            untrusted(&dir.stat().ok()?, Some(uid))
                .is_none()
                .then_some(dir)
        })
        .collect()
}

/// [`remove_stale_in`] the channel directory at `path`, opened once by [`open_channel_dir`];
/// nothing when it cannot be opened or may not be trusted.
pub fn remove_stale(path: &Path, euid: u32, ttl: Duration, owners: Owners) -> Vec<PathBuf> {
    match open_channel_dir(path, euid) {
        Ok(dir) => remove_stale_in(&dir, euid, ttl, owners),
        Err(_) => Vec::new(),
    }
}

/// Removes the channel files in `dir` of `owners` whose writer has ended and whose
/// heartbeat is older than `ttl` (§6; the spec's default is an hour), dot-named leftovers
/// of creations that died half-way, as old and unlocked, and memory snapshots
/// (`<channel>.snap-*.pickle`, §8) whose channel is gone and which are older than `ttl`:
/// tens of MB each, in `/dev/shm` they hold the host's memory until someone removes them,
/// and the hour leaves `vramscope sites` and a report time to read them after a clean exit
/// (which removes the channel at once). At most `MAX_FILES` of each kind are looked at per
/// pass. Everything is relative to `dir`'s descriptor. Returns what it removed.
pub fn remove_stale_in(dir: &Dir, euid: u32, ttl: Duration, owners: Owners) -> Vec<PathBuf> {
    let ttl_ns = u64::try_from(ttl.as_nanos()).unwrap_or(u64::MAX);
    let mut removed = Vec::new();
    let Ok(entries) = dir.entries(usize::MAX) else {
        return removed;
    };
    let now = sys::monotonic_ns();
    let owner_ok = |uid: u32| uid == euid || owners == Owners::Everyone;
    let (mut temps, mut channels, mut snapshots) = (0, 0, 0);
    for entry in entries {
        let name = entry.name.as_os_str();
        let text = name.to_string_lossy();
        let stale = if text.starts_with('.') {
            let temp = text.ends_with(&format!(".{TEMP_EXTENSION}"));
            temps += usize::from(temp);
            (temp && temps <= MAX_FILES)
                .then(|| stale_temp(dir, name, owner_ok, ttl))
                .flatten()
        } else if text.ends_with(&format!(".{EXTENSION}")) {
            channels += 1;
            (channels <= MAX_FILES)
                .then(|| stale_channel(dir, name, euid, owner_ok, now, ttl_ns))
                .flatten()
        } else if let Some(channel) = snapshot_channel(&text) {
            snapshots += 1;
            let orphan = matches!(
                dir.stat_at(OsStr::new(channel)),
                Err(e) if e.kind() == io::ErrorKind::NotFound
            );
            (snapshots <= MAX_FILES && orphan)
                .then(|| stale_file(dir, name, owner_ok, ttl))
                .flatten()
        } else {
            None
        };
        if let Some(id) = stale {
            // Only unlink if the name still refers to the file we judged.
            let same = dir.stat_at(name).is_ok_and(|st| (st.dev, st.ino) == id);
            if same && dir.remove_file(name).is_ok() {
                removed.push(dir.shown().join(name));
            }
        }
    }
    removed
}

/// The channel file a memory snapshot's name belongs to: `<channel>.vsc.snap-<seq>-<reason>.pickle`.
fn snapshot_channel(name: &str) -> Option<&str> {
    let (channel, rest) = name.split_once(".snap-")?;
    (rest.ends_with(".pickle") && parse_name(channel).is_some()).then_some(channel)
}

/// Whether `st` was last changed more than `ttl` ago (its whole second: at most a second
/// early, against an hour).
fn older_than(st: &Stat, ttl: Duration) -> bool {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(st.mtime).is_ok_and(|mtime| now.saturating_sub(Duration::from_secs(mtime)) > ttl)
}

/// `(dev, ino)` of a plain file of an owner we clean for, last changed more than `ttl` ago.
fn stale_file(
    dir: &Dir,
    name: &OsStr,
    owner_ok: impl Fn(u32) -> bool,
    ttl: Duration,
) -> Option<(u64, u64)> {
    let st = dir.stat_at(name).ok()?;
    (st.kind == Kind::File && owner_ok(st.uid) && older_than(&st, ttl)).then_some((st.dev, st.ino))
}

/// `(dev, ino)` of a channel of an owner we clean for that ended more than `ttl_ns` ago.
fn stale_channel(
    dir: &Dir,
    name: &OsStr,
    euid: u32,
    owner_ok: impl Fn(u32) -> bool,
    now: u64,
    ttl_ns: u64,
) -> Option<(u64, u64)> {
    let policy = Policy {
        euid,
        from_start: false,
    };
    let mut channel = Channel::open_at(dir, name, &policy).ok()?;
    let (uid, id) = channel.file_id();
    if !owner_ok(uid) {
        return None;
    }
    let update = channel.poll().ok()?;
    if !matches!(update.liveness, Liveness::Ended { .. }) {
        return None;
    }
    let last = update
        .heartbeat_ns
        .unwrap_or(channel.identity().created_monotonic_ns);
    // A heartbeat ahead of our clock is from before a reboot: as old as it gets.
    let age = if last <= now { now - last } else { u64::MAX };
    (age > ttl_ns).then_some(id)
}

/// `(dev, ino)` of a leftover temporary file of an owner we clean for, unlocked and
/// unmodified for `ttl`.
fn stale_temp(
    dir: &Dir,
    name: &OsStr,
    owner_ok: impl Fn(u32) -> bool,
    ttl: Duration,
) -> Option<(u64, u64)> {
    let file = dir.open_read(name).ok()?;
    let st = Stat::of(file.as_fd()).ok()?;
    if st.kind != Kind::File || !owner_ok(st.uid) {
        return None;
    }
    (older_than(&st, ttl) && sys::probe_lock(file.as_raw_fd()) == LockProbe::Free)
        .then_some((st.dev, st.ino))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_names_name_their_channel() {
        assert_eq!(
            snapshot_channel("123-456.vsc.snap-3-peak.pickle"),
            Some("123-456.vsc")
        );
        assert_eq!(snapshot_channel("123-456.vsc.snap-3-peak.pickle.tmp"), None);
        assert_eq!(snapshot_channel("notes.snap-3-peak.pickle"), None);
        assert_eq!(snapshot_channel("123-456.vsc"), None);
    }
}
