//! Process-wide state: init ref-count, time origin and the loaded scenario
//! (re-read when the file's inode, length or mtime changes).

use std::ffi::{CStr, OsStr, c_void};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use crate::clock::Origin;
use crate::ffi::{NvmlReturn, SUCCESS, UNINITIALIZED, UNKNOWN};
use crate::scenario::Scenario;

/// Environment variable naming the scenario file.
pub const SCENARIO_ENV: &str = "FAKE_NVML_SCENARIO";
/// Sidecar file looked for next to the loaded library when the env var is unset.
pub const SIDECAR_NAME: &str = "fake_nvml_scenario.json";
/// Minimum time between two checks of the scenario file for changes, where its directory
/// cannot be watched.
const RELOAD_INTERVAL: Duration = Duration::from_millis(50);
/// Where it is watched: a check this often even when nothing was reported, in case an
/// event was missed.
const WATCHED_RELOAD_INTERVAL: Duration = Duration::from_secs(5);
/// A file last modified at least this long before it was loaded cannot have been rewritten
/// since without a change of its signature: `nvmlInit*` may then keep the parsed scenario.
const SETTLED: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileSig {
    ino: u64,
    len: u64,
    mtime: i64,
    mtime_nsec: i64,
}

impl FileSig {
    fn modified(&self) -> Option<SystemTime> {
        let secs = u64::try_from(self.mtime).ok()?;
        let nanos = u32::try_from(self.mtime_nsec).ok()?;
        SystemTime::UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
    }
}

fn file_sig(path: &Path) -> Option<FileSig> {
    let m = std::fs::metadata(path).ok()?;
    Some(FileSig {
        ino: m.ino(),
        len: m.len(),
        mtime: m.mtime(),
        mtime_nsec: m.mtime_nsec(),
    })
}

struct Loaded {
    path: PathBuf,
    sig: Option<FileSig>,
    scenario: Arc<Scenario>,
    last_check: Instant,
    /// Its directory is watched (see `watch`): the file is looked at when something
    /// happened there.
    watched: bool,
    /// Wall clock just before the file was read.
    read_at: SystemTime,
}

impl Loaded {
    fn load(path: PathBuf) -> Result<Loaded, String> {
        // Watched before it is read, so that a rewrite during the read raises the flag.
        let watched = crate::watch::watch(&path);
        let read_at = SystemTime::now();
        let sig = file_sig(&path);
        let scenario = Scenario::load(&path)?;
        Ok(Loaded {
            watched,
            path,
            sig,
            scenario: Arc::new(scenario),
            last_check: Instant::now(),
            read_at,
        })
    }

    /// Whether `path` still holds exactly what was parsed: same path and signature, and the
    /// file was last modified well before it was read (a later write would have moved its
    /// mtime past `read_at`). Lets a client that inits and shuts down on every refresh
    /// (gpustat) skip re-parsing a large scenario; a file written just before an init is
    /// always re-read. Always by `stat`, never by the watch: its thread reads events some
    /// time after they happen, so "nothing reported" right after a write (a test rewriting
    /// the scenario, then calling init) did not mean "nothing written".
    fn unchanged(&self, path: &Path) -> bool {
        if self.path != path {
            return false;
        }
        let Some(sig) = self.sig else { return false };
        if file_sig(path) != Some(sig) {
            return false;
        }
        sig.modified()
            .and_then(|m| m.checked_add(SETTLED))
            .is_some_and(|settled| settled < self.read_at)
    }

    fn check_reload(&mut self) {
        let watched = self.watched && crate::watch::working();
        let interval = if watched {
            WATCHED_RELOAD_INTERVAL
        } else {
            RELOAD_INTERVAL
        };
        // Taken whatever happens next, so that an event is acted on once.
        let reported = watched && crate::watch::take_changed();
        if !reported && self.last_check.elapsed() < interval {
            return;
        }
        self.last_check = Instant::now();
        let sig = file_sig(&self.path);
        if sig.is_none() || sig == self.sig {
            return;
        }
        self.sig = sig;
        match Scenario::load(&self.path) {
            Ok(s) => self.scenario = Arc::new(s),
            Err(e) => eprintln!("fake-nvml: keeping the previous scenario: {e}"),
        }
    }
}

struct State {
    refcount: u32,
    origin: Option<Origin>,
    fixed_time: Option<f64>,
    path_override: Option<PathBuf>,
    loaded: Option<Loaded>,
}

