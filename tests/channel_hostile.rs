//! The reader against hostile files (§7): each malformed file is refused with its own reason,
//! nothing blocks or crashes, and a property test mutates valid files at random and checks
//! that the reader never panics and never hands out a record whose CRC is wrong.

mod channel_support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use channel_support::{from_start, poke_u64, private_dir, small, write_file, writer};
use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use vramscope::channel::layout::{ABSENT, control, event, header, sample, section};
use vramscope::channel::{
    Channel, DeviceFigures, DeviceIdentity, EventFields, EventKind, Policy, SampleFields,
    WriterState, crc32,
};

/// A valid channel with something in every section (rings wrapped), as bytes, and the offsets
/// of its sections. Made once per test process.
fn base() -> &'static Vec<u8> {
    static BASE: OnceLock<Vec<u8>> = OnceLock::new();
    BASE.get_or_init(|| {
        let dir = private_dir();
        let mut w = writer(dir.path(), small(2, 4, 8, 4));
        let a = w
            .add_device(DeviceIdentity {
                ordinal: 0,
                uuid: Some([7; 16]),
                pci_bus_id: Some("0000:18:00.0".into()),
                total: Some(1 << 34),
            })
            .expect("slot");
        w.add_device(DeviceIdentity::default()).expect("slot");
        w.publish_device(
            a,
            &DeviceFigures {
                allocated: Some(5),
                reserved: Some(6),
                ..DeviceFigures::default()
            },
        );
        let p = w.intern("forward");
        w.intern("backward");
        w.status(Some(3), "forward/layer.1");
        for i in 0..10u64 {
            w.sample(&SampleFields {
                t_ns: Some(100 + i),
                phase: p,
                allocated: Some(i),
                step: Some(i),
                ..SampleFields::default()
            });
        }
        for i in 0..5u64 {
            let mut ev = EventFields::new(EventKind::Mark);
            ev.args[0] = i;
            ev.text = "mark";
            w.event(&ev);
        }
        fs::read(w.path()).expect("read base")
    })
}

fn sec_entry(which: usize) -> usize {
    header::SECTION_TABLE + which * section::ENTRY_SIZE
}

fn get_u64(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}

fn set_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

fn set_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

fn set_u16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_le_bytes());
}

/// Opens (and, if that works, polls) `bytes` written as a channel file; the reason if refused.
fn verdict(dir: &Path, bytes: &[u8]) -> Result<(), String> {
    let path = write_file(dir, "1-1.vsc", bytes);
    let mut ch = Channel::open(&path, &from_start()).map_err(|r| r.reason)?;
    ch.poll().map(|_| ()).map_err(|r| r.reason)
}

fn assert_refused(dir: &Path, bytes: &[u8], reason: &str) {
    match verdict(dir, bytes) {
        Ok(()) => panic!("accepted, expected: {reason}"),
        Err(r) => assert!(r.contains(reason), "reason {r:?} lacks {reason:?}"),
    }
}

fn mutated(f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut b = base().clone();
    f(&mut b);
    b
}

#[test]
fn the_base_file_is_accepted() {
    let dir = private_dir();
    let path = write_file(dir.path(), "1-1.vsc", base());
    let u = Channel::open(&path, &from_start())
        .expect("open")
        .poll()
        .expect("poll");
    assert_eq!(u.devices.len(), 2);
    assert_eq!(u.phases, ["forward", "backward"]);
    assert_eq!(u.samples.len(), 8);
    assert_eq!((u.lost_samples, u.events.len(), u.lost_events), (2, 4, 1));
    // A copy holds no writer's lock: its writer is gone.
    assert!(matches!(
        u.liveness,
        vramscope::channel::Liveness::Ended { crashed: true }
    ));
}

#[test]
fn truncated_grown_and_shrunk_files_are_refused() {
    let dir = private_dir();
    let d = dir.path();
    assert_refused(
        d,
        &base()[..300],
        "truncated: 300 bytes, less than the 512-byte header",
    );
    assert_refused(d, &[], "truncated: 0 bytes");
    let size = base().len();
    assert_refused(
        d,
        &base()[..4096],
        &format!("truncated: 4096 bytes, the header says {size}"),
    );
    assert_refused(d, &mutated(|b| b.extend([0; 8])), "grown");
}

