//! Liveness (§6) with real processes: a writer killed by SIGKILL in the middle of publishing
//! reads as crashed with its last consistent figures, as does a file cut off after any store of
//! an update; a stale heartbeat reads as stalled; a pid whose start time changed reads as ended.

mod channel_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use channel_support::{from_start, poke_u64, private_dir, small, write_file, writer};
use vramscope::channel::layout::{header, spare, status};
use vramscope::channel::{
    Channel, DeviceFigures, DeviceIdentity, EventFields, EventKind, Liveness, Policy, SampleFields,
    Sections, Update, Writer, WriterConfig, WriterState, discover, monotonic_ns,
};

const CHILD_DIR: &str = "VRAMSCOPE_TEST_CHILD_DIR";

/// Figures of round `k`, checkable from `allocated = k` alone.
fn figures(k: u64) -> DeviceFigures {
    DeviceFigures {
        allocated: Some(k),
        allocated_peak: Some(k + 1),
        reserved: Some(2 * k),
        reserved_peak: Some(2 * k + 1),
        active: Some(3 * k),
        device_free: Some(1 << 40),
        ..DeviceFigures::default()
    }
}

fn sample(k: u64) -> SampleFields {
    SampleFields {
        allocated: Some(k),
        reserved: Some(2 * k),
        peak: Some(k + 1),
        active: Some(3 * k),
        step: Some(k),
        ..SampleFields::default()
    }
}

/// The child's part of `sigkill_mid_publishing_reads_as_crashed`: publish flat out until
/// killed. The test re-runs its own binary for it, so no separate test exists to be skipped.
fn publish_until_killed(dir: &Path) -> ! {
    let mut w = writer(dir, small(1, 4, 64, 16));
    let slot = w.add_device(DeviceIdentity::default()).expect("slot");
    let phase = w.intern("train");
    for k in 0.. {
        w.publish_device(slot, &figures(k));
        w.sample(&SampleFields { phase, ..sample(k) });
        w.status(Some(k), &format!("step {k}"));
        if k % 8 == 0 {
            let mut ev = EventFields::new(EventKind::StepEnd);
            ev.step = Some(k);
            ev.args[0] = k;
            w.event(&ev);
        }
    }
    unreachable!("published until killed")
}

fn check_consistent(u: &Update) {
    for s in &u.samples {
        let k = s.step.expect("step");
        assert_eq!(
            (s.allocated, s.reserved, s.peak, s.active),
            (Some(k), Some(2 * k), Some(k + 1), Some(3 * k))
        );
    }
    for e in &u.events {
        assert_eq!(Some(e.args[0]), e.step);
    }
    if let Some(d) = u.devices.first() {
        let k = d.allocated.expect("allocated");
        assert_eq!(
            (d.reserved, d.active),
            (Some(2 * k), Some(3 * k)),
            "torn slot"
        );
    }
    if let Some(st) = &u.status {
        assert_eq!(Some(st.label.clone()), st.step.map(|k| format!("step {k}")));
    }
}

fn find_channel(dir: &Path) -> Option<PathBuf> {
    discover::list(dir, Policy::current().euid)
        .ok()?
        .into_iter()
        .next()
        .map(|f| f.path)
}

