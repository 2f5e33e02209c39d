//! vramscope's own pickle reader (src/memory_snapshot/guard.rs, build.rs, value.rs) against Python's
//! `pickle`: random values of the subset a snapshot uses, pickled by Python at protocols 2
//! to 5 (tests/sites_support/pickle_values.py), read back and written in the canonical form
//! Python writes them in, sharing included; and a hostile corpus: truncations, huge declared
//! lengths, memo ids never stored, deep nesting, globals, a ten-million-entry history.

use std::path::Path;
use std::process::Command;
use vramscope::memory_snapshot::{self, ErrorKind, Limits};

const VALUES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/sites_support/pickle_values.py"
);
const SIMULATE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/sites_support/simulate.py"
);
const BIN: &str = env!("CARGO_BIN_EXE_vramscope");

fn python(args: &[&str]) {
    let out = Command::new("python3").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn python_bytes(code: &str) -> Vec<u8> {
    let out = Command::new("python3")
        .args(["-c", &format!("import pickle, sys\n{code}")])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Where two canonical forms first differ, with some of each around it.
fn first_difference(ours: &str, python: &str) -> String {
    let at = ours
        .bytes()
        .zip(python.bytes())
        .position(|(a, b)| a != b)
        .unwrap_or(ours.len().min(python.len()));
    let from = at.saturating_sub(60);
    let around = |s: &str| {
        s.get(from..(at + 60).min(s.len()))
            .unwrap_or("")
            .to_string()
    };
    format!(
        "at char {at}: ours ...{}... python ...{}...",
        around(ours),
        around(python)
    )
}

#[test]
fn random_values_read_as_python_pickled_them_at_every_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let mut compared = 0;
    let mut bytes_read = 0;
    for seed in 1..=12 {
        python(&[VALUES, out, &seed.to_string(), "40"]);
        for protocol in 2..=5 {
            let name = format!("{seed}-{protocol}");
            let pickle = std::fs::read(dir.path().join(format!("{name}.pickle"))).unwrap();
            let canon = std::fs::read_to_string(dir.path().join(format!("{name}.canon"))).unwrap();
            let ours = memory_snapshot::canonical_pickle(&pickle, &Limits::default())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(ours == canon, "{name}: {}", first_difference(&ours, &canon));
            compared += 1;
            bytes_read += pickle.len();
        }
    }
    assert_eq!(compared, 48);
    // The generator makes frames past 64 KiB and batches past 1,000 items now and then.
    assert!(bytes_read > 1 << 20, "{bytes_read}");
}

#[test]
fn sharing_is_kept_and_every_int_width_is_read() {
    let bytes = python_bytes(
        "shared = {'f': 1}\nl = [shared, shared, [shared]]\n\
         ints = [0, 255, 256, 65535, 65536, -1, -2**31, 2**31, 2**63 - 1, -2**63, 2**63, 2**64, -2**64, 2**2100, -2**2100]\n\
         sys.stdout.buffer.write(pickle.dumps([l, l, ints, (), (), 'é\\U0001F600', b'\\x00\\xff'], protocol=4))",
    );
    let ours = memory_snapshot::canonical_pickle(&bytes, &Limits::default()).unwrap();
    // The dict is one container (#2) referred to from three places; the list l (#1) twice.
    assert!(
        ours.starts_with("#0[#1[#2{s66:1},@2,#3[@2]],@1,#4[0,255,256,65535,65536,-1,-2147483648,2147483648,9223372036854775807,-9223372036854775808,9223372036854775808,18446744073709551616,-18446744073709551616,"),
        "{ours}"
    );
    assert!(ours.ends_with("],#5(),#6(),sc3a9f09f9880,b00ff]"), "{ours}");
}

/// A small snapshot as the simulator writes it (the 2,000-entry benchmark history).
fn small_snapshot() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    python(&[SIMULATE, dir.path().to_str().unwrap(), "bench", "2000"]);
    std::fs::read(dir.path().join("bench.pickle")).unwrap()
}

#[test]
fn a_snapshot_truncated_anywhere_is_one_line_naming_where() {
    let whole = small_snapshot();
    assert!(memory_snapshot::read_bytes(&whole, &Limits::default()).is_ok());
    // Every offset of the first 4 KiB, then every 97th byte to the end.
    let offsets = (1..4096).chain((4096..whole.len()).step_by(97));
    let mut tried = 0;
    for cut in offsets {
        let e = memory_snapshot::read_bytes(&whole[..cut], &Limits::default()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotASnapshot, "{cut}: {e}");
        let line = e.to_string();
        assert!(
            line.starts_with("not a memory snapshot: the pickle is truncated at byte"),
            "{cut}: {line}"
        );
        assert_eq!(line.lines().count(), 1);
        tried += 1;
    }
    assert!(tried > 4000, "{tried}");
}

fn refused(bytes: &[u8]) -> String {
    let e = memory_snapshot::read_bytes(bytes, &Limits::default()).unwrap_err();
    let line = e.to_string();
    assert_eq!(line.lines().count(), 1, "{line}");
    line
}

