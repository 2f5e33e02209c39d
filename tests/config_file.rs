//! The configuration file through the real binary: the layers (command line, `VRAMSCOPE_*`,
//! file, defaults) as `vramscope config` reports them, the XDG location, one-line errors with
//! status 2, root refusing another user's file, and in a real terminal (tmux) a file that
//! changes the refresh period, the theme and the sort the monitor starts with.

mod common;

use common::race;
use common::tmux::{self, Tmux};
use common::users::TestUser;
use common::{GIB, Scenario, h100, stderr, stdout};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_vramscope");

/// The binary with no configuration variable and no `VRAMSCOPE_*` setting from the machine.
fn vramscope(home: &Path) -> Command {
    let mut cmd = Command::new(BIN);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("VRAMSCOPE_") {
            cmd.env_remove(name);
        }
    }
    cmd.env("HOME", home).env_remove("XDG_CONFIG_HOME");
    cmd
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
}

/// The line of `vramscope config`'s output that sets `key`.
fn setting(out: &Output, key: &str) -> String {
    assert!(out.status.success(), "{}", stderr(out));
    stdout(out)
        .lines()
        .find(|l| l.starts_with(&format!("{key} = ")))
        .unwrap_or_else(|| panic!("no {key} in:\n{}", stdout(out)))
        .to_string()
}

#[test]
fn the_command_line_beats_the_environment_which_beats_the_file_which_beats_the_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("my.toml");
    write(
        &file,
        "# mine\ninterval = \"2s\"\ntheme = \"light\"\nsort = \"pid\"\n",
    );
    let run = |env: &[(&str, &str)], args: &[&str]| {
        vramscope(dir.path())
            .args(["config", "--config"])
            .arg(&file)
            .args(args)
            .envs(env.iter().copied())
            .output()
            .unwrap()
    };
    let file_only = run(&[], &[]);
    let shown = file.display();
    assert_eq!(
        setting(&file_only, "interval"),
        format!("interval = \"2s\"  # {shown} line 2")
    );
    assert_eq!(
        setting(&file_only, "theme"),
        format!("theme = \"light\"  # {shown} line 3")
    );
    assert_eq!(setting(&file_only, "ascii"), "ascii = false  # default");

    let env = run(
        &[("VRAMSCOPE_INTERVAL", "3s"), ("VRAMSCOPE_ASCII", "yes")],
        &[],
    );
    assert_eq!(
        setting(&env, "interval"),
        "interval = \"3s\"  # VRAMSCOPE_INTERVAL"
    );
    assert_eq!(setting(&env, "ascii"), "ascii = true  # VRAMSCOPE_ASCII");
    assert_eq!(
        setting(&env, "sort"),
        format!("sort = \"pid\"  # {shown} line 4")
    );

    let cli = run(
        &[("VRAMSCOPE_INTERVAL", "3s")],
        &["--interval", "4s", "--theme", "dark"],
    );
    assert_eq!(setting(&cli, "interval"), "interval = \"4s\"  # --interval");
    assert_eq!(setting(&cli, "theme"), "theme = \"dark\"  # --theme");

    // The variable that names the file, and `none`.
    let by_variable = vramscope(dir.path())
        .arg("config")
        .env("VRAMSCOPE_CONFIG", &file)
        .output()
        .unwrap();
    assert_eq!(
        setting(&by_variable, "interval"),
        format!("interval = \"2s\"  # {shown} line 2")
    );
    let none = vramscope(dir.path())
        .args(["config", "--config", "none"])
        .env("VRAMSCOPE_CONFIG", &file)
        .output()
        .unwrap();
    assert_eq!(setting(&none, "interval"), "interval = \"1s\"  # default");
}

