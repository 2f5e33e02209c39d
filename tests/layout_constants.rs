//! The channel's layout exists three times: `src/channel/layout.rs` (the reader and the Rust
//! writer), `python/vramscope/_layout.py` and `assets/vramscope_channel.h`. The three name
//! things differently, so [`table`] pairs them; the test then reads the real values of the
//! other two (Python imports its file and prints its constants, a C program compiled with the
//! header prints every `VSC_*` name it defines) and fails with the name of every constant that
//! differs, and of every one that a file has and the table does not pair (a new constant must
//! be added to the table, which says whether the other languages have it).
//!
//! A Rust constant paired with neither of the others is one the other writers spell as a
//! literal in their code (a field offset written once) or do not need (the reader's limits);
//! the behaviour tests (channel_roundtrip) hold those.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use common::{cc_available, python3_available};
use vramscope::channel::layout;

const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// A constant's value: a number, or bytes (the magic, the file extension).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Value {
    Int(i128),
    Bytes(Vec<u8>),
}

/// One constant: its Rust path (or a Rust expression, for a figure only the others name) and
/// the names it has in Python and C, `None` where that language has no name for it.
struct Row {
    rust: String,
    value: Value,
    python: Option<&'static str>,
    c: Option<&'static str>,
}

macro_rules! int {
    ($($seg:ident)::+, $py:expr, $c:expr) => {
        Row {
            rust: stringify!($($seg)::+).replace(' ', ""),
            value: Value::Int(layout::$($seg)::+ as i128),
            python: $py,
            c: $c,
        }
    };
}

macro_rules! bytes {
    ($($seg:ident)::+, $value:expr, $py:expr, $c:expr) => {
        Row {
            rust: stringify!($($seg)::+).replace(' ', ""),
            value: Value::Bytes($value.to_vec()),
            python: $py,
            c: $c,
        }
    };
}

/// C names the header defines that are its API, not the file's layout.
const C_API: &[&str] = &["VSC_OK", "VSC_RANK_FROM_ENV"];
const C_API_PREFIX: &str = "VSC_E_";

