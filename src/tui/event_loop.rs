//! The main thread: owns the monitor state and the UI state, blocks on one channel carrying
//! samples, keys and signals, and redraws at once after input and once per tick's batch of
//! samples (never more often than `MIN_DATA_GAP`), so an idle monitor costs next to nothing.

use super::feed::Feed;
use super::keys::{self, Outcome};
use super::options::Options;
use super::rows::{TableRow, table_rows};
use super::ui_state::JobView;
use super::ui_state::UiState;
use super::view::View;
use crate::job::{Job, JobEnd, descends_from};
use crate::model::SourceEvent;
use crate::model::{Snapshot, now_ms};
use crate::record::live::LiveRecording;
use crate::replay::Replay;
use crate::sources::runner::Sampling;
use crate::sources::sites_worker::{SitesDone, SitesWorker};
use crate::state::{HistoryView, Monitor, StaleAfter};
use crate::terminal_kit::clock::Clock;
use crate::terminal_kit::guard::TerminalGuard;
use crate::terminal_kit::signals::{self, SignalEvent};
use crate::terminal_kit::start;
use crate::terminal_kit::theme::Theme;
use crossterm::event::Event as TermEvent;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// Data never redraws more often than this, whatever the refresh period. (A tick's samples
/// arrive as one batch, so one frame shows them all without waiting for stragglers.)
const MIN_DATA_GAP: Duration = Duration::from_millis(50);

/// Everything the loop waits for.
enum Event {
    Source(SourceEvent),
    Input(TermEvent),
    InputClosed,
    Signal(SignalEvent),
    JobEnded(JobEnd),
    /// A snapshot reduced off this thread (`SitesWorker`).
    Sites(SitesDone),
}

impl From<SitesDone> for Event {
    fn from(done: SitesDone) -> Self {
        Event::Sites(done)
    }
}

impl From<JobEnd> for Event {
    fn from(end: JobEnd) -> Self {
        Event::JobEnded(end)
    }
}

/// The job `vramscope run` launched, handed to the monitor.
pub struct RunJob {
    pub job: Job,
    /// Quit when it ends, with its status.
    pub exit_with_job: bool,
}

impl From<SourceEvent> for Event {
    fn from(e: SourceEvent) -> Self {
        Event::Source(e)
    }
}

impl From<SignalEvent> for Event {
    fn from(e: SignalEvent) -> Self {
        Event::Signal(e)
    }
}

/// Runs the interactive monitor until the person quits or a signal ends it.
pub fn run(options: &Options, started: Instant, job: Option<RunJob>) -> ExitCode {
    monitor(options, started, job, None)
}

/// The same monitor on a recording, with a time cursor.
pub fn replay(options: &Options, replay: Replay) -> ExitCode {
    monitor(options, Instant::now(), None, Some(replay))
}

