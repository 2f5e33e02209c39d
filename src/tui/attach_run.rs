//! The TUI's `a` key carried out: `vramscope attach --yes PID` (or `detach`) run as a child
//! process, so the screen keeps drawing while the agent is pending; the loop polls it at
//! each event and shows its one-line answer when it ends.

use super::ui_state::AttachRequest;
use std::io::Read;
use std::process::{Child, Command, Stdio};

/// How long the child waits for the agent before it says it is still pending.
const TIMEOUT_S: &str = "60";

pub struct Running {
    child: Child,
    pid: u32,
    detach: bool,
}

/// Starts the attach if the pid still has the start time its row showed; else the line why not.
pub fn start(request: &AttachRequest) -> Result<Running, String> {
    match crate::channel::starttime(Some(request.pid)) {
        Ok(now) if now == request.starttime => {}
        Ok(_) => {
            return Err(format!(
                "pid {} now belongs to another process (it started after the row was sampled)",
                request.pid
            ));
        }
        Err(_) => return Err(format!("pid {} has exited", request.pid)),
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find vramscope itself: {e}"))?;
    let verb = if request.detach { "detach" } else { "attach" };
    let mut command = Command::new(exe);
    command.args([verb, "--yes", "--timeout", TIMEOUT_S]);
    // The child pins the process itself; this makes it refuse one that is no longer the
    // process the dialog showed (an exec while the person read it).
    if let Some(shown) = &request.shown {
        command.args(["--shown-as", &shown.token()]);
    }
    let child = command
        .arg(request.pid.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run vramscope {verb}: {e}"))?;
    Ok(Running {
        child,
        pid: request.pid,
        detach: request.detach,
    })
}

impl Running {
    /// The line to show while it runs.
    pub fn pending(&self) -> String {
        let verb = if self.detach { "detach" } else { "attach" };
        format!(
            "{verb} pending: pid {} (until its main thread returns to Python)",
            self.pid
        )
    }

    /// Its answer once it ended; None while it runs.
    pub fn poll(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(None) => None,
            Ok(Some(status)) => {
                let mut out = String::new();
                let mut err = String::new();
                if let Some(mut s) = self.child.stdout.take() {
                    let _ = s.read_to_string(&mut out);
                }
                if let Some(mut s) = self.child.stderr.take() {
                    let _ = s.read_to_string(&mut err);
                }
                Some(answer(status.success(), &out, &err))
            }
            Err(e) => Some(format!("vramscope attach: {e}")),
        }
    }
}

/// The last line said: stdout's on success, stderr's otherwise, without the program name.
fn answer(success: bool, out: &str, err: &str) -> String {
    let from = if success { out } else { err };
    let line = from
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    let line = line.strip_prefix("vramscope: ").unwrap_or(line);
    crate::channel::sanitize(line.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_is_the_last_line_said() {
        assert_eq!(
            answer(
                true,
                "process 7: live: publishing\n",
                "vramscope: attach pending: x\n"
            ),
            "process 7: live: publishing"
        );
        assert_eq!(
            answer(
                false,
                "",
                "vramscope: attach pending: x\nvramscope: process 7: attach pending after 60s\n"
            ),
            "process 7: attach pending after 60s"
        );
        assert_eq!(answer(false, "", "vramscope: \u{1b}[2Jx\n"), "\u{fffd}[2Jx");
    }
}