#[test]
fn a_file_shrunk_between_open_and_poll_is_refused_for_good() {
    let dir = private_dir();
    let path = write_file(dir.path(), "1-1.vsc", base());
    let mut ch = Channel::open(&path, &Policy::current()).expect("open");
    ch.poll().expect("poll");
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open rw")
        .set_len(4096)
        .expect("shrink");
    let r = ch.poll().expect_err("refused");
    assert!(
        r.reason.starts_with("truncated: 4096 bytes"),
        "{}",
        r.reason
    );
    assert_eq!(r.to_string(), format!("1-1.vsc: {}", r.reason));
    fs::write(&path, base()).expect("restore");
    assert_eq!(
        ch.poll().expect_err("still refused"),
        r,
        "a rejection is final"
    );
}

#[test]
fn a_file_resized_under_a_polling_reader_never_crashes_it() {
    let dir = private_dir();
    let path = write_file(dir.path(), "1-1.vsc", base());
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let f = fs::OpenOptions::new().write(true).open(&path).expect("rw");
            let full = base().len() as u64;
            for i in 0..2000u64 {
                let _ = f.set_len(if i % 2 == 0 { 700 + i } else { full });
            }
            stop.store(true, Ordering::Release);
        });
        let (mut ok, mut refused) = (0, 0);
        while !stop.load(Ordering::Acquire) {
            match Channel::open(&path, &from_start()).and_then(|mut c| c.poll()) {
                Ok(_) => ok += 1,
                Err(r) => {
                    let known = ["truncated", "grown", "short read", "cannot"];
                    assert!(known.iter().any(|k| r.reason.contains(k)), "{}", r.reason);
                    refused += 1;
                }
            }
        }
        eprintln!("{ok} polls accepted, {refused} refused while resizing");
    });
}

#[test]
fn bad_headers_are_refused_with_their_reason() {
    let dir = private_dir();
    let d = dir.path();
    assert_refused(d, &mutated(|b| b[0] = b'X'), "wrong magic");
    assert_refused(d, &mutated(|b| b[..8].fill(0)), "wrong magic");
    assert_refused(
        d,
        &mutated(|b| b[header::ENDIAN..header::ENDIAN + 4].copy_from_slice(&[1, 2, 3, 4])),
        "wrong endian tag: written big-endian",
    );
    assert_refused(
        d,
        &mutated(|b| set_u32(b, header::ENDIAN, 0xDEAD_BEEF)),
        "wrong endian tag 0xdeadbeef",
    );
    assert_refused(
        d,
        &mutated(|b| set_u16(b, header::MAJOR, 2)),
        "major version 2",
    );
    assert_refused(
        d,
        &mutated(|b| set_u16(b, header::MAJOR, 0)),
        "major version 0",
    );
    assert_refused(
        d,
        &mutated(|b| set_u32(b, header::HEADER_SIZE, 256)),
        "header size 256",
    );
    assert_refused(
        d,
        &mutated(|b| set_u32(b, header::HEADER_SIZE, u32::MAX)),
        "header size 4294967295",
    );
    let size = base().len() as u64;
    assert_refused(
        d,
        &mutated(|b| set_u64(b, header::FILE_SIZE, size + 64)),
        &format!("truncated: {size} bytes, the header says {}", size + 64),
    );
}

#[test]
fn a_higher_minor_version_is_read_as_this_one() {
    let dir = private_dir();
    let path = write_file(
        dir.path(),
        "1-1.vsc",
        &mutated(|b| set_u16(b, header::MINOR, 7)),
    );
    let mut ch = Channel::open(&path, &from_start()).expect("accepted");
    assert_eq!(ch.identity().minor, 7);
    assert_eq!(ch.poll().expect("poll").samples.len(), 8);
}

