//! Per-function call counters, readable in-process and written to
//! `$FAKE_NVML_COUNTS` as JSON for other processes.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Environment variable naming the JSON file the counts are written to.
pub const COUNTS_ENV: &str = "FAKE_NVML_COUNTS";
/// Minimum time between two writes triggered from the call path.
const WRITE_INTERVAL: Duration = Duration::from_secs(1);

struct Counters {
    counts: Option<HashMap<&'static str, u64>>,
    last_write: Option<Instant>,
}

static COUNTERS: Mutex<Counters> = Mutex::new(Counters {
    counts: None,
    last_write: None,
});
/// Serialises file writers (they share the temp file name).
static WRITER: Mutex<()> = Mutex::new(());

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn snapshot(c: &Counters) -> BTreeMap<String, u64> {
    c.counts
        .iter()
        .flatten()
        .map(|(k, v)| ((*k).to_owned(), *v))
        .collect()
}

/// Counts one call of `name`; writes the counts file when one is due.
pub fn record(name: &'static str) {
    let due = {
        let mut c = lock(&COUNTERS);
        *c.counts
            .get_or_insert_with(HashMap::new)
            .entry(name)
            .or_insert(0) += 1;
        let due = c.last_write.is_none_or(|w| w.elapsed() >= WRITE_INTERVAL);
        if due {
            c.last_write = Some(Instant::now());
        }
        due
    };
    if due {
        // Errors here must not change the outcome of the NVML call.
        let _ = write_to_env_path();
    }
}

/// All counts so far, by exported function name.
pub fn call_counts() -> BTreeMap<String, u64> {
    snapshot(&lock(&COUNTERS))
}

/// Zeroes every counter.
pub fn reset() {
    let mut c = lock(&COUNTERS);
    c.counts = None;
    c.last_write = None;
}

fn counts_path() -> Option<PathBuf> {
    std::env::var_os(COUNTS_ENV)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
}

/// Writes the counts to `$FAKE_NVML_COUNTS`. `Ok(false)` when it is unset.
pub fn write_to_env_path() -> std::io::Result<bool> {
    match counts_path() {
        Some(path) => write_counts_to(&path).map(|()| true),
        None => Ok(false),
    }
}

/// Writes the counts as a JSON object to `path` atomically (temp file + rename).
pub fn write_counts_to(path: &Path) -> std::io::Result<()> {
    let _writer = lock(&WRITER);
    let json = serde_json::to_vec_pretty(&call_counts()).map_err(std::io::Error::other)?;
    let mut tmp_name = path.as_os_str().to_owned();
    // pid + address of our statics: unique per process and per loaded copy.
    let copy = &raw const COUNTERS as usize;
    tmp_name.push(format!(".tmp{}-{copy:x}", std::process::id()));
    let tmp = PathBuf::from(tmp_name);
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&json)?;
        f.write_all(b"\n")?;
        f.flush()?;
        drop(f);
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Writes the counts once more when the process exits normally (or the library is
/// unloaded), so a short-lived client that never calls `nvmlShutdown` (a one-shot command
/// that keeps NVML open until exit) leaves complete counts. Nothing is written by a process
/// that made no call, or one killed by a signal.
extern "C" fn write_counts_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        let any = lock(&COUNTERS)
            .counts
            .as_ref()
            .is_some_and(|c| !c.is_empty());
        if any {
            let _ = write_to_env_path();
        }
    });
}

#[used]
#[unsafe(link_section = ".fini_array")]
static WRITE_COUNTS_AT_EXIT: extern "C" fn() = write_counts_at_exit;
