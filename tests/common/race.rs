//! Races a user drives against root: a small C program run as a [`TestUser`] that swaps one
//! name in a loop for a bounded time (its own entry, then a symlink to root's, and again),
//! while the test has root act on a path through that name; and a shared object whose
//! constructor leaves a marker, so a test can prove root never loaded it.

use super::users::TestUser;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// `flip NAME HELD TARGET SECONDS HOLD_US`: until SECONDS have passed, NAME is in turn the
/// entry HELD (renamed in, and out again to HELD) and a symlink to TARGET, each held for
/// HOLD_US microseconds. Prints the number of rounds; NAME ends as HELD's entry.
const FLIPPER: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int past(const struct timespec *end) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > end->tv_sec
        || (now.tv_sec == end->tv_sec && now.tv_nsec >= end->tv_nsec);
}

int main(int argc, char **argv) {
    if (argc != 6) return 2;
    const char *name = argv[1], *held = argv[2], *target = argv[3];
    unsigned hold = (unsigned)atoi(argv[5]);
    struct timespec end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += atoi(argv[4]);
    long rounds = 0;
    while (!past(&end)) {
        if (rename(held, name) != 0) { perror("rename in"); return 3; }
        usleep(hold);
        if (rename(name, held) != 0) { perror("rename out"); return 3; }
        if (symlink(target, name) != 0) { perror("symlink"); return 3; }
        usleep(hold);
        if (unlink(name) != 0) { perror("unlink"); return 3; }
        rounds++;
    }
    if (rename(held, name) != 0) { perror("rename back"); return 3; }
    printf("%ld\n", rounds);
    return 0;
}
"#;

/// Builds `source` with `cc` into `dir/name` (a shared object with `shared`), readable and
/// runnable by anyone (the test user runs it).
pub fn cc(dir: &Path, name: &str, source: &str, shared: bool) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).expect("write the C source");
    let out = dir.join(name);
    let mut cmd = Command::new("cc");
    if shared {
        cmd.args(["-shared", "-fPIC"]);
    }
    let built = cmd.arg("-o").arg(&out).arg(&src).output().expect("run cc");
    assert!(
        built.status.success(),
        "cc {name}: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    out
}

/// A shared object whose constructor appends `euid N` to `marker` when it is loaded.
pub fn marker_library(dir: &Path, marker: &Path) -> PathBuf {
    let source = format!(
        "#include <stdio.h>\n#include <unistd.h>\n\
         __attribute__((constructor)) static void planted(void) {{\n\
         FILE *f = fopen({:?}, \"a\");\n\
         if (f) {{ fprintf(f, \"euid %d\\n\", (int)geteuid()); fclose(f); }}\n}}\n",
        marker.to_str().expect("a UTF-8 marker path")
    );
    cc(dir, "planted.so", &source, true)
}

/// The flipper, built once per test into `dir`.
pub fn flipper(dir: &Path) -> PathBuf {
    cc(dir, "flip", FLIPPER, false)
}

/// One flipper running as a user.
pub struct Flip {
    child: Child,
}

impl Flip {
    /// Starts flipping `name` between `held` (the user's own entry, renamed in and out) and a
    /// symlink to `target`, for `seconds`.
    pub fn start(
        user: &TestUser,
        flipper: &Path,
        name: &Path,
        held: &Path,
        target: &Path,
        seconds: u32,
    ) -> Flip {
        let child = user
            .command(flipper.to_str().expect("UTF-8 path"))
            .arg(name)
            .arg(held)
            .arg(target)
            .arg(seconds.to_string())
            .arg("300")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the flipper");
        Flip { child }
    }

    /// Whether it is still flipping.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits for the end of its time and returns how many rounds it made (a failure of the
    /// flipper itself fails the test: a race that did not run proves nothing).
    pub fn finish(self) -> u64 {
        let out = self.child.wait_with_output().expect("wait for the flipper");
        assert!(
            out.status.success(),
            "the flipper failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("the flipper's count")
    }
}
