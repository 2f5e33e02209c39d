//! Damaged and hostile recordings: each gives one clear error naming the file and the line
//! or byte offset, with bounded memory and time; a record cut short at the very end (a
//! killed recorder) is no error at all.

mod common;
mod record_support;

use record_support::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use vramscope::model::SourceEvent;
use vramscope::recording::{Recording, RecordingError};

const HEADER: &str = r#"{"format":"vramscope.recording","version":1,"vramscope_version":"0.1.0","started_ms":1760000000000,"interval_ms":1000}"#;

struct Corpus {
    dir: tempfile::TempDir,
}

impl Corpus {
    fn new() -> Corpus {
        Corpus {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn file(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// A good recording of a few events of every kind.
    fn good(&self, name: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        write(&path, &every_kind());
        path
    }
}

/// What reading `path` to the end gives: the events before the error, and the error.
fn read(path: &Path) -> (usize, Option<RecordingError>) {
    let recording = match Recording::open(path) {
        Ok(r) => r,
        Err(e) => return (0, Some(e)),
    };
    let mut events = 0;
    for item in recording.events() {
        match item {
            Ok(_) => events += 1,
            Err(e) => return (events, Some(e)),
        }
    }
    (events, None)
}

fn error(path: &Path) -> String {
    let (_, e) = read(path);
    let message = e.expect("an error").message;
    let name = path.display().to_string();
    assert!(message.starts_with(&name), "names the file: {message}");
    assert!(!message.contains('\n'), "one line: {message}");
    message
}

fn peak_rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        / 1024
}

/// A zstd frame that decompresses to `gib` GiB of `byte`: 128 KiB RLE blocks of 4 bytes each.
fn bomb(gib: u64, byte: u8) -> Vec<u8> {
    // Magic; no content size, checksum or dictionary; a 1 MiB window.
    let mut frame = vec![0x28, 0xB5, 0x2F, 0xFD, 0x00, 10 << 3];
    let blocks = gib * 8192;
    for i in 0..blocks {
        let last = u32::from(i + 1 == blocks);
        let header = (128 * 1024) << 3 | 1 << 1 | last;
        frame.extend_from_slice(&header.to_le_bytes()[..3]);
        frame.push(byte);
    }
    frame
}

#[test]
fn garbage_and_other_files_are_not_recordings() {
    let c = Corpus::new();
    let garbage: Vec<u8> = (0..100_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let cases: [(&str, &[u8], &str); 6] = [
        ("garbage.bin", &garbage, "not a vramscope recording"),
        (
            "empty.jsonl",
            b"",
            "not a vramscope recording (the file is empty)",
        ),
        (
            "snapshot.json",
            br#"{"schema":"vramscope.snapshot","version":1}"#,
            "not a vramscope recording",
        ),
        ("text.jsonl", b"hello\n", "not a vramscope recording"),
        ("gz.jsonl.gz", &[0x1f, 0x8b, 8, 0, 0, 0], "gzip-compressed"),
        (
            "brace.jsonl",
            b"{not json at all\n",
            "not a vramscope recording",
        ),
    ];
    for (name, bytes, expected) in cases {
        let message = error(&c.file(name, bytes));
        assert!(message.contains(expected), "{name}: {message}");
    }
    let message = error(&c.dir.path().join("missing.jsonl"));
    assert!(message.contains("No such file"), "{message}");
}

#[test]
fn versions_are_checked() {
    let c = Corpus::new();
    let newer = c.file(
        "newer.jsonl",
        br#"{"format":"vramscope.recording","version":2,"vramscope_version":"9.0.0","started_ms":1,"interval_ms":1000}
{"t":1,"hologram":{}}
"#,
    );
    assert_eq!(
        error(&newer),
        format!(
            "{}: recorded by a newer vramscope (format version 2 by vramscope 9.0.0); this one reads version 1",
            newer.display()
        )
    );
    let zero = c.file(
        "zero.jsonl",
        br#"{"format":"vramscope.recording","version":0}"#,
    );
    assert!(error(&zero).contains("line 1: unknown format version 0"));
    let none = c.file("none.jsonl", br#"{"format":"vramscope.recording"}"#);
    assert!(error(&none).contains("line 1: the header has no format version"));
    let bad = c.file(
        "bad.jsonl",
        br#"{"format":"vramscope.recording","version":1,"started_ms":"yesterday"}"#,
    );
    assert!(
        error(&bad).contains("line 1: damaged header"),
        "{}",
        error(&bad)
    );
}

#[test]
fn damage_in_the_middle_names_its_line() {
    let c = Corpus::new();
    let good = std::fs::read_to_string(c.good("good.jsonl")).unwrap();
    let lines: Vec<&str> = good.lines().collect();
    let with_line_4 = |replacement: &str| -> String {
        let mut copy = lines.clone();
        copy[3] = replacement;
        copy.join("\n") + "\n"
    };
    let half = &lines[3][..lines[3].len() / 2];
    let cases = [
        ("cut.jsonl", with_line_4(half), "line 4, column"),
        ("cut.jsonl", with_line_4(half), "record cut short"),
        (
            "syntax.jsonl",
            with_line_4(r#"{"t":1,"device":{]}"#),
            "line 4, column 18: not a JSON record",
        ),
        (
            "types.jsonl",
            with_line_4(r#"{"t":"noon","host":{}}"#),
            "line 4, column 11: damaged record (invalid type",
        ),
        (
            "empty.jsonl",
            with_line_4(""),
            "line 4, column 0: record cut short",
        ),
        (
            "nul.jsonl",
            with_line_4("\0\0\0\0"),
            "line 4, column 1: not a JSON record",
        ),
        (
            "columns.jsonl",
            with_line_4(
                r#"{"t":1,"channels":{"at_ms":1,"polls":[{"path":"/x","writer":{"file":"f","pid":1,"kind":"C","framework":"","rank":null,"local_rank":null,"world_size":null,"job_id":"","command":"","allocator_config":"","exact_peaks":false,"sample_period_us":0},"host_pid":null,"liveness":{"state":"live"},"devices":[],"step":null,"label":"","points":[{"slot":0,"t":[1,2],"allocated":[1],"reserved":[1,1],"peak":[0,0],"step":[null,null]}],"events":[],"lost_samples":0,"lost_events":0}]}}"#,
            ),
            "line 4: the point columns of slot 0 differ in length",
        ),
        (
            "orphan.jsonl",
            with_line_4(
                r#"{"t":1,"channels":{"at_ms":1,"polls":[{"path":"/y","host_pid":null,"liveness":{"state":"live"},"devices":[],"step":null,"label":"","points":[],"events":[],"lost_samples":0,"lost_events":0}]}}"#,
            ),
            "line 4: channel /y is polled before its writer is named",
        ),
    ];
    for (name, text, expected) in cases {
        let path = c.file(name, text.as_bytes());
        let (events, e) = read(&path);
        let message = e.expect("an error").message;
        assert!(message.contains(expected), "{name}: {message}");
        assert_eq!(events, 2, "{name}: the events before the damage are read");
    }
}

#[test]
fn a_record_cut_at_the_end_is_not_an_error() {
    let c = Corpus::new();
    let good = std::fs::read(c.good("good.jsonl")).unwrap();
    let all = flatten(every_kind()).len();
    // Cut inside the last record, right after its newline's predecessor, and with NULs
    // where a crash left unwritten blocks.
    let last_start = good[..good.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .unwrap()
        + 1;
    for (name, bytes) in [
        ("mid.jsonl", good[..last_start + 10].to_vec()),
        ("nonl.jsonl", good[..good.len() - 1].to_vec()),
        (
            "nul.jsonl",
            [&good[..last_start], &[0u8; 4096][..]].concat(),
        ),
    ] {
        let (events, e) = read(&c.file(name, &bytes));
        assert!(e.is_none(), "{name}: {e:?}");
        assert_eq!(events, all - 1, "{name}");
    }
    let (events, e) = read(&c.file("whole.jsonl", &good));
    assert_eq!((events, e), (all, None));
}

#[test]
fn unknown_kinds_and_fields_from_a_later_minor_version_are_skipped() {
    let c = Corpus::new();
    let text = format!(
        "{HEADER}\n{{\"t\":5,\"annotation\":{{\"text\":\"lr drop\"}}}}\n{{\"t\":6,\"nvml_unavailable\":{{\"kind\":\"no_devices\"}},\"extra\":[1,2]}}\n"
    );
    let recording = Recording::open(&c.file("later.jsonl", text.as_bytes())).unwrap();
    let events: Vec<_> = recording.events().collect::<Result<_, _>>().unwrap();
    assert_eq!(events.len(), 1);
    assert!(matches!(events[0], (6, SourceEvent::NvmlUnavailable(_))));
}

#[test]
fn compressed_damage_names_the_byte_offset_and_a_cut_tail_reads_cleanly() {
    let c = Corpus::new();
    let path = c.dir.path().join("long.jsonl.zst");
    // Many seconds, each flushed as its own block, as a live recorder writes them.
    let mut recorder = vramscope::recording::Recorder::create(&path, header()).unwrap();
    // Where each second's block ends in the file.
    let mut flushed_at = Vec::new();
    for i in 0..200u64 {
        let event = SourceEvent::Device(Box::new(device(0, T0 + i * 1000, (i % 17) << 28)));
        recorder.record(T0 + i * 1000, &event).unwrap();
        recorder.flush().unwrap();
        flushed_at.push(std::fs::metadata(&path).unwrap().len() as usize);
    }
    recorder.finish().unwrap();
    let good = std::fs::read(&path).unwrap();
    assert_eq!(read(&path), (200, None));

    // Cut anywhere: no error, and every second flushed before the cut is there.
    for cut in [
        good.len() - 3,
        good.len() / 2,
        good.len() / 3 + 7,
        flushed_at[99],
        flushed_at[0],
    ] {
        let (events, e) = read(&c.file("cut.jsonl.zst", &good[..cut]));
        assert!(e.is_none(), "cut at {cut}: {e:?}");
        let whole = flushed_at.iter().filter(|&&end| end <= cut).count();
        assert_eq!(events, whole, "cut at {cut}");
    }

    let message = error(&c.file("head.jsonl.zst", &good[..20]));
    assert!(
        message.contains("it ends before its first line"),
        "{message}"
    );

    // Damage in the middle: one error, after the events before it.
    let mut damaged = good.clone();
    let middle = good.len() / 2;
    for b in &mut damaged[middle..middle + 16] {
        *b = !*b;
    }
    let (events, e) = read(&c.file("damaged.jsonl.zst", &damaged));
    let message = e.expect("an error").message;
    // zstd finds the damage; the offset is where the failing 512-byte step of input began,
    // and every second flushed before that step is read.
    let offset: usize = message
        .split("byte offset ")
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{message}"));
    assert!((middle - 512..=middle).contains(&offset), "{message}");
    assert!(message.contains("damaged zstd data"), "{message}");
    let before = flushed_at.iter().filter(|&&end| end <= offset).count();
    assert!(
        (before - 1..=before).contains(&events),
        "{events} events, {before} before: {message}"
    );

    // Garbage after the end of the frame.
    let trailing = [&good[..], b"GARBAGE!"].concat();
    let (events, e) = read(&c.file("trailing.jsonl.zst", &trailing));
    let message = e.expect("an error").message;
    assert_eq!(events, 200);
    assert!(
        message.contains(&format!("byte offset {}", good.len())),
        "{message}"
    );
}

#[test]
fn a_frame_asking_for_a_huge_window_is_refused() {
    let c = Corpus::new();
    // A 2 GiB window (exponent 21), then one raw block.
    let mut frame = vec![0x28, 0xB5, 0x2F, 0xFD, 0x00, 21 << 3];
    frame.extend_from_slice(&((1u32 << 3) | 1).to_le_bytes()[..3]);
    frame.push(b'{');
    let message = error(&c.file("window.zst", &frame));
    assert!(message.contains("byte offset"), "{message}");
    assert!(message.contains("zstd"), "{message}");
}

/// Gigabytes behind a few hundred KiB, and a line without end: each stops at its limit.
#[test]
fn bombs_and_endless_lines_stop_at_the_limits_with_bounded_memory() {
    let c = Corpus::new();
    let started = Instant::now();
    // 8 GiB of zeros: not a recording, found at the first byte.
    let message = error(&c.file("zeros.zst", &bomb(8, 0)));
    assert!(message.contains("not a vramscope recording"), "{message}");
    // A good header frame, then 8 GiB of spaces in one line.
    let head = zstd::encode_all(format!("{HEADER}\n").as_bytes(), 3).unwrap();
    let spaces = c.file("spaces.jsonl.zst", &[head, bomb(8, b' ')].concat());
    let message = error(&spaces);
    assert_eq!(
        message,
        format!("{}: line 2 is longer than 16 MiB", spaces.display())
    );
    // 8 GiB of newlines: an empty line is damage, found at line 2.
    let head = zstd::encode_all(format!("{HEADER}\n").as_bytes(), 3).unwrap();
    let message = error(&c.file("newlines.zst", &[head, bomb(8, b'\n')].concat()));
    assert!(
        message.contains("line 2, column 0: record cut short"),
        "{message}"
    );
    // A plain file with a 40 MiB line, and one with a 1 MiB header line.
    let long = c.dir.path().join("long.jsonl");
    let mut file = std::fs::File::create(&long).unwrap();
    writeln!(file, "{HEADER}").unwrap();
    file.write_all(br#"{"t":1,"host":""#).unwrap();
    for _ in 0..40 {
        file.write_all(&[b'x'; 1 << 20]).unwrap();
    }
    drop(file);
    assert!(error(&long).ends_with("long.jsonl: line 2 is longer than 16 MiB"));
    let mut wide = b"{".to_vec();
    wide.extend(std::iter::repeat_n(b' ', 1 << 20));
    let message = error(&c.file("wide.jsonl", &wide));
    assert!(
        message.contains("first line is longer than 64 KiB"),
        "{message}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    // The line limit and the zstd window, plus the test's own files: far below the bombs.
    assert!(peak_rss_mib() < 256, "peak RSS {} MiB", peak_rss_mib());
}