fn monitor(
    options: &Options,
    started: Instant,
    job: Option<RunJob>,
    replay: Option<Replay>,
) -> ExitCode {
    // The layout solver is the costliest part of a frame; every panel's split is cached.
    ratatui::layout::Layout::init_cache(std::num::NonZeroUsize::MIN.saturating_add(255));
    if let Err(status) = start::check_terminal("the monitor", "--once, --json or --csv") {
        return status;
    }
    if replay.is_some() && options.record.is_some() {
        eprintln!("vramscope: --record records live data; a replay is already a recording");
        return ExitCode::from(2);
    }
    let (tx, rx) = channel::<Event>();
    if let Err(status) = start::watch_signals(tx.clone()) {
        return status;
    }
    let (feed, monitor) = match replay {
        Some(replay) => Feed::replay(replay),
        None => {
            let sampling = match Sampling::start(options.sampling.clone(), tx.clone()) {
                Ok(sampling) => sampling,
                Err(e) => {
                    eprintln!("vramscope: {e}");
                    return ExitCode::from(1);
                }
            };
            (Feed::Live(sampling), Monitor::new(now_ms()))
        }
    };
    // The header keeps the period recording began at; each change is recorded as it comes.
    let recording = match LiveRecording::start(options.record.as_deref(), feed.interval_ms()) {
        Ok(r) => r,
        Err(message) => {
            eprintln!("vramscope: {message}");
            return ExitCode::from(2);
        }
    };
    // Hooks look at live data only: a replay's events happened long ago.
    let hooks = if feed.is_live() {
        options.hooks.as_slice()
    } else {
        &[]
    };
    let mut notifier = match crate::notify::Notifier::start(hooks, now_ms()) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("vramscope: {e}");
            return ExitCode::from(1);
        }
    };
    if let (Some(n), Some(RunJob { job, .. })) = (notifier.as_mut(), job.as_ref()) {
        n.watch_job(job.pid);
    }
    let exit_with_job = job.as_ref().is_some_and(|j| j.exit_with_job);
    let job_started = job.as_ref().and_then(|RunJob { job, .. }| {
        let log = job.log.as_ref()?;
        Some(format!(
            "job {} started; its output goes to {}",
            job.pid,
            log.display()
        ))
    });
    let mut job_view = None;
    if let Some(RunJob { job, .. }) = job {
        job_view = Some(JobView {
            pid: job.pid,
            end: None,
            focused: false,
        });
        if let Err(e) = job.watch(tx.clone()) {
            eprintln!("vramscope: {e}");
            return ExitCode::from(1);
        }
    }
    // Snapshots are read and reduced on their own thread: a large one takes a second.
    let sites = match SitesWorker::start(tx.clone()) {
        Ok(worker) => worker,
        Err(e) => {
            eprintln!("vramscope: {e}");
            return ExitCode::from(1);
        }
    };
    let mut guard = match start::take_over(tx, |read| read.map_or(Event::InputClosed, Event::Input))
    {
        Ok(guard) => guard,
        Err(status) => return status,
    };
    let mut app = App {
        monitor,
        ui: UiState::new(options.ascii, options.read_only),
        theme: Theme::from_env_named(options.theme, options.ascii),
        feed,
        exit_with_job,
        recording,
        behind_demo: None,
        sites,
        attaching: None,
        hooks: notifier.map(|notifier| Hooks {
            notifier,
            due: false,
            last_look: None,
        }),
    };
    app.ui.flash = job_started;
    app.ui.columns = options.columns.clone().unwrap_or_default();
    app.ui.units = options.units;
    app.ui.job = job_view;
    app.ui.time_cursor = !app.feed.is_live();
    app.ui.clock = Clock::Local;
    app.ui.sort = options.sort;
    app.ui.sort_descending = options.sort_descending;
    app.ui.host = app.feed.host();
    let mut first_frame = FirstFrame::from_env(started);
    // The last frame drawn for new data; frames drawn for input don't hold data back.
    let mut last_data_draw: Option<Instant> = None;
    let mut complete = false;
    // When data first arrived since the last frame; None = nothing new to show.
    let mut data_since: Option<Instant> = None;
    let mut input_dirty = true;
    let status = loop {
        if app.feed.tick(&mut app.monitor) {
            input_dirty = true;
        }
        if let Some(stopped) = app.recording.tick() {
            app.ui.flash = Some(stopped);
        }
        if app.look_for_events() {
            input_dirty = true;
        }
        let now = Instant::now();
        // Until every GPU has reported once, the screen is incomplete: the frame that first
        // completes it is drawn at once, whenever the previous frame was.
        let completed_now = !complete && app.monitor.has_first_data();
        let data_due_at = data_since.map(|since| {
            if completed_now {
                return since;
            }
            last_data_draw.map_or(since, |d| since.max(d + MIN_DATA_GAP))
        });
        let data_due = data_due_at.is_some_and(|due| now >= due);
        if input_dirty || data_due {
            if let Err(e) = app.draw(&mut guard) {
                break Exit::Error(format!("drawing failed: {e}"));
            }
            if data_due {
                last_data_draw = Some(Instant::now());
            }
            app.ring_bell();
            complete |= app.monitor.has_first_data();
            first_frame.drawn(&app.monitor);
            data_since = None;
            input_dirty = false;
        }
        // Idle: wake once a second anyway so ages ("3s ago") and stale marks stay true.
        let wait = match data_due_at {
            Some(due) if data_since.is_some() => due.saturating_duration_since(Instant::now()),
            _ => Duration::from_secs(1),
        };
        let wait = app.feed.wake_in().map_or(wait, |play| play.min(wait));
        let first = match rx.recv_timeout(wait) {
            Ok(event) => event,
            Err(RecvTimeoutError::Timeout) => {
                if data_since.is_none() {
                    input_dirty = true;
                }
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break Exit::Status(0),
        };
        let mut next = Some(first);
        let mut exit = None;
        // Drain everything pending before drawing once.
        while let Some(event) = next {
            match app.handle(event, &mut guard) {
                Step::Data => {
                    data_since.get_or_insert_with(Instant::now);
                }
                Step::Input => input_dirty = true,
                Step::Nothing => {}
                Step::Exit(e) => {
                    exit = Some(e);
                    break;
                }
            }
            next = rx.try_recv().ok();
        }
        if let Some(e) = exit {
            break e;
        }
        app.reduce_snapshots();
    };
    drop(guard);
    if let Some(hooks) = &app.hooks {
        // Long enough for the hooks the last events called for to start; they run on after.
        hooks.notifier.wait_idle(HOOKS_AT_EXIT);
        for line in hooks.notifier.take_said() {
            eprintln!("vramscope: {line}");
        }
    }
    if let Some(line) = app.recording.finish() {
        eprintln!("vramscope: {line}");
    }
    match status {
        Exit::Status(code) => ExitCode::from(code),
        Exit::Error(message) => {
            eprintln!("vramscope: {message}");
            ExitCode::from(1)
        }
    }
}