#[test]
fn bad_section_tables_are_refused_with_their_reason() {
    let dir = private_dir();
    let d = dir.path();
    let size = base().len() as u64;
    let off = |w: usize| sec_entry(w) + section::OFFSET;
    let rs = |w: usize| sec_entry(w) + section::RECORD_SIZE;
    let cap = |w: usize| sec_entry(w) + section::CAPACITY;
    let cases: Vec<(Vec<u8>, String)> = vec![
        (
            mutated(|b| set_u64(b, off(section::SAMPLES), size)),
            "samples section".into(),
        ),
        (
            mutated(|b| set_u64(b, off(section::EVENTS), u64::MAX - 7)),
            "runs past the file".into(),
        ),
        (
            mutated(|b| set_u64(b, off(section::STRINGS), 0x1404)),
            "is not a multiple of 8".into(),
        ),
        (
            mutated(|b| set_u64(b, off(section::DEVICES), 0x200)),
            "offset 0x200 is before 0x400".into(),
        ),
        (
            mutated(|b| set_u32(b, cap(section::SAMPLES), 6)),
            "samples capacity 6 is not a power of two".into(),
        ),
        (
            mutated(|b| set_u32(b, cap(section::EVENTS), 0)),
            "events capacity 0 is not a power of two".into(),
        ),
        (
            mutated(|b| set_u32(b, cap(section::EVENTS), 1 << 21)),
            "events capacity 2097152".into(),
        ),
        (
            mutated(|b| set_u32(b, cap(section::DEVICES), 0)),
            "devices capacity 0 is not 1..=64".into(),
        ),
        (
            mutated(|b| set_u32(b, cap(section::DEVICES), 65)),
            "devices capacity 65".into(),
        ),
        (
            mutated(|b| set_u32(b, cap(section::STRINGS), 1025)),
            "strings capacity 1025 is not 0..=1024".into(),
        ),
        (
            mutated(|b| set_u32(b, rs(section::SAMPLES), 32)),
            "samples record size 32 is below the v1 size 64".into(),
        ),
        (
            mutated(|b| set_u32(b, rs(section::DEVICES), 260)),
            "devices record size 260 is not a multiple of 8".into(),
        ),
        (
            mutated(|b| set_u32(b, rs(section::EVENTS), u32::MAX - 7)),
            "events section".into(),
        ),
        (
            mutated(|b| {
                let samples = get_u64(b, off(section::SAMPLES));
                set_u64(b, off(section::EVENTS), samples + 64);
            }),
            "sections overlap: samples".into(),
        ),
        (
            mutated(|b| {
                let devices = get_u64(b, off(section::DEVICES));
                set_u64(b, off(section::STRINGS), devices);
            }),
            "sections overlap: devices".into(),
        ),
    ];
    for (bytes, reason) in cases {
        assert_refused(d, &bytes, &reason);
    }
}

#[test]
fn counts_above_their_capacity_are_refused() {
    let dir = private_dir();
    let d = dir.path();
    assert_refused(
        d,
        &mutated(|b| set_u64(b, control::DEVICES_IN_USE, 3)),
        "devices in use 3 above the capacity 2",
    );
    assert_refused(
        d,
        &mutated(|b| set_u64(b, control::STRINGS_IN_USE, 5)),
        "strings in use 5 above the capacity 4",
    );
}

#[test]
fn a_head_that_goes_backwards_is_refused() {
    let dir = private_dir();
    let mut w = writer(dir.path(), small(1, 0, 8, 8));
    for _ in 0..5 {
        w.sample(&SampleFields::default());
    }
    let mut ch = Channel::open(w.path(), &from_start()).expect("open");
    assert_eq!(ch.poll().expect("poll").samples.len(), 5);
    poke_u64(w.path(), control::SAMPLES_HEAD, 2);
    let r = ch.poll().expect_err("refused");
    assert_eq!(r.reason, "samples head went backwards from 5 to 2");
}

#[test]
fn records_with_a_bad_crc_or_seq_are_never_returned() {
    let dir = private_dir();
    let d = dir.path();
    let samples = get_u64(base(), sec_entry(section::SAMPLES)) as usize;
    let events = get_u64(base(), sec_entry(section::EVENTS)) as usize;
    let read = |bytes: &[u8]| {
        let path = write_file(d, "1-1.vsc", bytes);
        Channel::open(&path, &from_start())
            .expect("open")
            .poll()
            .expect("poll")
    };
    // Records 2..10 sit in slots 2..8 and 0..2; slot 3 holds record 3.
    let u = read(&mutated(|b| b[samples + 3 * 64 + sample::ALLOCATED] ^= 1));
    let steps: Vec<u64> = u.samples.iter().filter_map(|s| s.step).collect();
    assert_eq!(
        steps,
        [2, 4, 5, 6, 7, 8, 9],
        "the damaged record is dropped"
    );
    assert_eq!(u.lost_samples, 3);
    // A seq from a later lap: overwritten, lost.
    let u = read(&mutated(|b| set_u64(b, samples + 3 * 64, 2 * 11 + 2)));
    assert_eq!(u.samples.len(), 7);
    assert_eq!(u.lost_samples, 3);
    // A seq from an earlier lap: not finished, the reader waits there.
    let u = read(&mutated(|b| set_u64(b, samples + 3 * 64, 2 * 3 + 1)));
    let steps: Vec<u64> = u.samples.iter().filter_map(|s| s.step).collect();
    assert_eq!(steps, [2]);
    // Event text damage.
    let u = read(&mutated(|b| b[events + 256 + event::TEXT] = b'M'));
    assert_eq!((u.events.len(), u.lost_events), (3, 2));
}

