//! The channel across languages: the Python writer (`python/vramscope`) and the C writer
//! (`assets/vramscope_channel.h`, compiled here with `cc -std=c99 -Wall -Wextra -Werror`) each
//! write a known sequence into a private directory, and the Rust reader reads it back field
//! by field: every header field, both device slots, status, phases, an event of every kind,
//! samples; then more records than the rings hold while the reader is not polling (the loss
//! counts must be exact); then the writer's end (clean, error, SIGKILL) as liveness.
//!
//! Writers are driven over pipes: each stage ends with a line on stdout and waits for a line
//! on stdin, so the reader polls at known points.

mod channel_support;
mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::OnceLock;

use channel_support::{from_start, private_dir, proc_starttime};
use common::{cc_available, python3_available};
use vramscope::channel::{
    Channel, EventKind, Liveness, Policy, Update, WriterKind, WriterState, layout,
};

const GIB: u64 = 1 << 30;
const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// Compiles a program of tests/c with the header, once per test run, into Cargo's scratch
/// directory for tests (built under a unique name, then renamed: runs may overlap).
fn compiled(name: &str, cell: &'static OnceLock<PathBuf>) -> PathBuf {
    cell.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let exe = dir.join(format!("vramscope-{name}"));
        let building = dir.join(format!("vramscope-{name}.{}", std::process::id()));
        let out = Command::new("cc")
            .args(["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-I"])
            .arg(Path::new(REPO).join("assets"))
            .arg(Path::new(REPO).join("tests/c").join(format!("{name}.c")))
            .arg("-o")
            .arg(&building)
            .output()
            .expect("run cc");
        assert!(
            out.status.success(),
            "cc failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::rename(&building, &exe).expect("rename");
        exe
    })
    .clone()
}

static ROUNDTRIP_C: OnceLock<PathBuf> = OnceLock::new();
static CHECKS_C: OnceLock<PathBuf> = OnceLock::new();

/// The Python writer's half of the known sequence, through the package's low-level writer.
const PY_SEQUENCE: &str = r#"
import sys, time
from vramscope import _layout as L
from vramscope._channel import Channel, DeviceInfo
from vramscope._identity import Identity
A = L.ABSENT
ending = sys.argv[1]
ident = Identity(L.KIND_PYTORCH, framework="roundtrip 1.0", sample_period_us=10000,
                 allocator_config="expandable_segments:True", flags=3)
ident.rank, ident.local_rank, ident.world_size = 2, 1, 4
ident.job_id, ident.cmdline = "job-rt", "roundtrip --case all"
ch = Channel.create(ident, devices=[
    DeviceInfo(3, bytes(range(0xA0, 0xB0)), "00000000:3B:00.0", 80 << 30), DeviceInfo(5)])
ch.publish_device(0, [5000] + list(range(1001, 1016)))
ch.publish_device(1, [5001, 7] + [A] * 14)
ch.intern("forward")
ch.intern("backward")
ch.set_status(42, "forward/model.layers.3", time.monotonic_ns())
for k in range(1, 14):
    kind = 99 if k == 13 else k
    ch.append_event(100 + k, kind, k % 2, k % 3, k, [k * 10 + a for a in range(6)], "event %d" % kind)
for i in range(10):
    ch.append_sample(1000 + i, i % 2, i * 1000 + 1, i * 1000 + 2, i * 1000 + 3, i * 1000 + 4, i, i & 15, i % 3)
print("ready", ch.path, flush=True)
sys.stdin.readline()
for i in range(5000):
    ch.append_sample(20000 + i, 0, 100000 + i, A, A, A, A, 0, 0)
for i in range(600):
    ch.append_event(30000 + i, L.EV_MARK, L.NO_SLOT, 0, None, (i,), "")
ch.heartbeat(time.monotonic_ns())
print("flooded", flush=True)
sys.stdin.readline()
if ending == "clean":
    ch.finish()
elif ending == "error":
    ch.finish("CUDA out of memory (from Python)")
    sys.exit(1)
else:
    while True:
        time.sleep(1)
"#;

/// A writer process and its pipes.
struct Writer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    path: PathBuf,
}

