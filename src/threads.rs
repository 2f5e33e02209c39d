//! Starting the monitor's threads. A thread that cannot start (the system is out of threads
//! or memory) is an error its caller reports in one line before exiting: a missing input or
//! NVML thread would otherwise leave the monitor deaf, or stuck on "starting NVML...".
//!
//! `VRAMSCOPE_FAIL_SPAWN=<name>` makes the thread of that name fail to start as the system
//! would (EAGAIN), so the tests can reach each of those paths.

use std::io;
use std::thread::{Builder, JoinHandle};

/// A thread that did not start; shown as "cannot start the NAME thread: REASON".
#[derive(Debug)]
pub struct SpawnFailed {
    pub name: String,
    pub error: io::Error,
}

impl std::fmt::Display for SpawnFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot start the {} thread: {}", self.name, self.error)
    }
}

impl std::error::Error for SpawnFailed {}

/// Starts `body` on a thread called `name`.
pub fn spawn<F, T>(name: &str, body: F) -> Result<JoinHandle<T>, SpawnFailed>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let started = if refused(name) {
        Err(io::Error::from_raw_os_error(libc::EAGAIN))
    } else {
        Builder::new().name(name.to_string()).spawn(body)
    };
    started.map_err(|error| SpawnFailed {
        name: name.to_string(),
        error,
    })
}

fn refused(name: &str) -> bool {
    std::env::var_os("VRAMSCOPE_FAIL_SPAWN").is_some_and(|v| v == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_starts_and_runs() {
        let handle = spawn("h20-test-thread", || 41 + 1).expect("spawn");
        assert_eq!(handle.join().expect("join"), 42);
    }

    #[test]
    fn the_failure_line_names_the_thread_and_the_reason() {
        let failed = SpawnFailed {
            name: "input".into(),
            error: io::Error::from_raw_os_error(libc::EAGAIN),
        };
        assert_eq!(
            failed.to_string(),
            "cannot start the input thread: Resource temporarily unavailable (os error 11)"
        );
    }
}