#[test]
fn the_file_is_found_in_xdg_config_home_else_in_home_dot_config() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let xdg = dir.path().join("xdg");
    write(
        &home.join(".config/vramscope/config.toml"),
        "interval = \"7s\"\n",
    );
    let from_home = vramscope(&home).arg("config").output().unwrap();
    assert!(setting(&from_home, "interval").starts_with("interval = \"7s\"  # "));
    assert!(stdout(&from_home).contains("home/.config/vramscope/config.toml line 1"));

    write(&xdg.join("vramscope/config.toml"), "interval = \"9s\"\n");
    let from_xdg = vramscope(&home)
        .arg("config")
        .env("XDG_CONFIG_HOME", &xdg)
        .output()
        .unwrap();
    assert!(
        stdout(&from_xdg).contains("xdg/vramscope/config.toml line 1"),
        "{}",
        stdout(&from_xdg)
    );
    assert!(setting(&from_xdg, "interval").starts_with("interval = \"9s\""));

    // No file at the usual place is no error.
    let nowhere = vramscope(&dir.path().join("nobody"))
        .arg("config")
        .output()
        .unwrap();
    assert_eq!(
        setting(&nowhere, "interval"),
        "interval = \"1s\"  # default"
    );
    assert!(stdout(&nowhere).contains("# Configuration file: none at "));
}

#[test]
fn a_bad_file_stops_every_mode_with_one_line_and_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    for (text, line) in [
        ("\n\nrefresh = \"1s\"\n", "line 3: refresh: unknown key"),
        (
            "theme = \"pink\"\n",
            "line 1: theme: bad value `pink` (one of: dark, light)",
        ),
        (
            "ascii = 1\n",
            "line 1: ascii: wrong type: true or false expected, not text",
        ),
        ("interval = [\n", "line 1: not valid TOML: "),
    ] {
        write(&file, text);
        for args in [&["--once"][..], &["config"], &["report", "x.jsonl"]] {
            let out = scenario
                .command()
                .arg("--config")
                .arg(&file)
                .args(args)
                .output()
                .unwrap();
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(2), "{args:?} {text:?}: {err}");
            assert_eq!(err.lines().count(), 1, "one line: {err}");
            assert!(
                err.starts_with(&format!("vramscope: {} {line}", file.display())),
                "{args:?} {text:?}: {err}"
            );
            assert!(stdout(&out).is_empty());
        }
    }
    let missing = scenario
        .command()
        .args(["--config", "/nonexistent/x.toml", "--once"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).starts_with("vramscope: /nonexistent/x.toml: cannot read: "));
}

#[test]
fn as_root_a_file_another_user_owns_or_may_write_is_refused() {
    if unsafe_free_euid() != 0 {
        eprintln!("skipped: not root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    write(&file, "nvml-lib = \"/tmp/evil.so\"\n");
    std::os::unix::fs::chown(&file, Some(65534), None).unwrap();
    let out = vramscope(dir.path())
        .args(["--config"])
        .arg(&file)
        .arg("--once")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("refused: running as root, and it belongs to uid 65534"),
        "{err}"
    );
    // The same in the usual place: no --config needed to be refused.
    let home = dir.path().join("home");
    write(
        &home.join(".config/vramscope/config.toml"),
        "ascii = true\n",
    );
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = vramscope(&home).arg("config").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("may be written by others (mode 777)"),
        "{}",
        stderr(&out)
    );
}

/// The effective uid, from /proc (the test needs no libc).
fn unsafe_free_euid() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let uids = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    uids.split_whitespace().nth(2).unwrap().parse().unwrap()
}

