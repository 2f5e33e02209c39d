//! Terminal input on a thread of its own, so a screen's loop waits on one channel for keys,
//! samples and signals alike. The monitor and the cluster view each wrap what it reads in
//! their own event type.

use crate::threads::SpawnFailed;
use crossterm::event::{self as term_event, Event as TermEvent};
use std::sync::mpsc::Sender;

/// Reads terminal events into `tx`, each wrapped by `wrap`: `Some(event)`, or `None` once
/// input is closed (the last thing sent). Stops when the loop's end of `tx` is gone.
pub fn spawn_reader<E: Send + 'static>(
    tx: Sender<E>,
    wrap: fn(Option<TermEvent>) -> E,
) -> Result<(), SpawnFailed> {
    crate::threads::spawn("input", move || {
        loop {
            let event = term_event::read().ok();
            let closed = event.is_none();
            if tx.send(wrap(event)).is_err() || closed {
                return;
            }
        }
    })?;
    Ok(())
}
