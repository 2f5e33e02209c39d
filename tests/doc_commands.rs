//! Every command line the README and the book show is run here, as a new user would type
//! it: on a fresh HOME (nothing in ~/.config, ~/.local, ~/.zfunc), with the real binary on
//! PATH as `vramscope` and the fake NVML as the driver, so "No such file or directory" on a
//! fresh account cannot come back. A command that cannot run on this machine (it needs the
//! package index, a systemd host, a Kubernetes cluster, a docker daemon, or is a benchmark
//! or build of many minutes) is listed in `ELSEWHERE` with why and what covers it instead.
//! A command in the docs that is in neither list fails the test, and so does a listed one
//! the docs no longer show.
//!
//! The docs' placeholders stand for what the test makes: `run.jsonl.zst` is the bundled
//! demo recording (pid 8313, job `demo`, which stand for `4242` and `slurm-991`),
//! `train.py` a script that publishes through `import vramscope`, `FILE` and the
//! `*.pickle` files memory snapshots made by tests/sites_support/make_snapshot.py, and
//! `gpu-node-1:9400,gpu-node-2:9400` two `vramscope serve` on loopback.
//!
//! The keys in the docs' tables are checked against the help overlay's tables, and every
//! `--option` the docs name against clap's definition (or a list of other tools' options).

mod common;

