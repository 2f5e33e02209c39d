//! Waiting for what another process or thread does: check, sleep a little, check again, and
//! give up after a time with a message that says what never happened and how long it was
//! waited for. Timeouts are generous: the suite runs on loaded 2-core machines.

use std::path::Path;
use std::time::{Duration, Instant};

/// The sleep between two checks of [`wait_until`] and [`wait_for`].
pub const POLL: Duration = Duration::from_millis(20);

/// Calls `found` every `every` until it returns a value, and returns it; `Err` with the time
/// waited once `within` has passed (`found` is called at least once, and once more after
/// the time is up). For a wait whose failure says more than [`wait_for`]'s message, or
/// whose check is costly (a scrape, a query to a server) and so is made less often.
pub fn poll<T>(
    within: Duration,
    every: Duration,
    mut found: impl FnMut() -> Option<T>,
) -> Result<T, Duration> {
    let start = Instant::now();
    loop {
        if let Some(value) = found() {
            return Ok(value);
        }
        let waited = start.elapsed();
        if waited >= within {
            return Err(waited);
        }
        std::thread::sleep(every);
    }
}

/// Polls `found` until it returns a value, and returns it; panics once `within` has passed,
/// naming `what` (what was awaited: "the job's pid file") and the time waited.
#[track_caller]
pub fn wait_for<T>(what: &str, within: Duration, found: impl FnMut() -> Option<T>) -> T {
    match poll(within, POLL, found) {
        Ok(value) => value,
        Err(waited) => panic!("waited {waited:?} for {what}, in vain"),
    }
}

/// Polls `done` until it holds; panics once `within` has passed, naming `what` and the time
/// waited.
#[track_caller]
pub fn wait_until(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    wait_for(what, within, || done().then_some(()));
}

/// [`wait_until`] `path` exists.
#[track_caller]
pub fn wait_for_path(path: &Path, within: Duration) {
    wait_until(&format!("{} to appear", path.display()), within, || {
        path.exists()
    });
}

/// [`wait_until`] `path` exists and holds something (a file its writer has begun to fill).
#[track_caller]
pub fn wait_for_content(path: &Path, within: Duration) {
    wait_until(&format!("{} to be written", path.display()), within, || {
        std::fs::metadata(path).is_ok_and(|m| m.len() > 0)
    });
}