impl Writer {
    fn spawn(mut cmd: Command, dir: &Path) -> Writer {
        let mut child = cmd
            .env("VRAMSCOPE_DIR", dir)
            .env("PYTHONPATH", Path::new(REPO).join("python"))
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env_remove("VRAMSCOPE_DISABLE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn writer");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut w = Writer {
            child,
            stdin,
            stdout,
            path: PathBuf::new(),
        };
        let ready = w.line();
        let path = ready
            .strip_prefix("ready ")
            .unwrap_or_else(|| panic!("writer said {ready:?}"));
        w.path = PathBuf::from(path);
        w
    }

    fn c(dir: &Path, args: &[&str]) -> Writer {
        let mut cmd = Command::new(compiled("roundtrip_writer", &ROUNDTRIP_C));
        cmd.args(args);
        Writer::spawn(cmd, dir)
    }

    fn python(dir: &Path, script: &str, mode: &str) -> Writer {
        let mut cmd = Command::new("python3");
        cmd.args(["-c", script, mode]);
        Writer::spawn(cmd, dir)
    }

    fn line(&mut self) -> String {
        let mut s = String::new();
        self.stdout.read_line(&mut s).expect("read writer");
        s.trim_end().to_string()
    }

    fn next_stage(&mut self, expect: Option<&str>) {
        writeln!(self.stdin, "go").expect("write writer");
        self.stdin.flush().expect("flush");
        if let Some(expect) = expect {
            assert_eq!(self.line(), expect);
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn open_from_start(path: &Path) -> Channel {
    Channel::open(path, &from_start()).unwrap_or_else(|r| panic!("rejected: {r}"))
}

/// Stage 1: every field the writer set, exactly.
fn check_known_sequence(ch: &Channel, up: &Update, kind: WriterKind, pid: u32) {
    let id = ch.identity();
    assert_eq!(id.kind, kind);
    assert_eq!(id.pid, u64::from(pid));
    assert_eq!(id.starttime, proc_starttime(pid));
    let own_ns = std::fs::metadata("/proc/self/ns/pid").expect("ns").ino();
    assert_eq!(id.pid_ns, Some(own_ns));
    assert_eq!(id.uid, u64::from(Policy::current().euid));
    assert!(id.created_realtime_ns > 1_600_000_000 * 1_000_000_000);
    assert!(id.created_monotonic_ns > 0);
    assert_eq!(id.sample_period_us, 10_000);
    assert_eq!(
        (id.rank, id.local_rank, id.world_size),
        (Some(2), Some(1), Some(4))
    );
    assert_eq!(id.job_id, "job-rt");
    assert_eq!(id.framework, "roundtrip 1.0");
    assert_eq!(id.cmdline, "roundtrip --case all");
    assert_eq!(id.allocator_config, "expandable_segments:True");
    assert_eq!(
        id.flags,
        layout::flags::PEAK_RESET | layout::flags::MODULE_ATTRIBUTION
    );
    assert_eq!((id.minor, id.file_size), (0, 401_408));

    assert_eq!(up.state, WriterState::Running);
    assert_eq!(up.liveness, Liveness::Alive);
    assert!(up.heartbeat_ns.is_some());
    assert_eq!(up.devices.len(), 2);
    let d0 = &up.devices[0];
    let uuid: Vec<u8> = (0xA0..0xB0).collect();
    assert_eq!((d0.index, d0.ordinal), (0, 3));
    assert_eq!(d0.uuid.map(|u| u.to_vec()), Some(uuid));
    assert_eq!(d0.pci_bus_id.as_deref(), Some("00000000:3B:00.0"));
    assert_eq!(d0.total, Some(80 * GIB));
    let figures = [
        d0.read_at_ns,
        d0.allocated,
        d0.allocated_peak,
        d0.reserved,
        d0.reserved_peak,
        d0.active,
        d0.inactive_split,
        d0.requested,
        d0.alloc_retries,
        d0.ooms,
        d0.device_allocs,
        d0.device_frees,
        d0.device_free,
        d0.limit,
        d0.interval_peak,
        d0.step_peak,
    ];
    let expected: Vec<Option<u64>> = std::iter::once(Some(5000))
        .chain((1001..1016).map(Some))
        .collect();
    assert_eq!(figures.to_vec(), expected);
    let d1 = &up.devices[1];
    assert_eq!(
        (d1.index, d1.ordinal, d1.uuid, d1.total),
        (1, 5, None, None)
    );
    assert_eq!(d1.pci_bus_id, None);
    assert_eq!((d1.read_at_ns, d1.allocated), (Some(5001), Some(7)));
    assert_eq!(
        (d1.reserved, d1.step_peak, d1.device_free),
        (None, None, None)
    );

    let status = up.status.as_ref().expect("status");
    assert_eq!(status.step, Some(42));
    assert_eq!(status.label, "forward/model.layers.3");
    assert!(status.set_at_ns > 0);
    assert_eq!(up.phases, ["forward", "backward"]);

    assert_eq!((up.lost_samples, up.lost_events), (0, 0));
    assert_eq!(up.events.len(), 13);
    for (e, k) in up.events.iter().zip(1u64..) {
        let code = if k == 13 { 99 } else { k as u16 };
        assert_eq!(e.kind, EventKind::from_code(code));
        assert_eq!(e.t_ns, 100 + k);
        assert_eq!(
            (e.slot, e.phase, e.step),
            (Some((k % 2) as u16), (k % 3) as u16, Some(k))
        );
        let args: Vec<u64> = (0..6).map(|a| k * 10 + a).collect();
        assert_eq!(e.args.to_vec(), args);
        assert_eq!(e.text, format!("event {code}"));
    }
    assert_eq!(up.events[12].kind, EventKind::Unknown(99));
    assert_eq!(up.samples.len(), 10);
    for (s, i) in up.samples.iter().zip(0u64..) {
        assert_eq!(s.t_ns, 1000 + i);
        assert_eq!(
            (s.slot, s.flags, s.phase),
            ((i % 2) as u8, (i & 15) as u8, (i % 3) as u16)
        );
        assert_eq!(
            (s.allocated, s.reserved, s.peak, s.active, s.step),
            (
                Some(i * 1000 + 1),
                Some(i * 1000 + 2),
                Some(i * 1000 + 3),
                Some(i * 1000 + 4),
                Some(i)
            )
        );
    }
}

/// Stage 2: 5000 samples and 600 events appended while the reader waited; the rings hold
/// 4096 and 512, so exactly 904 and 88 are lost and the newest ones are all there.
fn check_flood(up: &Update) {
    assert_eq!((up.lost_samples, up.lost_events), (904, 88));
    assert_eq!(up.samples.len(), 4096);
    for (s, i) in up.samples.iter().zip(904u64..) {
        assert_eq!((s.t_ns, s.allocated), (20_000 + i, Some(100_000 + i)));
        assert_eq!(
            (s.reserved, s.peak, s.active, s.step),
            (None, None, None, None)
        );
    }
    assert_eq!(up.events.len(), 512);
    for (e, i) in up.events.iter().zip(88u64..) {
        assert_eq!(
            (e.kind, e.t_ns, e.args[0], e.slot),
            (EventKind::Mark, 30_000 + i, i, None)
        );
        assert_eq!(e.args[1], layout::ABSENT);
    }
}

/// Runs the three stages against `writer` and checks the ending it was told to make.
fn round_trip(mut w: Writer, kind: WriterKind, ending: &str, error_text: &str) {
    let mut ch = open_from_start(&w.path);
    let up = ch.poll().expect("poll 1");
    check_known_sequence(&ch, &up, kind, w.pid());
    w.next_stage(Some("flooded"));
    let up = ch.poll().expect("poll 2");
    check_flood(&up);
    let path = w.path.clone();
    match ending {
        "kill" => {
            w.child.kill().expect("SIGKILL");
            w.child.wait().expect("wait");
        }
        _ => {
            w.next_stage(None);
            let status = w.child.wait().expect("wait");
            assert_eq!(status.code(), Some(if ending == "clean" { 0 } else { 1 }));
        }
    }
    let up = ch.poll().expect("poll 3");
    assert_eq!((up.lost_samples, up.lost_events), (904, 88));
    match ending {
        "clean" => {
            assert_eq!(up.state, WriterState::ExitedClean);
            assert_eq!(up.liveness, Liveness::Ended { crashed: false });
            assert_eq!(up.events.len(), 1);
            assert_eq!(
                (up.events[0].kind, up.events[0].args[0]),
                (EventKind::Exit, 0)
            );
            assert!(!path.exists(), "a clean exit removes the file");
        }
        "error" => {
            assert_eq!(up.state, WriterState::ExitedError);
            assert_eq!(up.liveness, Liveness::Ended { crashed: false });
            assert_eq!(up.events.len(), 1);
            let e = &up.events[0];
            assert_eq!(
                (e.kind, e.args[0], e.text.as_str()),
                (EventKind::Exit, 1, error_text)
            );
            assert!(path.exists(), "an error exit keeps the file");
            // A reader that comes later still gets everything, from the file alone.
            let mut late = open_from_start(&path);
            let up = late.poll().expect("late poll");
            assert_eq!((up.lost_samples, up.lost_events), (904 + 10, 88 + 13 + 1));
        }
        _ => {
            assert_eq!(up.state, WriterState::Running);
            assert_eq!(up.liveness, Liveness::Ended { crashed: true });
            assert!(up.events.is_empty() && up.samples.is_empty());
            assert!(path.exists());
        }
    }
}

#[test]
fn c_writer_clean_exit() {
    if !cc_available() {
        return;
    }
    let dir = private_dir();
    round_trip(
        Writer::c(dir.path(), &["clean"]),
        WriterKind::C,
        "clean",
        "",
    );
}

#[test]
fn c_writer_error_exit() {
    if !cc_available() {
        return;
    }
    let dir = private_dir();
    let w = Writer::c(dir.path(), &["error"]);
    round_trip(w, WriterKind::C, "error", "CUDA out of memory (from C)");
}

#[test]
fn c_writer_killed() {
    if !cc_available() {
        return;
    }
    let dir = private_dir();
    round_trip(Writer::c(dir.path(), &["hang"]), WriterKind::C, "kill", "");
}

#[test]
fn python_writer_clean_exit() {
    if !python3_available() {
        return;
    }
    let dir = private_dir();
    let w = Writer::python(dir.path(), PY_SEQUENCE, "clean");
    round_trip(w, WriterKind::PyTorch, "clean", "");
}

#[test]
fn python_writer_error_exit() {
    if !python3_available() {
        return;
    }
    let dir = private_dir();
    let w = Writer::python(dir.path(), PY_SEQUENCE, "error");
    round_trip(
        w,
        WriterKind::PyTorch,
        "error",
        "CUDA out of memory (from Python)",
    );
}

#[test]
fn python_writer_killed() {
    if !python3_available() {
        return;
    }
    let dir = private_dir();
    let w = Writer::python(dir.path(), PY_SEQUENCE, "hang");
    round_trip(w, WriterKind::PyTorch, "kill", "");
}

/// A Python writer killed inside a seqlocked update (spec section 3) of its device slot or its
/// status: it stores half of the new values, then SIGKILLs itself, the file left exactly as by
/// a kill at that instant.
const PY_KILLED_INSIDE: &str = r#"
import os, signal, sys, vramscope
from vramscope import _channel
GIB = 1 << 30
for n in (1, 2, 3):
    vramscope.report(device=0, allocated=n * GIB, reserved=(n + 1) * GIB,
                     uuid="GPU-00000000-0000-0000-0000-000000000000")
    vramscope.step()
print("ready", vramscope.channel_path(), flush=True)
sys.stdin.readline()
name = "_FIGURES" if sys.argv[1] == "slot" else "_STATUS"
real = getattr(_channel, name)

class Killed:
    def pack_into(self, buf, off, *values):
        raw = real.pack(*values)
        buf[off : off + len(raw) // 2] = raw[: len(raw) // 2]
        os.kill(os.getpid(), signal.SIGKILL)

setattr(_channel, name, Killed())
if sys.argv[1] == "slot":
    vramscope.report(device=0, allocated=4 * GIB, reserved=5 * GIB)
else:
    vramscope.step()
"#;

#[test]
fn python_writer_killed_inside_an_update_leaves_its_last_values() {
    if !python3_available() {
        return;
    }
    for (block, at) in [
        ("slot", layout::defaults::DEVICES_OFFSET as usize),
        ("status", layout::status::OFFSET),
    ] {
        let dir = private_dir();
        let mut w = Writer::python(dir.path(), PY_KILLED_INSIDE, block);
        w.next_stage(None);
        let status = w.child.wait().expect("wait");
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{block}: {status}");
        let bytes = std::fs::read(&w.path).expect("read");
        let seq = u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        assert_eq!(seq % 2, 1, "the {block} update was cut: seq {seq}");
        // A reader that never saw the writer alive, as `vramscope --json` after the crash.
        let up = open_from_start(&w.path).poll().expect("poll");
        assert_eq!(up.liveness, Liveness::Ended { crashed: true }, "{block}");
        let d = up
            .devices
            .first()
            .unwrap_or_else(|| panic!("{block}: the device was dropped"));
        assert_eq!(
            (d.allocated, d.reserved),
            (Some(3 * GIB), Some(4 * GIB)),
            "{block}"
        );
        let step = up.status.as_ref().and_then(|s| s.step);
        assert_eq!(step, Some(3), "{block}: the last complete status");
    }
}

/// A writer flat out while the reader polls: no copy is ever accepted torn, and accepted
/// plus lost always equals what was appended.
const PY_RACE: &str = r#"
import sys, time
from vramscope import _layout as L
from vramscope._channel import Channel, DeviceInfo
from vramscope._identity import Identity
ch = Channel.create(Identity(L.KIND_PYTHON), devices=[DeviceInfo(0)],
                    layout=L.Layout(samples=256, events=8))
print("ready", ch.path, flush=True)
sys.stdin.readline()
for i in range(1, int(sys.argv[1]) + 1):
    ch.publish_device(0, [i] * 16)
    ch.append_sample(i, 0, i, i, i, i, i, 0, 0)
ch.finish()
"#;

fn race(mut w: Writer, appended: u64) {
    let mut ch = open_from_start(&w.path);
    w.next_stage(None);
    let (mut accepted, mut slot_reads, mut last) = (0u64, 0u64, 0u64);
    loop {
        let done = w.child.try_wait().expect("try_wait").is_some();
        let up = ch.poll().expect("poll");
        for s in &up.samples {
            let t = s.t_ns;
            assert!(t > last, "samples out of order");
            last = t;
            assert_eq!(
                [s.allocated, s.reserved, s.peak, s.active, s.step],
                [Some(t); 5],
                "torn sample accepted"
            );
        }
        accepted += up.samples.len() as u64;
        if let Some(d) = up.devices.first()
            && let Some(a) = d.allocated
        {
            assert_eq!(d.step_peak, Some(a), "torn device slot accepted");
            assert_eq!(d.read_at_ns, Some(a), "torn device slot accepted");
            slot_reads += 1;
        }
        if done {
            assert_eq!(up.state, WriterState::ExitedClean);
            assert_eq!(accepted + up.lost_samples, appended);
            break;
        }
    }
    assert!(accepted > 0 && slot_reads > 0);
}

#[test]
fn python_writer_racing_reader() {
    if !python3_available() {
        return;
    }
    let dir = private_dir();
    race(Writer::python(dir.path(), PY_RACE, "100000"), 100_000);
}

#[test]
fn c_writer_racing_reader() {
    if !cc_available() {
        return;
    }
    let dir = private_dir();
    race(Writer::c(dir.path(), &["race", "3000000"]), 3_000_000);
}

/// The public Python API as a program uses it (no torch): what it publishes is what the
/// reader shows, peaks compared per spec section 5.
const PY_API: &str = r#"
import sys, vramscope
GIB = 1 << 30
vramscope.report(device=1, allocated=2 * GIB, reserved=3 * GIB, peak=4 * GIB, total=80 * GIB,
                 uuid="GPU-00112233-4455-6677-8899-aabbccddeeff", pci_bus_id="00000000:18:00.0")
with vramscope.mark("train"):
    vramscope.report(device=1, allocated=GIB, reserved=3 * GIB, peak=4 * GIB)
    vramscope.step()
    vramscope.note("checkpoint")
    print("ready", vramscope.channel_path(), flush=True)
    sys.stdin.readline()
"#;

#[test]
fn python_api_round_trip() {
    if !python3_available() {
        return;
    }
    let dir = private_dir();
    let mut w = Writer::python(dir.path(), PY_API, "");
    let mut ch = open_from_start(&w.path);
    let up = ch.poll().expect("poll");
    assert_eq!(ch.identity().kind, WriterKind::Python);
    assert_eq!(ch.identity().sample_period_us, 0);
    let d = &up.devices[0];
    assert_eq!(
        d.uuid,
        vramscope::channel::parse_uuid("GPU-00112233-4455-6677-8899-aabbccddeeff")
    );
    assert_eq!(
        (d.ordinal, d.total, d.allocated, d.step_peak),
        (1, Some(80 * GIB), Some(GIB), Some(4 * GIB))
    );
    let flags: Vec<u8> = up.samples.iter().map(|s| s.flags).collect();
    use layout::sample::{FLAG_NEW_HIGH_WATER, FLAG_PEAK_EXACT};
    assert_eq!(flags, [FLAG_PEAK_EXACT | FLAG_NEW_HIGH_WATER, 0]);
    let peaks: Vec<Option<u64>> = up.samples.iter().map(|s| s.peak).collect();
    assert_eq!(peaks, [Some(4 * GIB), Some(2 * GIB)]);
    assert_eq!(up.phases, ["train"]);
    assert_eq!(up.samples[1].phase, 1);
    let status = up.status.as_ref().expect("status");
    assert_eq!((status.step, status.label.as_str()), (Some(1), "train"));
    let kinds: Vec<EventKind> = up.events.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            EventKind::NewHighWater,
            EventKind::PhaseBegin,
            EventKind::StepEnd,
            EventKind::Mark,
        ]
    );
    let step_end = &up.events[2];
    assert_eq!(
        (step_end.step, step_end.slot, step_end.args[0]),
        (Some(0), Some(0), 4 * GIB)
    );
    assert_eq!(up.liveness, Liveness::Alive);
    w.next_stage(None);
    assert_eq!(w.child.wait().expect("wait").code(), Some(0));
    let up = ch.poll().expect("poll");
    assert_eq!(up.state, WriterState::ExitedClean);
    let kinds: Vec<EventKind> = up.events.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [EventKind::PhaseEnd, EventKind::Exit]);
    assert_eq!(up.events[0].args[0], 2 * GIB);
}

#[test]
fn c_writer_contract() {
    if !cc_available() {
        return;
    }
    let dir = private_dir();
    let out = Command::new(compiled("writer_checks", &CHECKS_C))
        .arg(dir.path())
        .output()
        .expect("run writer_checks");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout, "all checks passed\n");
    // Of five failures to create, one warned: the writer warns once per process.
    let warnings: Vec<&str> = stderr.lines().collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(warnings[0].starts_with("vramscope: not publishing memory figures: "));
}

