//! Driving the real binary in a real terminal: a private tmux server per test, keys sent with
//! send-keys, the screen read with capture-pane.

use super::wait;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Whether tmux can be used. In CI (CI set) a missing tmux is a failure: .ci/run installs it.
pub fn available() -> bool {
    super::tool_available("tmux", "-V", "apt-get install tmux")
}

/// One tmux server with one session of the given size.
pub struct Tmux {
    socket: String,
    pub pid_file: PathBuf,
}

impl Tmux {
    /// Starts `shell_command` (run by sh) in a detached session of `cols` x `rows`.
    /// The pane stays after the command exits so its last screen can be read.
    pub fn start(dir: &Path, cols: u16, rows: u16, shell_command: &str) -> Tmux {
        let socket = format!(
            "vramscope-test-{}-{}",
            std::process::id(),
            dir.file_name().unwrap().to_string_lossy()
        );
        let pid_file = dir.join("pid");
        // Isolated from the machine's channels, as `Scenario::command` is.
        let wrapped = format!(
            "echo $$ > {}; unset XDG_RUNTIME_DIR; export {}={} {}={}; exec {shell_command}",
            pid_file.display(),
            super::ISOLATED_SHM.0,
            dir.join(super::ISOLATED_SHM.1).display(),
            super::NO_CONFIG.0,
            super::NO_CONFIG.1,
        );
        let t = Tmux { socket, pid_file };
        // The pane stays from the server's start: set after `new-session`, a command that
        // exits at once (`--once` on a loaded machine) could take its pane and the session
        // with it first, leaving an empty screen.
        let conf = dir.join("tmux.conf");
        std::fs::write(&conf, "set-option -g remain-on-exit on\n").unwrap();
        t.tmux(&[
            "-f",
            conf.to_str().unwrap(),
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            &cols.to_string(),
            "-y",
            &rows.to_string(),
            "sh",
            "-c",
            &wrapped,
        ]);
        t
    }

    pub fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("run tmux");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The visible screen as text.
    pub fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "t"])
    }

    /// The visible screen with escape sequences (colours).
    pub fn screen_with_escapes(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-e", "-t", "t"])
    }

    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend(keys);
        self.tmux(&args);
    }

    pub fn resize(&self, cols: u16, rows: u16) {
        self.tmux(&[
            "resize-window",
            "-t",
            "t",
            "-x",
            &cols.to_string(),
            "-y",
            &rows.to_string(),
        ]);
    }

    /// A pane format variable, e.g. `pane_dead`, `alternate_on`, `cursor_flag`.
    pub fn pane(&self, format: &str) -> String {
        self.tmux(&[
            "display-message",
            "-p",
            "-t",
            "t",
            &format!("#{{{format}}}"),
        ])
        .trim()
        .to_string()
    }

    /// Polls the screen until `check` holds or `timeout` passes; returns the last screen.
    pub fn wait_for(&self, timeout: Duration, check: impl Fn(&str) -> bool) -> (bool, String) {
        let mut last = String::new();
        let found = wait::poll(timeout, Duration::from_millis(50), || {
            let screen = self.screen();
            if check(&screen) {
                return Some(screen);
            }
            last = screen;
            None
        });
        match found {
            Ok(screen) => (true, screen),
            Err(_) => (false, last),
        }
    }

    /// The first child of the shell tmux started (`pid`): the program it runs.
    pub fn child(&self) -> i32 {
        let parent = self.pid();
        wait::wait_for(
            &format!("a child of {parent}"),
            Duration::from_secs(5),
            || {
                let children =
                    std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children"))
                        .unwrap();
                children
                    .split_whitespace()
                    .next()
                    .map(|pid| pid.parse().unwrap())
            },
        )
    }

    pub fn pid(&self) -> u32 {
        wait::wait_for("tmux's pid file", Duration::from_secs(5), || {
            std::fs::read_to_string(&self.pid_file)
                .ok()
                .and_then(|text| text.trim().parse().ok())
        })
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}
