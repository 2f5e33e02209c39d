//! Liveness (§6) with real processes: a writer killed by SIGKILL in the middle of publishing
//! reads as crashed with its last consistent figures; a stale heartbeat reads as stalled; a pid
//! whose start time changed reads as ended.

mod channel_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use channel_support::{from_start, poke_u64, private_dir, small, writer};
use vramscope::channel::layout::header;
use vramscope::channel::{
    Channel, DeviceFigures, DeviceIdentity, EventFields, EventKind, Liveness, Policy, SampleFields,
    Update, Writer, WriterConfig, WriterState, discover, monotonic_ns,
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