use clap::CommandFactory;
use common::tmux::Tmux;
use serde_json::json;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// The files whose command lines count: the README, the book's chapters, the writer's README
/// (the book includes it).
fn doc_files() -> Vec<PathBuf> {
    let mut files = vec![
        Path::new(REPO).join("README.md"),
        Path::new(REPO).join("python/README.md"),
    ];
    let mut book: Vec<PathBuf> = std::fs::read_dir(Path::new(REPO).join("docs"))
        .expect("docs/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    book.sort();
    files.extend(book);
    files
}

/// Programs a command line in the docs may start with.
const PROGRAMS: &[&str] = &[
    "vramscope",
    "cargo",
    "pip",
    "uvx",
    "uv",
    "mkdir",
    "install",
    "systemctl",
    "kubectl",
    "docker",
    "bash",
    "maturin",
    "rustup",
    "python3",
    "cc",
];

/// Every command line of an indented code block (outside fenced blocks), without its
/// trailing comment, with the file it is in.
fn documented_commands() -> Vec<(String, String)> {
    let mut found = Vec::new();
    for file in doc_files() {
        let text = std::fs::read_to_string(&file).expect("read a doc");
        let name = file
            .strip_prefix(REPO)
            .unwrap_or(&file)
            .display()
            .to_string();
        let mut fenced = false;
        let mut previous_blank = true;
        let mut in_block = false;
        for line in text.lines() {
            if line.starts_with("```") {
                fenced = !fenced;
                continue;
            }
            let indented = line.starts_with("    ") && !line.starts_with("     ");
            // A code block begins after a blank line; indented text that continues a list
            // item or a paragraph is prose.
            in_block = !fenced && indented && (in_block || previous_blank);
            previous_blank = line.trim().is_empty();
            if !in_block {
                continue;
            }
            let command = strip_comment(line.trim());
            let first = command.split_whitespace().next().unwrap_or("");
            let starts_with_assignment =
                first.contains('=') && first.starts_with(char::is_uppercase);
            if PROGRAMS.contains(&first) || starts_with_assignment {
                found.push((name.clone(), command));
            }
        }
    }
    found
}

/// The command without `  # comment` (a `#` inside a word, as in `fpath+=(~/.zfunc)`, is
/// only part of a comment when a space stands before it).
fn strip_comment(line: &str) -> String {
    match line.find(" #") {
        Some(at) => line[..at].trim_end().to_string(),
        None => line.to_string(),
    }
}

/// How a documented command is run.
enum How {
    /// Runs to its end; exit status 0.
    Ends,
    /// Runs to its end and fails with one line on stderr that contains this text.
    FailsSaying(&'static str),
    /// Runs until its output (stdout or stderr) contains this text, then is stopped.
    RunsUntil(&'static str),
    /// A terminal program: runs in tmux until its screen contains this text, then `q`
    /// (twice for the monitor that stays after its job) must end it.
    Screen(&'static str),
    /// A terminal program that ends by itself, with status 0, within 30 s.
    ScreenEnds,
}

/// Commands the test runs: as documented, as run here when a placeholder stands in it
/// (`""`: the same), and how.
const RUN: &[(&str, &str, How)] = &[
    ("vramscope", "", How::Screen("NVIDIA H100 80GB HBM3")),
    ("vramscope demo", "", How::Screen("DEMO")),
    ("vramscope --once", "", How::Ends),
    ("vramscope --json", "", How::Ends),
    ("vramscope --csv", "", How::Ends),
    (
        "vramscope --json --loop 1",
        "",
        How::RunsUntil("\"schema\""),
    ),
    (
        "vramscope --csv --loop 5",
        "",
        How::RunsUntil("record,time_ms"),
    ),
    (
        "vramscope --columns user,type,vram,mem,cpu,elapsed",
        "",
        How::Screen("ELAPSED"),
    ),
    (
        "mkdir -p ~/.local/share/bash-completion/completions && vramscope completions bash > ~/.local/share/bash-completion/completions/vramscope",
        "",
        How::Ends,
    ),
    (
        "mkdir -p ~/.zfunc && vramscope completions zsh > ~/.zfunc/_vramscope",
        "",
        How::Ends,
    ),
    (
        "mkdir -p ~/.config/fish/completions && vramscope completions fish > ~/.config/fish/completions/vramscope.fish",
        "",
        How::Ends,
    ),
    (
        "mkdir -p ~/.local/share/man/man1 && vramscope man > ~/.local/share/man/man1/vramscope.1",
        "",
        How::Ends,
    ),
    (
        "mkdir -p ~/.config/vramscope && vramscope config --default > ~/.config/vramscope/config.toml",
        "",
        How::Ends,
    ),
    ("vramscope config --interval 3s", "", How::Ends),
    (
        "vramscope run --record train.jsonl.zst -- python train.py",
        "",
        How::Screen("exited with code 0"),
    ),
    ("vramscope report train.jsonl.zst", "", How::Ends),
    (
        "vramscope run -- python train.py --epochs 10",
        "",
        How::Screen("exited with code 0"),
    ),
    (
        "vramscope run --exit-with-job --log train.log -- torchrun --nproc-per-node 8 train.py",
        "",
        How::ScreenEnds,
    ),
    (
        "vramscope run --sites -- python train.py",
        "",
        How::Screen("exited with code 0"),
    ),
    (
        "vramscope record -o run.jsonl.zst",
        "vramscope record -o new-1.jsonl.zst",
        How::RunsUntil("recording to new-1.jsonl.zst"),
    ),
    (
        "vramscope record -o run.jsonl.zst --duration 12h",
        "vramscope record -o new-2.jsonl.zst --duration 12h",
        How::RunsUntil("recording to new-2.jsonl.zst"),
    ),
    (
        "vramscope --record run.jsonl.zst",
        "vramscope --record new-3.jsonl.zst",
        How::Screen("NVIDIA H100"),
    ),
    (
        "vramscope replay run.jsonl.zst",
        "",
        How::Screen("NVIDIA H100"),
    ),
    (
        "vramscope report run.jsonl.zst --since 2m --until 5m",
        "",
        How::Ends,
    ),
    (
        "vramscope plot run.jsonl.zst -o mine.svg --pid 4242",
        "vramscope plot run.jsonl.zst -o mine.svg --pid 8313",
        How::Ends,
    ),
    (
        "vramscope export run.jsonl.zst --job slurm-991",
        "vramscope export run.jsonl.zst --job demo",
        How::Ends,
    ),
    (
        "vramscope serve",
        "",
        How::RunsUntil("serving http://127.0.0.1:9400"),
    ),
    (
        "vramscope serve --listen 0.0.0.0:9400",
        "",
        How::RunsUntil("serving http://0.0.0.0:9400"),
    ),
    (
        "vramscope cluster --targets gpu-node-1:9400,gpu-node-2:9400",
        "vramscope cluster --targets TARGETS",
        How::Screen("NODE"),
    ),
    (
        "vramscope cluster --prometheus http://prom:9090",
        "",
        How::Screen("prom:9090"),
    ),
    // The hosts do not resolve here: the screen says so for each (tests/cluster_ssh.rs
    // reaches real sshd servers).
    (
        "vramscope cluster --ssh box1,box2,box3",
        "",
        How::Screen("3 hosts over ssh"),
    ),
    (
        "vramscope cluster --ssh gpu-box-1,ann@gpu-box-2",
        "",
        How::Screen("2 hosts over ssh"),
    ),
    (
        "vramscope cluster --prometheus http://prom:9090 --once",
        "",
        How::FailsSaying("Prometheus prom:9090: cannot connect"),
    ),
    (
        "vramscope cluster --prometheus http://prom:9090 --json",
        "",
        How::FailsSaying("Prometheus prom:9090: cannot connect"),
    ),
    ("vramscope sites run.snap-3-peak.pickle", "", How::Ends),
    (
        "vramscope sites run.snap-4-oom.pickle --at oom",
        "",
        How::Ends,
    ),
    (
        "vramscope sites FILE --at end --top 20",
        "vramscope sites peak.pickle --at end --top 20",
        How::Ends,
    ),
    (
        "vramscope sites FILE --device 1 --json",
        "vramscope sites peak.pickle --device 1 --json",
        How::FailsSaying("the snapshot has nothing on device 1"),
    ),
    ("vramscope sites A.pickle B.pickle --at end", "", How::Ends),
    (
        "vramscope sites FILE --at peak --against end",
        "vramscope sites peak.pickle --at peak --against end",
        How::Ends,
    ),
    (
        "vramscope diff fits.jsonl.zst ooms.jsonl.zst",
        "vramscope diff run.jsonl.zst run.jsonl.zst",
        How::Ends,
    ),
    (
        "vramscope diff fits.jsonl.zst ooms.jsonl.zst --json",
        "vramscope diff run.jsonl.zst run.jsonl.zst --json",
        How::Ends,
    ),
    ("vramscope diff A.pickle B.pickle", "", How::Ends),
];

/// Commands not run here: why, and what covers them instead.
const ELSEWHERE: &[(&str, &str)] = &[
    (
        "vramscope run --on 'oom=notify-send \"vramscope: OOM\"' --on exit=bell -- python train.py",
        "needs notify-send and a training script; tests/hooks.rs runs `run --json --on oom=... --on exit=...` with a hook that records what it is told",
    ),
    (
        "vramscope --json --loop 10s --on \"free:30m=sh -c 'echo GPU \\$VRAMSCOPE_GPU is free | mail -s free me'\" > /dev/null",
        "needs mail and 30 minutes; tests/hooks.rs runs `--json --loop` with `free:1s` hooks from a configuration file",
    ),
    (
        "uvx vramscope",
        "needs the package index; tests/wheel_install.rs runs `uvx --from WHEEL vramscope` on the wheel scripts/dist builds",
    ),
    (
        "pip install vramscope",
        "needs the package index; tests/wheel_install.rs pip-installs the wheel scripts/dist builds",
    ),
    (
        "uv tool install vramscope",
        "needs the package index; the same wheel as tests/wheel_install.rs installs",
    ),
    (
        "pip install vramscope-writer",
        "needs the package index; scripts/dist builds the writer-alone wheel and sdist",
    ),
    (
        "cargo install vramscope",
        "needs crates.io's published crate; `cargo publish --dry-run` in scripts/dist builds the packaged crate",
    ),
    (
        "cargo install --path .",
        "a release build of many minutes; scripts/dist builds the same code",
    ),
    (
        "cargo run --release",
        "a release build of many minutes; the monitor itself runs here as `vramscope`",
    ),
    ("cargo test --workspace", ".ci/run runs it (checked below)"),
    (
        "cargo bench --bench refresh",
        "a benchmark of minutes: prints figures, asserts nothing",
    ),
    ("cargo bench --bench serve", "a benchmark of minutes"),
    (
        "cargo bench --bench peers",
        "a benchmark of about 40 minutes",
    ),
    (
        "cargo bench --bench peers -- --seconds 5 --repeats 1 --scenarios 1x4",
        "a benchmark of minutes",
    ),
    (
        "cargo bench --bench peers -- --help",
        "builds the benchmarks in the release profile: many minutes",
    ),
    ("cargo bench --bench cluster", "a benchmark of minutes"),
    ("cargo bench --bench sites", "a benchmark of minutes"),
    (
        "cargo bench --bench sites -- shared 10000000",
        "a benchmark of minutes",
    ),
    ("cargo bench --bench channel", "a benchmark of minutes"),
    ("cargo bench --bench recording", "a benchmark of minutes"),
    (
        "cargo bench --bench recording -- --e2e",
        "a benchmark of minutes",
    ),
    (
        "cargo bench --bench recording -- --replay-rss",
        "a benchmark of minutes",
    ),
    (
        "cargo bench --profile dist --bench serve_footprint",
        "an hour by default",
    ),
    ("python3 python/bench/bench_writer.py", "a benchmark"),
    (
        "cc -O2 -std=c99 -Iassets tests/c/bench_writer.c -o /tmp/bw && /tmp/bw",
        "a benchmark; tests/c builds the C writer in tests",
    ),
    ("bash scripts/dist", ".ci/run runs it (checked below)"),
    (
        "maturin build --profile dist --zig --compatibility manylinux2014 --target x86_64-unknown-linux-gnu --out dist",
        "scripts/dist runs it (checked below)",
    ),
    (
        "rustup target add aarch64-unknown-linux-gnu",
        "the Rust project's servers are not reachable here (docs/packaging.md)",
    ),
    (
        "DIST_TARGET=aarch64-unknown-linux-gnu bash scripts/dist",
        "needs the aarch64 standard library (docs/packaging.md)",
    ),
    (
        "install -m 0755 \"$(command -v vramscope)\" /usr/local/bin/vramscope",
        "installs into the machine's /usr/local: a deployment step",
    ),
    (
        "install -m 0644 assets/vramscope.service /etc/systemd/system/vramscope.service",
        "a systemd host; .ci/deploy-check verifies the unit",
    ),
    (
        "systemctl daemon-reload && systemctl enable --now vramscope",
        "a systemd host; .ci/deploy-check verifies the unit",
    ),
    (
        "kubectl create namespace monitoring",
        "a Kubernetes cluster; scripts/check_k8s.py validates the manifests",
    ),
    (
        "kubectl apply -f assets/k8s/",
        "a Kubernetes cluster; scripts/check_k8s.py validates the manifests",
    ),
    (
        "docker build -f assets/Dockerfile -t vramscope:0.1.0 dist",
        "no docker daemon, and Docker Hub is not reachable (docs/deploy.md)",
    ),
    (
        "docker run --rm --runtime=nvidia --pid=host -p 9400:9400 -v /dev/shm:/dev/shm:ro vramscope:0.1.0",
        "no docker daemon or GPU",
    ),
    (
        "vramscope attach 4242",
        "attaches by ptrace or sys.remote_exec: tests/attach_safety.rs and tests/attach_pep768.rs attach to real CPython processes",
    ),
    ("vramscope detach 4242", "tests/attach_pep768.rs detaches"),
    (
        "vramscope attach --ptrace --yes 4242",
        "tests/attach_pep768.rs",
    ),
    (
        "vramscope attach --python /opt/py314/bin/python3.14 4242",
        "needs CPython 3.14 at that path: tests/attach_pep768.rs gives its own",
    ),
];

/// The folder the commands run in, with the files the placeholders stand for, and a PATH of
/// `vramscope`, `python` (python3) and `torchrun` (runs its script with python3).
struct Work {
    dir: tempfile::TempDir,
    targets: String,
    exporters: Vec<std::process::Child>,
}

/// The exporters end with the test: a `Child` dropped is not killed, and each run left two
/// `vramscope serve` processes behind on the machine.
impl Drop for Work {
    fn drop(&mut self) {
        for child in &mut self.exporters {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Work {
    fn new() -> Work {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        let bin = d.join("bin");
        std::fs::create_dir_all(&bin).expect("bin");
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_vramscope"), bin.join("vramscope"))
            .expect("link vramscope");
        let python3 = which("python3").expect("python3");
        std::os::unix::fs::symlink(&python3, bin.join("python")).expect("link python");
        std::fs::write(
            bin.join("torchrun"),
            "#!/bin/sh\n# torchrun's stand-in: its options dropped, the script run once.\nwhile [ \"${1#--}\" != \"$1\" ]; do shift 2; done\nexec python3 \"$@\"\n",
        )
        .expect("torchrun");
        set_mode(&bin.join("torchrun"), 0o755);
        std::fs::create_dir(d.join("work")).expect("work");
        std::fs::copy(
            Path::new(REPO).join("assets/demo.jsonl.zst"),
            d.join("work/run.jsonl.zst"),
        )
        .expect("the demo recording");
        // Publishes a little through the installed writer (`vramscope run` injects it), then
        // ends: the monitor then shows it as exited.
        std::fs::write(
            d.join("work/train.py"),
            "import time, vramscope\n\
             for step in range(3):\n\
             \x20   vramscope.report(device=0, allocated=(step + 1) << 30, reserved=4 << 30, total=80 << 30, uuid='GPU-00000000-0000-0000-0000-000000000000')\n\
             \x20   time.sleep(0.3)\n\
             print('trained')\n",
        )
        .expect("train.py");
        for (name, mode) in [
            ("run.snap-3-peak.pickle", "peak"),
            ("run.snap-4-oom.pickle", "oom"),
            ("peak.pickle", "peak"),
            ("A.pickle", "peak"),
            ("B.pickle", "short"),
        ] {
            let out = Command::new("python3")
                .arg(Path::new(REPO).join("tests/sites_support/make_snapshot.py"))
                .arg(d.join("work").join(name))
                .arg(mode)
                .output()
                .expect("make a snapshot");
            assert!(out.status.success(), "{}", common::stderr(&out));
        }
        std::fs::write(
            d.join("scenario.json"),
            serde_json::to_vec(&json!({ "devices": [common::h100(0)] })).expect("json"),
        )
        .expect("scenario");
        let mut work = Work {
            dir,
            targets: String::new(),
            exporters: Vec::new(),
        };
        // Two exporters for `cluster --targets`.
        let mut addrs = Vec::new();
        for _ in 0..2 {
            let home = work.fresh_home();
            let mut child = work
                // `exec`: the child killed is the exporter itself, not a shell above it.
                .command("exec vramscope serve --listen 127.0.0.1:0", &home)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start an exporter");
            let stderr = child.stderr.take().expect("stderr");
            let mut line = String::new();
            let mut reader = BufReader::new(stderr);
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                if let Some(addr) = line
                    .trim()
                    .strip_prefix("vramscope: serving http://")
                    .and_then(|a| a.strip_suffix("/metrics"))
                {
                    addrs.push(addr.to_string());
                    break;
                }
                line.clear();
            }
            work.exporters.push(child);
        }
        assert_eq!(addrs.len(), 2, "the exporters never said where they listen");
        work.targets = addrs.join(",");
        work
    }

    fn fresh_home(&self) -> PathBuf {
        let home = tempfile::Builder::new()
            .prefix("home")
            .tempdir_in(self.dir.path())
            .expect("home")
            .keep();
        set_mode(&home, 0o700);
        home
    }

    /// The environment a new user has, plus the fake NVML and private channel folders.
    fn env(&self, home: &Path) -> Vec<(String, String)> {
        let d = self.dir.path();
        let path = format!("{}:/usr/local/bin:/usr/bin:/bin", d.join("bin").display());
        [
            ("HOME", home.display().to_string()),
            ("PATH", path),
            ("LANG", "C.UTF-8".to_string()),
            ("TERM", "xterm-256color".to_string()),
            ("PYTHONDONTWRITEBYTECODE", "1".to_string()),
            (
                "VRAMSCOPE_NVML_LIB",
                common::fake_nvml().display().to_string(),
            ),
            (
                "FAKE_NVML_SCENARIO",
                d.join("scenario.json").display().to_string(),
            ),
            ("VRAMSCOPE_DIR", d.join("channels").display().to_string()),
            (
                common::ISOLATED_SHM.0,
                d.join("no-shm").display().to_string(),
            ),
            (common::NO_NODE.0, d.join("no-node").display().to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    fn command(&self, command: &str, home: &Path) -> Command {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(command)
            .current_dir(self.dir.path().join("work"))
            .env_clear()
            .envs(self.env(home));
        cmd
    }

    fn shell_line(&self, command: &str, home: &Path) -> String {
        let vars: Vec<String> = self
            .env(home)
            .into_iter()
            .map(|(k, v)| format!("{k}='{v}'"))
            .collect();
        // Tmux::start runs this after `exec`: env first, the folder inside.
        // The exit status goes to HOME/status: tmux's own may be gone with the pane.
        let inner = format!(
            "cd '{}' && {command}; echo $? > '{}'",
            self.dir.path().join("work").display(),
            home.join("status").display()
        );
        format!(
            "env -i {} sh -c '{}'",
            vars.join(" "),
            inner.replace('\'', "'\\''")
        )
    }
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_string_lossy()
        .split(':')
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file())
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Runs one documented command its way; `Err` says what went wrong.
fn run_one(w: &Work, documented: &str, run_as: &str, how: &How) -> Result<(), String> {
    let command = if run_as.is_empty() {
        documented
    } else {
        run_as
    }
    .replace("TARGETS", &w.targets);
    let home = w.fresh_home();
    match how {
        How::Ends | How::FailsSaying(_) => {
            let out = w
                .command(&command, &home)
                .stdin(Stdio::null())
                .output()
                .map_err(|e| e.to_string())?;
            let stderr = common::stderr(&out);
            if stderr.contains("No such file or directory") {
                return Err(format!("said: {stderr}"));
            }
            match how {
                How::FailsSaying(text) => {
                    let lines: Vec<&str> = stderr.lines().collect();
                    if out.status.success() || lines.len() != 1 || !lines[0].contains(text) {
                        return Err(format!(
                            "expected one line saying `{text}` and a failure; status {:?}, stderr: {stderr}",
                            out.status.code()
                        ));
                    }
                }
                _ => {
                    if !out.status.success() {
                        return Err(format!("status {:?}: {stderr}", out.status.code()));
                    }
                }
            }
            Ok(())
        }
        How::RunsUntil(text) => {
            // `exec`, so the child killed below is vramscope itself, not a shell above it.
            let mut child = w
                .command(&format!("exec {command}"), &home)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| e.to_string())?;
            let (tx, rx) = std::sync::mpsc::channel();
            for stream in [
                Box::new(child.stdout.take().expect("stdout")) as Box<dyn std::io::Read + Send>,
                Box::new(child.stderr.take().expect("stderr")),
            ] {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    for line in BufReader::new(stream).lines().map_while(Result::ok) {
                        if tx.send(line).is_err() {
                            return;
                        }
                    }
                });
            }
            drop(tx);
            let deadline = Instant::now() + Duration::from_secs(30);
            let mut seen = Vec::new();
            let result = loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match rx.recv_timeout(left) {
                    Ok(line) if line.contains(text) => break Ok(()),
                    Ok(line) => seen.push(line),
                    Err(_) => break Err(format!("never said `{text}`: {seen:?}")),
                }
            };
            let _ = child.kill();
            let _ = child.wait();
            result
        }
        How::ScreenEnds => {
            let tmux = Tmux::start(&home, 120, 40, &w.shell_line(&command, &home));
            let deadline = Instant::now() + Duration::from_secs(30);
            while tmux.pane("pane_dead") != "1" {
                if Instant::now() > deadline {
                    let screen = tmux.screen();
                    tmux.tmux(&["kill-server"]);
                    return Err(format!("it did not end by itself:\n{screen}"));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let status = std::fs::read_to_string(home.join("status")).unwrap_or_default();
            let status = status.trim();
            let screen = tmux.screen();
            tmux.tmux(&["kill-server"]);
            if status != "0" {
                return Err(format!("exit status {status}:\n{screen}"));
            }
            Ok(())
        }
        How::Screen(text) => {
            let tmux = Tmux::start(&home, 120, 40, &w.shell_line(&command, &home));
            let (found, screen) = tmux.wait_for(Duration::from_secs(30), |s| s.contains(text));
            if !found {
                return Err(format!("the screen never showed `{text}`:\n{screen}"));
            }
            // `q` quits; the monitor of a job that ended shows how it ended and quits the same.
            let deadline = Instant::now() + Duration::from_secs(15);
            while tmux.pane("pane_dead") != "1" {
                if Instant::now() > deadline {
                    let screen = tmux.screen();
                    tmux.tmux(&["kill-server"]);
                    return Err(format!("`q` did not end it:\n{screen}"));
                }
                tmux.keys(&["q"]);
                std::thread::sleep(Duration::from_millis(300));
            }
            let status = std::fs::read_to_string(home.join("status")).unwrap_or_default();
            let status = status.trim();
            let screen = tmux.screen();
            tmux.tmux(&["kill-server"]);
            if status != "0" {
                return Err(format!("exit status {status}:\n{screen}"));
            }
            Ok(())
        }
    }
}

#[test]
fn every_documented_command_runs_on_a_fresh_home() {
    if !common::python3_available() || !common::tmux::available() {
        return;
    }
    let documented = documented_commands();
    let shown: BTreeSet<String> = documented
        .iter()
        .map(|(_, c)| c.trim().to_string())
        .collect();
    let run: BTreeSet<String> = RUN.iter().map(|(c, _, _)| c.to_string()).collect();
    let elsewhere: BTreeSet<String> = ELSEWHERE.iter().map(|(c, _)| c.to_string()).collect();
    let unlisted: Vec<&String> = shown
        .iter()
        .filter(|c| !run.contains(*c) && !elsewhere.contains(*c))
        .collect();
    assert!(
        unlisted.is_empty(),
        "documented commands neither run nor listed in ELSEWHERE: {unlisted:#?}"
    );
    let stale: Vec<&String> = run
        .iter()
        .chain(elsewhere.iter())
        .filter(|c| !shown.contains(*c))
        .collect();
    assert!(
        stale.is_empty(),
        "listed but no longer documented: {stale:#?}"
    );

    // What ELSEWHERE says is checked where it can be.
    let ci = std::fs::read_to_string(Path::new(REPO).join(".ci/run")).expect(".ci/run");
    assert!(ci.lines().any(|l| l.trim() == "cargo test --workspace"));
    assert!(ci.contains("bash scripts/dist"));
    let dist = std::fs::read_to_string(Path::new(REPO).join("scripts/dist")).expect("dist");
    assert!(dist.contains("maturin build --profile dist --zig --compatibility manylinux2014"));
    let cargo = std::fs::read_to_string(Path::new(REPO).join("Cargo.toml")).expect("Cargo");
    for (c, _) in ELSEWHERE {
        if let Some(bench) = c
            .strip_prefix("cargo bench ")
            .and_then(|b| b.split_whitespace().skip_while(|w| *w != "--bench").nth(1))
        {
            assert!(
                cargo.contains(&format!("name = \"{bench}\"")),
                "no bench {bench}"
            );
        }
    }

    let work = Work::new();
    let mut failures = Vec::new();
    for (command, run_as, how) in RUN {
        if let Err(e) = run_one(&work, command, run_as, how) {
            failures.push(format!("{command}: {e}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // The job's recording and its report.
    assert!(work.dir.path().join("work/train.jsonl.zst").exists());
    assert!(work.dir.path().join("work/mine.svg").exists());
}

/// The key names of a Markdown table's first column (`` `s` / `S` ``, `Up/Down, PgUp/PgDn`).
fn table_keys(markdown: &str, header: &str) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    let mut in_table = false;
    for line in markdown.lines() {
        if line.trim() == header {
            in_table = true;
            continue;
        }
        if in_table {
            if !line.starts_with('|') {
                break;
            }
            if line.starts_with("|---") {
                continue;
            }
            let cell = line.split('|').nth(1).unwrap_or("");
            keys.extend(split_keys(cell));
        }
    }
    keys
}

/// `q / Ctrl-C`, `` `q`, Ctrl-C ``, `Up/Down` as key names.
fn split_keys(cell: &str) -> Vec<String> {
    cell.replace('`', "")
        .split([',', ' '])
        .flat_map(|w| {
            if w.len() > 1 && w.contains('/') {
                w.split('/').map(str::to_string).collect::<Vec<_>>()
            } else {
                vec![w.to_string()]
            }
        })
        .map(|w| w.trim().to_string())
        .filter(|w| !w.is_empty() && w != "/")
        .collect()
}

#[test]
fn the_key_tables_are_the_help_overlays() {
    use vramscope::tui::panels::help::{CURSOR_KEYS, KEYS};
    let from = |table: &[(&str, &str)]| -> BTreeSet<String> {
        table.iter().flat_map(|(k, _)| split_keys(k)).collect()
    };
    let monitor = std::fs::read_to_string(Path::new(REPO).join("docs/monitor.md")).unwrap();
    assert_eq!(
        table_keys(&monitor, "| key | action |"),
        from(KEYS),
        "docs/monitor.md's key table against the help overlay's KEYS"
    );
    let replay = std::fs::read_to_string(Path::new(REPO).join("docs/recording.md")).unwrap();
    assert_eq!(
        table_keys(&replay, "| key | action |"),
        from(CURSOR_KEYS),
        "docs/recording.md's replay keys against the help overlay's CURSOR_KEYS"
    );
}

/// Options the docs name that belong to other programs, by program.
const FOREIGN_OPTIONS: &[&str] = &[
    // cargo (build, test, bench, install, package, publish, fmt)
    "--bench",
    "--release",
    "--workspace",
    "--path",
    "--profile",
    "--target",
    "--dry-run",
    "--list",
    "--check",
    "--no-default-features",
    // the benchmarks' own options (benches/*.rs)
    "--e2e",
    "--replay-rss",
    "--seconds",
    "--repeats",
    "--scenarios",
    "--oneshots",
    "--intervals",
    "--tools",
    "--out",
    // nvitop and gpustat, measured beside vramscope (docs/benchmarks.md)
    "--monitor",
    "--show-user",
    "--show-cmd",
    "--show-pid",
    // nvidia-smi, whose figures `--units mib` matches (docs/oneshot.md)
    "--query-gpu",
    "--format",
    // a training script's options in the examples (train.py, torchrun)
    "--epochs",
    "--lr",
    "--nproc-per-node",
    // a training script's batch size and sequence length, as `diff` reads them (docs/diff.md)
    "--batch-size",
    "--batch",
    "--seq-len",
    "--seq",
    "--block-size",
    // CPython's configure (a build without remote debugging)
    "--without-remote-debug",
    // maturin
    "--zig",
    "--compatibility",
    // systemd-analyze, systemctl
    "--man",
    "--threshold",
    "--offline",
    "--now",
    // kubernetes-validate
    "--strict",
    // docker run
    "--rm",
    "--runtime",
    // scripts/import_graph.py
    "--why",
    // cargo build
    "--bin",
    // scripts/gpu-check (tests/gpu_check.rs runs it)
    "--simulated",
];

fn clap_longs(cmd: &clap::Command, out: &mut BTreeSet<String>) {
    for a in cmd.get_arguments() {
        if let Some(long) = a.get_long() {
            out.insert(format!("--{long}"));
        }
    }
    for sub in cmd.get_subcommands() {
        clap_longs(sub, out);
    }
}

#[test]
fn every_option_the_docs_name_is_clap_s_or_another_tool_s() {
    let mut longs = BTreeSet::new();
    clap_longs(&vramscope::cli::Cli::command(), &mut longs);
    longs.insert("--help".into());
    longs.insert("--version".into());
    let mut unknown = BTreeSet::new();
    for file in doc_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let bytes = text.as_bytes();
        let mut i = 0;
        while let Some(at) = text[i..].find("--") {
            let start = i + at;
            i = start + 2;
            let before = start.checked_sub(1).map(|b| bytes[b]);
            if before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'-') {
                continue;
            }
            let word: String = text[start + 2..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
                .collect();
            if word.is_empty() || !word.starts_with(|c: char| c.is_ascii_lowercase()) {
                continue;
            }
            let option = format!("--{word}");
            if !longs.contains(&option) && !FOREIGN_OPTIONS.contains(&option.as_str()) {
                unknown.insert(format!("{option} ({})", file.display()));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "options in the docs that vramscope does not have: {unknown:#?}"
    );
}

/// The README's screenshot is assets/screenshot.txt, taken at the default refresh: its
/// header's `every 1.0s` is what the monitor says when nothing sets `--interval`.
#[test]
fn the_readme_shows_the_screenshot_at_the_default_refresh() {
    let readme = std::fs::read_to_string(Path::new(REPO).join("README.md")).unwrap();
    let shot = std::fs::read_to_string(Path::new(REPO).join("assets/screenshot.txt")).unwrap();
    assert!(
        readme.contains(&format!("```\n{shot}```\n")),
        "README's screenshot differs"
    );
    let default = vramscope::cli::Cli::command()
        .get_arguments()
        .find(|a| a.get_id() == "interval")
        .and_then(|a| a.get_default_values().first().cloned())
        .expect("--interval's default");
    assert_eq!(default, "1s");
    let header = shot.lines().next().unwrap_or("");
    assert!(header.contains("every 1.0s"), "{header}");
}

/// The README is not part of the book (whose links CI checks in the built HTML): its own
/// relative links must name files that exist, and their anchors headings of those files.
#[test]
fn the_readme_links_resolve() {
    let readme = std::fs::read_to_string(Path::new(REPO).join("README.md")).unwrap();
    let mut checked = 0;
    for part in readme.split("](").skip(1) {
        let Some(target) = part.split(')').next() else {
            continue;
        };
        if target.starts_with("http") || target.starts_with('#') {
            continue;
        }
        let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
        let path = Path::new(REPO).join(file);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("README links to {target}: {e}"));
        if !anchor.is_empty() {
            // mdBook's ids: a heading in lower case, spaces as dashes.
            let found = text.lines().filter(|l| l.starts_with('#')).any(|l| {
                l.trim_start_matches('#')
                    .trim()
                    .to_lowercase()
                    .replace(' ', "-")
                    == anchor
            });
            assert!(found, "README links to {target}: no such heading");
        }
        checked += 1;
    }
    assert!(checked >= 15, "only {checked} links checked");
}