enum Exit {
    Status(u8),
    Error(String),
}

enum Step {
    Nothing,
    Data,
    Input,
    Exit(Exit),
}

struct App {
    monitor: Monitor,
    ui: UiState,
    theme: Theme,
    feed: Feed,
    exit_with_job: bool,
    /// `--record`: every event is recorded before it is ingested.
    recording: LiveRecording,
    /// While the demo plays: the live data it covers, still sampled, to go back to.
    behind_demo: Option<Behind>,
    /// Reduces the memory snapshots writers announce, off this thread.
    sites: SitesWorker,
    /// A `vramscope attach` started with `a`, still running.
    attaching: Option<super::attach_run::Running>,
    /// `--on EVENT=CMD`: the hooks, looking at the live data.
    hooks: Option<Hooks>,
}

/// The hooks and when they last looked at the live data.
struct Hooks {
    notifier: crate::notify::Notifier,
    /// New live data arrived since the last look.
    due: bool,
    last_look: Option<Instant>,
}

/// The hooks look at most this often: peak reads arrive ten times a second, and each look
/// takes a snapshot.
const HOOKS_LOOK_GAP: Duration = Duration::from_millis(250);
/// How long the monitor waits at exit for the hooks still queued or running.
const HOOKS_AT_EXIT: Duration = Duration::from_secs(1);

/// The live screen's data, kept while the demo plays over it.
struct Behind {
    feed: Feed,
    monitor: Monitor,
}

impl App {
    /// Lets the hooks look at the live data (paused or not: a paused screen still hears
    /// of an OOM) when new data came; true when they have something to say on screen.
    fn look_for_events(&mut self) -> bool {
        let Some(hooks) = &mut self.hooks else {
            return false;
        };
        let recent = hooks
            .last_look
            .is_some_and(|t| t.elapsed() < HOOKS_LOOK_GAP);
        if hooks.due && !recent && self.behind_demo.is_none() {
            hooks.due = false;
            hooks.last_look = Some(Instant::now());
            let snapshot = self.monitor.snapshot(
                self.feed.now_ms(),
                StaleAfter::interval(self.feed.interval_ms()),
            );
            hooks.notifier.observe(&snapshot);
        }
        let said = hooks.notifier.take_said();
        if said.is_empty() {
            return false;
        }
        self.ui.flash = Some(said.join("; "));
        true
    }

