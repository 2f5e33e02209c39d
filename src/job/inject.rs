//! The Python writer package (`python/vramscope`), embedded in the binary for `vramscope run`.
//!
//! `prepare` unpacks it into a private directory as two `PYTHONPATH` entries: `bootstrap/`,
//! holding only `sitecustomize.py` (so it shadows nothing else), then `lib/`, holding the
//! package. The bootstrap chains to whatever `sitecustomize` it shadows and, with
//! `VRAMSCOPE_AUTOSTART=1`, arms an import hook that starts the writer when PyTorch
//! initialises CUDA. It loads the package as `_vramscope_run`, so the program's own
//! `import vramscope` resolves as its sys.path says. Python run with `-S`, `-I` or `-E`
//! skips all of this.

use std::ffi::OsString;
use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Lists the package's files once: each becomes `(path in the package, contents)`.
macro_rules! package {
    ($($path:literal),* $(,)?) => {
        /// Every file of `python/vramscope`, as (path inside the package, contents).
        pub const PACKAGE: &[(&str, &str)] = &[
            $(($path, include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/python/vramscope/", $path))),)*
        ];
    };
}

package!(
    "__init__.py",
    "_adapters.py",
    "_attach.py",
    "_autostart.py",
    "_bootstrap/sitecustomize.py",
    "_channel.py",
    "_config.py",
    "_cupy.py",
    "_directory.py",
    "_excepthooks.py",
    "_guard.py",
    "_identity.py",
    "_importhook.py",
    "_jax.py",
    "_layout.py",
    "_no_imports.py",
    "_peaks.py",
    "_polled.py",
    "_records.py",
    "_runtime.py",
    "_sampler.py",
    "_session.py",
    "_sites.py",
    "_torch.py",
    "_torch_boot.py",
    "_torch_categories.py",
    "_torch_hooks.py",
    "_torch_modules.py",
    "_torch_source.py",
    "_torch_virtual.py",
);

/// The package file that also goes alone into the first `PYTHONPATH` entry.
const BOOTSTRAP: &str = "_bootstrap/sitecustomize.py";

/// Tells the bootstrap to arm the PyTorch hook; without it the bootstrap only chains.
pub const AUTOSTART_VAR: &str = "VRAMSCOPE_AUTOSTART";

/// Writes the package under `dir` (created 0700 if missing; it must be ours and not a
/// symlink) and returns the variables to set in the child's environment:
/// `PYTHONPATH=<dir>/bootstrap:<dir>/lib[:<our PYTHONPATH>]` and `VRAMSCOPE_AUTOSTART=1`.
pub fn prepare(dir: &Path) -> io::Result<Vec<(String, OsString)>> {
    prepare_with(dir, std::env::var_os("PYTHONPATH"))
}

fn prepare_with(dir: &Path, existing: Option<OsString>) -> io::Result<Vec<(String, OsString)>> {
    private_dir(dir)?;
    let bootstrap = dir.join("bootstrap");
    let lib = dir.join("lib");
    private_dir(&bootstrap)?;
    private_dir(&lib)?;
    let package = lib.join("vramscope");
    private_dir(&package)?;
    for (path, text) in PACKAGE {
        let target = package.join(path);
        if let Some(parent) = target.parent().filter(|p| *p != package) {
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)?;
            private_dir(parent)?;
        }
        write_file(&target, text)?;
    }
    let sitecustomize = PACKAGE
        .iter()
        .find(|(path, _)| *path == BOOTSTRAP)
        .map(|(_, text)| *text)
        .unwrap_or_default();
    write_file(&bootstrap.join("sitecustomize.py"), sitecustomize)?;

    let mut python_path = OsString::from(&bootstrap);
    python_path.push(":");
    python_path.push(&lib);
    if let Some(existing) = existing.filter(|p| !p.is_empty()) {
        python_path.push(":");
        python_path.push(existing);
    }
    Ok(vec![
        ("PYTHONPATH".to_string(), python_path),
        (AUTOSTART_VAR.to_string(), OsString::from("1")),
    ])
}

/// `dir`, created 0700 when missing; an existing one must be a directory of ours, not a
/// symlink, so nobody else can swap the code the child will run.
fn private_dir(dir: &Path) -> io::Result<()> {
    match DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = fs::symlink_metadata(dir)?;
    let euid = crate::channel::euid();
    if !meta.file_type().is_dir() || meta.uid() != euid {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} is not a directory of ours", dir.display()),
        ));
    }
    if meta.mode() & 0o777 != 0o700 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Writes `text` to `path` as 0644, never through a symlink.
