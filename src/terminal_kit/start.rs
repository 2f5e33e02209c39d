//! The start-up both screens share, in its order: a terminal on both ends that can show a
//! screen, then signals forwarded to the screen's channel; later (once the screen's own
//! threads run) keys read into the same channel and the terminal taken over. Keys are read
//! before the terminal is taken over, so a failure to start leaves it as it was. Each step
//! says its failure in one line and gives the exit status to leave with.

use super::guard::{TerminalGuard, unsuitable};
use super::signals::{self, SignalEvent};
use crossterm::event::Event as TermEvent;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::mpsc::Sender;

/// Refused unless standard input and output are a terminal that can show `screen` (`the
/// monitor`); `instead` names what to use for a file or pipe.
pub fn check_terminal(screen: &str, instead: &str) -> Result<(), ExitCode> {
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        eprintln!(
            "vramscope: {screen} needs a terminal; for output to a file or pipe use {instead}"
        );
        return Err(ExitCode::from(2));
    }
    if let Some(why) = unsuitable() {
        eprintln!("vramscope: {why}");
        return Err(ExitCode::from(2));
    }
    Ok(())
}

/// The signals a screen answers (`signals`), as events on `tx`.
pub fn watch_signals<E: From<SignalEvent> + Send + 'static>(tx: Sender<E>) -> Result<(), ExitCode> {
    signals::forward(tx).map_err(|e| {
        eprintln!("vramscope: cannot watch signals: {e}");
        ExitCode::from(1)
    })
}

/// Keys read into `tx` (each wrapped by `wrap`: the key, or `None` when input closed), then
/// the terminal taken over.
pub fn take_over<E: Send + 'static>(
    tx: Sender<E>,
    wrap: fn(Option<TermEvent>) -> E,
) -> Result<TerminalGuard, ExitCode> {
    if let Err(e) = super::input::spawn_reader(tx, wrap) {
        eprintln!("vramscope: {e}");
        return Err(ExitCode::from(1));
    }
    TerminalGuard::enter().map_err(|e| {
        eprintln!("vramscope: cannot set up the terminal: {e}");
        ExitCode::from(1)
    })
}
