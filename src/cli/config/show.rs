//! `vramscope config`: the settings a command line runs with, written as a configuration file
//! with where each comes from, so the layers can be seen rather than guessed; `--default`: the
//! documented default file (assets/config.toml), whose agreement with the command line's
//! definition a test checks.

use super::Resolved;
use super::locate::Chosen;
use clap::ArgAction;
use clap::parser::ValueSource;
use std::process::ExitCode;

/// The documented default configuration file.
pub const DEFAULT_FILE: &str = include_str!("../../../assets/config.toml");

/// Prints the settings (or, with `default`, the default file).
pub fn run(resolved: &Resolved, default: bool) -> ExitCode {
    let text = if default {
        DEFAULT_FILE.to_string()
    } else {
        settings_text(resolved)
    };
    match crate::stdout::print(&text) {
        Ok(()) => ExitCode::SUCCESS,
        Err(status) => status,
    }
}

/// The settings as TOML, one per line, each followed by its source.
pub fn settings_text(resolved: &Resolved) -> String {
    let command = super::command();
    let mut out =
        String::from("# The settings this command line runs with, and where each comes from.\n");
    out.push_str(&match (&resolved.chosen, &resolved.file) {
        (_, Some(file)) => format!("# Configuration file: {}\n", super::file::shown(&file.path)),
        (Chosen::Usual(path), None) => format!(
            "# Configuration file: none at {}\n",
            super::file::shown(path)
        ),
        _ => "# Configuration file: none (--config none)\n".to_string(),
    });
    for long in super::settings::SETTINGS {
        let Some(arg) = command.get_arguments().find(|a| a.get_long() == Some(long)) else {
            continue;
        };
        let id = arg.get_id().as_str();
        let raw: Vec<String> = resolved
            .matches
            .get_raw(id)
            .into_iter()
            .flatten()
            .map(|v| crate::text::clean(&v.to_string_lossy()).into_owned())
            .collect();
        let source = match resolved.matches.value_source(id) {
            Some(ValueSource::CommandLine) => format!("--{long}"),
            Some(ValueSource::EnvVariable) => super::settings::env_name(long),
            _ => match resolved.file.as_ref().and_then(|f| {
                f.entries
                    .iter()
                    .find(|e| e.key == *long)
                    .map(|e| (f, e.line))
            }) {
                Some((file, line)) => format!("{} line {line}", super::file::shown(&file.path)),
                None => "default".to_string(),
            },
        };
        let flag = matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse);
        let value = match (raw.as_slice(), flag) {
            ([], _) => {
                out.push_str(&format!("# {long}: not set ({source})\n"));
                continue;
            }
            // As read, not as written (`VRAMSCOPE_ASCII=yes`): the file takes true or false.
            (_, true) => resolved
                .matches
                .get_one::<bool>(id)
                .copied()
                .unwrap_or_default()
                .to_string(),
            ([one], false) => quoted(one),
            (many, _) => format!(
                "[{}]",
                many.iter()
                    .map(|v| quoted(v))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        out.push_str(&format!("{long} = {value}  # {source}\n"));
    }
    out
}

/// A TOML basic string.
fn quoted(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::config::{file, settings};
    use std::collections::BTreeMap;
    use std::path::Path;

    /// The default file's keys: set ones by their value, commented-out examples by their line.
    fn documented() -> (BTreeMap<String, String>, BTreeMap<String, String>) {
        let parsed = file::parse(Path::new("assets/config.toml"), DEFAULT_FILE).unwrap();
        let set = parsed
            .entries
            .iter()
            .map(|e| {
                let value = match &e.value {
                    file::FileValue::Bool(b) => Some(b.to_string()),
                    file::FileValue::Text(t) => Some(t.clone()),
                    _ => None,
                };
                assert!(value.is_some(), "{}: {:?}", e.key, e.value);
                (e.key.clone(), value.unwrap_or_default())
            })
            .collect();
        let examples = DEFAULT_FILE
            .lines()
            .filter_map(|l| l.strip_prefix("# "))
            .filter_map(|l| {
                let (key, _) = l.split_once(" = ")?;
                settings::SETTINGS
                    .contains(&key)
                    .then(|| (key.to_string(), l.to_string()))
            })
            .collect();
        (set, examples)
    }

    #[test]
    fn the_default_file_documents_every_setting_at_the_command_lines_default() {
        let command = crate::cli::config::command();
        let (set, examples) = documented();
        for long in settings::SETTINGS {
            let arg = command.get_arguments().find(|a| a.get_long() == Some(long));
            assert!(arg.is_some(), "no option --{long}");
            let Some(arg) = arg else { continue };
            assert!(arg.is_global_set(), "--{long} is read whatever the mode");
            let defaults: Vec<String> = arg
                .get_default_values()
                .iter()
                .map(|v| v.to_string_lossy().into_owned())
                .collect();
            let flag = matches!(arg.get_action(), ArgAction::SetTrue);
            match (set.get(*long), examples.get(*long)) {
                (Some(value), None) => {
                    let expected = if flag && defaults.is_empty() {
                        vec!["false".to_string()]
                    } else {
                        defaults
                    };
                    assert_eq!(
                        vec![value.clone()],
                        expected,
                        "{long}: the file's value is the default"
                    );
                }
                (None, Some(_)) => assert!(
                    defaults.is_empty() && !flag,
                    "{long} has a default ({defaults:?}): write it, not an example"
                ),
                other => panic!("{long} must be documented once, set or as an example: {other:?}"),
            }
            let at = DEFAULT_FILE
                .lines()
                .position(|l| {
                    l.starts_with(&format!("{long} = ")) || l.starts_with(&format!("# {long} = "))
                })
                .unwrap();
            let above = DEFAULT_FILE.lines().nth(at - 1).unwrap_or_default();
            assert!(
                above.starts_with("# ") && !above.contains(" = "),
                "{long}: no explanation above it"
            );
        }
        for key in set.keys().chain(examples.keys()) {
            assert!(
                settings::SETTINGS.contains(&key.as_str()),
                "{key} is no setting"
            );
        }
    }

    #[test]
    fn the_default_files_values_and_examples_are_accepted() {
        let parsed = file::parse(Path::new("assets/config.toml"), DEFAULT_FILE).unwrap();
        settings::apply(crate::cli::config::command(), &parsed).unwrap();
        let (_, examples) = documented();
        for line in examples.values() {
            let example = file::parse(Path::new("example"), line).unwrap();
            settings::apply(crate::cli::config::command(), &example)
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
}
