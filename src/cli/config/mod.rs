//! Settings in layers, merged in one place: the command line, then `VRAMSCOPE_*` variables,
//! then the configuration file, then the built-in defaults. A setting is a command-line option
//! (`settings::SETTINGS`); clap applies the first two layers and the last, and the file's
//! values enter as the options' defaults, checked by the options' own parsers first. So the
//! file can hold nothing the command line could not say, and `--help`, completions and the
//! man page describe the file's keys too.
//!
//! ```text
//! args ──> clap (CLI > env > default) ──> --config / XDG ──> file ──> trust (root) ──>
//!          settings::apply (file values become defaults) ──> clap again ──> Cli
//! ```

pub mod file;
pub mod locate;
pub mod settings;
pub mod show;
pub mod trust;

use crate::cli::Cli;
use clap::{ArgMatches, Command, CommandFactory, FromArgMatches};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

/// The command line with every layer applied.
pub struct Resolved {
    pub cli: Cli,
    pub matches: ArgMatches,
    /// Where the file was looked for.
    pub chosen: locate::Chosen,
    /// The file read, if one was.
    pub file: Option<file::ConfigFile>,
}

/// The command line's definition, settings readable from their variables: what parses, and
/// what `--help`, completions and the man page describe.
pub fn command() -> Command {
    settings::with_environment(Cli::command())
}

/// Parses `args` (the program's name first) with the environment and the configuration
/// file. On `Err` what had to be said is said (help, version, the error's line) and the value
/// is the status to exit with.
pub fn parse(args: &[OsString]) -> Result<Resolved, ExitCode> {
    let mut command = command();
    let matches = clap_parse(&mut command, args)?;
    let given = matches.get_one::<PathBuf>("config");
    let chosen = locate::choose(
        given.map(PathBuf::as_path),
        std::env::var_os("XDG_CONFIG_HOME").as_deref(),
        std::env::var_os("HOME").as_deref(),
    );
    let file = load(&chosen, crate::channel::sys::euid()).map_err(refuse)?;
    let (mut command, matches) = match &file {
        None => (command, matches),
        Some(file) => {
            // A fresh definition: parsing built the first one, copying global options'
            // defaults into every subcommand, where a later change would not reach.
            let mut layered = settings::apply(self::command(), file).map_err(refuse)?;
            let matches = clap_parse(&mut layered, args)?;
            (layered, matches)
        }
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.format(&mut command).exit(),
    };
    Ok(Resolved {
        cli,
        matches,
        chosen,
        file,
    })
}

/// The file chosen, if there is one, refused when root should not trust it: read by the one
/// open that checks it (`trust::read`).
pub fn load(chosen: &locate::Chosen, euid: u32) -> Result<Option<file::ConfigFile>, String> {
    let Some(path) = chosen.path() else {
        return Ok(None);
    };
    match trust::read(path, euid, chosen.missing_ok()) {
        Ok(bytes) => file::parse_bytes(path, bytes).map(Some),
        Err(trust::Failure::Missing(_)) if chosen.missing_ok() => Ok(None),
        Err(failure) => Err(failure.line().to_string()),
    }
}

fn refuse(line: String) -> ExitCode {
    eprintln!("vramscope: {line}");
    ExitCode::from(2)
}