fn table() -> Vec<Row> {
    use layout::*;
    vec![
        int!(ABSENT, Some("ABSENT"), Some("VSC_ABSENT")),
        bytes!(MAGIC, MAGIC, Some("MAGIC"), None),
        int!(ENDIAN_TAG, Some("ENDIAN_TAG"), None),
        int!(VERSION_MAJOR, Some("MAJOR"), None),
        int!(VERSION_MINOR, Some("MINOR"), None),
        bytes!(EXTENSION, EXTENSION.as_bytes(), None, None),
        bytes!(TEMP_EXTENSION, TEMP_EXTENSION.as_bytes(), None, None),
        int!(DIR_MODE, None, None),
        int!(FILE_MODE, None, None),
        int!(SECTIONS_MIN_OFFSET, None, None),
        int!(FIELD_ALIGN, None, None),
        int!(PAGE, Some("PAGE"), Some("VSC__PAGE")),
        // The largest figure a writer can store: one below ABSENT.
        Row {
            rust: "ABSENT - 1".into(),
            value: Value::Int(ABSENT as i128 - 1),
            python: Some("U64_MAX_VALUE"),
            c: None,
        },
        int!(
            state::STARTING,
            Some("STATE_STARTING"),
            Some("VSC_STATE_STARTING")
        ),
        int!(
            state::RUNNING,
            Some("STATE_RUNNING"),
            Some("VSC_STATE_RUNNING")
        ),
        int!(
            state::EXITED_CLEAN,
            Some("STATE_EXITED_CLEAN"),
            Some("VSC_STATE_EXITED_CLEAN")
        ),
        int!(
            state::EXITED_ERROR,
            Some("STATE_EXITED_ERROR"),
            Some("VSC_STATE_EXITED_ERROR")
        ),
        int!(
            flags::PEAK_RESET,
            Some("FLAG_PEAK_RESET"),
            Some("VSC_FLAG_PEAK_RESET")
        ),
        int!(
            flags::MODULE_ATTRIBUTION,
            Some("FLAG_MODULE_ATTRIBUTION"),
            Some("VSC_FLAG_MODULE_ATTRIBUTION")
        ),
        int!(flags::SITES, Some("FLAG_SITES"), Some("VSC_FLAG_SITES")),
        // Only `vramscope attach`'s agent, which is the Python writer, sets it.
        int!(flags::ATTACHED, Some("FLAG_ATTACHED"), None),
        int!(
            kind::PYTORCH,
            Some("KIND_PYTORCH"),
            Some("VSC_KIND_PYTORCH")
        ),
        int!(kind::JAX, Some("KIND_JAX"), Some("VSC_KIND_JAX")),
        int!(
            kind::TENSORFLOW,
            Some("KIND_TENSORFLOW"),
            Some("VSC_KIND_TENSORFLOW")
        ),
        int!(kind::CUPY, Some("KIND_CUPY"), Some("VSC_KIND_CUPY")),
        int!(kind::PYTHON, Some("KIND_PYTHON"), Some("VSC_KIND_PYTHON")),
        int!(kind::C, Some("KIND_C"), Some("VSC_KIND_C")),
        int!(kind::RUST, Some("KIND_RUST"), Some("VSC_KIND_RUST")),
        int!(header::SIZE, Some("HEADER_SIZE"), Some("VSC__HEADER")),
        int!(header::MAGIC, Some("H_MAGIC"), None),
        int!(header::ENDIAN, Some("H_ENDIAN"), None),
        int!(header::MAJOR, Some("H_VERSION"), None),
        int!(header::MINOR, None, None),
        int!(header::HEADER_SIZE, Some("H_HEADER_SIZE"), None),
        int!(header::FLAGS, Some("H_FLAGS"), None),
        int!(header::FILE_SIZE, Some("H_FILE_SIZE"), None),
        int!(header::STATE, Some("H_STATE"), None),
        int!(header::HEARTBEAT, Some("H_HEARTBEAT"), None),
        int!(header::PID, Some("H_PID"), None),
        int!(header::STARTTIME, Some("H_STARTTIME"), None),
        int!(header::PID_NS, Some("H_PIDNS"), None),
        int!(header::UID, Some("H_UID"), None),
        int!(header::CREATED_REALTIME, Some("H_CREATED_REALTIME"), None),
        int!(header::CREATED_MONOTONIC, Some("H_CREATED_MONOTONIC"), None),
        int!(header::WRITER_KIND, Some("H_KIND"), None),
        int!(header::SAMPLE_PERIOD, Some("H_PERIOD_US"), None),
        int!(header::RANK, Some("H_RANKS"), None),
        int!(header::LOCAL_RANK, None, None),
        int!(header::WORLD_SIZE, None, None),
        int!(header::NOT_DISTRIBUTED, None, None),
        int!(header::JOB_ID, Some("H_JOB_ID"), None),
        int!(header::JOB_ID_LEN, Some("JOB_ID_SIZE"), None),
        int!(header::FRAMEWORK, Some("H_FRAMEWORK"), None),
        int!(header::FRAMEWORK_LEN, Some("FRAMEWORK_SIZE"), None),
        int!(header::CMDLINE, Some("H_CMDLINE"), None),
        int!(header::CMDLINE_LEN, Some("CMDLINE_SIZE"), None),
        int!(header::ALLOCATOR_CONFIG, Some("H_ALLOC_CONF"), None),
        int!(header::ALLOCATOR_CONFIG_LEN, Some("ALLOC_CONF_SIZE"), None),
        int!(header::SECTION_TABLE, Some("H_SECTIONS"), None),
        int!(section::ENTRY_SIZE, None, None),
        int!(section::OFFSET, None, None),
        int!(section::RECORD_SIZE, None, None),
        int!(section::CAPACITY, None, None),
        int!(section::DEVICES, None, Some("VSC__SEC_DEVICES")),
        int!(section::STRINGS, None, Some("VSC__SEC_STRINGS")),
        int!(section::SAMPLES, None, Some("VSC__SEC_SAMPLES")),
        int!(section::EVENTS, None, Some("VSC__SEC_EVENTS")),
        int!(section::COUNT, None, None),
        int!(section::DEVICES_MAX, None, None),
        int!(section::STRINGS_MAX, None, None),
        int!(section::RING_MAX, None, None),
        int!(control::OFFSET, Some("CONTROL"), None),
        int!(control::SIZE, None, None),
        int!(control::DEVICES_IN_USE, Some("C_DEVICES"), None),
        int!(control::SAMPLES_HEAD, Some("C_SAMPLES_HEAD"), None),
        int!(control::EVENTS_HEAD, Some("C_EVENTS_HEAD"), None),
        int!(control::STRINGS_IN_USE, Some("C_STRINGS"), None),
        int!(
            control::SNAPSHOT_REQUESTS,
            Some("C_SNAPSHOT_REQUESTS"),
            None
        ),
        int!(status::OFFSET, Some("STATUS"), None),
        int!(status::SIZE, Some("STATUS_SIZE"), None),
        int!(status::SEQ, None, None),
        int!(status::STEP, None, None),
        int!(status::SET_AT, None, None),
        int!(status::LABEL_LEN, None, None),
        int!(status::LABEL, None, None),
        int!(status::LABEL_CAP, Some("LABEL_MAX"), None),
        int!(spare::OFFSET, None, None),
        int!(spare::SEQ, Some("SPARE_SEQ"), None),
        int!(spare::BLOCK, Some("SPARE_BLOCK"), None),
        int!(spare::COPY, Some("SPARE_COPY"), None),
        int!(spare::STATUS_COPY, Some("STATUS_COPY"), None),
        int!(spare::DEVICE_COPY, Some("DEVICE_COPY"), None),
        int!(spare::SIZE, None, None),
        int!(
            device::RECORD_SIZE,
            Some("DEVICE_SIZE"),
            Some("VSC__DEVICE")
        ),
        int!(device::SEQ, Some("D_SEQ"), None),
        int!(device::ORDINAL, Some("D_ORDINAL"), None),
        int!(device::FLAGS, None, None),
        int!(device::UUID, Some("D_UUID"), None),
        int!(device::UUID_LEN, Some("UUID_SIZE"), None),
        int!(device::PCI_BUS_ID, Some("D_PCI"), None),
        int!(device::PCI_BUS_ID_LEN, Some("PCI_SIZE"), None),
        int!(device::TOTAL, Some("D_TOTAL"), None),
        // Python's figures start at read_at ("t"), then the fifteen [M] figures.
        int!(device::READ_AT, Some("D_FIGURES"), None),
        int!(device::ALLOCATED, None, None),
        int!(device::ALLOCATED_PEAK, None, None),
        int!(device::RESERVED, None, None),
        int!(device::RESERVED_PEAK, None, None),
        int!(device::ACTIVE, None, None),
        int!(device::INACTIVE_SPLIT, None, None),
        int!(device::REQUESTED, None, None),
        int!(device::ALLOC_RETRIES, None, None),
        int!(device::OOMS, None, None),
        int!(device::DEVICE_ALLOCS, None, None),
        int!(device::DEVICE_FREES, None, None),
        int!(device::DEVICE_FREE, None, None),
        int!(device::LIMIT, None, None),
        int!(device::INTERVAL_PEAK, None, None),
        int!(device::STEP_PEAK, None, None),
        int!(device::V1_END, None, None),
        int!(device::FIGURES, None, None),
        Row {
            rust: "device::FIGURES + 1 (read_at)".into(),
            value: Value::Int(device::FIGURES as i128 + 1),
            python: Some("len(DEVICE_FIGURES)"),
            c: None,
        },
        int!(device::FLAG_UUID_VALID, Some("DEVICE_UUID_VALID"), None),
        int!(device::FLAG_UUID_MIG, Some("DEVICE_UUID_MIG"), None),
        int!(
            device::FLAG_PCI_BUS_ID_VALID,
            Some("DEVICE_PCI_VALID"),
            None
        ),
        int!(
            string::RECORD_SIZE,
            Some("STRING_SIZE"),
            Some("VSC__STRING")
        ),
        int!(string::LEN, None, None),
        int!(string::TEXT, None, None),
        int!(string::MAX_LEN, Some("STRING_MAX"), None),
        int!(
            sample::RECORD_SIZE,
            Some("SAMPLE_SIZE"),
            Some("VSC__SAMPLE")
        ),
        int!(sample::SEQ, None, None),
        int!(sample::T, None, None),
        int!(sample::ALLOCATED, None, None),
        int!(sample::RESERVED, None, None),
        int!(sample::PEAK, None, None),
        int!(sample::ACTIVE, None, None),
        int!(sample::STEP, None, None),
        int!(sample::SLOT, None, None),
        int!(sample::FLAGS, None, None),
        int!(sample::PHASE, None, None),
        int!(sample::CRC, Some("SAMPLE_CRC"), None),
        int!(sample::CRC_START, None, None),
        int!(
            sample::FLAG_PEAK_EXACT,
            Some("SAMPLE_PEAK_EXACT"),
            Some("VSC_SAMPLE_PEAK_EXACT")
        ),
        int!(
            sample::FLAG_NEW_HIGH_WATER,
            Some("SAMPLE_NEW_HIGH_WATER"),
            Some("VSC_SAMPLE_NEW_HIGH_WATER")
        ),
        int!(
            sample::FLAG_FOREIGN_RESET_SEEN,
            Some("SAMPLE_FOREIGN_RESET_SEEN"),
            Some("VSC_SAMPLE_FOREIGN_RESET_SEEN")
        ),
        int!(
            sample::FLAG_HOOK,
            Some("SAMPLE_HOOK"),
            Some("VSC_SAMPLE_HOOK")
        ),
        int!(
            sample::FLAG_STEP_SINCE_ATTACH,
            Some("SAMPLE_STEP_SINCE_ATTACH"),
            Some("VSC_SAMPLE_STEP_SINCE_ATTACH")
        ),
        int!(event::RECORD_SIZE, Some("EVENT_SIZE"), Some("VSC__EVENT")),
        int!(event::SEQ, None, None),
        int!(event::T, None, None),
        int!(event::KIND, None, None),
        int!(event::SLOT, None, None),
        int!(event::PHASE, None, None),
        int!(event::TEXT_LEN, None, None),
        int!(event::STEP, None, None),
        int!(event::ARGS, None, None),
        int!(event::ARG_COUNT, None, None),
        int!(event::TEXT, None, None),
        int!(event::TEXT_CAP, Some("EVENT_TEXT_MAX"), None),
        int!(event::CRC, Some("EVENT_CRC"), None),
        int!(event::CRC_START, None, None),
        int!(event::NO_SLOT, Some("NO_SLOT"), Some("VSC_NO_SLOT")),
        int!(event::OOM, Some("EV_OOM"), Some("VSC_EV_OOM")),
        int!(
            event::OOM_ERROR,
            Some("EV_OOM_ERROR"),
            Some("VSC_EV_OOM_ERROR")
        ),
        int!(
            event::PHASE_BEGIN,
            Some("EV_PHASE_BEGIN"),
            Some("VSC_EV_PHASE_BEGIN")
        ),
        int!(
            event::PHASE_END,
            Some("EV_PHASE_END"),
            Some("VSC_EV_PHASE_END")
        ),
        int!(
            event::STEP_END,
            Some("EV_STEP_END"),
            Some("VSC_EV_STEP_END")
        ),
        int!(event::MARK, Some("EV_MARK"), Some("VSC_EV_MARK")),
        int!(
            event::NEW_HIGH_WATER,
            Some("EV_NEW_HIGH_WATER"),
            Some("VSC_EV_NEW_HIGH_WATER")
        ),
        int!(
            event::ALLOC_RETRY,
            Some("EV_ALLOC_RETRY"),
            Some("VSC_EV_ALLOC_RETRY")
        ),
        int!(event::EXIT, Some("EV_EXIT"), Some("VSC_EV_EXIT")),
        int!(
            event::SNAPSHOT_WRITTEN,
            Some("EV_SNAPSHOT_WRITTEN"),
            Some("VSC_EV_SNAPSHOT_WRITTEN")
        ),
        int!(
            event::FOREIGN_PEAK_RESET,
            Some("EV_FOREIGN_PEAK_RESET"),
            Some("VSC_EV_FOREIGN_PEAK_RESET")
        ),
        int!(
            event::EMPTY_CACHE,
            Some("EV_EMPTY_CACHE"),
            Some("VSC_EV_EMPTY_CACHE")
        ),
        // Written by the Python writer alone: the C and Rust writers have no categories.
        int!(event::MEMORY_KINDS, Some("EV_MEMORY_KINDS"), None),
        int!(event::SNAPSHOT_OOM, Some("SNAPSHOT_OOM"), None),
        int!(event::SNAPSHOT_PEAK, Some("SNAPSHOT_PEAK"), None),
        int!(event::SNAPSHOT_REQUEST, Some("SNAPSHOT_REQUEST"), None),
        int!(liveness::STALL_MIN_NS, None, None),
        int!(liveness::STALL_PERIODS, None, None),
        int!(liveness::STALE_TTL_NS, None, None),
        int!(
            defaults::DEVICES,
            Some("DEFAULT_DEVICES"),
            Some("VSC_DEFAULT_DEVICES")
        ),
        int!(
            defaults::STRINGS,
            Some("DEFAULT_STRINGS"),
            Some("VSC_DEFAULT_STRINGS")
        ),
        int!(
            defaults::SAMPLES,
            Some("DEFAULT_SAMPLES"),
            Some("VSC_DEFAULT_SAMPLES")
        ),
        int!(
            defaults::EVENTS,
            Some("DEFAULT_EVENTS"),
            Some("VSC_DEFAULT_EVENTS")
        ),
        // Python computes the default file's offsets in `Layout()` rather than naming them.
        int!(
            defaults::DEVICES_OFFSET,
            Some("Layout().devices_offset"),
            None
        ),
        int!(
            defaults::STRINGS_OFFSET,
            Some("Layout().strings_offset"),
            None
        ),
        int!(
            defaults::SAMPLES_OFFSET,
            Some("Layout().samples_offset"),
            None
        ),
        int!(
            defaults::EVENTS_OFFSET,
            Some("Layout().events_offset"),
            None
        ),
        int!(defaults::FILE_SIZE, Some("Layout().file_size"), None),
    ]
}

