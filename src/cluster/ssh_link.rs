//! One `--ssh` host: a thread that keeps one ssh session running the remote vramscope, reads
//! its documents as they come and keeps only the latest, and says why there is none when
//! the session fails, ends or stalls; then it reconnects, waiting longer after each session
//! that brought nothing.
//!
//! Everything the host sends is foreign: a line is read within `SSH_DOCUMENT` bytes (a
//! longer one is skipped to its end and said), ssh's stderr is kept as its last
//! `SSH_STDERR_TAIL` bytes and shown cleaned, so a host costs at most one line buffer, one
//! document's series and that tail, whatever it sends. A stalled session is killed: the
//! others never wait on it.

use super::series::Series;
use super::ssh_command::SshSetup;
use super::ssh_document;
use crate::safe_fs::bounds::{SSH_DOCUMENT, SSH_STDERR_TAIL};
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

/// How often the session's child is checked for an end, a stall or a stop.
const POLL: Duration = Duration::from_millis(100);
/// The wait before reconnecting doubles from this after every session that brought no
/// document, up to `RETRY_MAX`.
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(10);
/// ssh's stderr lines shown in a problem, the last ones (its own error is its last line).
const STDERR_LINES: usize = 2;
/// A problem's text from ssh is cut to this many characters: it is one line on a screen.
const SHOWN_CHARS: usize = 200;

/// What is known of one host now.
#[derive(Debug, Default)]
pub struct HostState {
    /// The latest document's series, while the session that sent it is up.
    pub latest: Option<Vec<Series>>,
    /// Why there is no current document (connecting, failed, ended, stalled, refused).
    pub problem: Option<String>,
    /// Documents read, over all sessions.
    pub documents: u64,
    /// Whether the first session has ended or sent a document (`--once` waits for this).
    pub settled: bool,
    /// The session the state is from: a reader of an older session changes nothing.
    session: u64,
}

/// One host's link: its state, shared with the fetcher, and the thread that keeps it.
#[derive(Debug)]
pub struct Link {
    pub host: String,
    state: Arc<Mutex<HostState>>,
    stop: Arc<AtomicBool>,
}