    /// The terminal bell, when a `bell` hook asked for one; between frames, so that it
    /// never splits an escape sequence.
    fn ring_bell(&mut self) {
        if self.hooks.as_mut().is_some_and(|h| h.notifier.take_bell()) {
            let mut out = std::io::stdout();
            let _ = out.write_all(b"\x07").and_then(|()| out.flush());
        }
    }

    /// What the screen shows: the frozen snapshot while paused, else a fresh one.
    fn shown(&self) -> Arc<Snapshot> {
        match &self.ui.frozen {
            Some(frozen) => Arc::clone(frozen),
            None => Arc::new(self.monitor.snapshot(
                self.feed.now_ms(),
                StaleAfter::interval(self.feed.interval_ms()),
            )),
        }
    }

    /// Hands the worker the snapshots the live state wants reduced; one it displaced
    /// unread is marked unread again, to be asked for later.
    fn reduce_snapshots(&mut self) {
        if !self.feed.is_live() || self.behind_demo.is_some() {
            return;
        }
        for job in self.monitor.reductions_wanted() {
            if let Some(displaced) = self.sites.submit(job) {
                self.monitor.sites_done(
                    &displaced.channel,
                    &displaced.path,
                    crate::model::held_sites::SitesState::NotRead,
                );
            }
        }
    }

    fn rows(&self, snapshot: &Snapshot) -> Vec<TableRow> {
        table_rows(snapshot, &self.ui)
    }

    fn draw(&mut self, guard: &mut TerminalGuard) -> std::io::Result<()> {
        let snapshot = self.shown();
        super::rows::hold_vram(&mut self.ui, &snapshot);
        crate::log_file::reasons(|| {
            let now = self.feed.now_ms();
            let all = super::panels::reasons::collect(&snapshot, now, false);
            all.into_iter().map(|r| r.text).collect()
        });
        let rows = self.rows(&snapshot);
        self.ui.banner = self.feed.banner();
        self.ui.recording = self.recording.label();
        focus_job(&mut self.ui, &rows);
        follow_selection(&mut self.ui, &rows);
        let view = View {
            snapshot: &snapshot,
            history: HistoryView::at(&self.monitor, snapshot.taken_at_ms),
            ui: &self.ui,
            now_ms: snapshot.taken_at_ms,
            interval_ms: self.feed.interval_ms(),
            theme: &self.theme,
            rows: &rows,
        };
        guard.draw(|frame| super::layout::draw(frame, &view))
    }

