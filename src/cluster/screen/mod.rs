//! The interactive cluster screen. The main thread owns the model and the person's
//! choices; it blocks on one channel carrying refreshes (from the fetcher thread), keys and
//! signals, and redraws after each, and once a second so ages stay true. The terminal is
//! handled as the monitor handles it (`terminal_kit`, its start-up `terminal_kit::start`): restored on every
//! exit path, suspended and resumed, resized.

mod charts;
mod help;
mod keys;
mod render;
mod state;

use super::fetch::{self, ChartsPast, Fetched, Source};
use super::model::Cluster;
use super::options::{ClusterView, Options};
use super::view::{self, StaleAfter};
use crate::model::now_ms;
use crate::terminal_kit::signals::{self, SignalEvent};
use crate::terminal_kit::start;
use crate::terminal_kit::theme::Theme;
use crossterm::event::Event as TermEvent;
use keys::Outcome;
use state::Ui;
use std::process::ExitCode;
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

enum Event {
    Fetched(Box<Fetched>),
    ChartsPast(ChartsPast),
    Input(TermEvent),
    InputClosed,
    Signal(SignalEvent),
}

impl From<SignalEvent> for Event {
    fn from(e: SignalEvent) -> Self {
        Event::Signal(e)
    }
}

fn fetched(f: Fetched) -> Event {
    Event::Fetched(Box::new(f))
}

fn charts_past(p: ChartsPast) -> Event {
    Event::ChartsPast(p)
}

pub fn run(
    options: &Options,
    source: Source,
    stale_after: StaleAfter,
    started: Instant,
) -> ExitCode {
    if let Err(status) = start::check_terminal("the cluster view", "--once or --json") {
        return status;
    }
    let (tx, rx) = channel::<Event>();
    if let Err(status) = start::watch_signals(tx.clone()) {
        return status;
    }
    let describe = source.describe();
    // The targets of the nodes shown open: the fetcher reads their single-node figures.
    let open = Arc::new(Mutex::new(Vec::new()));
    if let Err(e) = fetch::spawn(
        source,
        options.interval,
        Arc::clone(&open),
        tx.clone(),
        (fetched, charts_past),
    ) {
        eprintln!("vramscope: {e}");
        return ExitCode::from(1);
    }
    let mut guard = match start::take_over(tx, |read| read.map_or(Event::InputClosed, Event::Input))
    {
        Ok(guard) => guard,
        Err(status) => return status,
    };
    let theme = Theme::from_env_named(options.theme, options.ascii);
    let mut ui = Ui::new(options.view);
    let mut cluster = Cluster::default();
    let mut screen = view::build(&cluster, &describe, now_ms(), stale_after);
    let mut first_frame = std::env::var_os("VRAMSCOPE_FIRST_FRAME_FILE");
    // Benchmark hook: the refreshes taken in and the HTTP requests they made, rewritten
    // after each, so requests per refresh are counted, not inferred from the time.
    let refresh_file = std::env::var_os("VRAMSCOPE_REFRESH_FILE");
    let status = loop {
        if !ui.paused {
            screen = view::build(&cluster, &describe, now_ms(), stale_after);
        }
        if !ui.view_chosen && screen.has_ranks() {
            ui.view = ClusterView::Jobs;
        }
        let mut lines = state::lines(&screen, &ui);
        ui.select_first_if_none(&screen, &lines);
        if let Ok(mut open) = open.lock() {
            *open = state::open_instances(&screen, &ui);
        }
        if let Err(e) = guard.draw(|frame| {
            let charts = (&cluster.charts, stale_after.unread_ms);
            render::draw(frame, &screen, charts, &mut ui, &lines, &theme);
            None
        }) {
            break Err(format!("drawing failed: {e}"));
        }
        // Benchmark hook: µs from start to the first frame drawn from an answer.
        if cluster.fetches > 0
            && let Some(file) = first_frame.take()
        {
            let _ = std::fs::write(file, format!("{}\n", started.elapsed().as_micros()));
        }
        let event = match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(event) => event,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => break Ok(()),
        };
        let mut next = Some(event);
        let mut quit = None;
        while let Some(event) = next {
            match event {
                Event::Fetched(f) => {
                    cluster.ingest(*f);
                    if let Some(file) = &refresh_file {
                        let counts = format!("{} {}\n", cluster.fetches, cluster.requests);
                        let _ = std::fs::write(file, counts);
                    }
                }
                Event::ChartsPast(p) => {
                    cluster.take_chart_past(p.past, p.at_ms);
                    if let Some(file) = &refresh_file {
                        let counts = format!("{} {}\n", cluster.fetches, cluster.requests);
                        let _ = std::fs::write(file, counts);
                    }
                }
                Event::Input(TermEvent::Key(key)) => {
                    let outcome = keys::handle(key, &mut ui, &screen, &lines);
                    // Keys typed together act each on what the one before made (`v` then
                    // Down selects in the new view).
                    if outcome != Outcome::Ignored {
                        lines = state::lines(&screen, &ui);
                    }
                    match outcome {
                        Outcome::Quit => quit = Some(Ok(())),
                        Outcome::Suspend => {
                            guard.suspend();
                            signals::stop_here();
                            if let Err(e) = guard.resume() {
                                quit = Some(Err(format!("cannot take the terminal back: {e}")));
                            }
                        }
                        Outcome::FullRedraw => {
                            if let Err(e) = guard.resized() {
                                quit = Some(Err(format!("cannot redraw: {e}")));
                            }
                        }
                        Outcome::Redraw | Outcome::Ignored => {}
                    }
                }
                Event::Input(TermEvent::Resize(..)) | Event::Signal(SignalEvent::Resized) => {
                    if let Err(e) = guard.resized() {
                        quit = Some(Err(format!("cannot follow the new size: {e}")));
                    }
                }
                Event::Input(_) => {}
                Event::InputClosed => quit = Some(Ok(())),
                Event::Signal(SignalEvent::Quit(_)) => quit = Some(Ok(())),
                Event::Signal(SignalEvent::Stop) => {
                    guard.suspend();
                    signals::stop_here();
                    if let Err(e) = guard.resume() {
                        quit = Some(Err(format!("cannot take the terminal back: {e}")));
                    }
                }
                Event::Signal(SignalEvent::Resumed) => {
                    if let Err(e) = guard.resume() {
                        quit = Some(Err(format!("cannot take the terminal back: {e}")));
                    }
                }
            }
            if quit.is_some() {
                break;
            }
            next = rx.try_recv().ok();
        }
        if let Some(q) = quit {
            break q;
        }
    };
    drop(guard);
    match status {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("vramscope: {message}");
            ExitCode::from(1)
        }
    }
}