static STATE: Mutex<State> = Mutex::new(State {
    refcount: 0,
    origin: None,
    fixed_time: None,
    path_override: None,
    loaded: None,
});

fn lock() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What one call sees: the scenario and the scenario time.
pub struct Snapshot {
    pub scenario: Arc<Scenario>,
    /// Scenario seconds since the first successful init.
    pub t: f64,
    /// Wall clock at the first successful init, µs since the Unix epoch.
    pub wall_us: u64,
}

/// Path of the file this code was loaded from (the `.so`, or the executable
/// for the rlib), via `dladdr` on one of our own functions.
pub fn own_library_path() -> Option<PathBuf> {
    let addr = crate::exports::system::nvmlInit_v2 as *const () as *const c_void;
    // SAFETY: Dl_info is plain data; dladdr fills it or returns 0.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: `addr` is an address inside this object; `info` is valid for writes.
    if unsafe { libc::dladdr(addr, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr returned a NUL-terminated string owned by the loader.
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    Some(PathBuf::from(OsStr::from_bytes(name.to_bytes())))
}

/// Where the scenario comes from: the test override, then `FAKE_NVML_SCENARIO`,
/// then the sidecar next to the library. `Err` explains why none was found.
fn scenario_path(st: &State) -> Result<PathBuf, String> {
    if let Some(p) = &st.path_override {
        return Ok(p.clone());
    }
    if let Some(p) = std::env::var_os(SCENARIO_ENV).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let lib = own_library_path()
        .ok_or_else(|| format!("{SCENARIO_ENV} is unset and dladdr found no library path"))?;
    let sidecar = lib
        .parent()
        .map_or_else(|| PathBuf::from(SIDECAR_NAME), |d| d.join(SIDECAR_NAME));
    if sidecar.is_file() {
        Ok(sidecar)
    } else {
        Err(format!(
            "{SCENARIO_ENV} is unset and there is no {} next to {}",
            sidecar.display(),
            lib.display()
        ))
    }
}

/// `nvmlInit*`: (re)loads the scenario (unless the file is provably unchanged since it was
/// parsed), applies `init_error`, counts up.
pub fn init() -> NvmlReturn {
    let mut st = lock();
    let path = match scenario_path(&st) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("fake-nvml: no scenario: {e}");
            return UNKNOWN;
        }
    };
    if !st.loaded.as_ref().is_some_and(|l| l.unchanged(&path)) {
        match Loaded::load(path) {
            Ok(l) => st.loaded = Some(l),
            Err(e) => {
                eprintln!("fake-nvml: cannot load scenario: {e}");
                return UNKNOWN;
            }
        }
    }
    let Some(init_error) = st.loaded.as_ref().map(|l| l.scenario.init_error) else {
        return UNKNOWN;
    };
    if let Some(code) = init_error {
        return code.0;
    }
    st.refcount = st.refcount.saturating_add(1);
    st.origin.get_or_insert_with(Origin::now);
    SUCCESS
}

/// `nvmlShutdown`: counts down; `Uninitialized` when not initialised.
pub fn shutdown() -> NvmlReturn {
    let mut st = lock();
    if st.refcount == 0 {
        return UNINITIALIZED;
    }
    st.refcount -= 1;
    SUCCESS
}

/// The scenario and time for a call; `Err(Uninitialized)` outside init/shutdown.
pub fn snapshot() -> Result<Snapshot, NvmlReturn> {
    let mut st = lock();
    if st.refcount == 0 {
        return Err(UNINITIALIZED);
    }
    let fixed = st.fixed_time;
    let origin = st.origin;
    let loaded = st.loaded.as_mut().ok_or(UNINITIALIZED)?;
    loaded.check_reload();
    Ok(Snapshot {
        scenario: Arc::clone(&loaded.scenario),
        t: fixed.or_else(|| origin.map(|o| o.elapsed())).unwrap_or(0.0),
        wall_us: origin.map_or(0, |o| o.wall_us),
    })
}

pub fn set_scenario_path(path: Option<PathBuf>) {
    lock().path_override = path;
}

pub fn set_fixed_time(t: Option<f64>) {
    lock().fixed_time = t;
}

pub fn reset() {
    let mut st = lock();
    st.refcount = 0;
    st.origin = None;
    st.fixed_time = None;
    st.path_override = None;
    st.loaded = None;
}
