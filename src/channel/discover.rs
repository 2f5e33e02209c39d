//! Finding channels: the directories to watch, the `*.vsc` files in them, channels inside
//! containers and their host pids; removal of files whose writers are long gone (§6) is
//! `cleaning`'s.
//! Directories are checked without following symlinks; files are checked again, and fully,
//! by `Channel::open`.

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::dir::{SHM_DIR_PREFIX, env_dir, open_channel_dir, runtime_dir, shm_root, user_shm_dir};
use super::layout::EXTENSION;
use super::sys;

/// Channel files (names ending `.vsc`) taken from one directory at most, so a directory
/// full of junk costs bounded time: each is opened and checked. Other names cost only their
/// reading from the directory, and every entry is read, so a live writer is never hidden
/// behind them.
pub const MAX_FILES: usize = 4096;

/// A channel file found in a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelFile {
    pub path: PathBuf,
    /// Pid and start time from the name, when it has the spec's form.
    pub name: Option<(u32, u64)>,
}

/// `<pid>-<starttime>.vsc` as `(pid, starttime)`.
pub fn parse_name(name: &str) -> Option<(u32, u64)> {
    let stem = name.strip_suffix(EXTENSION)?.strip_suffix('.')?;
    let (pid, start) = stem.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(pid) || !digits(start) {
        return None;
    }
    Some((pid.parse().ok()?, start.parse().ok()?))
}

/// The directories where channels readable by `euid` may be: `$VRAMSCOPE_DIR`,
/// `/dev/shm/vramscope-<euid>` and `$XDG_RUNTIME_DIR/vramscope`, and for root every
/// `/dev/shm/vramscope-*` (`/dev/shm` being `$VRAMSCOPE_SHM` where set, see `shm_root`).
/// Only those that exist as directories (not symlinks) are returned.
pub fn channel_dirs(euid: u32) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut add = |p: PathBuf| {
        // path-ok: a hint only, for the list of folders to watch: each is opened by open_channel_dir before anything in it is read.
        let is_dir = fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir());
        if is_dir && !dirs.contains(&p) {
            dirs.push(p);
        }
    };
    candidate_dirs(euid).into_iter().for_each(&mut add);
    if euid == 0 {
        shm_channel_dirs(&shm_root()).into_iter().for_each(add);
    }
    dirs
}

/// `$VRAMSCOPE_DIR`, `/dev/shm/vramscope-<euid>` and `$XDG_RUNTIME_DIR/vramscope`, whether
/// they exist or not: where a channel directory may appear.
pub fn candidate_dirs(euid: u32) -> Vec<PathBuf> {
    [
        env_dir(),
        Some(user_shm_dir(&shm_root(), euid)),
        runtime_dir(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The `vramscope-*` entries of a `/dev/shm` directory, sorted; at most `MAX_FILES` of them.
/// Every entry is looked at: PyTorch fills `/dev/shm` with files of its own.
fn shm_channel_dirs(shm: &Path) -> Vec<PathBuf> {
    // path-ok: names only, from /dev/shm (root's, sticky); each folder named is opened by open_channel_dir.
    let mut dirs: Vec<PathBuf> = fs::read_dir(shm)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name()
                .as_bytes()
                .starts_with(SHM_DIR_PREFIX.as_bytes())
        })
        .take(MAX_FILES)
        .map(|e| e.path())
        .collect();
    dirs.sort();
    dirs
}

/// Why `dir` may not be trusted to hold channels for `euid`, if it may not: a symlink, not a
/// directory, another owner (unless we are root), or writable by group or others.
pub fn check_dir(dir: &Path, euid: u32) -> Result<(), String> {
    open_channel_dir(dir, euid).map(|_| ())
}

/// The channel files of a directory, and how many more there were than `MAX_FILES`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Listing {
    pub files: Vec<ChannelFile>,
    /// Channel files left out; the caller says so.
    pub skipped: usize,
}

impl Listing {
    /// What was left out of `dir`, as one line, when anything was.
    pub fn skipped_note(&self, dir: &Path) -> Option<String> {
        (self.skipped > 0).then(|| {
            format!(
                "{}: {} channel files not read (at most {MAX_FILES} per directory)",
                dir.display(),
                self.skipped
            )
        })
    }
}

/// The `*.vsc` files in `dir` (names starting with `.` are never read), after checking `dir`.
pub fn list(dir: &Path, euid: u32) -> Result<Vec<ChannelFile>, String> {
    list_all(dir, euid).map(|l| l.files)
}

/// Every entry of `dir` is read; of its `*.vsc` files at most `MAX_FILES` are kept, those
/// whose name's pid is a live process first (a writer's file among old or junk ones).
pub fn list_all(dir: &Path, euid: u32) -> Result<Listing, String> {
    // Listed through the descriptor that was checked, not the path again.
    let opened = open_channel_dir(dir, euid)?;
    let entries = opened
        .entries(usize::MAX)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files: Vec<ChannelFile> = entries
        .into_iter()
        .filter_map(|e| {
            let name = e.name.to_str()?.to_string();
            let ext = Path::new(&name).extension()?;
            (!name.starts_with('.') && ext == EXTENSION).then(|| ChannelFile {
                path: dir.join(&name),
                name: parse_name(&name),
            })
        })
        .collect();
    let mut skipped = 0;
    if files.len() > MAX_FILES {
        // Only when over the limit: one stat of /proc per file.
        files.sort_by_cached_key(|f| !f.name.is_some_and(|(pid, _)| pid_exists(pid)));
        skipped = files.len() - MAX_FILES;
        files.truncate(MAX_FILES);
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Listing { files, skipped })
}

