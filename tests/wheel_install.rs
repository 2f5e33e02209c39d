//! The wheel users install (`pip install vramscope`), installed as they would: into a fresh
//! virtual environment, run with a PATH that holds only that environment (no Rust
//! toolchain, no compiler), no PYTHONPATH and a fresh HOME. The binary answers with the
//! package's version, reads the fake NVML, and `vramscope run` publishes a Python job's
//! figures through the installed writer, which is the same code the binary embeds.
//!
//! The wheel is the one `scripts/dist` builds; `VRAMSCOPE_WHEEL` names it (.ci/run sets it).
//! Without it the test says SKIPPED, and under CI it fails. `VRAMSCOPE_UVX` (uv's `uvx`,
//! from the packaging tools' venv) also runs it as the README says, `uvx vramscope`, from the
//! wheel's file with a cold cache and no index, and prints how long that took.

mod common;

use common::{GIB, h100};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn wheel() -> Option<PathBuf> {
    match std::env::var_os("VRAMSCOPE_WHEEL") {
        Some(w) if !w.is_empty() => Some(PathBuf::from(w)),
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "VRAMSCOPE_WHEEL unset in CI: .ci/run builds the wheel with scripts/dist"
            );
            eprintln!(
                "SKIPPED: the installed-wheel test needs VRAMSCOPE_WHEEL, a wheel built by \
                 scripts/dist (.ci/run sets it)"
            );
            None
        }
    }
}

/// A fresh venv with the wheel installed from the file alone (no index), and a fresh HOME.
struct Installed {
    dir: tempfile::TempDir,
}

impl Installed {
    fn new(wheel: &Path) -> Installed {
        let dir = tempfile::tempdir().expect("tempdir");
        let venv = dir.path().join("venv");
        let made = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .output()
            .expect("python3 -m venv");
        assert!(made.status.success(), "venv: {}", common::stderr(&made));
        std::fs::create_dir(dir.path().join("home")).expect("home");
        let installed = Installed { dir };
        let pip = installed.run(
            "python",
            &["-m", "pip", "install", "--no-index", "--no-deps", "-q"],
            &[wheel.as_os_str()],
        );
        assert!(
            pip.status.success(),
            "pip install: {}",
            common::stderr(&pip)
        );
        installed
    }

    fn bin(&self) -> PathBuf {
        self.dir.path().join("venv/bin")
    }

    /// `program` from the venv, with nothing of this process's environment but what is set
    /// here: PATH is the venv's bin alone.
    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(self.bin().join(program));
        cmd.env_clear()
            .env("PATH", self.bin())
            .env("HOME", self.dir.path().join("home"))
            .env("LANG", "C.UTF-8")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            // As the tests' Scenario does: no configuration file, no machine's channels.
            .env("VRAMSCOPE_CONFIG", "none")
            .env("VRAMSCOPE_SHM", self.dir.path().join("no-shm"))
            .env("VRAMSCOPE_K8S_ROOT", self.dir.path().join("no-node"))
            .env("VRAMSCOPE_DIR", self.dir.path().join("channels"))
            .env("VRAMSCOPE_NVML_LIB", common::fake_nvml())
            .env("FAKE_NVML_SCENARIO", self.dir.path().join("scenario.json"));
        cmd
    }

    fn run(&self, program: &str, args: &[&str], more: &[&std::ffi::OsStr]) -> Output {
        self.command(program)
            .args(args)
            .args(more)
            .output()
            .unwrap_or_else(|e| panic!("run {program}: {e}"))
    }

    fn ok(&self, program: &str, args: &[&str]) -> String {
        let out = self.run(program, args, &[]);
        assert!(
            out.status.success(),
            "{program} {args:?}: {}",
            common::stderr(&out)
        );
        common::stdout(&out)
    }

    fn scenario(&self, value: &Value) {
        std::fs::write(
            self.dir.path().join("scenario.json"),
            serde_json::to_vec(value).expect("json"),
        )
        .expect("write the scenario");
    }
}

/// What the job publishes: 3 GiB allocated of 4 reserved on GPU 0; then, while its channel
/// is open (a clean exit removes it), it prints its `vramscope.__version__` and what the
/// installed binary's `--json` reads.
const JOB: &str = "import subprocess, vramscope\n\
    vramscope.report(device=0, allocated=3 << 30, reserved=4 << 30, peak=3 << 30, total=80 << 30, \
    uuid='GPU-00000000-0000-0000-0000-000000000000')\n\
    print(vramscope.__version__)\n\
    print(subprocess.run(['vramscope', '--json'], capture_output=True, text=True, check=True).stdout)\n";

