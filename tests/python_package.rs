//! The Python writer package's own tests (`python/tests`, standard-library unittest) run as
//! part of `cargo test`, plus a check that its sources stay valid Python 3.8.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::python3_available;

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
    let ran = log
        .lines()
        .find_map(|l| {
            l.strip_prefix("Ran ")?
                .split(' ')
                .next()?
                .parse::<u32>()
                .ok()
        })
        .expect("unittest summary");
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