/// Every `pub const` of layout.rs, as `module::NAME` (read from the source, so that a new
/// constant the table has not classified is caught).
fn rust_names() -> BTreeSet<String> {
    let text = std::fs::read_to_string(Path::new(REPO).join("src/channel/layout.rs"))
        .expect("read layout.rs");
    let mut module: Option<String> = None;
    let mut names = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("pub mod ") {
            module = Some(rest.trim_end_matches(" {").to_string());
        } else if line == "}" {
            module = None;
        } else if let Some(rest) = line.trim_start().strip_prefix("pub const ") {
            let name = rest.split(':').next().expect("a const has a name").trim();
            names.insert(match &module {
                Some(m) => format!("{m}::{name}"),
                None => name.to_string(),
            });
        }
    }
    names
}

/// Python's values: every upper-case int or bytes of `_layout.py`, a tuple's length, and the
/// default `Layout()`'s offsets; printed as `NAME int VALUE` or `NAME bytes HEX`.
fn python_values() -> BTreeMap<String, Value> {
    let script = r#"
import importlib.util, sys
spec = importlib.util.spec_from_file_location("_layout", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
def show(name, v):
    if isinstance(v, bool):
        return
    if isinstance(v, int):
        print(name, "int", v)
    elif isinstance(v, bytes):
        print(name, "bytes", v.hex())
    elif isinstance(v, tuple):
        print("len(%s)" % name, "int", len(v))
    else:
        print(name, "other", type(v).__name__)
for name in sorted(vars(m)):
    if name.isupper():
        show(name, getattr(m, name))
d = m.Layout()
for field in ("devices_offset", "strings_offset", "samples_offset", "events_offset", "file_size"):
    show("Layout().%s" % field, getattr(d, field))
"#;
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(Path::new(REPO).join("python/vramscope/_layout.py"))
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "python3 failed: {}",
        common::stderr(&out)
    );
    parse_dump(&common::stdout(&out))
}