fn clap_parse(command: &mut Command, args: &[OsString]) -> Result<ArgMatches, ExitCode> {
    match command.try_get_matches_from_mut(args) {
        Ok(matches) => Ok(matches),
        // `--help` and `--version` to a pipe or file end as every printing command does
        // (stdout); clap would report success having written nothing.
        Err(e) if !e.use_stderr() => Err(match crate::stdout::print(&e.render().to_string()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(status) => status,
        }),
        Err(e) => e.exit(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::terminal_kit::theme::ThemeName;
    use crate::tui::ui_state::SortColumn;
    use std::path::Path;
    use std::time::Duration;

    /// The command line `args` over the file `text`, without the environment layer (the
    /// variables are the process's; tests/config_file.rs sets them per run).
    fn layered(text: &str, args: &[&str]) -> Result<Cli, String> {
        let file = file::parse(Path::new("/c/config.toml"), text)?;
        let mut command = settings::apply(Cli::command(), &file)?;
        let matches = command
            .try_get_matches_from_mut(std::iter::once("vramscope").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        Cli::from_arg_matches(&matches).map_err(|e| e.to_string())
    }

    #[test]
    fn the_file_beats_the_defaults_and_the_command_line_beats_the_file() {
        let text = "interval = \"2s\"\ntheme = \"light\"\nsort = \"pid\"\nsort-order = \"desc\"\nread-only = true\npcie = 3\n";
        let from_file = layered(text, &[]).unwrap();
        assert_eq!(from_file.interval, Duration::from_secs(2));
        assert_eq!(from_file.theme, ThemeName::Light);
        assert_eq!(from_file.sort, SortColumn::Pid);
        assert_eq!(
            from_file.sort_order,
            Some(crate::cli::SortOrder::Descending)
        );
        assert!(from_file.read_only);
        assert_eq!(from_file.pcie, Some(Duration::from_secs(3)));
        assert!(
            !from_file.ascii,
            "what the file leaves out keeps its default"
        );

        let given = layered(
            text,
            &[
                "--interval",
                "500ms",
                "--theme",
                "dark",
                "--sort",
                "cpu",
                "--pcie",
            ],
        )
        .unwrap();
        assert_eq!(given.interval, Duration::from_millis(500));
        assert_eq!(given.theme, ThemeName::Dark);
        assert_eq!(given.sort, SortColumn::Cpu);
        assert_eq!(
            given.pcie,
            Some(Duration::from_secs(5)),
            "--pcie alone: its own 5 s"
        );
        assert!(given.read_only);

        let none = layered("", &[]).unwrap();
        assert_eq!(none.interval, Duration::from_secs(1));
        assert_eq!(none.theme, ThemeName::Dark);
        assert_eq!(none.sort, SortColumn::Vram);
        assert_eq!(none.sort_order, None);
    }

    #[test]
    fn a_file_value_is_not_a_command_line_option_a_mode_would_refuse() {
        let file = file::parse(
            Path::new("/c/config.toml"),
            "interval = \"2s\"\nascii = true\n",
        )
        .unwrap();
        let matches = settings::apply(Cli::command(), &file)
            .unwrap()
            .try_get_matches_from(["vramscope", "report", "run.jsonl"])
            .unwrap();
        assert_eq!(crate::cli::scope::refuse_ignored(&matches), Ok(()));
    }

    fn error(text: &str) -> String {
        layered(text, &[]).unwrap_err()
    }

    #[test]
    fn every_error_is_one_line_naming_the_file_the_line_and_the_key() {
        for (text, expected) in [
            (
                "\ncolour = \"red\"\n",
                "/c/config.toml line 2: colour: unknown key (the keys: interval, pcie, nvml-lib, read-only, ascii, theme, units, sort, sort-order",
            ),
            (
                "read_only = true\n",
                "/c/config.toml line 1: read_only: unknown key",
            ),
            ("once = true\n", "/c/config.toml line 1: once: unknown key"),
            (
                "[keys]\nquit = \"x\"\n",
                "/c/config.toml line 1: keys: unknown key",
            ),
            (
                "ascii = \"yes\"\n",
                "/c/config.toml line 1: ascii: wrong type: true or false expected, not text",
            ),
            (
                "interval = true\n",
                "/c/config.toml line 1: interval: wrong type: text or a number expected, not a boolean",
            ),
            (
                "theme = [\"light\"]\n",
                "/c/config.toml line 1: theme: wrong type: text or a number expected, not a list",
            ),
            (
                "sort = { by = \"pid\" }\n",
                "/c/config.toml line 1: sort: wrong type: text or a number expected, not a table",
            ),
            (
                "interval = \"50ms\"\n",
                "/c/config.toml line 1: interval: bad value: `50ms` is below the 100 ms minimum",
            ),
            (
                "interval = 0.01\n",
                "/c/config.toml line 1: interval: bad value: `0.01` is below the 100 ms minimum",
            ),
            (
                "theme = \"solarized\"\n",
                "/c/config.toml line 1: theme: bad value `solarized` (one of: dark, light)",
            ),
            (
                "sort = \"colour\"\n",
                "/c/config.toml line 1: sort: bad value: no column `colour` (columns: pid, user, gpu, rank, type, vram",
            ),
            (
                "sort-order = \"up\"\n",
                "/c/config.toml line 1: sort-order: bad value `up` (one of: ascending, descending)",
            ),
            (
                "ascii = true\ninterval = \"x\"\n",
                "/c/config.toml line 2: interval: bad value: `x` is not a period",
            ),
        ] {
            let line = error(text);
            assert!(
                line.starts_with(expected),
                "{text:?}:\n  got  {line}\n  want {expected}"
            );
            assert!(!line.contains('\n'), "{line}");
        }
    }

    #[test]
    fn hostile_text_in_a_value_comes_back_cleaned() {
        let line = error("theme = \"\\u001b]0;owned\\u0007\"\n");
        assert!(
            line.starts_with("/c/config.toml line 1: theme: bad value `"),
            "{line}"
        );
        assert!(
            !line.contains('\u{1b}') && !line.contains('\u{7}'),
            "{line:?}"
        );
    }
}