#[test]
fn oversized_lengths_and_unknown_values_are_clamped_not_trusted() {
    let dir = private_dir();
    let status_len =
        vramscope::channel::layout::status::OFFSET + vramscope::channel::layout::status::LABEL_LEN;
    let bytes = mutated(|b| {
        set_u64(b, status_len, u64::MAX);
        set_u64(b, header::STATE, 99);
    });
    let path = write_file(dir.path(), "1-1.vsc", &bytes);
    let u = Channel::open(&path, &from_start())
        .expect("open")
        .poll()
        .expect("poll");
    assert_eq!(u.state, WriterState::Unknown(99));
    let label = u.status.expect("status").label;
    assert!(label.starts_with("forward/layer.1") && label.len() <= 160);
}

#[test]
fn files_that_are_not_ours_or_not_regular_are_refused() {
    let dir = private_dir();
    let d = dir.path();
    let good = write_file(d, "1-1.vsc", base());
    let euid = Policy::current().euid;

    let link = d.join("2-2.vsc");
    std::os::unix::fs::symlink(&good, &link).expect("symlink");
    let r = Channel::open(&link, &Policy::current())
        .err()
        .expect("refused");
    assert_eq!(r.reason, "not a regular file: a symlink");

    let r = Channel::open(Path::new("/dev/null"), &Policy::current())
        .err()
        .expect("refused");
    assert_eq!(r.reason, "not a regular file: a character device");
    let r = Channel::open(d, &Policy::current()).err().expect("refused");
    assert_eq!(r.reason, "not a regular file: a directory");

    let loose = write_file(d, "3-3.vsc", base());
    fs::set_permissions(&loose, fs::Permissions::from_mode(0o640)).expect("chmod");
    let r = Channel::open(&loose, &Policy::current())
        .err()
        .expect("refused");
    assert_eq!(r.reason, "mode 0640 gives group/other permissions");

    // A reader running as another (non-root) user refuses our file.
    let stranger = Policy {
        euid: if euid == 4242 { 4243 } else { 4242 },
        from_start: false,
    };
    let r = Channel::open(&good, &stranger).err().expect("refused");
    assert_eq!(
        r.reason,
        format!("owned by uid {euid}, not by us ({})", stranger.euid)
    );

    if euid == 0 {
        let theirs = write_file(d, "4-4.vsc", base());
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).expect("chown");
        Channel::open(&theirs, &Policy::current()).expect("root reads every user's channel");
        let as_user = Policy {
            euid: 1000,
            from_start: false,
        };
        let r = Channel::open(&theirs, &as_user).err().expect("refused");
        assert_eq!(r.reason, "owned by uid 65534, not by us (1000)");
    } else {
        eprintln!("note: not root, the chown case is not run");
    }
}

#[test]
fn a_fifo_is_refused_without_blocking() {
    let dir = private_dir();
    let fifo: PathBuf = dir.path().join("5-5.vsc");
    let c = std::ffi::CString::new(fifo.to_str().expect("utf-8")).expect("c path");
    // SAFETY: a valid path string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(
            Channel::open(&fifo, &Policy::current())
                .err()
                .map(|r| r.reason),
        );
    });
    let reason = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("opening a FIFO must not block");
    assert_eq!(reason.as_deref(), Some("not a regular file: a FIFO"));
}

// ---- property test -------------------------------------------------------------------------

/// The 52 bytes a sample's CRC covers, rebuilt from what the reader returned.
fn sample_payload(s: &vramscope::channel::SampleRecord) -> Vec<u8> {
    let mut p = Vec::with_capacity(52);
    for v in [
        Some(s.t_ns),
        s.allocated,
        s.reserved,
        s.peak,
        s.active,
        s.step,
    ] {
        p.extend(v.unwrap_or(ABSENT).to_le_bytes());
    }
    p.extend([s.slot, s.flags]);
    p.extend(s.phase.to_le_bytes());
    p
}