static OOM_C: OnceLock<PathBuf> = OnceLock::new();

#[test]
fn c_writer_explicit_oom_carries_the_last_figures_and_leaves_the_count_to_the_program() {
    if !cc_available() {
        return;
    }
    let dir = private_dir();
    let out = Command::new(compiled("oom_writer", &OOM_C))
        .arg(dir.path())
        .output()
        .expect("run oom_writer");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut ch = open_from_start(Path::new(stdout.trim_end()));
    let up = ch.poll().expect("poll");
    let ooms: Vec<_> = up
        .events
        .iter()
        .filter(|e| e.kind == EventKind::Oom)
        .collect();
    assert_eq!(ooms.len(), 2, "{:?}", up.events);
    let (first, second) = (ooms[0], ooms[1]);
    assert_eq!(first.slot, Some(0));
    assert_eq!((first.step, first.phase), (Some(40), 1));
    assert_eq!(up.phases, ["train/backward"]);
    assert_eq!(first.text, "train/backward");
    // Asked and free as told; total, allocated, reserved and retries as last published.
    assert_eq!(first.args, [6 * GIB, GIB, 80 * GIB, 7 * GIB, 9 * GIB, 4]);
    assert_eq!((second.step, second.phase), (None, 0));
    assert_eq!(second.text, "eval");
    assert_eq!(
        second.args,
        [
            layout::ABSENT,
            layout::ABSENT,
            80 * GIB,
            7 * GIB,
            9 * GIB,
            4
        ]
    );
    // The program's own three, not plus the two reported (events the monitor counts); the
    // other figures as published.
    let d = &up.devices[0];
    assert_eq!(d.ooms, Some(3));
    assert_eq!((d.allocated, d.device_free), (Some(7 * GIB), Some(3 * GIB)));
}