#[test]
fn sigkill_mid_publishing_reads_as_crashed() {
    if let Some(dir) = std::env::var_os(CHILD_DIR) {
        publish_until_killed(Path::new(&dir));
    }
    let dir = private_dir();
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "sigkill_mid_publishing_reads_as_crashed",
            "--test-threads=1",
        ])
        .env(CHILD_DIR, dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child");
    let deadline = Instant::now() + Duration::from_secs(60);
    let path = loop {
        if let Some(p) = find_channel(dir.path()) {
            break p;
        }
        assert!(Instant::now() < deadline, "child never created its channel");
        std::thread::sleep(Duration::from_millis(5));
    };
    let (pid, _) =
        discover::parse_name(&path.file_name().unwrap().to_string_lossy()).expect("name");
    assert_eq!(pid, child.id());
    let mut ch = Channel::open(&path, &from_start()).expect("open");
    let mut seen = 0;
    while seen < 2000 {
        let u = ch.poll().expect("poll");
        assert!(matches!(
            u.liveness,
            Liveness::Alive | Liveness::Stalled { .. }
        ));
        check_consistent(&u);
        seen += u.samples.len();
        assert!(Instant::now() < deadline, "child publishes too slowly");
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    let u = ch.poll().expect("poll after the kill");
    assert_eq!(u.liveness, Liveness::Ended { crashed: true });
    assert_eq!(
        u.state,
        WriterState::Running,
        "a killed writer never says it exited"
    );
    assert_eq!(u.phases, ["train"]);
    assert!(
        u.devices[0].allocated.is_some(),
        "the last consistent figures are kept"
    );
    check_consistent(&u);
    // A reader arriving after the crash sees the same, and every record is accounted for.
    let mut late = Channel::open(&path, &from_start()).expect("open after the kill");
    let u = late.poll().expect("poll");
    assert_eq!(u.liveness, Liveness::Ended { crashed: true });
    assert!(
        u.devices.first().is_some_and(|d| d.allocated.is_some()),
        "a reader that never saw the writer alive still gets its last figures"
    );
    assert!(u.status.is_some(), "and its last status");
    check_consistent(&u);
    let stepped: Vec<u64> = u.samples.iter().filter_map(|s| s.step).collect();
    let head = stepped.last().expect("samples") + 1;
    assert_eq!(u.samples.len() as u64 + u.lost_samples, head);
}

#[test]
fn an_old_heartbeat_reads_as_stalled_until_the_next_beat() {
    let dir = private_dir();
    let mut w = Writer::create(WriterConfig {
        sample_period_us: 100_000,
        capacities: small(1, 0, 8, 8),
        ..channel_support::config(dir.path())
    })
    .expect("writer");
    let mut ch = Channel::open(w.path(), &Policy::current()).expect("open");
    assert_eq!(ch.poll().expect("poll").liveness, Liveness::Alive);
    poke_u64(w.path(), header::HEARTBEAT, monotonic_ns() - 10_000_000_000);
    match ch.poll().expect("poll").liveness {
        Liveness::Stalled { heartbeat_age_ns } => {
            assert!((10_000_000_000..20_000_000_000).contains(&heartbeat_age_ns))
        }
        other => panic!("expected stalled, got {other:?}"),
    }
    w.heartbeat();
    assert_eq!(ch.poll().expect("poll").liveness, Liveness::Alive);
}

#[test]
fn an_on_demand_writer_is_never_stalled() {
    let dir = private_dir();
    let w = writer(dir.path(), small(1, 0, 8, 8));
    let mut ch = Channel::open(w.path(), &Policy::current()).expect("open");
    assert_eq!(ch.identity().sample_period_us, 0);
    poke_u64(w.path(), header::HEARTBEAT, monotonic_ns() - 10_000_000_000);
    assert_eq!(ch.poll().expect("poll").liveness, Liveness::Alive);
}

#[test]
fn a_start_time_that_no_longer_matches_the_pid_reads_as_ended() {
    let dir = private_dir();
    let w = writer(dir.path(), small(1, 0, 8, 8));
    let mut ch = Channel::open(w.path(), &Policy::current()).expect("open");
    let real = ch.identity().starttime;
    assert_eq!(ch.poll().expect("poll").liveness, Liveness::Alive);
    // Our own pid with another start time: the pid was reused, although the lock is held.
    poke_u64(w.path(), header::STARTTIME, real + 1);
    let mut reused = Channel::open(w.path(), &Policy::current()).expect("open");
    assert_eq!(
        reused.poll().expect("poll").liveness,
        Liveness::Ended { crashed: true }
    );
    // In another pid namespace our /proc says nothing about the pid: no verdict from it.
    poke_u64(w.path(), header::PID_NS, 12345);
    let mut elsewhere = Channel::open(w.path(), &Policy::current()).expect("open");
    assert_eq!(elsewhere.poll().expect("poll").liveness, Liveness::Alive);
}

fn word(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}

/// The 8-byte stores of one seqlocked update (§3) that turns the block at `at` (its seq, then
/// `copy` bytes of fields) of the file image `old` into the block of `new`: the spare first,
/// then the block between its odd and its even sequence.
fn update_stores(old: &[u8], new: &[u8], at: usize, copy: usize) -> Vec<(usize, u64)> {
    let seq = word(old, at);
    let fields = (8..8 + copy).step_by(8);
    let mut stores = vec![(spare::BLOCK, at as u64)];
    stores.extend(
        fields
            .clone()
            .map(|f| (spare::COPY + f - 8, word(old, at + f))),
    );
    stores.push((spare::SEQ, seq + 1));
    stores.push((at, seq + 1));
    stores.extend(fields.map(|f| (at + f, word(new, at + f))));
    stores.push((at, seq + 2));
    stores
}

fn apply(image: &[u8], stores: &[(usize, u64)]) -> Vec<u8> {
    let mut b = image.to_vec();
    for &(off, v) in stores {
        b[off..off + 8].copy_from_slice(&v.to_le_bytes());
    }
    b
}

/// What a reader that never saw the writer alive makes of `image`.
fn first_poll(dir: &Path, image: &[u8]) -> Update {
    let path = write_file(dir, "1-1.vsc", image);
    Channel::open(&path, &from_start())
        .expect("open")
        .poll()
        .expect("poll")
}

#[test]
fn a_writer_killed_after_any_store_of_an_update_leaves_its_last_values_readable() {
    let dir = private_dir();
    let caps = small(2, 0, 8, 8);
    let (sections, _) = Sections::plan(caps).expect("plan");
    let slot_at = |i: u64| sections.devices.record(i) as usize;
    let mut w = writer(dir.path(), caps);
    let id = DeviceIdentity {
        ordinal: 3,
        uuid: Some([9; 16]),
        ..DeviceIdentity::default()
    };
    let a = w.add_device(id).expect("slot");
    let b = w.add_device(DeviceIdentity::default()).expect("slot");
    // Explicit read times: publishing then stores nothing outside the slot and the spare.
    let at = |k: u64| DeviceFigures {
        read_at_ns: Some(1000 + k),
        ..figures(k)
    };
    w.publish_device(a, &at(1));
    w.publish_device(b, &at(50));
    w.status(Some(1), "step 1");
    let v1 = std::fs::read(w.path()).expect("read");
    w.publish_device(a, &at(2));
    let v2 = std::fs::read(w.path()).expect("read");
    w.status(Some(2), "step 2");
    let v3 = std::fs::read(w.path()).expect("read");
    let work = private_dir();
    let (u1, u2, u3) = (
        first_poll(work.path(), &v1),
        first_poll(work.path(), &v2),
        first_poll(work.path(), &v3),
    );
    assert_eq!(u1.devices.len(), 2);
    assert_eq!(u2.devices[0].allocated, Some(2));
    assert_eq!(u3.status.as_ref().map(|s| s.label.as_str()), Some("step 2"));

    // Killed after `k` stores of the update of slot `a`: everything before it, or all of it.
    let stores = update_stores(&v1, &v2, slot_at(0), spare::DEVICE_COPY);
    for k in 0..=stores.len() {
        let u = first_poll(work.path(), &apply(&v1, &stores[..k]));
        let want = if k == stores.len() { &u2 } else { &u1 };
        assert_eq!(u.devices, want.devices, "slot update cut after {k} stores");
        assert_eq!(u.status, u1.status, "slot update cut after {k} stores");
    }
    // The same for the status.
    let stores = update_stores(&v2, &v3, status::OFFSET, spare::STATUS_COPY);
    for k in 0..=stores.len() {
        let u = first_poll(work.path(), &apply(&v2, &stores[..k]));
        let want = if k == stores.len() { &u3 } else { &u2 };
        assert_eq!(u.status, want.status, "status update cut after {k} stores");
        assert_eq!(u.devices, u2.devices, "status update cut after {k} stores");
    }

    // The spare stands in only for the block and the sequence it names.
    let stores = update_stores(&v1, &v2, slot_at(0), spare::DEVICE_COPY);
    let odd = stores.len() - 2;
    let mid_update = apply(&v1, &stores[..odd]);
    assert_eq!(first_poll(work.path(), &mid_update).devices, u1.devices);
    for (off, v) in [
        (spare::BLOCK, slot_at(1) as u64),
        (spare::SEQ, word(&v1, slot_at(0)) + 3),
    ] {
        let u = first_poll(work.path(), &apply(&mid_update, &[(off, v)]));
        assert_eq!(u.devices, &u1.devices[1..], "spare word {off:#x} = {v}");
    }

    // And the writer stores exactly that sequence.
    let stores = update_stores(&v1, &v2, slot_at(0), spare::DEVICE_COPY);
    assert!(apply(&v1, &stores) == v2, "the writer's slot update");
    let stores = update_stores(&v2, &v3, status::OFFSET, spare::STATUS_COPY);
    assert!(apply(&v2, &stores) == v3, "the writer's status update");
}
