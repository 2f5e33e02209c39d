//! Which options are settings, and how a configuration file's values become them. A setting is
//! a global option of the command line known by its long name: the file's key is that name
//! (`read-only`), its variable `VRAMSCOPE_` and the name upper-cased with `_` (`VRAMSCOPE_READ_ONLY`).
//! Values from the file are checked by the option's own parser and then become the option's
//! default, so clap itself applies the order: command line, then environment, then file, then
//! the built-in default.

use super::file::{ConfigFile, Entry, FileValue};
use clap::{Arg, ArgAction, Command};

/// The options a configuration file may set, by their long name; an option becomes a setting
/// (a file key and a `VRAMSCOPE_*` variable) with one line here.
pub const SETTINGS: &[&str] = &[
    "interval",
    "pcie",
    "nvml-lib",
    "read-only",
    "ascii",
    "theme",
    "units",
    "sort",
    "sort-order",
    "peak-interval",
    "columns",
    "monitor-log",
    "gpm",
    "on",
];

/// The environment variable of the option `long`: `VRAMSCOPE_READ_ONLY` for `read-only`.
pub fn env_name(long: &str) -> String {
    format!("VRAMSCOPE_{}", long.to_uppercase().replace('-', "_"))
}

/// Whether clap's argument `id` is a setting.
pub fn is_setting_id(command: &Command, id: &str) -> bool {
    command
        .get_arguments()
        .any(|a| a.get_id() == id && a.get_long().is_some_and(|l| SETTINGS.contains(&l)))
}

/// The command line's definition with every setting readable from its variable.
pub fn with_environment(command: Command) -> Command {
    SETTINGS.iter().fold(command, |command, long| {
        let Some(id) = id_of(&command, long) else {
            return command;
        };
        command.mut_arg(id, |arg| {
            let arg = if arg.get_env().is_some() {
                arg
            } else {
                arg.env(env_name(long))
            };
            // A flag's variable reads as people write them: 1, yes, on as well as true.
            if matches!(arg.get_action(), ArgAction::SetTrue) {
                arg.value_parser(clap::builder::BoolishValueParser::new())
            } else {
                arg
            }
        })
    })
}

fn id_of(command: &Command, long: &str) -> Option<String> {
    command
        .get_arguments()
        .find(|a| a.get_long() == Some(long))
        .map(|a| a.get_id().to_string())
}

/// `command` with the file's values as the settings' defaults, each checked first: the first
/// unknown key, value of the wrong type or bad value is the error, one line naming the file,
/// the line and the key.
pub fn apply(command: Command, file: &ConfigFile) -> Result<Command, String> {
    apply_settings(command, file, SETTINGS)
}

/// `apply` with `settings` as the options a file may set.
fn apply_settings(
    command: Command,
    file: &ConfigFile,
    settings: &[&str],
) -> Result<Command, String> {
    let mut command = command;
    for entry in &file.entries {
        let values =
            check(&command, entry, settings).map_err(|problem| file.problem(entry, &problem))?;
        let Some(id) = id_of(&command, &entry.key) else {
            continue;
        };
        command = command.mut_arg(id, |arg| arg.default_values(values));
    }
    Ok(command)
}

/// The values `entry` gives its option, as the command line would spell them.
fn check(command: &Command, entry: &Entry, settings: &[&str]) -> Result<Vec<String>, String> {
    let arg = command
        .get_arguments()
        .find(|a| a.get_long() == Some(entry.key.as_str()))
        .filter(|_| settings.contains(&entry.key.as_str()))
        .ok_or_else(|| format!("unknown key (the keys: {})", settings.join(", ")))?;
    let flag = matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse);
    let list = matches!(arg.get_action(), ArgAction::Append);
    let values = match (&entry.value, flag, list) {
        (FileValue::Bool(b), true, _) => vec![b.to_string()],
        (other, true, _) => {
            return Err(format!(
                "wrong type: true or false expected, not {}",
                other.kind()
            ));
        }
        (FileValue::Text(text), false, _) => split(arg, text),
        (FileValue::List(items), false, true) => items.iter().flat_map(|i| split(arg, i)).collect(),
        (other, false, _) => {
            return Err(format!(
                "wrong type: {} expected, not {}",
                if list {
                    "text or a list"
                } else {
                    "text or a number"
                },
                other.kind()
            ));
        }
    };
    // A flag's boolean needs no parsing; a flag takes no value on the command line.
    if !flag {
        for value in &values {
            parse(arg, value)?;
        }
    }
    Ok(values)
}

/// A value as the command line would split it (`--columns pid,vram`).
fn split(arg: &Arg, text: &str) -> Vec<String> {
    match arg.get_value_delimiter() {
        Some(delimiter) => text.split(delimiter).map(str::to_string).collect(),
        None => vec![text.to_string()],
    }
}