    fn handle(&mut self, event: Event, guard: &mut TerminalGuard) -> Step {
        if let Some(answer) = self.attaching.as_mut().and_then(|a| a.poll()) {
            self.attaching = None;
            self.ui.flash = Some(answer);
        } else if let Some(running) = &self.attaching
            && self.ui.flash.is_none()
        {
            // Said until the answer comes, whatever key cleared it.
            self.ui.flash = Some(running.pending());
        }
        match event {
            Event::Source(e) => {
                if let Some(stopped) = self.recording.record(&e) {
                    self.ui.flash = Some(stopped);
                }
                // Live sampling goes on under the demo, so going back shows the present.
                if let Some(behind) = &mut self.behind_demo {
                    behind.monitor.ingest(e);
                    return Step::Nothing;
                }
                if !self.feed.is_live() {
                    return Step::Nothing;
                }
                self.monitor.ingest(e);
                if let Some(hooks) = &mut self.hooks {
                    hooks.due = true;
                }
                if self.ui.frozen.is_some() {
                    Step::Nothing
                } else {
                    Step::Data
                }
            }
            Event::Input(TermEvent::Key(key)) => self.key(key, guard),
            Event::Input(TermEvent::Resize(..)) | Event::Signal(SignalEvent::Resized) => {
                let _ = guard.resized();
                Step::Input
            }
            Event::Input(_) => Step::Nothing,
            Event::InputClosed => Step::Exit(Exit::Status(0)),
            Event::Signal(SignalEvent::Quit(signal)) => {
                Step::Exit(Exit::Status(128u8.saturating_add(signal as u8)))
            }
            Event::Signal(SignalEvent::Stop) => stop(guard),
            Event::Signal(SignalEvent::Resumed) => {
                let _ = guard.resume();
                Step::Input
            }
            Event::Sites(done) => {
                // Under the demo, the live monitor it covers keeps the answer.
                let monitor = match &mut self.behind_demo {
                    Some(behind) => &mut behind.monitor,
                    None => &mut self.monitor,
                };
                monitor.sites_done(&done.channel, &done.path, done.sites);
                if self.ui.frozen.is_some() || self.behind_demo.is_some() {
                    Step::Nothing
                } else {
                    Step::Data
                }
            }
            Event::JobEnded(end) => {
                let code = end.code;
                if let (Some(hooks), Some(job)) = (&mut self.hooks, &self.ui.job) {
                    let at = self.feed.now_ms();
                    hooks.notifier.job_ended(job.pid, code, &end.text, at);
                }
                if let Some(job) = &mut self.ui.job {
                    self.ui.flash = Some(format!("job {} {}", job.pid, end.text));
                    job.end = Some(end);
                }
                if self.exit_with_job {
                    Step::Exit(Exit::Status(code))
                } else {
                    Step::Input
                }
            }
        }
    }

    fn key(&mut self, key: crossterm::event::KeyEvent, guard: &mut TerminalGuard) -> Step {
        let snapshot = self.shown();
        let rows = self.rows(&snapshot);
        match keys::handle(key, &mut self.ui, &rows, &snapshot) {
            Outcome::Ignored => Step::Nothing,
            Outcome::Redraw => Step::Input,
            Outcome::FullRedraw => {
                let _ = guard.resized();
                Step::Input
            }
            // Quitting after the job ended reports how it ended, as `--exit-with-job` does.
            Outcome::Quit => Step::Exit(Exit::Status(
                self.ui
                    .job
                    .as_ref()
                    .and_then(|j| j.end.as_ref())
                    .map_or(0, |end| end.code),
            )),
            Outcome::Suspend => stop(guard),
            Outcome::Kill(request) => {
                self.ui.flash = Some(keys::send_signal(&request));
                Step::Input
            }
            Outcome::AskSnapshot { pid, process } => {
                self.ui.flash = Some(super::snapshot_ask::ask(&snapshot, pid, process));
                Step::Input
            }
            Outcome::Attach(request) => {
                self.ui.flash = Some(if self.attaching.is_some() {
                    "an attach is still running: wait for its answer".to_string()
                } else {
                    match super::attach_run::start(&request) {
                        Ok(running) => {
                            let pending = running.pending();
                            self.attaching = Some(running);
                            pending
                        }
                        Err(why) => why,
                    }
                });
                Step::Input
            }
            Outcome::ResetPeaks => {
                self.monitor.reset_peaks();
                self.ui.flash = Some("peaks reset".into());
                Step::Input
            }
            Outcome::StepInterval { slower } => {
                let ms = keys::step_interval(self.feed.interval_ms(), slower);
                self.ui.flash = Some(format!("refresh every {ms} ms"));
                // At either end of the ladder the period stays: no change to record.
                if ms == self.feed.interval_ms() {
                    return Step::Input;
                }
                if let Some(event) = self.feed.set_interval(Duration::from_millis(ms)) {
                    // Recorded like the samplers' events, so a replay and a plot of the
                    // recording read each period from when it began.
                    if let Some(stopped) = self.recording.record(&event) {
                        self.ui.flash = Some(stopped);
                    }
                    self.monitor.ingest(event);
                }
                Step::Input
            }
            Outcome::Replay(command) => {
                self.ui.flash = self.feed.command(command, &mut self.monitor);
                Step::Input
            }
            Outcome::PlayDemo => {
                match crate::replay::demo::replay() {
                    Ok(demo) => {
                        let (feed, monitor) = Feed::replay(demo);
                        self.behind_demo = Some(Behind {
                            feed: std::mem::replace(&mut self.feed, feed),
                            monitor: std::mem::replace(&mut self.monitor, monitor),
                        });
                        self.ui.in_demo = true;
                        self.ui.time_cursor = true;
                        self.ui.host = self.feed.host();
                        self.ui.frozen = None;
                        self.ui.flash = Some(crate::replay::demo::GREETING.into());
                    }
                    Err(e) => self.ui.flash = Some(format!("the demo cannot play: {e}")),
                }
                Step::Input
            }
            Outcome::LeaveDemo => {
                if let Some(behind) = self.behind_demo.take() {
                    self.feed = behind.feed;
                    self.monitor = behind.monitor;
                    self.ui.time_cursor = false;
                    self.ui.frozen = None;
                    self.ui.host = self.feed.host();
                    self.ui.flash = Some("demo ended: live data again".into());
                }
                self.ui.in_demo = false;
                Step::Input
            }
        }
    }
}

