//! The Python writer package's own tests (`python/tests`, standard-library unittest) run as
//! part of `cargo test`, plus a check that its sources stay valid Python 3.8.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{python3_available, real_packages_python};

const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// python3 with a clean environment for vramscope: the user's VRAMSCOPE_* settings and
/// PYTHONPATH must not change what the tests see.
fn python3(args: &[&str]) -> Option<Output> {
    if !python3_available() {
        return None;
    }
    let mut cmd = Command::new("python3");
    cmd.args(args)
        .current_dir(REPO)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("PYTHONPATH");
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("VRAMSCOPE_") {
            cmd.env_remove(name);
        }
    }
    Some(cmd.output().expect("run python3"))
}

#[test]
fn python_unittests_pass() {
    let Some(out) = python3(&["-m", "unittest", "discover", "-s", "python/tests", "-v"]) else {
        return;
    };
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "python unittests failed:\n{log}");
    let ran = tests_ran(&log);
    assert!(ran >= 80, "only {ran} tests ran:\n{log}");
    // "OK (skipped=1)" when not root: giving a directory away needs root.
    assert!(
        log.trim_end()
            .lines()
            .last()
            .is_some_and(|l| l.starts_with("OK")),
        "{log}"
    );
}

#[test]
fn python_adapters_pass_against_the_real_torch_and_jax() {
    let Some(python) = real_packages_python() else {
        return;
    };
    let mut cmd = Command::new(&python);
    cmd.args([
        "-m",
        "unittest",
        "-v",
        "test_real_torch",
        "test_real_torch_sites",
        "test_real_torch_categories",
    ])
    .current_dir(Path::new(REPO).join("python/tests"))
    .env("PYTHONDONTWRITEBYTECODE", "1")
    .env_remove("PYTHONPATH");
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("VRAMSCOPE_") {
            cmd.env_remove(name);
        }
    }
    let out = cmd.output().unwrap_or_else(|e| panic!("run {python}: {e}"));
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "real-package tests failed:\n{log}");
    // A module that cannot import torch skips as a whole: here that is a failure.
    let last = log.trim_end().lines().last().unwrap_or_default();
    assert_eq!(last, "OK", "{log}");
    let ran = tests_ran(&log);
    assert!(ran >= 30, "only {ran} tests ran:\n{log}");
}

/// `docs/benchmarks.md`'s command for what counting memory by kind costs a step: it runs
/// against the real torch and prints a figure for each model of the MemTracker tests.
#[test]
fn the_memory_by_kind_benchmark_runs_against_the_real_torch() {
    let Some(python) = real_packages_python() else {
        return;
    };
    let out = Command::new(&python)
        .arg("python/bench/bench_categories.py")
        .current_dir(REPO)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("PYTHONPATH")
        .output()
        .unwrap_or_else(|e| panic!("run {python}: {e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for model in ["Mlp", "TiedLm", "Transformer", "Cnn", "Checkpointed"] {
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with(model) && l.ends_with("% of the step")),
            "no figure for {model}:\n{text}"
        );
    }
}

#[test]
fn python_sources_parse_as_python_3_8() {
    let check = r#"
import ast, pathlib, sys
bad = []
for root in ("python/vramscope", "python/tests", "python/bench"):
    for path in sorted(pathlib.Path(root).rglob("*.py")):
        try:
            ast.parse(path.read_text(), str(path), feature_version=(3, 8))
        except SyntaxError as e:
            bad.append("%s:%s: %s" % (path, e.lineno, e.msg))
print("\n".join(bad) or "ok")
"#;
    let Some(out) = python3(&["-c", check]) else {
        return;
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.trim() == "ok",
        "not Python 3.8:\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(Path::new(REPO).join("python/pyproject.toml").exists());
}

/// How many tests unittest's summary line (`Ran N tests in ...`) says ran.
fn tests_ran(log: &str) -> u32 {
    log.lines()
        .find_map(|l| {
            l.strip_prefix("Ran ")?
                .split(' ')
                .next()?
                .parse::<u32>()
                .ok()
        })
        .expect("unittest summary")
}
