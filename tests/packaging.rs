//! One version for the binary and the writer, and the build definitions that ship them:
//! Cargo.toml's version is the one source of truth; the writer's `__version__` must say the
//! same (the writer-alone build reads it from there, and the wheel's binary answers
//! `--version` with Cargo's), and the root pyproject.toml builds the one wheel with maturin.

use std::path::Path;
use std::process::Command;

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn repo_file(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

#[test]
fn the_writer_and_the_binary_have_cargos_version() {
    let init = repo_file("python/vramscope/__init__.py");
    let declared: Vec<&str> = init
        .lines()
        .filter_map(|l| l.strip_prefix("__version__ = \""))
        .filter_map(|rest| rest.strip_suffix('"'))
        .collect();
    assert_eq!(
        declared,
        [VERSION],
        "python/vramscope/__init__.py's __version__"
    );
    // The embedded copy is what `vramscope run` injects: the same line.
    let embedded = vramscope::job::inject::PACKAGE
        .iter()
        .find(|(path, _)| *path == "__init__.py")
        .map(|(_, text)| *text)
        .expect("the embedded __init__.py");
    assert!(embedded.contains(&format!("__version__ = \"{VERSION}\"")));

    let out = Command::new(env!("CARGO_BIN_EXE_vramscope"))
        .arg("--version")
        .output()
        .expect("run vramscope --version");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("vramscope {VERSION}")
    );
}

#[test]
fn the_wheel_is_maturins_binary_plus_the_writer_and_the_writer_alone_builds_pure() {
    let root = repo_file("pyproject.toml");
    for line in [
        "build-backend = \"maturin\"",
        "bindings = \"bin\"",
        "python-source = \"python\"",
        "module-name = \"vramscope\"",
        "name = \"vramscope\"",
        "dynamic = [\"version\"]",
        "profile = \"dist\"",
    ] {
        assert!(
            root.lines().any(|l| l.trim() == line),
            "pyproject.toml lacks `{line}`"
        );
    }
    assert!(!root.lines().any(|l| l.starts_with("version =")));
    let writer = repo_file("python/pyproject.toml");
    for line in [
        "build-backend = \"setuptools.build_meta\"",
        "name = \"vramscope-writer\"",
        "version = { attr = \"vramscope.__version__\" }",
    ] {
        assert!(
            writer.lines().any(|l| l.trim() == line),
            "python/pyproject.toml lacks `{line}`"
        );
    }
    let cargo = repo_file("Cargo.toml");
    assert!(!cargo.lines().any(|l| l.trim() == "publish = false"));
    assert!(cargo.contains("[profile.dist]"));
}
