//! Signals as events: SIGTERM, SIGINT, SIGHUP (ssh dropped) and SIGQUIT end the loop so the
//! terminal is restored; SIGTSTP (`kill -TSTP`, the shell's suspend) gives the terminal back
//! before stopping; SIGCONT (resumed after any stop) takes it back and redraws it whole.
//!
//! SIGTTIN and SIGTTOU keep their default action, stopping us: they come only while we are in
//! the background, where the terminal is not ours to restore, and catching SIGTTOU would make
//! the terminal calls that raise it repeat forever. SIGCONT takes the terminal back after them
//! too.

use signal_hook::consts::{SIGCONT, SIGHUP, SIGINT, SIGQUIT, SIGSTOP, SIGTERM, SIGTSTP, SIGWINCH};
use signal_hook::iterator::Signals;
use std::sync::mpsc::Sender;
use std::thread;

/// What a signal asks of the loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignalEvent {
    Quit(i32),
    /// Restore the terminal, then stop until continued.
    Stop,
    Resumed,
    Resized,
}

/// Forwards signals to the loop's channel from a thread of their own.
pub fn forward<E: From<SignalEvent> + Send + 'static>(tx: Sender<E>) -> std::io::Result<()> {
    let mut signals = Signals::new([SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGTSTP, SIGCONT, SIGWINCH])?;
    thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                let event = match signal {
                    SIGCONT => SignalEvent::Resumed,
                    SIGWINCH => SignalEvent::Resized,
                    SIGTSTP => SignalEvent::Stop,
                    other => SignalEvent::Quit(other),
                };
                if tx.send(event.into()).is_err() {
                    return;
                }
            }
        })?;
    Ok(())
}

/// Stops this process until a SIGCONT. SIGSTOP, since our SIGTSTP only sends an event: the
/// caller has given the terminal back first.
pub fn stop_here() {
    let _ = signal_hook::low_level::raise(SIGSTOP);
}