/// The names the C header defines as object-like macros or enum members.
fn c_names(header: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in header.lines() {
        let line = line.trim_start();
        if let Some(rest) = line.strip_prefix("#define VSC_") {
            let name = rest.split_whitespace().next().unwrap_or("");
            if !name.contains('(') {
                names.insert(format!("VSC_{name}"));
            }
            continue;
        }
        // Enum members, one or several to a line: `VSC_X = value,`.
        for (i, _) in line.match_indices("VSC_") {
            let word: String = line[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let after = line[i + word.len()..].trim_start();
            if after.starts_with('=') && !after.starts_with("==") {
                names.insert(word);
            }
        }
    }
    names
}

/// C's values: a program compiled with the header prints each name's value.
fn c_values() -> BTreeMap<String, Value> {
    let header_path = Path::new(REPO).join("assets/vramscope_channel.h");
    let header = std::fs::read_to_string(&header_path).expect("read the C header");
    let mut program = String::from(
        "#include \"vramscope_channel.h\"\n#include <stdio.h>\n\
         #define SHOW(n) do { if ((long long)(n) < 0 && (n) < 0) \
         printf(\"%s int -%llu\\n\", #n, (unsigned long long)(-(long long)(n))); \
         else printf(\"%s int %llu\\n\", #n, (unsigned long long)(n)); } while (0)\n\
         int main(void) {\n",
    );
    for name in c_names(&header) {
        program.push_str(&format!("    SHOW({name});\n"));
    }
    program.push_str("    return 0;\n}\n");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("layout-constants-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let source = dir.join("print.c");
    let exe = dir.join("print");
    std::fs::write(&source, program).expect("write the C program");
    let built = Command::new("cc")
        .args(["-std=c99", "-I"])
        .arg(Path::new(REPO).join("assets"))
        .arg(&source)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("run cc");
    assert!(
        built.status.success(),
        "cc failed: {}",
        common::stderr(&built)
    );
    let out = Command::new(&exe).output().expect("run the C program");
    assert!(out.status.success(), "the C program failed");
    let _ = std::fs::remove_dir_all(&dir);
    parse_dump(&common::stdout(&out))
}

fn parse_dump(text: &str) -> BTreeMap<String, Value> {
    let mut values = BTreeMap::new();
    for line in text.lines() {
        let mut parts = line.rsplitn(3, ' ');
        let (Some(value), Some(kind), Some(name)) = (parts.next(), parts.next(), parts.next())
        else {
            panic!("unreadable line {line:?}");
        };
        let value = match kind {
            "int" => Value::Int(value.parse().expect("an integer")),
            "bytes" => Value::Bytes(
                (0..value.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&value[i..i + 2], 16).expect("hex"))
                    .collect(),
            ),
            _ => panic!("{name} is a {value}, neither a number nor bytes"),
        };
        values.insert(name.to_string(), value);
    }
    values
}

/// Every difference between the table and one language's values: a paired name it lacks, a
/// value that differs, a name it has that the table does not pair.
fn compare(
    language: &str,
    rows: &[Row],
    pick: impl Fn(&Row) -> Option<&'static str>,
    values: &BTreeMap<String, Value>,
    not_layout: impl Fn(&str) -> bool,
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut paired = BTreeSet::new();
    for row in rows {
        let Some(name) = pick(row) else { continue };
        paired.insert(name);
        match values.get(name) {
            None => problems.push(format!("{language} {name} (Rust {}) is missing", row.rust)),
            Some(v) if *v != row.value => problems.push(format!(
                "{language} {name} is {v:?} but Rust {} is {:?}",
                row.rust, row.value
            )),
            Some(_) => {}
        }
    }
    for name in values.keys() {
        if !paired.contains(name.as_str()) && !not_layout(name) {
            problems.push(format!(
                "{language} {name} is not in the table (add it, with its Rust counterpart)"
            ));
        }
    }
    problems
}

#[test]
fn every_rust_constant_is_in_the_table() {
    let rows = table();
    let in_table: BTreeSet<&str> = rows.iter().map(|r| r.rust.as_str()).collect();
    let missing: Vec<String> = rust_names()
        .into_iter()
        .filter(|n| !in_table.contains(n.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "layout.rs constants the table does not classify: {missing:?}"
    );
    assert!(
        rust_names().len() > 150,
        "layout.rs was not read: {:?}",
        rust_names()
    );
}

#[test]
fn python_layout_matches_rust() {
    if !python3_available() {
        return;
    }
    let problems = compare(
        "Python",
        &table(),
        |r| r.python,
        &python_values(),
        |_| false,
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn c_layout_matches_rust() {
    if !cc_available() {
        return;
    }
    let values = c_values();
    assert!(
        values.len() > 40,
        "the C header's names were not found: {values:?}"
    );
    let problems = compare(
        "C",
        &table(),
        |r| r.c,
        &values,
        |name| C_API.contains(&name) || name.starts_with(C_API_PREFIX),
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The comparison itself finds a changed value, a missing name and an unpaired one.
#[test]
fn a_difference_is_named() {
    let rows = table();
    let mut values: BTreeMap<String, Value> = rows
        .iter()
        .filter_map(|r| r.python.map(|n| (n.to_string(), r.value.clone())))
        .collect();
    assert!(compare("Python", &rows, |r| r.python, &values, |_| false).is_empty());
    values.insert("EV_MARK".into(), Value::Int(60));
    values.remove("H_FLAGS");
    values.insert("EV_NEW".into(), Value::Int(13));
    let problems = compare("Python", &rows, |r| r.python, &values, |_| false);
    assert_eq!(
        problems,
        vec![
            "Python H_FLAGS (Rust header::FLAGS) is missing".to_string(),
            "Python EV_MARK is Int(60) but Rust event::MARK is Int(6)".to_string(),
            "Python EV_NEW is not in the table (add it, with its Rust counterpart)".to_string(),
        ]
    );
}
