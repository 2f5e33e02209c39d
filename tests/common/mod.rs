//! Shared by the end-to-end tests: finding the fake NVML library that `cargo test` builds
//! (it is a dev-dependency), writing scenarios, and running the real binary against them.

#![allow(
    dead_code,
    reason = "shared by several test crates, each of which uses a different part"
)]

// The model is the monitor's: crates built with the channel library alone (`--no-default-features`)
// have no builders.
#[cfg(feature = "monitor")]
pub mod builders;
pub mod measured;
pub mod race;
pub mod tmux;
pub mod users;
pub mod wait;

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `target/<profile>/deps/libfake_nvml.so`, built by cargo because fake-nvml is a
/// dev-dependency; test binaries live in that same `deps` folder.
pub fn fake_nvml() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let deps = exe.parent().expect("deps dir");
    let lib = deps.join("libfake_nvml.so");
    assert!(
        lib.exists(),
        "{} missing: fake-nvml must stay a dev-dependency",
        lib.display()
    );
    lib
}

/// The UUID [`h100`] gives GPU `index` (`GPU-00000000-0000-0000-0000-00000000000N`).
pub fn gpu_uuid(index: u32) -> String {
    format!("GPU-00000000-0000-0000-0000-00000000000{index}")
}

/// A temporary folder holding one scenario file.
pub struct Scenario {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

impl Scenario {
    pub fn new(value: &Value) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("scenario.json");
        std::fs::write(&path, serde_json::to_vec_pretty(value).expect("json")).expect("write");
        Scenario { dir, path }
    }

    /// Replaces the scenario atomically; the fake re-reads it on change.
    pub fn rewrite(&self, value: &Value) {
        let tmp = self.dir.path().join("scenario.json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(value).expect("json")).expect("write");
        std::fs::rename(&tmp, &self.path).expect("rename");
    }

    /// The first `n` snapshots of `--json --loop 1s` with `extra` options.
    pub fn json_loop(&self, extra: &[&str], n: usize) -> Vec<Value> {
        use std::io::{BufRead, BufReader};
        let mut child = self
            .command()
            .args(["--json", "--loop", "1s"])
            .args(extra)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start vramscope --json --loop");
        let lines: Vec<Value> = BufReader::new(child.stdout.take().unwrap())
            .lines()
            .take(n)
            .map(|l| serde_json::from_str(&l.expect("a line")).expect("JSON"))
            .collect();
        let _ = child.kill();
        let _ = child.wait();
        lines
    }

    /// The binary with `VRAMSCOPE_NVML_LIB` pointing at the fake and the scenario in its environment,
    /// isolated from the machine's channels (see [`ISOLATED_SHM`]).
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_vramscope"));
        cmd.env("FAKE_NVML_SCENARIO", &self.path)
            // The variable, not `--nvml-lib`: the option is refused by the commands that
            // load no NVML (report, clean, ...), the variable never is.
            .env("VRAMSCOPE_NVML_LIB", fake_nvml())
            .env(ISOLATED_SHM.0, self.dir().join(ISOLATED_SHM.1))
            .env(NO_CONFIG.0, NO_CONFIG.1)
            .env(NO_NODE.0, self.dir().join(NO_NODE.1))
            .env_remove("XDG_RUNTIME_DIR");
        cmd
    }

