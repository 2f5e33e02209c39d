//! `--csv`: one row per GPU and per process, with a `record` column telling which. An absent
//! figure is an empty cell (never 0); quoting follows RFC 4180. A text cell that a
//! spreadsheet would take for a formula is defused (`formula_guard`).

use super::fields::{self, Field, Value};
use crate::model::Snapshot;
use crate::model::figures::{device as gpu, process};
use crate::model::units::{MemoryUnits, csv_mib};
use std::borrow::Cow;

/// The header line: `record,time_ms`, then device fields, then process fields (the first two
/// process fields repeat device facts under their own names for easy filtering). Every name
/// is unique, so `pandas.read_csv` and `csv.DictReader` keep every column.
pub fn header() -> String {
    let mut names: Vec<Cow<'static, str>> = vec!["record".into(), "time_ms".into()];
    names.extend(gpu::ALL.iter().map(|f| Cow::Borrowed(f.key)));
    names.extend(process::ALL.iter().map(|f| process_column(f.key)));
    names.join(",") + "\n"
}

/// A process field's CSV column: its JSON name, with `process_` before it where a device
/// field has the same name (`mem_util` is the device's, `process_mem_util` the process's).
/// In JSON each sits in its own object, so there the names stay as they are.
fn process_column(name: &'static str) -> Cow<'static, str> {
    if gpu::ALL.iter().any(|f| f.key == name) {
        Cow::Owned(format!("process_{name}"))
    } else {
        Cow::Borrowed(name)
    }
}

/// Rows for one snapshot, preceded by the header when `with_header`; GPU memory in bytes, or
/// with `--units mib` as nvidia-smi's CSV writes it (`4096 MiB`).
pub fn render(snapshot: &Snapshot, with_header: bool, units: MemoryUnits) -> String {
    let mut out = if with_header { header() } else { String::new() };
    let time = snapshot.taken_at_ms.to_string();
    for device in &snapshot.devices {
        let cells = fields::device(device);
        out += &row("device", &time, &cells, &[], units);
    }
    for process in &snapshot.processes {
        let cells = fields::process(process);
        out += &row("process", &time, &[], &cells, units);
    }
    out
}

fn row(
    record: &str,
    time: &str,
    device_fields: &[Field],
    process_fields: &[Field],
    units: MemoryUnits,
) -> String {
    let mut cells = vec![record.to_string(), time.to_string()];
    cells.extend(pad(device_fields, gpu::ALL.len(), units));
    cells.extend(pad(process_fields, process::ALL.len(), units));
    cells.join(",") + "\n"
}

fn pad(fields: &[Field], width: usize, units: MemoryUnits) -> Vec<String> {
    if fields.is_empty() {
        return vec![String::new(); width];
    }
    fields
        .iter()
        .map(|(_, r)| r.as_ref().map_or(String::new(), |v| cell(v, units)))
        .collect()
}

fn cell(value: &Value, units: MemoryUnits) -> String {
    match value {
        Value::Int(v) => v.to_string(),
        Value::Bytes(v) => match units {
            MemoryUnits::Auto => v.to_string(),
            MemoryUnits::Mib => csv_mib(*v),
        },
        Value::Float(v) => format!("{v:.1}"),
        Value::Bool(v) => v.to_string(),
        Value::Text(v) => quote(&formula_guard(v)),
    }
}

/// Text that a spreadsheet would run as a formula (a command line beginning with `=`, `+`,
/// `-` or `@`, or a tab or carriage return before one) gets a leading `'`, as OWASP's CSV
/// injection advice says: Excel, LibreOffice and Sheets then show it as text. Only text
/// cells pass here; numbers (a negative one too) are written as they are.
pub fn formula_guard(text: &str) -> Cow<'_, str> {
    if text.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        Cow::Owned(format!("'{text}"))
    } else {
        Cow::Borrowed(text)
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
    fn text_a_spreadsheet_would_run_is_defused_and_numbers_are_not() {
        for formula in ["=1+2", "+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1"] {
            assert_eq!(
                cell(&Value::Text(formula.into()), MemoryUnits::Auto),
                quote(&format!("'{formula}"))
            );
        }
        assert_eq!(
            cell(
                &Value::Text("=HYPERLINK(\"http://e\",\"x\")".into()),
                MemoryUnits::Auto
            ),
            "\"'=HYPERLINK(\"\"http://e\"\",\"\"x\"\")\""
        );
        assert_eq!(
            cell(&Value::Text("python -m x".into()), MemoryUnits::Auto),
            "python -m x"
        );
        assert_eq!(cell(&Value::Int(3), MemoryUnits::Auto), "3");
        assert_eq!(cell(&Value::Float(-1.5), MemoryUnits::Auto), "-1.5");
        assert_eq!(cell(&Value::Bytes(3 << 20), MemoryUnits::Auto), "3145728");
        assert_eq!(cell(&Value::Bytes(3 << 20), MemoryUnits::Mib), "3 MiB");
    }

    #[test]
    fn header_has_every_field_once() {
        let h = header();
        let names: Vec<&str> = h.trim_end().split(',').collect();
        assert_eq!(names.len(), 2 + gpu::ALL.len() + process::ALL.len());
        let unique: std::collections::HashSet<&str> = names.iter().copied().collect();
        assert_eq!(unique.len(), names.len(), "a name repeats in {h}");
        assert!(names.contains(&"mem_util") && names.contains(&"process_mem_util"));
    }
}
