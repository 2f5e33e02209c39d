//! `--csv`: one row per GPU and per process, with a `record` column telling which. An absent
//! figure is an empty cell (never 0); quoting follows RFC 4180.

use super::fields::{self, DEVICE, Field, PROCESS, Value};
use crate::model::Snapshot;

/// The header line: `record,time_ms`, then device fields, then process fields (the first two
/// process fields repeat device facts under their own names for easy filtering).
pub fn header() -> String {
    let mut names = vec!["record", "time_ms"];
    names.extend(DEVICE.iter().map(|(name, _)| *name));
    names.extend(PROCESS.iter().map(|(name, _)| *name));
    names.join(",") + "\n"
}

/// Rows for one snapshot, preceded by the header when `with_header`.
pub fn render(snapshot: &Snapshot, with_header: bool) -> String {
    let mut out = if with_header { header() } else { String::new() };
    let time = snapshot.taken_at_ms.to_string();
    for device in &snapshot.devices {
        let cells = fields::device(device);
        out += &row("device", &time, &cells, &[]);
    }
    for process in &snapshot.processes {
        let cells = fields::process(process);
        out += &row("process", &time, &[], &cells);
    }
    out
}

fn row(record: &str, time: &str, device: &[Field], process: &[Field]) -> String {
    let mut cells = vec![record.to_string(), time.to_string()];
    cells.extend(pad(device, DEVICE.len()));
    cells.extend(pad(process, PROCESS.len()));
    cells.join(",") + "\n"
}

fn pad(fields: &[Field], width: usize) -> Vec<String> {
    if fields.is_empty() {
        return vec![String::new(); width];
    }
    fields
        .iter()
        .map(|(_, r)| r.as_ref().map_or(String::new(), cell))
        .collect()
}

fn cell(value: &Value) -> String {
    match value {
        Value::Int(v) => v.to_string(),
        Value::Float(v) => format!("{v:.1}"),
        Value::Bool(v) => v.to_string(),
        Value::Text(v) => quote(v),
    }
}

/// Quotes a field when it holds a comma, quote or line break, doubling inner quotes.
pub fn quote(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_follows_rfc4180() {
        assert_eq!(quote("python train.py"), "python train.py");
        assert_eq!(quote("a,b"), "\"a,b\"");
        assert_eq!(quote("say \"hi\""), "\"say \"\"hi\"\"\"");
    }

    #[test]
    fn header_has_every_field_once() {
        let h = header();
        assert_eq!(
            h.trim_end().split(',').count(),
            2 + DEVICE.len() + PROCESS.len()
        );
    }
}