/// Runs the option's own parser on `value`, as a command line holding only this option would
/// (not its variable, which is another layer); the reason it refuses it, in one line.
fn parse(arg: &Arg, value: &str) -> Result<(), String> {
    use clap::error::{ContextKind, ContextValue};
    let long = arg.get_long().unwrap_or_default();
    let alone = Command::new("vramscope")
        .no_binary_name(true)
        .arg(arg.clone().env(None).global(false));
    let error = match alone.try_get_matches_from([format!("--{long}={value}")]) {
        Ok(_) => return Ok(()),
        Err(error) => error,
    };
    let shown = crate::text::clean(value);
    if let Some(reason) = std::error::Error::source(&error) {
        return Err(format!("bad value: {}", one_line(&reason.to_string())));
    }
    if let Some(ContextValue::Strings(valid)) = error.get(ContextKind::ValidValue) {
        return Err(format!(
            "bad value `{shown}` (one of: {})",
            valid.join(", ")
        ));
    }
    Err(format!("bad value `{shown}`"))
}

fn one_line(text: &str) -> String {
    let first = text.lines().next().unwrap_or_default();
    crate::text::clean(first).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::builder::PossibleValuesParser;
    use std::path::Path;

    /// A list option such as the table's `--columns pid,vram`: one line in the settings makes
    /// it a key taking a list or a comma-separated text.
    fn with_columns() -> Command {
        Command::new("t").no_binary_name(true).arg(
            Arg::new("columns")
                .long("columns")
                .action(ArgAction::Append)
                .value_delimiter(',')
                .value_parser(PossibleValuesParser::new(["pid", "user", "vram"])),
        )
    }

    fn columns(text: &str) -> Result<Vec<String>, String> {
        let file = super::super::file::parse(Path::new("c.toml"), text)?;
        let command = apply_settings(with_columns(), &file, &["columns"])?;
        let matches = command.try_get_matches_from(Vec::<String>::new()).unwrap();
        Ok(matches
            .get_many::<String>("columns")
            .unwrap()
            .cloned()
            .collect())
    }

    #[test]
    fn a_list_option_takes_a_list_or_the_command_lines_spelling() {
        assert_eq!(
            columns("columns = [\"pid\", \"vram\"]\n").unwrap(),
            ["pid", "vram"]
        );
        assert_eq!(
            columns("columns = \"user,pid\"\n").unwrap(),
            ["user", "pid"]
        );
        assert_eq!(
            columns("columns = [\"pid\", \"colour\"]\n").unwrap_err(),
            "c.toml line 1: columns: bad value `colour` (one of: pid, user, vram)"
        );
        assert_eq!(
            columns("columns = true\n").unwrap_err(),
            "c.toml line 1: columns: wrong type: text or a list expected, not a boolean"
        );
        // The command line still replaces the file's list.
        let file = super::super::file::parse(Path::new("c.toml"), "columns = [\"pid\"]\n").unwrap();
        let matches = apply_settings(with_columns(), &file, &["columns"])
            .unwrap()
            .try_get_matches_from(["--columns", "vram,user"])
            .unwrap();
        let given: Vec<&String> = matches.get_many::<String>("columns").unwrap().collect();
        assert_eq!(given, ["vram", "user"]);
    }

    /// Global options that are no setting, by their long name: they say what one run does
    /// (print once, record to a file), or name the configuration file itself.
    const NOT_SETTINGS: [&str; 6] = ["once", "json", "csv", "loop", "record", "config"];

    /// A new global option has to be placed: a setting (one line in SETTINGS, and its key in
    /// assets/config.toml) or one of the few that are not.
    #[test]
    fn every_global_option_is_a_setting_or_said_not_to_be() {
        let command = crate::cli::config::command();
        for arg in command.get_arguments().filter(|a| a.is_global_set()) {
            let long = arg.get_long().unwrap_or_default();
            assert!(
                SETTINGS.contains(&long) != NOT_SETTINGS.contains(&long),
                "--{long}: add it to SETTINGS (and assets/config.toml) or to NOT_SETTINGS"
            );
        }
    }

    #[test]
    fn every_setting_is_a_global_option_with_its_variable() {
        let command = crate::cli::config::command();
        for long in SETTINGS {
            let arg = command.get_arguments().find(|a| a.get_long() == Some(long));
            assert!(arg.is_some(), "no option --{long}");
            let Some(arg) = arg else { continue };
            assert!(arg.is_global_set(), "--{long}");
            assert_eq!(
                arg.get_env(),
                Some(std::ffi::OsStr::new(&env_name(long))),
                "--{long}"
            );
        }
        assert_eq!(env_name("sort-order"), "VRAMSCOPE_SORT_ORDER");
    }
}
