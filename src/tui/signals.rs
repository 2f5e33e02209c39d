//! Signals as events: SIGTERM, SIGINT and SIGHUP (ssh dropped) end the loop so the terminal is
//! restored; SIGCONT (resumed after a stop) forces a full redraw.

use signal_hook::consts::{SIGCONT, SIGHUP, SIGINT, SIGTERM, SIGWINCH};
use signal_hook::iterator::Signals;
use std::sync::mpsc::Sender;
use std::thread;

/// What a signal asks of the loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignalEvent {
    Quit(i32),
    Resumed,
    Resized,
}

/// Forwards signals to the loop's channel from a thread of their own.
pub fn forward<E: From<SignalEvent> + Send + 'static>(tx: Sender<E>) -> std::io::Result<()> {
    let mut signals = Signals::new([SIGTERM, SIGINT, SIGHUP, SIGCONT, SIGWINCH])?;
    thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                let event = match signal {
                    SIGCONT => SignalEvent::Resumed,
                    SIGWINCH => SignalEvent::Resized,
                    other => SignalEvent::Quit(other),
                };
                if tx.send(event.into()).is_err() {
                    return;
                }
            }
        })?;
    Ok(())
}