impl Link {
    /// Starts the host's thread.
    pub fn start(
        host: String,
        setup: SshSetup,
        control_dir: PathBuf,
        stall_after: Duration,
    ) -> Result<Link, String> {
        let state = Arc::new(Mutex::new(HostState {
            problem: Some("connecting".into()),
            ..HostState::default()
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let keeper = Keeper {
            host: host.clone(),
            setup,
            control_dir,
            stall_after,
            state: Arc::clone(&state),
            stop: Arc::clone(&stop),
        };
        crate::threads::spawn("cluster-ssh", move || keeper.run()).map_err(|e| e.to_string())?;
        Ok(Link { host, state, stop })
    }

    pub fn state(&self) -> MutexGuard<'_, HostState> {
        lock(&self.state)
    }

    /// Ends the session and the thread (within `POLL`).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn lock(state: &Mutex<HostState>) -> MutexGuard<'_, HostState> {
    // A reader that panicked left whole values: the state is still usable.
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

struct Keeper {
    host: String,
    setup: SshSetup,
    control_dir: PathBuf,
    stall_after: Duration,
    state: Arc<Mutex<HostState>>,
    stop: Arc<AtomicBool>,
}

/// How a session ended.
enum Ended {
    Exited(ExitStatus),
    Stalled(Duration),
    Stopped,
}

impl Keeper {
    fn run(self) {
        let mut retry = RETRY_FIRST;
        let mut session = 0u64;
        while !self.stopped() {
            session += 1;
            let before = lock(&self.state).documents;
            let problem = match self.session(session) {
                Ok((Ended::Stopped, _)) => return,
                Ok((ended, stderr)) => why(ended, &stderr),
                Err(why) => why,
            };
            let brought = lock(&self.state).documents > before;
            // A session that brought documents ended after working: reconnect soon. One
            // that brought none is retried less and less often.
            let wait = if brought {
                retry = RETRY_FIRST;
                RETRY_FIRST
            } else {
                let wait = retry;
                retry = (retry * 2).min(RETRY_MAX);
                wait
            };
            {
                let mut state = lock(&self.state);
                state.latest = None;
                state.settled = true;
                state.problem = Some(format!(
                    "{problem} (trying again in {}s)",
                    wait.as_secs().max(1)
                ));
            }
            self.pause(wait);
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Waits `wait`, or less when stopped.
    fn pause(&self, wait: Duration) {
        let until = Instant::now() + wait;
        while !self.stopped() && Instant::now() < until {
            thread::sleep(POLL);
        }
    }

    /// One session: ssh started, its output read until it ends, stalls or is stopped; how it
    /// ended, with the last of ssh's stderr.
    fn session(&self, session: u64) -> Result<(Ended, String), String> {
        let mut child = Command::new("ssh")
            .args(self.setup.session_args(&self.host, &self.control_dir))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run ssh: {e}"))?;
        lock(&self.state).session = session;
        let started = Instant::now();
        let last_line: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
        let tail = Arc::new(Mutex::new(Vec::new()));
        if let Some(out) = child.stdout.take() {
            let reader = Reader {
                host: self.host.clone(),
                session,
                state: Arc::clone(&self.state),
                last_line: Arc::clone(&last_line),
            };
            if let Err(e) = crate::threads::spawn("cluster-ssh-out", move || reader.read(out)) {
                kill(&mut child);
                return Err(e.to_string());
            }
        }
        if let Some(err) = child.stderr.take() {
            let tail = Arc::clone(&tail);
            // Without it only ssh's exit status is shown.
            let _ = crate::threads::spawn("cluster-ssh-err", move || keep_tail(err, &tail));
        }
        // The first document may take the connection's own deadline more.
        let first_deadline = self.setup.connect_timeout + self.stall_after;
        let ended = loop {
            if self.stopped() {
                kill(&mut child);
                break Ended::Stopped;
            }
            match child.try_wait() {
                Ok(Some(status)) => break Ended::Exited(status),
                Ok(None) => {}
                Err(e) => {
                    kill(&mut child);
                    return Err(format!("cannot watch ssh: {e}"));
                }
            }
            let quiet = match *last_line
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
            {
                Some(at) => (at.elapsed() > self.stall_after).then(|| at.elapsed()),
                None => (started.elapsed() > first_deadline).then(|| started.elapsed()),
            };
            if let Some(quiet) = quiet {
                kill(&mut child);
                // A stalled master connection would stall the next session too.
                self.exit_master();
                break Ended::Stalled(quiet);
            }
            thread::sleep(POLL);
        };
        // ssh's last words reach the pipe before it exits; the reader takes them at once.
        thread::sleep(POLL);
        let stderr = tail.lock().map(|t| shown_tail(&t)).unwrap_or_default();
        Ok((ended, stderr))
    }

    /// Asks this host's master connection to exit, waiting at most the connection's deadline.
    fn exit_master(&self) {
        exit_masters(&self.setup, &[&self.host], &self.control_dir);
    }
}

/// Asks the master connections of `hosts` in `control_dir` to exit, all at once (a host
/// with none running: ssh says so and exits), waiting at most the connection's deadline.
pub fn exit_masters(setup: &SshSetup, hosts: &[&str], control_dir: &std::path::Path) {
    let mut children: Vec<Child> = hosts
        .iter()
        .filter_map(|host| {
            Command::new("ssh")
                .args(setup.exit_args(host, control_dir))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .ok()
        })
        .collect();
    let until = Instant::now() + setup.connect_timeout;
    while Instant::now() < until {
        children.retain_mut(|c| matches!(c.try_wait(), Ok(None)));
        if children.is_empty() {
            return;
        }
        thread::sleep(Duration::from_millis(20));
    }
    for child in &mut children {
        kill(child);
    }
}

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Why a session gave no (more) documents, in one line.
fn why(ended: Ended, stderr: &str) -> String {
    let said = |what: String| {
        if stderr.is_empty() {
            what
        } else {
            format!("{what}: {stderr}")
        }
    };
    match ended {
        Ended::Stalled(quiet) => format!(
            "stalled: no document for {}s, session ended",
            quiet.as_secs()
        ),
        Ended::Stopped => "stopped".into(),
        Ended::Exited(status) => match status.code() {
            // ssh's own failure: no connection, refused login, unknown host key.
            Some(255) => said("ssh failed".into()),
            Some(127) => said("no vramscope on the host's PATH".into()),
            // An older vramscope refusing `--json --loop` (clap's usage error).
            Some(2) => said("its vramscope refused `--json --loop` (an older one?)".into()),
            Some(0) => said("the remote vramscope ended".into()),
            Some(code) => said(format!("the remote vramscope exited with status {code}")),
            None => said("ssh was killed by a signal".into()),
        },
    }
}

/// The reader of one session's stdout: each line a document.
struct Reader {
    host: String,
    session: u64,
    state: Arc<Mutex<HostState>>,
    last_line: Arc<Mutex<Option<Instant>>>,
}

impl Reader {
    fn read(self, out: impl Read) {
        let mut out = BufReader::new(out);
        let mut line = Vec::new();
        loop {
            let read = read_bounded_line(&mut out, &mut line, SSH_DOCUMENT);
            let outcome = match read {
                Ok(Line::End) | Err(_) => return,
                Ok(Line::Whole) => {
                    ssh_document::series(&String::from_utf8_lossy(&line), &self.host)
                }
                Ok(Line::TooLong) => Err(format!(
                    "sent a document over {} MiB (the most one host's may be): skipped",
                    SSH_DOCUMENT >> 20
                )),
            };
            *self
                .last_line
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Instant::now());
            let mut state = lock(&self.state);
            if state.session != self.session {
                return;
            }
            state.settled = true;
            match outcome {
                Ok(series) => {
                    state.latest = Some(series);
                    state.problem = None;
                    state.documents += 1;
                }
                Err(why) => {
                    state.latest = None;
                    state.problem = Some(why);
                }
            }
        }
    }
}

/// What one bounded line read found.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    Whole,
    /// Longer than the bound: read to its end, none of it kept.
    TooLong,
    End,
}

/// Reads one line into `line` (without its newline), keeping at most `max` bytes: a longer
/// line is consumed to its end and reported, never held.
fn read_bounded_line(
    input: &mut impl BufRead,
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    line.clear();
    let mut too_long = false;
    loop {
        let buf = input.fill_buf()?;
        if buf.is_empty() {
            // A last line without its newline is a document cut off: not read.
            return Ok(Line::End);
        }
        let (chunk, found) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if !too_long && line.len() + chunk.len() <= max {
            line.extend_from_slice(chunk);
        } else {
            too_long = true;
            line.clear();
        }
        let used = found.unwrap_or(buf.len());
        input.consume(used);
        if found.is_some() {
            return Ok(if too_long { Line::TooLong } else { Line::Whole });
        }
    }
}

/// Keeps the last `SSH_STDERR_TAIL` bytes of `err` in `tail` until it ends.
fn keep_tail(mut err: impl Read, tail: &Mutex<Vec<u8>>) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = err.read(&mut buf) {
        if n == 0 {
            return;
        }
        let Ok(mut t) = tail.lock() else { return };
        t.extend_from_slice(&buf[..n]);
        if t.len() > SSH_STDERR_TAIL {
            let cut = t.len() - SSH_STDERR_TAIL;
            t.drain(..cut);
        }
    }
}

/// The last lines of ssh's stderr, each cleaned, in one line.
fn shown_tail(tail: &[u8]) -> String {
    let lines: Vec<String> = tail
        .split(|b| *b == b'\n' || *b == b'\r')
        .map(crate::text::clean_bytes)
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    let last = lines[lines.len().saturating_sub(STDERR_LINES)..].join(" / ");
    match last.char_indices().nth(SHOWN_CHARS) {
        Some((end, _)) => format!("{}...", &last[..end]),
        None => last,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_over_the_bound_is_skipped_to_its_end_and_said() {
        let mut input = BufReader::with_capacity(4, &b"abc\n0123456789\nxy\npartial"[..]);
        let mut line = Vec::new();
        let mut seen = Vec::new();
        loop {
            let read = read_bounded_line(&mut input, &mut line, 5).unwrap();
            if read == Line::End {
                break;
            }
            seen.push((read, String::from_utf8(line.clone()).unwrap()));
        }
        assert_eq!(
            seen,
            [
                (Line::Whole, "abc".to_string()),
                (Line::TooLong, String::new()),
                (Line::Whole, "xy".to_string()),
            ]
        );
    }

    #[test]
    fn ssh_stderr_is_shown_cleaned_as_its_last_lines() {
        let tail =
            b"Warning: x\n\x1b]0;pwned\x07\nssh: connect to host h port 22: Connection refused\r\n";
        assert_eq!(
            shown_tail(tail),
            "\u{FFFD}]0;pwned\u{FFFD} / ssh: connect to host h port 22: Connection refused"
        );
        let long = "é".repeat(300);
        assert_eq!(shown_tail(long.as_bytes()).chars().count(), SHOWN_CHARS + 3);
    }
}