/// The version the job printed and the `--json` document it read.
fn job_output(out: &str) -> (String, Value) {
    let (version, json) = out.split_once('\n').expect("two lines");
    (
        version.to_string(),
        serde_json::from_str(json).unwrap_or_else(|e| panic!("--json ({e}): {json}")),
    )
}

#[test]
fn the_installed_wheel_runs_without_rust_and_publishes_through_its_writer() {
    let Some(wheel) = wheel() else {
        return;
    };
    let installed = Installed::new(&wheel);
    // Nothing of Rust on the PATH these commands see.
    for tool in ["cargo", "rustc", "cc"] {
        assert!(!installed.bin().join(tool).exists(), "{tool} in the venv");
    }

    assert_eq!(
        installed.ok("vramscope", &["--version"]).trim(),
        format!("vramscope {VERSION}")
    );
    let where_from = installed.ok(
        "python",
        &[
            "-c",
            "import vramscope; print(vramscope.__version__); print(vramscope.__file__)",
        ],
    );
    let mut lines = where_from.lines();
    assert_eq!(lines.next(), Some(VERSION));
    let file = PathBuf::from(lines.next().expect("the package's file"));
    assert!(
        file.starts_with(installed.dir.path().join("venv")),
        "imported from {}",
        file.display()
    );

    // The installed package is the writer the binary embeds, file for file.
    let package = file.parent().expect("package folder");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/vramscope");
    for (path, text) in vramscope::job::inject::PACKAGE {
        let there = std::fs::read_to_string(package.join(path))
            .unwrap_or_else(|e| panic!("{path} not in the wheel: {e}"));
        assert_eq!(
            &there, text,
            "{path} in the wheel differs from the embedded one"
        );
        assert_eq!(
            std::fs::read_to_string(repo.join(path)).ok().as_deref(),
            Some(*text)
        );
    }

    installed.scenario(&json!({ "devices": [h100(0)] }));
    let once = installed.ok("vramscope", &["--once"]);
    assert!(once.contains("NVIDIA H100 80GB HBM3"), "{once}");

    // The job's own `python` is the venv's, found on PATH; its `import vramscope` needs no
    // PYTHONPATH of the user's.
    let published = installed.ok(
        "vramscope",
        &["run", "--no-monitor", "--", "python", "-c", JOB],
    );
    let (version, doc) = job_output(&published);
    assert_eq!(version, VERSION);
    let allocators = doc["allocators"].as_array().expect("allocators");
    assert_eq!(allocators.len(), 1, "{doc}");
    assert_eq!(allocators[0]["kind"], json!("Python"), "{doc}");
    assert_eq!(
        allocators[0]["devices"][0]["allocated"],
        json!(3 * GIB),
        "{doc}"
    );

    // And the installed package alone, without `run`, publishes the same way.
    let (version, doc) = job_output(&installed.ok("python", &["-c", JOB]));
    assert_eq!(version, VERSION);
    assert_eq!(
        doc["allocators"][0]["devices"][0]["allocated"],
        json!(3 * GIB),
        "{doc}"
    );
}

/// `uvx --from WHEEL vramscope --once`, offline, on a cold uv cache: what `uvx vramscope`
/// does once the wheel is downloaded.
#[test]
fn uvx_runs_the_wheel_from_a_cold_cache() {
    let Some(wheel) = wheel() else {
        return;
    };
    let Some(uvx) = std::env::var_os("VRAMSCOPE_UVX").filter(|u| !u.is_empty()) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "VRAMSCOPE_UVX unset in CI: .ci/run sets it from .ci/dist-tools"
        );
        eprintln!("SKIPPED: uvx needs VRAMSCOPE_UVX (.ci/run sets it)");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("scenario.json"),
        serde_json::to_vec(&json!({ "devices": [h100(0)] })).expect("json"),
    )
    .expect("scenario");
    let started = std::time::Instant::now();
    let out = Command::new(&uvx)
        .args(["--offline", "--from"])
        .arg(&wheel)
        .args(["vramscope", "--once"])
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", dir.path())
        .env("UV_CACHE_DIR", dir.path().join("uv-cache"))
        .env("VRAMSCOPE_CONFIG", "none")
        .env("VRAMSCOPE_SHM", dir.path().join("no-shm"))
        .env("VRAMSCOPE_K8S_ROOT", dir.path().join("no-node"))
        .env("VRAMSCOPE_NVML_LIB", common::fake_nvml())
        .env("FAKE_NVML_SCENARIO", dir.path().join("scenario.json"))
        .output()
        .expect("run uvx");
    let took = started.elapsed();
    assert!(out.status.success(), "uvx: {}", common::stderr(&out));
    assert!(common::stdout(&out).contains("NVIDIA H100 80GB HBM3"));
    println!(
        "uvx --from WHEEL vramscope --once, cold cache: {:.2} s",
        took.as_secs_f64()
    );
}