/// Whether a process `pid` exists in our pid namespace.
fn pid_exists(pid: u32) -> bool {
    // path-ok: /proc/PID is the kernel's, named by a number.
    pid != 0 && fs::symlink_metadata(format!("/proc/{pid}")).is_ok()
}

/// Channel directories inside the container of host process `host_pid`, seen through
/// `/proc/<pid>/root`: its `/dev/shm/vramscope-*`, and its `$VRAMSCOPE_DIR` and
/// `$XDG_RUNTIME_DIR/vramscope` when its environment is readable to us.
pub fn container_dirs(host_pid: u32) -> Vec<PathBuf> {
    let root = PathBuf::from(format!("/proc/{host_pid}/root"));
    let mut dirs = shm_channel_dirs(&root.join("dev/shm"));
    // path-ok: /proc/PID/environ is the kernel's copy of the process's start environment, bounded by it.
    let environ = fs::read(format!("/proc/{host_pid}/environ")).unwrap_or_default();
    for var in environ.split(|&b| b == 0) {
        let text = String::from_utf8_lossy(var);
        let inside = if let Some(v) = text.strip_prefix("VRAMSCOPE_DIR=") {
            PathBuf::from(v)
        } else if let Some(v) = text.strip_prefix("XDG_RUNTIME_DIR=") {
            PathBuf::from(v).join("vramscope")
        } else {
            continue;
        };
        // Only absolute paths mean something under the container's root.
        if let Ok(rel) = inside.strip_prefix("/") {
            let d = root.join(rel);
            // path-ok: a hint only, as in channel_dirs: the folder is opened by open_channel_dir before use.
            if !dirs.contains(&d) && fs::symlink_metadata(&d).is_ok_and(|m| m.is_dir()) {
                dirs.push(d);
            }
        }
    }
    dirs
}

/// The `NSpid:` line of `/proc/<host_pid>/status`: the process's pid in each pid namespace it
/// belongs to, outermost first (the last is what it calls itself).
pub fn nspids(host_pid: u32) -> Option<Vec<u64>> {
    // path-ok: /proc/PID/status is the kernel's.
    let status = fs::read_to_string(format!("/proc/{host_pid}/status")).ok()?;
    parse_nspid(&status)
}

/// The numbers of an `NSpid:` line in a `/proc/<pid>/status` text.
pub fn parse_nspid(status: &str) -> Option<Vec<u64>> {
    let line = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
    line.split_ascii_whitespace()
        .map(|n| n.parse().ok())
        .collect::<Option<Vec<u64>>>()
        .filter(|v| !v.is_empty())
}

/// The host pid, among `candidates` (e.g. NVML's pids), of the writer that calls itself
/// `ns_pid` in the pid namespace with inode `pid_ns` (a channel's `pid` and `pid_ns`).
pub fn host_pid(
    pid_ns: u64,
    ns_pid: u64,
    candidates: impl IntoIterator<Item = u32>,
) -> Option<u32> {
    candidates.into_iter().find(|&c| {
        sys::pid_ns_inode(Some(c)) == Some(pid_ns)
            && nspids(c).and_then(|v| v.last().copied()) == Some(ns_pid)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(parse_name("123-456.vsc"), Some((123, 456)));
        assert_eq!(parse_name("123-456.tmp"), None);
        assert_eq!(parse_name("-456.vsc"), None);
        assert_eq!(parse_name("1-2-3.vsc"), None);
        assert_eq!(parse_name("+1-2.vsc"), None);
        assert_eq!(parse_name("99999999999-2.vsc"), None);
        assert_eq!(parse_name("1-2vsc"), None);
    }

    #[test]
    fn nspid_lines() {
        let status = "Name:\tpython\nNSpid:\t81234\t17\t1\nNSsid:\t1\n";
        assert_eq!(parse_nspid(status), Some(vec![81234, 17, 1]));
        assert_eq!(parse_nspid("NSpid:\t42\n"), Some(vec![42]));
        assert_eq!(parse_nspid("NSpid:\n"), None);
        assert_eq!(parse_nspid("Name: x\n"), None);
        assert_eq!(parse_nspid("NSpid: 1 x\n"), None);
    }

    #[test]
    fn our_own_process_maps_to_itself() {
        let me = sys::pid();
        let ns = sys::pid_ns_inode(None).expect("own pid namespace");
        let ns_pid = *nspids(me).expect("NSpid line").last().expect("one entry");
        assert_eq!(host_pid(ns, ns_pid, [1, me]), Some(me));
        assert_eq!(host_pid(ns.wrapping_add(1), ns_pid, [me]), None);
    }
}
