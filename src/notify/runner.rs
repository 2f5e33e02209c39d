//! Runs hooks on their own thread, so that the monitor never waits for one: at most
//! `RUNNING_AT_ONCE` at a time, each killed (with its process group) when it outlives
//! `HOOK_TIMEOUT`, a queue of `QUEUED_AT_MOST` behind them, and each hook's failure or
//! timeout said once.

use super::event::Event;
use std::collections::HashSet;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A hook still running after this long is killed.
pub const HOOK_TIMEOUT: Duration = Duration::from_secs(10);
/// Hooks running at once; more wait in the queue.
pub const RUNNING_AT_ONCE: usize = 4;
/// Hooks waiting to start; one more is dropped, and that is said.
pub const QUEUED_AT_MOST: usize = 32;
/// How often running hooks are looked at.
const POLL: Duration = Duration::from_millis(50);

/// One hook to run: its program and arguments, and what it is told.
pub struct Run {
    /// How the hook is named when something is said of it: `--on oom=./notify.sh`.
    pub label: String,
    pub argv: Vec<String>,
    pub event: Event,
    /// A failure is not said: the built-in tmux/screen message fails whenever no client is
    /// attached (a detached session), which is no news.
    pub quiet: bool,
}

/// The handle the monitor holds: it queues runs and collects what is to be said.
pub struct Runner {
    queue: SyncSender<Run>,
    said: Arc<Mutex<Said>>,
    /// Runs queued or running.
    busy: Arc<AtomicUsize>,
}

#[derive(Default)]
struct Said {
    /// Lines not yet shown.
    pending: Vec<String>,
    /// What has been said once already: (label, what).
    once: HashSet<(String, &'static str)>,
}

impl Said {
    fn once(&mut self, label: &str, what: &'static str, line: String) {
        if self.once.insert((label.to_string(), what)) {
            self.pending.push(line);
        }
    }
}

impl Runner {
    pub fn start() -> Result<Runner, String> {
        let (queue, runs) = sync_channel::<Run>(QUEUED_AT_MOST);
        let said = Arc::new(Mutex::new(Said::default()));
        let busy = Arc::new(AtomicUsize::new(0));
        let (shared, count) = (Arc::clone(&said), Arc::clone(&busy));
        crate::threads::spawn("hooks", move || run_all(&runs, &shared, &count))
            .map_err(|e| e.to_string())?;
        Ok(Runner { queue, said, busy })
    }

    /// Waits until no hook is queued or running, at most `limit`.
    pub fn wait_idle(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.busy.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::sleep(POLL);
        }
    }

    /// Queues `run`; never waits.
    pub fn submit(&self, run: Run) {
        self.busy.fetch_add(1, Ordering::AcqRel);
        let refused = self.queue.try_send(run);
        if refused.is_err() {
            self.busy.fetch_sub(1, Ordering::AcqRel);
        }
        if let Err(TrySendError::Full(run)) = refused {
            let line = format!(
                "{}: {QUEUED_AT_MOST} hooks already wait; this {} event was dropped",
                run.label, run.event.kind
            );
            self.lock().once(&run.label, "full", line);
        }
    }

    /// What is to be said of hooks since the last call, each thing once.
    pub fn take_said(&self) -> Vec<String> {
        std::mem::take(&mut self.lock().pending)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Said> {
        self.said.lock().unwrap_or_else(|p| p.into_inner())
    }
}

struct Running {
    label: String,
    quiet: bool,
    child: Child,
    since: Instant,
}

fn run_all(runs: &Receiver<Run>, said: &Mutex<Said>, busy: &AtomicUsize) {
    let done = || busy.fetch_sub(1, Ordering::AcqRel);
    let say = |label: &str, what, line| {
        said.lock()
            .unwrap_or_else(|p| p.into_inner())
            .once(label, what, line)
    };
    let mut running: Vec<Running> = Vec::new();
    let mut open = true;
    while open || !running.is_empty() {
        if open && running.len() < RUNNING_AT_ONCE {
            let next = if running.is_empty() {
                runs.recv().map_err(|_| RecvTimeoutError::Disconnected)
            } else {
                runs.recv_timeout(POLL)
            };
            match next {
                Ok(run) => match start(&run) {
                    Ok(child) => running.push(Running {
                        label: run.label,
                        quiet: run.quiet,
                        child,
                        since: Instant::now(),
                    }),
                    Err(e) => {
                        say(
                            &run.label,
                            "start",
                            format!("{}: cannot run it: {e}", run.label),
                        );
                        done();
                    }
                },
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => open = false,
            }
        } else {
            std::thread::sleep(POLL);
        }
        let before = running.len();
        running.retain_mut(|r| match r.child.try_wait() {
            Ok(Some(status)) if status.success() => false,
            Ok(Some(status)) => {
                if !r.quiet {
                    say(&r.label, "failed", format!("{}: {status}", r.label));
                }
                false
            }
            Ok(None) if r.since.elapsed() >= HOOK_TIMEOUT => {
                kill_group(&mut r.child);
                say(
                    &r.label,
                    "timeout",
                    format!(
                        "{}: still running after {} s: killed",
                        r.label,
                        HOOK_TIMEOUT.as_secs()
                    ),
                );
                false
            }
            Ok(None) => true,
            Err(e) => {
                say(
                    &r.label,
                    "wait",
                    format!("{}: cannot wait for it: {e}", r.label),
                );
                kill_group(&mut r.child);
                false
            }
        });
        for _ in running.len()..before {
            done();
        }
    }
}

/// Starts the program directly (no shell), in a process group of its own so that a
/// timeout kills whatever it started too, with the event on its standard input.
fn start(run: &Run) -> std::io::Result<Child> {
    let (program, args) = run
        .argv
        .split_first()
        .ok_or_else(|| std::io::Error::other("no command"))?;
    let mut command = Command::new(program);
    command
        .args(args)
        .envs(run.event.environment())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    let mut child = command.spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        // The event is a few hundred bytes, well inside a pipe's buffer: this does not
        // wait on a hook that never reads. A hook that ends without reading is no error.
        let _ = stdin.write_all(run.event.json().as_bytes());
    }
    Ok(child)
}

fn kill_group(child: &mut Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: kill(2) with a negative pid signals the group the hook leads; it touches
        // no memory of ours.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}