    /// The monitor on this scenario as a shell command line for a tmux pane, options `extra`
    /// after the fake NVML.
    pub fn monitor_line(&self, extra: &str) -> String {
        format!(
            "env FAKE_NVML_SCENARIO={} {}={} {} --nvml-lib {} {extra}",
            self.path.display(),
            NO_NODE.0,
            self.dir().join(NO_NODE.1).display(),
            env!("CARGO_BIN_EXE_vramscope"),
            fake_nvml().display()
        )
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command().args(args).output().expect("run vramscope")
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The binary's stdout for `args`, its channels read from `channels` (`VRAMSCOPE_DIR`);
    /// the run must succeed.
    pub fn stdout_reading(&self, channels: &Path, args: &[&str]) -> String {
        let out = self
            .command()
            .env("VRAMSCOPE_DIR", channels)
            .args(args)
            .output()
            .expect("run vramscope");
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        stdout(&out)
    }

    /// `--json` with the channels in `channels`, parsed.
    pub fn json_reading(&self, channels: &Path) -> Value {
        serde_json::from_str(&self.stdout_reading(channels, &["--json"])).expect("--json")
    }
}

/// The monitor as a tmux pane's command line with an NVML library that cannot load: the
/// screen without a driver, which offers the demo.
pub fn without_nvml_line() -> String {
    format!(
        "{} --nvml-lib /nonexistent/libnvidia-ml.so.1",
        env!("CARGO_BIN_EXE_vramscope")
    )
}

/// Where the binary under test looks for users' channel directories instead of `/dev/shm`
/// (variable, and a folder under the test's own that nothing creates): run as root, it would
/// otherwise read every user's channels on the machine, and another user's running job
/// would change what the tests see. `.ci/run` plants such a channel to prove it does not.
pub const ISOLATED_SHM: (&str, &str) = ("VRAMSCOPE_SHM", "no-shm");

/// No configuration file: the machine's ~/.config/vramscope/config.toml must not change what
/// the tests see. A test of the file gives `--config`, which outranks the variable.
pub const NO_CONFIG: (&str, &str) = ("VRAMSCOPE_CONFIG", "none");

/// Where the binary under test reads a Kubernetes node's `/proc` and `/var/log` for pods
/// (variable, and a folder nothing creates): a test run inside a pod (a CI runner on
/// Kubernetes) must not see its own pod. The pod tests give a node of their own.
pub const NO_NODE: (&str, &str) = ("VRAMSCOPE_K8S_ROOT", "no-node");

pub const GIB: u64 = 1 << 30;
pub const MIB: u64 = 1 << 20;

/// A GPU as tests usually want it: every figure readable.
pub fn h100(index: u32) -> Value {
    json!({
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": gpu_uuid(index),
        "pci_bus_id": format!("00000000:{:02X}:00.0", 0x18 + index),
        "memory_total": 80 * GIB,
        "memory_reserved": 512 * MIB,
        "max_sm_clock": 1980,
        "max_mem_clock": 2619,
        "power_limit": 700_000,
        "num_fans": 1,
        "persistence_mode": true,
        "timeline": [{
            "t": 0, "memory_used": 10 * GIB, "gpu_util": 87, "mem_util": 41, "temperature": 64,
            "power": 412_000, "sm_clock": 1755, "mem_clock": 2619, "fan": 35, "encoder": 3,
            "decoder": 4, "throttle_reasons": 4, "ecc_corrected": 0, "ecc_uncorrected": 0,
            "pstate": 0, "pcie_tx": 1000, "pcie_rx": 2000
        }],
        "processes": [],
        "process_utilization": []
    })
}

/// Whether `tool version_flag` (`-V`, `--version`) runs. In CI (CI set) a missing tool is a
/// failure: .ci/run installs every tool the tests use; elsewhere the test says it is skipped
/// and how to get it.
pub fn tool_available(tool: &str, version_flag: &str, install: &str) -> bool {
    let found = Command::new(tool)
        .arg(version_flag)
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "{tool} missing in CI: .ci/run installs it"
        );
        eprintln!("SKIPPED: {tool} is not installed ({install})");
    }
    found
}

/// `tool_available` for the Python tests' interpreter.
/// How many of process `pid`'s threads are named `name` (`/proc/PID/task/*/comm`); 0 once
/// the process is gone. The sampling pool's spare workers are counted this way.
pub fn threads_named(pid: u32, name: &str) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks
                .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
                .filter(|comm| comm.trim() == name)
                .count()
        })
        .unwrap_or(0)
}

pub fn python3_available() -> bool {
    tool_available("python3", "--version", "apt-get install python3")
}

/// `tool_available` for the C tests' compiler.
pub fn cc_available() -> bool {
    tool_available("cc", "--version", "apt-get install gcc libc6-dev")
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The fake's call counts (the `FAKE_NVML_COUNTS` file's text) by function; empty when the
/// text is not a JSON object, a count that is not a number is 0.
pub fn parse_counts(text: &str) -> BTreeMap<String, f64> {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| {
            v.as_object().map(|o| {
                o.iter()
                    .map(|(k, v)| (k.clone(), v.as_f64().unwrap_or(0.0)))
                    .collect()
            })
        })
        .unwrap_or_default()
}

/// [`parse_counts`] of the file at `path` (empty while the fake has not written it yet).
pub fn read_counts(path: &Path) -> BTreeMap<String, f64> {
    parse_counts(&read_counts_text(path))
}

/// The counts file's text (empty while the fake has not written it yet). The fake rewrites
/// the file in place, so a read that overlaps a write may see a wrong digit: the text is
/// read until two reads agree.
pub fn read_counts_text(path: &Path) -> String {
    let read = || std::fs::read_to_string(path).unwrap_or_default();
    let mut text = read();
    for _ in 0..10 {
        let again = read();
        if again == text {
            break;
        }
        text = again;
    }
    text
}

/// The interpreter with the real torch and jax that .ci/run installs (VRAMSCOPE_REAL_PYTHON).
/// In CI its absence fails; elsewhere the test says it is skipped and how to run it.
pub fn real_packages_python() -> Option<String> {
    match std::env::var("VRAMSCOPE_REAL_PYTHON") {
        Ok(python) if !python.is_empty() => Some(python),
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "VRAMSCOPE_REAL_PYTHON unset in CI: .ci/run installs the real torch and jax"
            );
            eprintln!(
                "SKIPPED: the adapters' tests against the real torch and jax need \
                 VRAMSCOPE_REAL_PYTHON, a python with python/ci/requirements-real.txt \
                 installed (.ci/run sets it)"
            );
            None
        }
    }
}