#[test]
fn the_default_file_sets_what_no_file_sets() {
    let dir = tempfile::tempdir().unwrap();
    let default = vramscope(dir.path())
        .args(["config", "--default"])
        .output()
        .unwrap();
    assert!(default.status.success());
    let file = dir.path().join("default.toml");
    write(&file, &stdout(&default));
    let with = vramscope(dir.path())
        .args(["config", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    let without = vramscope(dir.path())
        .args(["config", "--config", "none"])
        .output()
        .unwrap();
    let values = |out: &Output| -> Vec<String> {
        assert!(out.status.success(), "{}", stderr(out));
        stdout(out)
            .lines()
            .filter(|l| !l.starts_with("# "))
            .map(|l| l.split("  # ").next().unwrap().to_string())
            .collect()
    };
    assert_eq!(values(&with), values(&without));
    assert!(values(&with).len() >= 5, "{:?}", values(&with));
}

#[test]
fn a_file_changes_the_period_theme_and_sort_the_monitor_starts_with() {
    if !tmux::available() {
        return;
    }
    let mut gpu = h100(0);
    gpu["processes"] = json!([{ "t": 0, "compute": [
        { "pid": 1111, "used_memory": 2 * GIB },
        { "pid": 2222, "used_memory": 6 * GIB },
    ] }]);
    let scenario = Scenario::new(&json!({ "devices": [gpu] }));
    let file = scenario.dir().join("config.toml");
    write(
        &file,
        "interval = \"2s\"\ntheme = \"light\"\nsort = \"pid\"\n",
    );
    let line = format!("{} --config {}", scenario.monitor_line(""), file.display());
    let t = Tmux::start(scenario.dir(), 120, 30, &line);
    let (ok, screen) = t.wait_for(Duration::from_secs(8), |s| {
        s.contains("2222") && s.contains("1111")
    });
    assert!(ok, "the monitor ran:\n{screen}");
    let header = screen.lines().next().unwrap_or_default();
    assert!(header.contains("2.0s"), "the file's period: {header}");
    assert!(
        screen.contains("PID▲"),
        "sorted by pid, ascending:\n{screen}"
    );
    let first = |s: &str| s.find("1111").unwrap() < s.find("2222").unwrap();
    assert!(first(&screen), "1111 above 2222:\n{screen}");
    let colours = t.screen_with_escapes();
    assert!(
        colours.contains("38;5;25"),
        "the light theme's blue title:\n{colours:?}"
    );

    // The command line outranks the file: the dark theme, VRAM first, the file's period kept.
    let dark_dir = tempfile::tempdir().unwrap();
    let line = format!(
        "{} --config {} --theme dark --sort vram",
        scenario.monitor_line(""),
        file.display()
    );
    let t = Tmux::start(dark_dir.path(), 120, 30, &line);
    let (ok, screen) = t.wait_for(Duration::from_secs(8), |s| {
        s.contains("2222") && s.contains("1111")
    });
    assert!(ok, "the monitor ran:\n{screen}");
    assert!(
        screen.lines().next().unwrap_or_default().contains("2.0s"),
        "{screen}"
    );
    assert!(screen.contains("VRAM▼") && !first(&screen), "{screen}");
    let colours = t.screen_with_escapes();
    // tmux writes the terminal's own sixteen colours as 38;5;0-15: the dark title is cyan (6).
    assert!(
        !colours.contains("38;5;25") && colours.contains("38;5;6m"),
        "the dark theme's cyan title, not the light one's blue:\n{colours:?}"
    );
}

/// A folder of `user`'s own at `dir`, holding `file` (a path inside it) with `text`; every
/// folder and the file are theirs.
fn theirs(user: &TestUser, dir: &Path, file: &str, text: &str) {
    let path = dir.join(file);
    write(&path, text);
    let mut at = path.as_path();
    while at != dir.parent().unwrap() {
        user.give(at);
        at = at.parent().unwrap();
    }
}

/// Issue 28 §1.2: the file was read by path and only then its path checked, so a user who
/// controls one component of the path (their HOME under sudo, XDG_CONFIG_HOME,
/// VRAMSCOPE_CONFIG, --config into their tree or a shared sticky folder) flipped a symlink
/// between their file and root's, and root loaded their `nvml-lib`. Here the user flips it in
/// a loop while root runs `--once` again and again: the planted library (a real shared
/// object whose constructor leaves a marker) must never be loaded.
#[test]
fn as_root_a_path_a_user_flips_never_gives_root_the_users_file() {
    let Some(user) = TestUser::create() else {
        eprintln!("SKIPPED: needs root and useradd to race a real other user");
        return;
    };
    if !common::cc_available() {
        eprintln!("SKIPPED: needs cc for the planted library");
        return;
    }
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let top_dir = tempfile::tempdir().unwrap();
    let top = top_dir.path();
    std::fs::set_permissions(top, std::fs::Permissions::from_mode(0o755)).unwrap();
    let marker = top.join("marker");
    let planted = race::marker_library(top, &marker);
    let flipper = race::flipper(top);
    let root_home = top.join("root-home");
    let vramscope_as_root = |args: &[&std::ffi::OsStr], env: &[(&str, &Path)]| {
        let mut cmd = scenario.command();
        cmd.env_remove("VRAMSCOPE_NVML_LIB")
            .env_remove("VRAMSCOPE_CONFIG")
            .env_remove("XDG_CONFIG_HOME")
            .env("HOME", &root_home)
            .envs(env.iter().copied())
            .args(args)
            .arg("--once");
        cmd.output().unwrap()
    };

    // The planted library is what the test looks for: loaded by root, it leaves the marker.
    let out = vramscope_as_root(
        &["--nvml-lib".as_ref(), planted.as_os_str()],
        &[("VRAMSCOPE_CONFIG", Path::new("none"))],
    );
    let said = std::fs::read_to_string(&marker).unwrap_or_default();
    assert_eq!(said, "euid 0\n", "the planted library ran as root: {out:?}");
    std::fs::remove_file(&marker).unwrap();

    // Root's own files (trusted wherever a flipped name points into them), and the user's.
    let trusted = top.join("trusted");
    let ours = format!("nvml-lib = {:?}\n", common::fake_nvml());
    write(&trusted.join("config.toml"), &ours);
    write(&trusted.join("vramscope/config.toml"), &ours);
    let planted_text = format!("nvml-lib = {planted:?}\n");
    let home = top.join("home");
    std::fs::create_dir(&home).unwrap();
    user.give(&home);
    let shared = top.join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let held_file = shared.join(".theirs.toml");
    write(&held_file, &planted_text);
    user.give(&held_file);
    for held in ["c.held", "v.held", "x/vramscope.held"] {
        theirs(&user, &home, &format!("{held}/config.toml"), &planted_text);
    }
    theirs(
        &user,
        &home,
        ".config.held/vramscope/config.toml",
        &planted_text,
    );

    struct Case<'a> {
        what: &'a str,
        args: Vec<&'a std::ffi::OsStr>,
        env: Vec<(&'a str, PathBuf)>,
        /// The name the user flips between `held` (theirs) and a symlink to `target` (root's).
        name: PathBuf,
        held: PathBuf,
        target: &'a Path,
    }
    let named = home.join("c/config.toml");
    let shared_name = shared.join("config.toml");
    let cases = [
        Case {
            what: "--config through a folder of theirs",
            args: vec!["--config".as_ref(), named.as_os_str()],
            env: vec![],
            name: home.join("c"),
            held: home.join("c.held"),
            target: &trusted,
        },
        Case {
            what: "VRAMSCOPE_CONFIG through a folder of theirs",
            args: vec![],
            env: vec![("VRAMSCOPE_CONFIG", home.join("v/config.toml"))],
            name: home.join("v"),
            held: home.join("v.held"),
            target: &trusted,
        },
        Case {
            what: "XDG_CONFIG_HOME of theirs",
            args: vec![],
            env: vec![("XDG_CONFIG_HOME", home.join("x"))],
            name: home.join("x/vramscope"),
            held: home.join("x/vramscope.held"),
            target: &trusted,
        },
        Case {
            what: "their HOME, as under sudo",
            args: vec![],
            env: vec![("HOME", home.clone())],
            name: home.join(".config"),
            held: home.join(".config.held"),
            target: &trusted,
        },
        Case {
            what: "--config in a shared sticky folder",
            args: vec!["--config".as_ref(), shared_name.as_os_str()],
            env: vec![],
            name: shared_name.clone(),
            held: held_file.clone(),
            target: &trusted.join("config.toml"),
        },
    ];
    for case in cases {
        let env: Vec<(&str, &Path)> = case.env.iter().map(|(k, v)| (*k, v.as_path())).collect();
        let mut flip = race::Flip::start(&user, &flipper, &case.name, &case.held, case.target, 2);
        let (mut runs, mut refused) = (0, 0);
        while flip.running() {
            let out = vramscope_as_root(&case.args, &env);
            runs += 1;
            let err = stderr(&out);
            assert!(
                !marker.exists(),
                "{}: root loaded the user's library on run {runs}: {out:?}",
                case.what
            );
            assert!(err.lines().count() <= 1, "{}: {err}", case.what);
            refused += usize::from(err.contains("refused: running as root"));
        }
        let rounds = flip.finish();
        eprintln!(
            "{}: {runs} runs as root ({refused} refused) while the user flipped {rounds} times",
            case.what
        );
        assert!(rounds > 0 && runs >= 3, "{}: the race ran", case.what);
        assert!(refused > 0, "{}: root refused the user's path", case.what);
    }
    assert!(!marker.exists());
}
