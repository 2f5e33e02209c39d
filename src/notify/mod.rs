//! `--on EVENT=CMD`: a word when something happens. `detect` compares successive snapshots
//! and finds the events (`oom`, `hang`, `exit`, `peak`, `free`), `runner` runs the user's
//! commands off the monitor's thread with the event as JSON on their standard input, and
//! `bell` is the built-in action: the terminal bell, and a status message in tmux or screen.
//! Each hook runs at most once per event and at most once per `RATE_GAP`; events held back
//! in between are counted on the next run's event.

mod detect;
mod event;
mod runner;
mod spec;

pub use detect::{HANG_FLOOR_MS, Wanted};
pub use event::Event;
pub use runner::{HOOK_TIMEOUT, QUEUED_AT_MOST, RUNNING_AT_ONCE};
pub use spec::{Action, Hook, Kind, parse, split_words};

use crate::model::Snapshot;
use std::time::{Duration, Instant};

/// A hook runs at most once in this long; events in between are held back and counted.
pub const RATE_GAP: Duration = Duration::from_secs(5);

/// The hooks asked for, what earlier snapshots showed, and the thread that runs them.
pub struct Notifier {
    hooks: Vec<Armed>,
    detector: detect::Detector,
    runner: runner::Runner,
    /// A bell is due: the owner of the terminal rings it (`take_bell`).
    bell_due: bool,
}

struct Armed {
    hook: Hook,
    label: String,
    last_run: Option<Instant>,
    held_back: u64,
}

impl Notifier {
    /// `None` when no hook is asked for; an error when the hooks' thread cannot start.
    pub fn start(hooks: &[Hook], started_ms: u64) -> Result<Option<Notifier>, String> {
        if hooks.is_empty() {
            return Ok(None);
        }
        let mut wanted = Wanted::default();
        for hook in hooks {
            match hook.kind {
                Kind::Oom => wanted.oom = true,
                Kind::Exit => wanted.exit = true,
                Kind::Hang => wanted.hang_factor = min_of(wanted.hang_factor, hook.threshold),
                Kind::Peak => wanted.peak_share = min_of(wanted.peak_share, hook.threshold),
                #[allow(
                    clippy::cast_possible_truncation,
                    clippy::cast_sign_loss,
                    reason = "a positive threshold in seconds, far inside u64 in ms"
                )]
                Kind::Free => {
                    let ms = (hook.threshold * 1000.0) as u64;
                    wanted.free_after_ms = Some(wanted.free_after_ms.map_or(ms, |m| m.min(ms)));
                }
            }
        }
        let runner = runner::Runner::start()?;
        Ok(Some(Notifier {
            hooks: hooks
                .iter()
                .map(|hook| Armed {
                    hook: hook.clone(),
                    label: format!("--on {}", event::one_line(&hook.text)),
                    last_run: None,
                    held_back: 0,
                })
                .collect(),
            detector: detect::Detector::new(wanted, started_ms),
            runner,
            bell_due: false,
        }))
    }

    /// The job `vramscope run` started: its end is said by `job_ended`, with its status.
    pub fn watch_job(&mut self, pid: u32) {
        self.detector.watch_job(pid);
    }

    /// Looks for events in the newest live snapshot and runs the hooks they call for.
    pub fn observe(&mut self, snapshot: &Snapshot) {
        for (kind, event) in self.detector.observe(snapshot) {
            self.dispatch(kind, &event);
        }
    }

    pub fn job_ended(&mut self, pid: u32, code: u8, text: &str, at_ms: u64) {
        if let Some((kind, event)) = self.detector.job_ended(pid, code, text, at_ms) {
            self.dispatch(kind, &event);
        }
    }

    /// Waits until no hook is queued or running, at most `limit`: for a mode about to exit.
    pub fn wait_idle(&self, limit: Duration) {
        self.runner.wait_idle(limit);
    }

    /// Whether a bell is due; due once per call that says so.
    pub fn take_bell(&mut self) -> bool {
        std::mem::take(&mut self.bell_due)
    }

    /// What is to be said of the hooks (a failure, a timeout), each thing once.
    pub fn take_said(&self) -> Vec<String> {
        self.runner.take_said()
    }

    fn dispatch(&mut self, kind: Kind, event: &Event) {
        for armed in self.hooks.iter_mut().filter(|a| a.hook.kind == kind) {
            if !applies(&armed.hook, event) {
                continue;
            }
            if armed.last_run.is_some_and(|t| t.elapsed() < RATE_GAP) {
                armed.held_back += 1;
                continue;
            }
            armed.last_run = Some(Instant::now());
            let mut event = event.clone().cleaned();
            event.held_back = std::mem::take(&mut armed.held_back);
            let argv = match &armed.hook.action {
                Action::Command(argv) => argv.clone(),
                Action::Bell => {
                    self.bell_due = true;
                    match status_line_command(&event) {
                        Some(argv) => argv,
                        None => continue,
                    }
                }
            };
            self.runner.submit(runner::Run {
                label: armed.label.clone(),
                argv,
                event,
                quiet: armed.hook.action == Action::Bell,
            });
        }
    }
}

fn min_of(current: Option<f64>, new: f64) -> Option<f64> {
    Some(current.map_or(new, |c| c.min(new)))
}

/// Several hooks of one kind may ask different thresholds: the detector looks with the
/// lowest, and each hook takes the events past its own.
fn applies(hook: &Hook, event: &Event) -> bool {
    let figure = |name: &str| event.details.get(name).and_then(serde_json::Value::as_f64);
    match hook.kind {
        Kind::Peak => match (figure("peak"), figure("gpu_total")) {
            (Some(peak), Some(total)) => peak >= hook.threshold * total,
            _ => true,
        },
        Kind::Free => figure("idle_s").is_none_or(|s| s + 1.0 >= hook.threshold),
        Kind::Hang => match (figure("waited_ms"), figure("median_step_ms")) {
            (Some(waited), Some(median)) => waited >= hook.threshold * median,
            _ => true,
        },
        Kind::Oom | Kind::Exit => true,
    }
}

/// `tmux display-message` inside tmux ($TMUX), `screen -X echo` inside screen ($STY);
/// `None` outside both. The message is vramscope's own words and numbers only: tmux reads
/// `#` in a message as a format (`#(...)` runs a command), so no foreign text goes in.
fn status_line_command(event: &Event) -> Option<Vec<String>> {
    let mut text = format!("vramscope: {}", event.kind);
    if let Some(pid) = event.pid {
        text.push_str(&format!(" pid {pid}"));
    }
    if let Some(gpu) = event.gpu {
        text.push_str(&format!(" GPU {gpu}"));
    }
    if std::env::var_os("TMUX").is_some() {
        return Some(vec!["tmux".into(), "display-message".into(), text]);
    }
    if std::env::var_os("STY").is_some() {
        return Some(vec!["screen".into(), "-X".into(), "echo".into(), text]);
    }
    None
}
