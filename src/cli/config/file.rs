//! Reading a configuration file: TOML, one flat table of settings, each remembered with its
//! line so an error can name it. Nothing here knows which keys exist (see `settings`).

use std::path::{Path, PathBuf};
use toml_edit::{Document, Item, Value};

/// A file's settings in the order written.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigFile {
    pub path: PathBuf,
    pub entries: Vec<Entry>,
}

/// One `key = value` line.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub key: String,
    /// From 1.
    pub line: usize,
    pub value: FileValue,
}

/// A value as far as settings care: what the command line could have given.
#[derive(Debug, Clone, PartialEq)]
pub enum FileValue {
    Bool(bool),
    /// A string, or a number as written (`0.5`, `2`).
    Text(String),
    /// An array of strings and numbers.
    List(Vec<String>),
    /// Anything else, by TOML's name for it (`a table`, `a date`).
    Other(&'static str),
}

impl FileValue {
    /// What the value is, for an error saying what was expected instead.
    pub fn kind(&self) -> &'static str {
        match self {
            FileValue::Bool(_) => "a boolean",
            FileValue::Text(_) => "text",
            FileValue::List(_) => "a list",
            FileValue::Other(kind) => kind,
        }
    }
}

impl ConfigFile {
    /// The one line naming the file, the entry's line and key, and what is wrong.
    pub fn problem(&self, entry: &Entry, problem: &str) -> String {
        format!(
            "{} line {}: {}: {problem}",
            shown(&self.path),
            entry.line,
            crate::text::clean(&entry.key)
        )
    }
}

/// The path as an error line shows it, cleaned of characters a terminal would act on.
pub fn shown(path: &Path) -> String {
    crate::text::clean(&path.to_string_lossy()).into_owned()
}

/// Parses `bytes`, the contents of `path` (read by `trust::read`), as UTF-8 TOML.
pub fn parse_bytes(path: &Path, bytes: Vec<u8>) -> Result<ConfigFile, String> {
    let text = String::from_utf8(bytes).map_err(|e| {
        let line = line_at(
            &String::from_utf8_lossy(e.as_bytes()),
            e.utf8_error().valid_up_to(),
        );
        format!("{} line {line}: not UTF-8 text", shown(path))
    })?;
    parse(path, &text)
}

/// Parses `text`, the contents of `path`.
pub fn parse(path: &Path, text: &str) -> Result<ConfigFile, String> {
    let document = Document::parse(text).map_err(|e| {
        let line = e.span().map_or(1, |s| line_at(text, s.start));
        let message = e.message().lines().next().unwrap_or("syntax error");
        format!(
            "{} line {line}: not valid TOML: {}",
            shown(path),
            crate::text::clean(message)
        )
    })?;
    let table = document.as_table();
    let mut entries: Vec<Entry> = table
        .iter()
        .map(|(key, item)| {
            let at = table
                .key(key)
                .and_then(toml_edit::Key::span)
                .or_else(|| item.span());
            Entry {
                key: key.to_string(),
                line: at.map_or(1, |s| line_at(text, s.start)),
                value: value_of(item),
            }
        })
        .collect();
    entries.sort_by_key(|e| e.line);
    Ok(ConfigFile {
        path: path.to_path_buf(),
        entries,
    })
}

fn value_of(item: &Item) -> FileValue {
    match item {
        Item::Value(value) => match value {
            Value::Boolean(b) => FileValue::Bool(*b.value()),
            Value::Array(items) => {
                let texts: Option<Vec<String>> = items.iter().map(text_of).collect();
                texts.map_or(
                    FileValue::Other("a list of tables or lists"),
                    FileValue::List,
                )
            }
            other => {
                text_of(other).map_or_else(|| FileValue::Other(kind_of(other)), FileValue::Text)
            }
        },
        Item::Table(_) => FileValue::Other("a table"),
        Item::ArrayOfTables(_) => FileValue::Other("an array of tables"),
        Item::None => FileValue::Other("nothing"),
    }
}

/// A string or number as the command line would spell it.
fn text_of(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.value().clone()),
        Value::Integer(i) => Some(i.value().to_string()),
        Value::Float(f) => Some(f.value().to_string()),
        _ => None,
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Datetime(_) => "a date",
        Value::InlineTable(_) => "a table",
        Value::Boolean(_) => "a boolean",
        Value::Array(_) => "a list",
        Value::String(_) | Value::Integer(_) | Value::Float(_) => "text",
    }
}

/// The line (from 1) holding byte `offset` of `text`.
fn line_at(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<ConfigFile, String> {
        parse(Path::new("/etc/x/config.toml"), text)
    }

    #[test]
    fn entries_keep_their_line_and_value() {
        let file = parsed(
            "# comment\n\ninterval = \"2s\"\nascii = true\npcie = 0.5\ncolumns = [\"pid\", 3]\n",
        )
        .unwrap();
        let seen: Vec<(&str, usize, &FileValue)> = file
            .entries
            .iter()
            .map(|e| (e.key.as_str(), e.line, &e.value))
            .collect();
        assert_eq!(
            seen,
            [
                ("interval", 3, &FileValue::Text("2s".into())),
                ("ascii", 4, &FileValue::Bool(true)),
                ("pcie", 5, &FileValue::Text("0.5".into())),
                (
                    "columns",
                    6,
                    &FileValue::List(vec!["pid".into(), "3".into()])
                ),
            ]
        );
    }

    #[test]
    fn tables_and_dates_are_named_by_their_kind() {
        let file = parsed("when = 2026-01-01\n[keys]\nquit = \"x\"\n").unwrap();
        assert_eq!(file.entries[0].value, FileValue::Other("a date"));
        assert_eq!(file.entries[1].key, "keys");
        assert_eq!(file.entries[1].line, 2);
        assert_eq!(file.entries[1].value, FileValue::Other("a table"));
    }

    #[test]
    fn a_syntax_error_is_one_line_naming_file_and_line() {
        let error = parsed("interval = \"1s\"\ntheme = \n").unwrap_err();
        assert!(
            error.starts_with("/etc/x/config.toml line 2: not valid TOML: "),
            "{error}"
        );
        assert!(!error.contains('\n'), "{error}");
        let twice = parsed("ascii = true\nascii = false\n").unwrap_err();
        assert!(twice.starts_with("/etc/x/config.toml line 2: "), "{twice}");
    }

    #[test]
    fn a_problem_names_file_line_and_a_cleaned_key() {
        let file = parsed("\"bad\\u202ekey\" = 1\n").unwrap();
        let line = file.problem(&file.entries[0], "unknown key");
        assert_eq!(
            line,
            format!(
                "/etc/x/config.toml line 1: bad{}key: unknown key",
                crate::text::clean("\u{202e}")
            )
        );
        assert!(!line.contains('\u{202e}'));
    }

    #[test]
    fn text_that_is_not_utf8_is_refused_naming_its_line() {
        let latin = parse_bytes(
            Path::new("/etc/x/latin.toml"),
            b"ascii = true\n# caf\xe9\n".to_vec(),
        );
        assert_eq!(
            latin.unwrap_err(),
            "/etc/x/latin.toml line 2: not UTF-8 text"
        );
    }
}
