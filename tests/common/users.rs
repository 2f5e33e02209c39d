//! An unprivileged user made for one test and removed after it (`useradd`/`userdel`), so the
//! root-safety tests run root against a real other user, as on a shared GPU server. Only
//! root can make one: `TestUser::create` is `None` otherwise, and the test says SKIPPED.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How a test user's name begins: `vst<pid>x<n>`, so a run killed before its users were
/// removed has them removed by the next (their pid is gone).
const PREFIX: &str = "vst";

static NEXT: AtomicU32 = AtomicU32::new(0);

/// One user, removed (with anything it still runs) when dropped.
pub struct TestUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// `useradd` and `userdel` take a lock on /etc/passwd; tests running beside each other wait
/// for it rather than fail.
fn retry(args: &[&str], program: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match Command::new(program).args(args).output() {
            Ok(out) if out.status.success() => return true,
            Ok(out) => {
                let err = String::from_utf8_lossy(&out.stderr);
                let busy = err.contains("lock") || err.contains("try again");
                if !busy || Instant::now() > deadline {
                    eprintln!("{program} {args:?}: {err}");
                    return false;
                }
            }
            Err(_) => return false,
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn id_of(name: &str, flag: &str) -> Option<u32> {
    let out = Command::new("id").args([flag, name]).output().ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// Removes test users left by runs that were killed (their pid is gone).
fn sweep_stale() {
    let Ok(passwd) = std::fs::read_to_string("/etc/passwd") else {
        return;
    };
    for name in passwd.lines().filter_map(|l| l.split(':').next()) {
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let Some((pid, _)) = rest.split_once('x') else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = Command::new("pkill").args(["-KILL", "-u", name]).status();
            retry(&[name], "userdel");
        }
    }
}

impl TestUser {
    /// A new user with its own group and no home, or `None` when not root or `useradd` is
    /// missing.
    pub fn create() -> Option<TestUser> {
        if !is_root() {
            return None;
        }
        sweep_stale();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("{PREFIX}{}x{n}", std::process::id());
        if !retry(
            &[
                "--no-create-home",
                "--user-group",
                "--shell",
                "/bin/sh",
                &name,
            ],
            "useradd",
        ) {
            return None;
        }
        let (uid, gid) = (id_of(&name, "-u")?, id_of(&name, "-g")?);
        Some(TestUser { name, uid, gid })
    }

    /// `program` to be run as this user (real and effective ids, no supplementary groups).
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new("setpriv");
        cmd.args([
            &format!("--reuid={}", self.uid),
            &format!("--regid={}", self.gid),
            "--clear-groups",
            "--",
            program,
        ]);
        cmd
    }

    /// Gives `path` (not following a symlink) to this user.
    pub fn give(&self, path: &std::path::Path) {
        std::os::unix::fs::lchown(path, Some(self.uid), Some(self.gid)).expect("lchown");
    }
}

impl Drop for TestUser {
    fn drop(&mut self) {
        let _ = Command::new("pkill")
            .args(["-KILL", "-u", &self.name])
            .status();
        // pkill returns before the processes are gone; userdel refuses a user still running.
        let deadline = Instant::now() + Duration::from_secs(10);
        while Command::new("pgrep")
            .args(["-u", &self.name])
            .output()
            .is_ok_and(|o| o.status.success())
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        retry(&[&self.name], "userdel");
    }
}
