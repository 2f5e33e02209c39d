//! Per-function call counters, readable in-process and written to
//! `$FAKE_NVML_COUNTS` as JSON for other processes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Environment variable naming the JSON file the counts are written to.
pub const COUNTS_ENV: &str = "FAKE_NVML_COUNTS";
/// Minimum time between two writes triggered from the call path.
const WRITE_INTERVAL: Duration = Duration::from_secs(1);

struct Counters {
    /// By name, in first-call order. A list found by pointer rather than a `HashMap`: every
    /// NVML call lands here, about thirty names are ever counted, and hashing each name was
    /// the larger part of what counting cost the monitor being benchmarked.
    counts: Vec<(&'static str, u64)>,
    last_write: Option<Instant>,
}

static COUNTERS: Mutex<Counters> = Mutex::new(Counters {
    counts: Vec::new(),
    last_write: None,
});
/// The counts file, kept open between writes; `None` until the first write.
static WRITER: Mutex<Option<CountsFile>> = Mutex::new(None);

/// An open counts file: each write overwrites it in place.
///
/// Why not a temp file and a rename, which readers would never see half-written: on tmpfs
/// each rename freed the old file's page and each write allocated a new one, and that was a
/// tenth of a millisecond a second inside the monitor being benchmarked, charged to it. An
/// overwrite of the same page costs one `pwrite`. The numbers are padded to a fixed width,
/// so the text keeps its length and layout from one write to the next, and a reader that
/// overlaps a write sees at worst a wrong digit: reading until two reads agree is enough.
struct CountsFile {
    path: PathBuf,
    file: std::fs::File,
    len: u64,
}
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn snapshot(c: &Counters) -> BTreeMap<String, u64> {
    let mut all = BTreeMap::new();
    for (name, count) in &c.counts {
        *all.entry((*name).to_owned()).or_insert(0) += count;
    }
    all
}

/// Counts one call of `name`; writes the counts file when one is due.
pub fn record(name: &'static str) {
    let due = {
        let mut c = lock(&COUNTERS);
        // The same literal is one pointer; a copy of it elsewhere gets its own entry, which
        // `snapshot` adds up.
        match c
            .counts
            .iter_mut()
            .find(|(known, _)| std::ptr::eq(*known, name))
        {
            Some((_, count)) => *count += 1,
            None => c.counts.push((name, 1)),
        }
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
    c.counts.clear();
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

/// Writes the counts as a JSON object to `path`, in place (see [`CountsFile`]).
pub fn write_counts_to(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut writer = lock(&WRITER);
    let text = counts_json(&call_counts());
    // Removed, or replaced by a rename, the open file has no name left: opened anew. An
    // `fstat` of the descriptor, not a lookup of the path.
    let still_there = |open: &CountsFile| {
        use std::os::unix::fs::MetadataExt;
        open.path == path && open.file.metadata().is_ok_and(|m| m.nlink() > 0)
    };
    let open = match writer.take() {
        Some(open) if still_there(&open) => open,
        _ => {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(path)?;
            CountsFile {
                path: path.to_path_buf(),
                file,
                len: 0,
            }
        }
    };
    let len = text.len() as u64;
    open.file.write_all_at(text.as_bytes(), 0)?;
    // Shorter only after `reset()` dropped some functions.
    if len < open.len {
        open.file.set_len(len)?;
    }
    *writer = Some(CountsFile { len, ..open });
    Ok(())
}

/// Pretty JSON, each count right-aligned in 20 columns (a u64's widest), so that the text
/// changes in its digits only while no new function is called.
fn counts_json(counts: &BTreeMap<String, u64>) -> String {
    use std::fmt::Write as _;
    let mut text = String::from("{");
    for (i, (name, count)) in counts.iter().enumerate() {
        let comma = if i == 0 { "" } else { "," };
        let name = serde_json::to_string(name).unwrap_or_default();
        let _ = write!(text, "{comma}\n  {name}: {count:>20}");
    }
    text.push_str("\n}\n");
    text
}

/// Writes the counts once more when the process exits normally (or the library is
/// unloaded), so a short-lived client that never calls `nvmlShutdown` (a one-shot command
/// that keeps NVML open until exit) leaves complete counts. Nothing is written by a process
/// that made no call, or one killed by a signal.
extern "C" fn write_counts_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        let any = !lock(&COUNTERS).counts.is_empty();
        if any {
            let _ = write_to_env_path();
        }
    });
}

#[used]
#[unsafe(link_section = ".fini_array")]
static WRITE_COUNTS_AT_EXIT: extern "C" fn() = write_counts_at_exit;