#[test]
fn huge_declared_lengths_and_memo_ids_never_stored_are_refused() {
    for (bytes, says) in [
        (&b"\x80\x04X\xff\xff\xff\xffab."[..], "truncated at byte 2"),
        (
            b"\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\x7fab.",
            "truncated at byte 2",
        ),
        (
            b"\x80\x04\x8e\xff\xff\xff\xff\xff\xff\xff\xffab.",
            "truncated at byte 2",
        ),
        (b"\x80\x04\x8b\xff\xff\xff\x7f\x01.", "truncated at byte 2"),
        (b"\x80\x04\x8c\xffab.", "truncated at byte 2"),
        (
            b"\x80\x04]h\x05.",
            "refers to memo 5, which was never stored",
        ),
        (b"\x80\x04]j\xff\xff\xff\x7f.", "refers to memo 2147483647"),
        (
            b"\x80\x04]q\x0a.",
            "memo id 10 at byte 3 is larger than the values built",
        ),
        (
            b"\x80\x04]\x94]\x94h\x00h\x01.",
            "ends at byte 10 with 4 values",
        ),
        (
            b"\x80\x04\x8c\x02\xff\xfe.",
            "the string at byte 2 is not UTF-8",
        ),
        (b"\x80\x04\x8f\x94.", "holds a set at byte 2"),
        (b"\x80\x04K\x01]a.", "appends to an integer"),
        (
            b"\x80\x04]\x94\x94.",
            "at byte 4 is stored in the memo twice",
        ),
    ] {
        let line = refused(bytes);
        assert!(line.contains(says), "{bytes:?}: {line}");
    }
    // A FRAME declaring more than the file holds is only a hint: the values are read.
    let e = refused(b"\x80\x04\x95\xff\xff\xff\xff\xff\xff\xff\x7f}.");
    assert!(e.contains("without `segments`"), "{e}");
}

#[test]
fn nesting_past_64_is_refused_for_every_container() {
    for (code, ok) in [
        ("v = []\nfor _ in range(62): v = [v]", true),
        ("v = []\nfor _ in range(70): v = [v]", false),
        ("v = {}\nfor _ in range(100): v = {'k': v}", false),
        ("v = ()\nfor _ in range(100): v = (v,)", false),
        ("v = 1\nfor _ in range(100): v = [v, v]", false),
    ] {
        let bytes = python_bytes(&format!(
            "{code}\nsys.stdout.buffer.write(pickle.dumps(v, protocol=4))"
        ));
        let read = memory_snapshot::canonical_pickle(&bytes, &Limits::default());
        assert_eq!(read.is_ok(), ok, "{code}: {read:?}");
        if let Err(e) = read {
            assert!(e.to_string().contains("nest deeper than 64"), "{code}: {e}");
        }
    }
}

#[test]
fn every_opcode_that_names_or_calls_a_global_is_refused() {
    for (bytes, what) in [
        (
            &b"\x80\x04\x8c\x05posix\x8c\x06system\x93."[..],
            "names a Python global",
        ),
        (
            b"\x80\x02cposix\nsystem\n.",
            "names a Python global (`posix.system`)",
        ),
        (b"\x80\x02N)R.", "calls a Python object (REDUCE)"),
        (b"\x80\x02}}b.", "builds a Python object"),
        (b"\x80\x02(iposix\nsystem\n.", "builds a Python object"),
        (b"\x80\x02(o.", "builds a Python object"),
        (b"\x80\x02N)\x81.", "builds a Python object"),
        (b"\x80\x04N)}\x92.", "builds a Python object"),
        (b"\x80\x02\x82\x01.", "names a Python global"),
        (b"\x80\x02\x83\x01\x00.", "names a Python global"),
        (b"\x80\x02\x84\x01\x00\x00\x00.", "names a Python global"),
        (b"\x80\x02Pid\n.", "uses persistent ids"),
        (b"\x80\x02NQ.", "uses persistent ids"),
        (
            b"\x80\x05\x96\x00\x00\x00\x00\x00\x00\x00\x00.",
            "holds a bytearray",
        ),
        (b"\x80\x05\x97.", "uses out-of-band buffers"),
    ] {
        let e = memory_snapshot::read_bytes(bytes, &Limits::default()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Refused, "{bytes:?}: {e}");
        assert!(e.to_string().contains(what), "{bytes:?}: {e}");
        assert!(e.to_string().contains("never runs code"), "{e}");
    }
}

/// Runs `vramscope ARGS` and returns its status, stdout and its own peak RSS in KiB.
#[expect(
    clippy::zombie_processes,
    reason = "wait4 below waits for the child, for its rusage, which clippy cannot see"
)]
fn vramscope_rss(args: &[&str]) -> (i32, String, i64) {
    let child = Command::new(BIN)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut stdout = child.stdout.unwrap();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut out).unwrap();
    let mut status = 0;
    // SAFETY: a zeroed rusage is valid; wait4 writes it and the status for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; the child is ours and not yet waited for.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid);
    (libc::WEXITSTATUS(status), out, usage.ru_maxrss)
}

#[test]
fn a_ten_million_entry_history_is_read_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("huge.pickle");
    let code = format!(
        "e = {{'action': 'alloc', 'addr': 1, 'size': 512, 'stream': 0, 'time_us': 1}}\n\
         pickle.dump({{'segments': [], 'device_traces': [[e] * 10_000_000]}}, open('{}', 'wb'), protocol=4)",
        file.display()
    );
    python_bytes(&code);
    // The default limits keep the newest 2,000,000 entries: the reader holds at most one
    // and a half times that while it reads (72 bytes each), and the answer.
    let (status, out, rss_kib) = vramscope_rss(&["sites", file.to_str().unwrap(), "--at", "end"]);
    assert_eq!(status, 0, "{out}");
    assert!(
        out.contains("(8000000 older ones cut by the limits)"),
        "{out}"
    );
    assert!(rss_kib < 600 * 1024, "peak RSS {} MiB", rss_kib / 1024);
    assert!(Path::new(&file).exists());
}
