//! What /proc says about the process to attach to: its state, owner, command line,
//! environment, pid namespace, and the Python it runs (from the files it maps).

use crate::channel::sanitize;
use std::fs;
use std::path::{Path, PathBuf};

/// One process, as read once from /proc before attaching.
#[derive(Debug, Clone)]
pub struct Target {
    pub pid: i32,
    /// `R`, `S`, `Z`, `T`...: field 3 of /proc/PID/stat.
    pub state: char,
    pub uid: u32,
    pub tracer: i32,
    /// Arguments joined by spaces, sanitised for the terminal.
    pub command: String,
    pub environ: Vec<String>,
    pub args: Vec<String>,
    /// The files it maps, with each one's lowest mapped address at file offset 0.
    pub mapped: Vec<(u64, String)>,
    /// `/proc/PID/exe`, resolved (in the target's mount namespace).
    pub exe: String,
    /// Whether its pid namespace differs from ours.
    pub other_pid_namespace: bool,
}

impl Target {
    /// Reads `/proc/PID`; the error is the line to print.
    pub fn read(pid: i32) -> Result<Target, String> {
        Self::read_in(Path::new("/proc"), pid)
    }

    fn read_in(proc: &Path, pid: i32) -> Result<Target, String> {
        let dir = proc.join(pid.to_string());
        let stat = fs::read_to_string(dir.join("stat")).map_err(|_| {
            format!("no process {pid} (it exited, or it is not in this pid namespace)")
        })?;
        let state = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].trim_start().chars().next())
            .unwrap_or('?');
        let status = fs::read_to_string(dir.join("status")).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.split_whitespace().next().unwrap_or("").to_string())
        };
        let uid = field("Uid:")
            .and_then(|v| v.parse().ok())
            .unwrap_or(u32::MAX);
        let tracer = field("TracerPid:")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let args: Vec<String> = fs::read(dir.join("cmdline"))
            .unwrap_or_default()
            .split(|&c| c == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let command = sanitize(args.join(" ").as_bytes());
        let environ = fs::read(dir.join("environ"))
            .unwrap_or_default()
            .split(|&c| c == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let mapped = parse_maps(&fs::read_to_string(dir.join("maps")).unwrap_or_default());
        let exe = fs::read_link(dir.join("exe"))
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let ns = |p: PathBuf| fs::read_link(p).ok();
        let other_pid_namespace = match (ns(dir.join("ns/pid")), ns(proc.join("self/ns/pid"))) {
            (Some(a), Some(b)) => a != b,
            _ => false,
        };
        Ok(Target {
            pid,
            state,
            uid,
            tracer,
            command,
            environ,
            args,
            mapped,
            exe,
            other_pid_namespace,
        })
    }

    /// The value of `name` in its environment at start.
    pub fn env(&self, name: &str) -> Option<&str> {
        self.environ
            .iter()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
    }

    /// The mapped file whose name marks it as the Python interpreter (libpython, else the
    /// executable itself), if any.
    pub fn python_file(&self) -> Option<&str> {
        let base = |p: &str| p.rsplit('/').next().unwrap_or(p).to_string();
        self.mapped
            .iter()
            .map(|(_, p)| p.as_str())
            .find(|p| base(p).starts_with("libpython"))
            .or_else(|| {
                self.mapped
                    .iter()
                    .map(|(_, p)| p.as_str())
                    .find(|p| *p == self.exe && base(p).starts_with("python"))
            })
    }

    /// `(3, 11)` from `libpython3.11.so.1.0` or `python3.11`; None if the name does not say.
    pub fn python_version(&self) -> Option<(u32, u32)> {
        let file = self.python_file()?;
        let name = file.rsplit('/').next()?;
        let rest = name
            .strip_prefix("libpython")
            .or_else(|| name.strip_prefix("python"))?;
        let mut parts = rest.split(|c: char| !c.is_ascii_digit());
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        Some((major, minor))
    }

    /// The target's file `path` as this process reaches it: through its root, so a
    /// container's files are the container's.
    pub fn root_path(&self, path: &str) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root{}", self.pid, path))
    }
}

/// `(lowest address at offset 0, path)` per mapped file, in order of first appearance.
pub fn parse_maps(maps: &str) -> Vec<(u64, String)> {
    let mut out: Vec<(u64, String)> = Vec::new();
    for line in maps.lines() {
        let mut f = line.splitn(6, ' ');
        let (Some(range), _, Some(offset), _, _, Some(path)) =
            (f.next(), f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        let path = path.trim_start();
        if !path.starts_with('/') || path.ends_with(" (deleted)") {
            continue;
        }
        let start = range
            .split('-')
            .next()
            .and_then(|s| u64::from_str_radix(s, 16).ok());
        let (Some(start), Ok(0)) = (start, u64::from_str_radix(offset, 16)) else {
            continue;
        };
        if !out.iter().any(|(_, p)| p == path) {
            out.push((start, path.to_string()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_give_each_files_base() {
        let maps = "\
55d0a000-55d0b000 r--p 00000000 08:01 123 /usr/bin/python3.11
55d0b000-55d0c000 r-xp 00001000 08:01 123 /usr/bin/python3.11
7f00000-7f01000 r--p 00000000 08:01 9 /usr/lib/x86_64-linux-gnu/libc.so.6
7f02000-7f03000 rw-p 00000000 00:00 0 
7f04000-7f05000 r--p 00000000 08:01 10 /tmp/gone.so (deleted)
7ffd000-7ffe000 rw-p 00000000 00:00 0 [stack]";
        let m = parse_maps(maps);
        assert_eq!(
            m,
            [
                (0x55d0a000, "/usr/bin/python3.11".to_string()),
                (0x7f00000, "/usr/lib/x86_64-linux-gnu/libc.so.6".to_string())
            ]
        );
    }
}