fn write_file(path: &Path, text: &str) -> io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    f.write_all(text.as_bytes())?;
    f.set_permissions(fs::Permissions::from_mode(0o644))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::process::Command;

    fn package_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("python/vramscope")
    }

    fn py_files(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in fs::read_dir(dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "__pycache__") {
                    py_files(root, &path, out);
                }
            } else if path.extension().is_some_and(|e| e == "py") {
                let rel = path.strip_prefix(root).expect("under root");
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }

    #[test]
    fn every_package_file_is_embedded_and_current() {
        let root = package_dir();
        let mut on_disk = Vec::new();
        py_files(&root, &root, &mut on_disk);
        on_disk.sort();
        let mut embedded: Vec<String> = PACKAGE.iter().map(|(p, _)| p.to_string()).collect();
        embedded.sort();
        assert_eq!(
            embedded, on_disk,
            "update the package! list in src/job/inject.rs"
        );
        for (path, text) in PACKAGE {
            let now = fs::read_to_string(root.join(path)).expect("read");
            assert_eq!(*text, now, "{path} changed since this binary was built");
        }
    }

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "vramscope-inject-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn tree_layout_and_modes() {
        let dir = temp_dir("layout");
        let env = prepare_with(&dir, None).expect("prepare");
        let mode = |p: &Path| fs::metadata(p).expect("stat").mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("lib/vramscope/_bootstrap")), 0o700);
        assert_eq!(mode(&dir.join("lib/vramscope/_channel.py")), 0o644);
        let bootstrap: Vec<_> = fs::read_dir(dir.join("bootstrap"))
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(bootstrap, ["sitecustomize.py"]);
        let expected_path = format!("{0}/bootstrap:{0}/lib", dir.display());
        assert_eq!(
            env,
            [
                ("PYTHONPATH".to_string(), OsString::from(expected_path)),
                ("VRAMSCOPE_AUTOSTART".to_string(), OsString::from("1")),
            ]
        );
        // Again over the same tree, with a PYTHONPATH to keep after ours.
        let env = prepare_with(&dir, Some(OsString::from("/opt/a:/opt/b"))).expect("again");
        let path = env[0].1.to_string_lossy().into_owned();
        assert!(path.ends_with("/lib:/opt/a:/opt/b"), "{path}");
        fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn refuses_a_symlink_for_the_directory() {
        let dir = temp_dir("link");
        let real = temp_dir("link-real");
        fs::create_dir(&real).expect("mkdir");
        std::os::unix::fs::symlink(&real, &dir).expect("symlink");
        let err = prepare_with(&dir, None).expect_err("a symlink must be refused");
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
        assert_eq!(fs::read_dir(&real).expect("read_dir").count(), 0);
        fs::remove_file(&dir).expect("cleanup");
        fs::remove_dir(&real).expect("cleanup");
    }

    #[test]
    fn prepared_tree_imports_and_arms_in_python() {
        let found = Command::new("python3")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            assert!(
                std::env::var_os("CI").is_none(),
                "python3 missing in CI: .ci/run installs it"
            );
            eprintln!("SKIPPED: python3 is not installed");
            return;
        }
        let dir = temp_dir("import");
        let env = prepare_with(&dir, None).expect("prepare");
        let out = Command::new("python3")
            .args([
                "-c",
                "import sys, sitecustomize, vramscope; \
                 print(sitecustomize.__file__); print(vramscope.__file__); \
                 print('_vramscope_run._autostart' in sys.modules)",
            ])
            .env_remove("VRAMSCOPE_DISABLE")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .envs(env)
            .output()
            .expect("run python3");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(
            lines,
            [
                dir.join("bootstrap/sitecustomize.py")
                    .to_string_lossy()
                    .as_ref(),
                dir.join("lib/vramscope/__init__.py")
                    .to_string_lossy()
                    .as_ref(),
                "True",
            ]
        );
        fs::remove_dir_all(&dir).expect("cleanup");
    }
}
