//! `vramscope completions SHELL` and `vramscope man` run as the real binary: each prints a
//! script or page that names every subcommand and every long option of the definition the
//! command line is parsed with, and the shells accept the scripts.

use clap::CommandFactory;
use std::process::{Command, Output};
use vramscope::cli::Cli;

fn vramscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vramscope"))
        .args(args)
        .output()
        .expect("run vramscope")
}

fn printed(args: &[&str]) -> String {
    let out = vramscope(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stderr.is_empty(), "{args:?} wrote to stderr");
    String::from_utf8(out.stdout).expect("UTF-8")
}

fn subcommands() -> Vec<String> {
    Cli::command()
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect()
}

/// Every long option of the top level and of each subcommand.
/// Every long option a user is shown (a hidden one, such as attach's `--shown-as` that only
/// the TUI passes, is in no page and no completion).
fn long_options() -> Vec<String> {
    let cmd = Cli::command();
    let shown = |a: &clap::Arg| (!a.is_hide_set()).then(|| a.get_long().map(str::to_string));
    let mut longs: Vec<String> = cmd.get_arguments().filter_map(shown).flatten().collect();
    for sub in cmd.get_subcommands() {
        longs.extend(sub.get_arguments().filter_map(shown).flatten());
    }
    longs
}

#[test]
fn completions_name_every_subcommand_in_every_shell() {
    let names = subcommands();
    assert!(names.len() >= 12 && names.contains(&"man".to_string()));
    for shell in ["bash", "zsh", "fish"] {
        let script = printed(&["completions", shell]);
        for name in &names {
            assert!(script.contains(name.as_str()), "{shell}: no {name}");
        }
        for long in long_options() {
            assert!(script.contains(&long), "{shell}: no --{long}");
        }
    }
}

#[test]
fn the_shells_accept_their_scripts() {
    for (shell, check) in [("bash", "-n"), ("zsh", "-n"), ("fish", "--no-execute")] {
        let available = Command::new(shell)
            .args(["-c", "true"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !available {
            eprintln!("{shell} not installed: its script's syntax is not checked");
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vramscope.completion");
        std::fs::write(&path, printed(&["completions", shell])).unwrap();
        let out = Command::new(shell).arg(check).arg(&path).output().unwrap();
        assert!(
            out.status.success(),
            "{shell} {check}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn bash_completes_a_subcommand_from_its_prefix() {
    let ok = Command::new("bash")
        .args(["-c", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("bash not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vramscope.bash");
    std::fs::write(&path, printed(&["completions", "bash"])).unwrap();
    // What bash does on `vramscope rep<TAB>`.
    let script = format!(
        "source {}; COMP_WORDS=(vramscope rep); COMP_CWORD=1; COMP_LINE='vramscope rep'; \
         COMP_POINT=${{#COMP_LINE}}; _vramscope vramscope rep vramscope; \
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        path.display()
    );
    let out = Command::new("bash").args(["-c", &script]).output().unwrap();
    let words = String::from_utf8_lossy(&out.stdout);
    let mut words: Vec<&str> = words.split_whitespace().collect();
    words.sort_unstable();
    assert_eq!(
        words,
        ["replay", "report"],
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_man_page_is_roff_with_every_subcommand_and_option() {
    let page = printed(&["man"]);
    assert!(page.contains(".TH vramscope 1"), "{page}");
    for name in subcommands() {
        assert!(
            page.contains(&format!(".SH \"VRAMSCOPE {}\"", name.to_uppercase())),
            "no section for {name}"
        );
    }
    for long in long_options() {
        // roff escapes each hyphen.
        let escaped = format!("\\-\\-{}", long.replace('-', "\\-"));
        assert!(page.contains(&escaped), "no {escaped}");
    }
}

#[test]
fn an_unknown_shell_and_an_ignored_global_option_get_one_line() {
    let out = vramscope(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("tcsh"));
    for args in [
        &["completions", "bash", "--once"][..],
        &["man", "--ascii"][..],
    ] {
        let out = vramscope(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("does not apply to `vramscope"),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn a_full_disk_is_one_line_and_status_1() {
    let full = std::fs::File::create("/dev/full").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_vramscope"))
        .arg("man")
        .stdout(full)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot write to standard output"));
}