/// Ctrl-Z or SIGTSTP: the terminal goes back to the shell, then we stop; once continued,
/// the terminal is ours again and redrawn whole.
fn stop(guard: &mut TerminalGuard) -> Step {
    guard.suspend();
    signals::stop_here();
    let _ = guard.resume();
    Step::Input
}

/// Puts the selection on the launched job's process (or a descendant: torchrun's ranks) the
/// first time one shows up on a GPU, so the monitor opens on the job.
fn focus_job(ui: &mut UiState, rows: &[TableRow]) {
    let Some(job) = &mut ui.job else { return };
    if job.focused {
        return;
    }
    let root = job.pid;
    if let Some(row) = rows
        .iter()
        .find(|r| !r.is_exited() && descends_from(r.local_pid().unwrap_or(r.key.pid), root))
    {
        job.focused = true;
        ui.selected_key = Some(row.key.clone());
        ui.selection_chosen = true;
    }
}

/// Keeps a chosen selection on the same process when rows are re-sorted or come and go;
/// when it has gone, on the same line. One nobody chose stays on the top row.
fn follow_selection(ui: &mut UiState, rows: &[TableRow]) {
    let found = ui
        .selected_key
        .as_ref()
        .filter(|_| ui.selection_chosen)
        .and_then(|key| rows.iter().position(|r| &r.key == key));
    ui.selected = match found {
        Some(at) => at,
        None if !ui.selection_chosen => 0,
        None => ui.selected.min(rows.len().saturating_sub(1)),
    };
    ui.selected_key = rows.get(ui.selected).map(|r| r.key.clone());
}

/// Benchmark hook: with VRAMSCOPE_FIRST_FRAME_FILE set, writes the µs from start to the first
/// frame that shows every GPU's data (or the reason there is none).
struct FirstFrame {
    target: Option<std::path::PathBuf>,
    started: Instant,
}

impl FirstFrame {
    fn from_env(started: Instant) -> Self {
        Self {
            target: std::env::var_os("VRAMSCOPE_FIRST_FRAME_FILE").map(Into::into),
            started,
        }
    }

    fn drawn(&mut self, monitor: &Monitor) {
        let Some(target) = &self.target else { return };
        if !monitor.has_first_data() {
            return;
        }
        let micros = self.started.elapsed().as_micros();
        let _ = std::fs::write(target, format!("{micros}\n"));
        self.target = None;
    }
}