/// The 244 bytes an event's CRC covers, rebuilt from what the reader returned.
fn event_payload(e: &vramscope::channel::EventRecord) -> Vec<u8> {
    let mut p = Vec::with_capacity(244);
    p.extend(e.t_ns.to_le_bytes());
    p.extend(e.kind.code().to_le_bytes());
    p.extend(e.slot.unwrap_or(event::NO_SLOT).to_le_bytes());
    p.extend(e.phase.to_le_bytes());
    p.extend((e.text.len() as u16).to_le_bytes());
    p.extend(e.step.unwrap_or(ABSENT).to_le_bytes());
    for a in e.args {
        p.extend(a.to_le_bytes());
    }
    let mut text = e.text.as_bytes().to_vec();
    text.resize(event::TEXT_CAP, 0);
    p.extend(text);
    p
}

/// Whether `file` holds `payload` at some 8-aligned offset followed by its correct CRC.
fn stored_with_good_crc(file: &[u8], payload: &[u8]) -> bool {
    let crc = crc32(payload).to_le_bytes();
    (0..file.len().saturating_sub(payload.len() + 4))
        .step_by(8)
        .any(|o| file[o..o + payload.len()] == *payload && file[o + payload.len()..][..4] == crc)
}

#[derive(Clone, Debug)]
enum Mutation {
    Flip { at: usize, mask: u8 },
    Truncate { len: usize },
    Word { at: usize, width: usize, value: u64 },
}

/// Offsets and widths of every header, table and control field: the places where a random
/// value is most likely to find a gap in the checks.
const FIELDS: &[(usize, usize)] = &[
    (header::ENDIAN, 4),
    (header::MAJOR, 2),
    (header::MINOR, 2),
    (header::HEADER_SIZE, 4),
    (header::FLAGS, 4),
    (header::FILE_SIZE, 8),
    (header::STATE, 8),
    (header::HEARTBEAT, 8),
    (header::PID, 8),
    (header::PID_NS, 8),
    (header::WRITER_KIND, 4),
    (header::SAMPLE_PERIOD, 4),
    (header::RANK, 4),
    (0x1C0, 8),
    (0x1C8, 4),
    (0x1CC, 4),
    (0x1D0, 8),
    (0x1D8, 4),
    (0x1DC, 4),
    (0x1E0, 8),
    (0x1E8, 4),
    (0x1EC, 4),
    (0x1F0, 8),
    (0x1F8, 4),
    (0x1FC, 4),
    (control::DEVICES_IN_USE, 8),
    (control::SAMPLES_HEAD, 8),
    (control::EVENTS_HEAD, 8),
    (control::STRINGS_IN_USE, 8),
];

fn mutation() -> impl Strategy<Value = Mutation> {
    let size = base().len();
    let value = prop_oneof![
        any::<u64>(),
        0u64..64,
        Just(u64::MAX),
        (0u64..24).prop_map(|b| 1 << b),
        Just(size as u64),
    ];
    prop_oneof![
        3 => (0..size, 1u8..=255).prop_map(|(at, mask)| Mutation::Flip { at, mask }),
        1 => (0..size + 64).prop_map(|len| Mutation::Truncate { len }),
        3 => (0..FIELDS.len(), value).prop_map(|(i, value)| Mutation::Word {
            at: FIELDS[i].0,
            width: FIELDS[i].1,
            value,
        }),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    match *m {
        Mutation::Flip { at, mask } => {
            if let Some(b) = bytes.get_mut(at) {
                *b ^= mask;
            }
        }
        Mutation::Truncate { len } => bytes.resize(len, 0),
        Mutation::Word { at, width, value } => {
            if at + width <= bytes.len() {
                bytes[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
            }
        }
    }
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50_000)
}

#[test]
fn mutated_files_never_crash_the_reader_nor_pass_a_bad_record() {
    let dir = private_dir();
    let config = ProptestConfig {
        cases: cases(),
        max_shrink_iters: 2_000,
        ..ProptestConfig::default()
    };
    let mut runner = TestRunner::new(config);
    let outcome = runner.run(&prop::collection::vec(mutation(), 1..5), |mutations| {
        let mut bytes = base().clone();
        for m in &mutations {
            apply(&mut bytes, m);
        }
        let path = write_file(dir.path(), "1-1.vsc", &bytes);
        if let Ok(mut ch) = Channel::open(&path, &from_start()) {
            for _ in 0..2 {
                let Ok(u) = ch.poll() else { break };
                for s in &u.samples {
                    prop_assert!(
                        stored_with_good_crc(&bytes, &sample_payload(s)),
                        "bad {s:?}"
                    );
                }
                for e in &u.events {
                    prop_assert!(stored_with_good_crc(&bytes, &event_payload(e)), "bad {e:?}");
                }
                prop_assert!(u.devices.len() <= 64 && u.phases.len() <= 1024);
            }
        }
        Ok(())
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
}
