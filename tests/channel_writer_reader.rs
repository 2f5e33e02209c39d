//! The Rust writer against the reader: every field survives the trip, rings account for every
//! record, concurrent publishing is never seen torn, and the writer's file life cycle (§1)
//! holds: names, modes, exits, forks and refused directories.

mod channel_support;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use channel_support::{from_start, private_dir, proc_starttime, small, writer};
use vramscope::channel::layout::{ABSENT, flags, sample as sample_flags};
use vramscope::channel::{
    Capacities, Channel, DeviceFigures, DeviceIdentity, DeviceSlot, EventFields, EventKind, Exit,
    Liveness, Policy, SampleFields, SampleRecord, Writer, WriterConfig, WriterKind, WriterState,
    monotonic_ns, parse_uuid, uuid_string,
};

/// `read_at_ns` and the 15 figures of a slot, in slot order.
fn figures_of(d: &DeviceSlot) -> [Option<u64>; 16] {
    [
        d.read_at_ns,
        d.allocated,
        d.allocated_peak,
        d.reserved,
        d.reserved_peak,
        d.active,
        d.inactive_split,
        d.requested,
        d.alloc_retries,
        d.ooms,
        d.device_allocs,
        d.device_frees,
        d.device_free,
        d.limit,
        d.interval_peak,
        d.step_peak,
    ]
}

fn all_figures(base: u64) -> DeviceFigures {
    DeviceFigures {
        read_at_ns: Some(base),
        allocated: Some(base + 1),
        allocated_peak: Some(base + 2),
        reserved: Some(base + 3),
        reserved_peak: Some(base + 4),
        active: Some(base + 5),
        inactive_split: Some(base + 6),
        requested: Some(base + 7),
        alloc_retries: Some(base + 8),
        ooms: Some(base + 9),
        device_allocs: Some(base + 10),
        device_frees: Some(base + 11),
        device_free: Some(base + 12),
        limit: Some(base + 13),
        interval_peak: Some(base + 14),
        step_peak: Some(base + 15),
    }
}

#[test]
fn every_field_survives_the_round_trip() {
    let dir = private_dir();
    let before = monotonic_ns();
    let mut w = Writer::create(WriterConfig {
        kind: WriterKind::PyTorch,
        sample_period_us: 50_000,
        rank: Some(3),
        local_rank: Some(1),
        world_size: Some(8),
        job_id: "job-42".into(),
        framework: "torch 2.5.1+cu124".into(),
        cmdline: "python train.py --name ünïcode".into(),
        allocator_config: "expandable_segments:True\x1b[31m\n".into(),
        flags: flags::PEAK_RESET | flags::MODULE_ATTRIBUTION,
        dir: Some(dir.path().to_path_buf()),
        capacities: Capacities::default(),
    })
    .expect("writer");

    // The file: its name, its mode, its directory's mode.
    let name = format!(
        "{}-{}.vsc",
        std::process::id(),
        proc_starttime(std::process::id())
    );
    assert_eq!(w.path(), dir.path().join(&name));
    let meta = fs::symlink_metadata(w.path()).expect("file");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(meta.len(), 401_408);
    let dir_meta = fs::metadata(dir.path()).expect("dir");
    assert_eq!(dir_meta.permissions().mode() & 0o777, 0o700);
    let names: Vec<_> = fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names, [name.as_str()], "no temporary name is left behind");

    let uuid = parse_uuid("GPU-12345678-9abc-def0-0123-456789abcdef").expect("uuid");
    let s0 = w
        .add_device(DeviceIdentity {
            ordinal: 2,
            uuid: Some(uuid),
            pci_bus_id: Some("00000000:18:00.0".into()),
            total: Some(80 << 30),
        })
        .expect("slot 0");
    let s1 = w
        .add_device(DeviceIdentity {
            ordinal: 5,
            ..DeviceIdentity::default()
        })
        .expect("slot 1");
    assert_eq!((s0, s1), (0, 1));
    w.publish_device(s0, &all_figures(1000));
    w.publish_device(
        s1,
        &DeviceFigures {
            allocated: Some(77),
            ..DeviceFigures::default()
        },
    );
    let fwd = w.intern("forward");
    let bwd = w.intern("backward");
    assert_eq!((fwd, bwd), (1, 2));
    assert_eq!(
        w.intern("forward"),
        1,
        "interning twice gives the same phase"
    );
    assert_eq!(w.intern(""), 0);
    w.status(Some(17), "forward/model.encoder.layers.3");
    w.sample(&SampleFields {
        t_ns: Some(5),
        slot: 0,
        flags: sample_flags::FLAG_PEAK_EXACT | sample_flags::FLAG_HOOK,
        phase: fwd,
        allocated: Some(10),
        reserved: Some(20),
        peak: Some(30),
        active: Some(40),
        step: Some(17),
    });
    w.sample(&SampleFields {
        slot: 1,
        ..SampleFields::default()
    });
    let mut oom = EventFields::new(EventKind::Oom);
    oom.t_ns = Some(99);
    oom.slot = Some(0);
    oom.phase = bwd;
    oom.step = Some(17);
    oom.args = [1, 2, 3, 4, 5, 6];
    oom.text = "model.decoder";
    w.event(&oom);
    let mut newer = EventFields::new(EventKind::Unknown(300));
    newer.text = "from a newer writer";
    w.event(&newer);

    let mut ch = Channel::open(w.path(), &from_start()).expect("open");
    let id = ch.identity().clone();
    assert_eq!(id.pid, u64::from(std::process::id()));
    assert_eq!(id.starttime, proc_starttime(std::process::id()));
    assert!(id.pid_ns.is_some());
    assert_eq!(id.uid, u64::from(Policy::current().euid));
    assert!(id.created_monotonic_ns >= before && id.created_monotonic_ns <= monotonic_ns());
    assert!(id.created_realtime_ns > 1_600_000_000_000_000_000);
    assert_eq!(id.kind, WriterKind::PyTorch);
    assert_eq!(id.sample_period_us, 50_000);
    assert_eq!(
        (id.rank, id.local_rank, id.world_size),
        (Some(3), Some(1), Some(8))
    );
    assert_eq!(id.job_id, "job-42");
    assert_eq!(id.framework, "torch 2.5.1+cu124");
    assert_eq!(id.cmdline, "python train.py --name ünïcode");
    assert_eq!(
        id.allocator_config, "expandable_segments:True\u{FFFD}[31m ",
        "the escape withheld, the line break a space"
    );
    assert_eq!(id.flags, flags::PEAK_RESET | flags::MODULE_ATTRIBUTION);
    assert_eq!((id.minor, id.file_size), (0, 401_408));

    let u = ch.poll().expect("poll");
    assert_eq!(u.state, WriterState::Running);
    assert_eq!(u.liveness, Liveness::Alive);
    assert!(u.heartbeat_ns.is_some_and(|h| h >= before));
    assert_eq!(u.devices.len(), 2);
    let d0 = &u.devices[0];
    assert_eq!((d0.index, d0.ordinal), (0, 2));
    assert_eq!(
        d0.uuid.map(|u| uuid_string(&u)).as_deref(),
        Some("GPU-12345678-9abc-def0-0123-456789abcdef")
    );
    assert_eq!(d0.pci_bus_id.as_deref(), Some("00000000:18:00.0"));
    assert_eq!(d0.total, Some(80 << 30));
    let want: Vec<Option<u64>> = (1000..1016).map(Some).collect();
    assert_eq!(figures_of(d0).to_vec(), want);
    let d1 = &u.devices[1];
    assert_eq!(
        (d1.index, d1.ordinal, d1.uuid, d1.pci_bus_id.as_deref()),
        (1, 5, None, None)
    );
    assert_eq!(d1.total, None);
    assert_eq!(d1.allocated, Some(77));
    assert!(
        d1.read_at_ns.is_some_and(|t| t >= before),
        "stamped when published"
    );
    assert_eq!(
        (d1.reserved, d1.step_peak, d1.device_free),
        (None, None, None)
    );

    let status = u.status.as_ref().expect("status");
    assert_eq!(status.step, Some(17));
    assert_eq!(status.label, "forward/model.encoder.layers.3");
    assert!(status.set_at_ns >= before);
    assert_eq!(u.phases, ["forward", "backward"]);

    assert_eq!(u.samples.len(), 2);
    assert_eq!(
        u.samples[0],
        SampleRecord {
            t_ns: 5,
            slot: 0,
            flags: sample_flags::FLAG_PEAK_EXACT | sample_flags::FLAG_HOOK,
            phase: 1,
            allocated: Some(10),
            reserved: Some(20),
            peak: Some(30),
            active: Some(40),
            step: Some(17),
        }
    );
    let s = &u.samples[1];
    assert!(s.t_ns >= before);
    assert_eq!((s.slot, s.flags, s.phase), (1, 0, 0));
    assert_eq!(
        (s.allocated, s.reserved, s.peak, s.active, s.step),
        (None, None, None, None, None)
    );

    assert_eq!(u.events.len(), 2);
    let e = &u.events[0];
    assert_eq!(
        (e.t_ns, e.kind, e.slot, e.phase, e.step),
        (99, EventKind::Oom, Some(0), 2, Some(17))
    );
    assert_eq!(
        (e.args, e.text.as_str()),
        ([1, 2, 3, 4, 5, 6], "model.decoder")
    );
    let e = &u.events[1];
    assert_eq!(
        (e.kind, e.kind.name()),
        (EventKind::Unknown(300), "event 300".to_string())
    );
    assert_eq!(
        (e.slot, e.phase, e.step, e.args),
        (None, 0, None, [ABSENT; 6])
    );
    assert_eq!(e.text, "from a newer writer");
    assert_eq!((u.lost_samples, u.lost_events), (0, 0));

    // A second poll brings no records again but the same state.
    let again = ch.poll().expect("poll again");
    assert!(again.samples.is_empty() && again.events.is_empty());
    assert_eq!(again.devices, u.devices);
    assert_eq!(again.phases, u.phases);
}

#[test]
fn text_is_cut_at_character_boundaries_to_fit_its_field() {
    let dir = private_dir();
    let mut w = Writer::create(WriterConfig {
        cmdline: "é".repeat(100),
        job_id: "j".repeat(100),
        ..channel_support::config(dir.path())
    })
    .expect("writer");
    let slot = w
        .add_device(DeviceIdentity {
            pci_bus_id: Some("00000000:18:00.0-and-more".into()),
            ..DeviceIdentity::default()
        })
        .expect("slot");
    let phase = w.intern(&"日".repeat(30));
    w.status(None, &"x".repeat(200));
    let mut ev = EventFields::new(EventKind::Mark);
    let long = "é".repeat(100);
    ev.text = &long;
    w.event(&ev);
    let mut ch = Channel::open(w.path(), &from_start()).expect("open");
    assert_eq!(ch.identity().cmdline, "é".repeat(64));
    assert_eq!(ch.identity().job_id, "j".repeat(64));
    let u = ch.poll().expect("poll");
    assert_eq!(
        u.devices[slot].pci_bus_id.as_deref(),
        Some("00000000:18:00.0")
    );
    assert_eq!(phase, 1);
    assert_eq!(u.phases, ["日".repeat(21)]);
    assert_eq!(u.status.expect("status").label, "x".repeat(160));
    assert_eq!(u.events[0].text, "é".repeat(86));
}

#[test]
fn an_explicit_oom_carries_the_last_figures_and_leaves_the_count_to_the_program() {
    const GIB: u64 = 1 << 30;
    let dir = private_dir();
    let mut w = writer(dir.path(), Capacities::default());
    let slot = w
        .add_device(DeviceIdentity {
            total: Some(80 * GIB),
            ..DeviceIdentity::default()
        })
        .expect("slot");
    let published = DeviceFigures {
        allocated: Some(7 * GIB),
        reserved: Some(9 * GIB),
        alloc_retries: Some(4),
        device_free: Some(3 * GIB),
        ..DeviceFigures::default()
    };
    w.publish_device(slot, &published);
    let backward = w.intern("train/backward");
    w.status(Some(40), "train/backward");
    w.oom(slot, Some(6 * GIB), Some(GIB));
    let mut ch = Channel::open(w.path(), &from_start()).expect("open");
    let u = ch.poll().expect("poll");
    let (oom,) = match u.events.as_slice() {
        [e] => (e,),
        other => panic!("one event expected: {other:?}"),
    };
    assert_eq!(oom.kind, EventKind::Oom);
    assert_eq!(oom.slot, Some(0));
    assert_eq!((oom.step, oom.phase), (Some(40), backward));
    assert_eq!(oom.text, "train/backward");
    // Asked, free as told; total, allocated, reserved and retries as last published.
    assert_eq!(oom.args, [6 * GIB, GIB, 80 * GIB, 7 * GIB, 9 * GIB, 4]);
    let d = &u.devices[slot];
    // The event is the OOM (the monitor counts events); the figure stays the program's.
    assert_eq!(d.ooms, None, "the program published no count");
    assert_eq!(
        (d.allocated, d.device_free),
        (Some(7 * GIB), Some(3 * GIB)),
        "the other figures stay"
    );

    // A count of the program's own is published as it is: adding the OOMs reported here
    // would count twice an OOM the program counted and reported. Unknown figures and a
    // label that is no phase stay unknown.
    w.publish_device(slot, &published);
    assert_eq!(ch.poll().expect("poll").devices[slot].ooms, None);
    w.status(None, "eval, not a phase");
    w.oom(slot, None, None);
    w.publish_device(
        slot,
        &DeviceFigures {
            ooms: Some(3),
            ..published
        },
    );
    let u = ch.poll().expect("poll");
    assert_eq!(u.devices[slot].ooms, Some(3));
    let second = &u.events[0];
    assert_eq!((second.step, second.phase), (None, 0));
    assert_eq!(second.text, "eval, not a phase");
    assert_eq!(&second.args[..2], &[ABSENT, ABSENT]);

    // No such slot: nothing written, nothing panics.
    w.oom(7, Some(1), None);
    assert!(ch.poll().expect("poll").events.is_empty());
}

fn numbered(i: u64) -> SampleFields {
    SampleFields {
        t_ns: Some(i),
        allocated: Some(i * 10),
        step: Some(i),
        ..SampleFields::default()
    }
}

fn times(samples: &[SampleRecord]) -> Vec<u64> {
    samples.iter().map(|s| s.t_ns).collect()
}

#[test]
fn a_reader_that_falls_behind_counts_exactly_what_it_lost() {
    let dir = private_dir();
    let mut w = writer(dir.path(), small(1, 0, 8, 4));
    let mut ch = Channel::open(w.path(), &from_start()).expect("open");
    let mut accepted = 0u64;

    for i in 0..20 {
        w.sample(&numbered(i));
    }
    let u = ch.poll().expect("poll");
    assert_eq!(u.lost_samples, 12);
    assert_eq!(times(&u.samples), (12..20).collect::<Vec<_>>());
    accepted += u.samples.len() as u64;

    for i in 20..25 {
        w.sample(&numbered(i));
    }
    let u = ch.poll().expect("poll");
    assert_eq!(u.lost_samples, 12, "nothing more lost while keeping up");
    assert_eq!(times(&u.samples), (20..25).collect::<Vec<_>>());
    accepted += u.samples.len() as u64;

    for i in 25..125 {
        w.sample(&numbered(i));
    }
    let u = ch.poll().expect("poll");
    assert_eq!(u.lost_samples, 12 + 92);
    assert_eq!(times(&u.samples), (117..125).collect::<Vec<_>>());
    assert!(u.samples.iter().all(|s| s.allocated == Some(s.t_ns * 10)));
    accepted += u.samples.len() as u64;
    assert_eq!(accepted + u.lost_samples, w.samples_appended());

    for i in 0..10u64 {
        let mut ev = EventFields::new(EventKind::Mark);
        ev.t_ns = Some(i);
        w.event(&ev);
    }
    let u = ch.poll().expect("poll");
    assert_eq!(u.lost_events, 6);
    let t: Vec<u64> = u.events.iter().map(|e| e.t_ns).collect();
    assert_eq!(t, (6..10).collect::<Vec<_>>());
}

#[test]
fn a_reader_opened_mid_run_starts_at_the_head() {
    let dir = private_dir();
    let mut w = writer(dir.path(), small(1, 0, 16, 8));
    for i in 0..10 {
        w.sample(&numbered(i));
    }
    w.event(&EventFields::new(EventKind::Mark));
    let mut late = Channel::open(w.path(), &Policy::current()).expect("open");
    let mut history = Channel::open(w.path(), &from_start()).expect("open");
    let u = late.poll().expect("poll");
    assert!(u.samples.is_empty() && u.events.is_empty());
    assert_eq!((u.lost_samples, u.lost_events), (0, 0));
    for i in 10..13 {
        w.sample(&numbered(i));
    }
    w.event(&EventFields::new(EventKind::StepEnd));
    let u = late.poll().expect("poll");
    assert_eq!(times(&u.samples), [10, 11, 12]);
    assert_eq!(u.events.len(), 1);
    assert_eq!(u.events[0].kind, EventKind::StepEnd);
    let h = history.poll().expect("poll");
    assert_eq!(times(&h.samples), (0..13).collect::<Vec<_>>());
    assert_eq!(h.events.len(), 2);
}

/// Fields of sample `i` that a reader can check from `t_ns = i` alone.
fn derived_sample(i: u64) -> SampleFields {
    SampleFields {
        t_ns: Some(i),
        slot: (i % 2) as u8,
        flags: (i % 16) as u8,
        phase: (i % 7) as u16,
        allocated: Some(i.wrapping_mul(3)),
        reserved: Some(i ^ 0x5555_5555_5555),
        peak: Some(i.rotate_left(17)),
        active: Some(i.wrapping_mul(7) + 1),
        step: Some(i / 3),
    }
}

#[test]
fn a_flat_out_writer_and_a_polling_reader_never_disagree() {
    const SAMPLES: u64 = 200_000;
    let dir = private_dir();
    let mut w = writer(dir.path(), small(2, 0, 16, 8));
    let slot = w.add_device(DeviceIdentity::default()).expect("slot");
    let mut ch = Channel::open(w.path(), &from_start()).expect("open");
    let done = Arc::new(AtomicBool::new(false));
    let writer_done = Arc::clone(&done);
    let producer = std::thread::spawn(move || {
        let mut events = 0u64;
        for i in 0..SAMPLES {
            w.sample(&derived_sample(i));
            if i % 16 == 0 {
                w.publish_device(slot, &all_figures(i));
                w.status(Some(i), &format!("label {i}"));
                let mut ev = EventFields::new(EventKind::Mark);
                ev.t_ns = Some(events);
                ev.args = [events, events * 2, events * 3, !events, 0, ABSENT];
                let text = format!("event {events}");
                ev.text = &text;
                w.event(&ev);
                events += 1;
            }
        }
        writer_done.store(true, Ordering::Release);
        (w, events)
    });

    let (mut samples, mut events, mut polls) = (0u64, 0u64, 0u64);
    let (mut last_sample, mut last_event): (Option<u64>, Option<u64>) = (None, None);
    let mut check = |u: &vramscope::channel::Update| {
        for s in &u.samples {
            let want = derived_sample(s.t_ns);
            assert_eq!(
                (
                    s.slot,
                    s.flags,
                    s.phase,
                    s.allocated,
                    s.reserved,
                    s.peak,
                    s.active,
                    s.step
                ),
                (
                    want.slot,
                    want.flags,
                    want.phase,
                    want.allocated,
                    want.reserved,
                    want.peak,
                    want.active,
                    want.step
                ),
                "sample {} is torn",
                s.t_ns
            );
            assert!(last_sample.is_none_or(|l| s.t_ns > l), "samples in order");
            last_sample = Some(s.t_ns);
        }
        for e in &u.events {
            let n = e.t_ns;
            assert_eq!(
                e.args,
                [n, n * 2, n * 3, !n, 0, ABSENT],
                "event {n} is torn"
            );
            assert_eq!(e.text, format!("event {n}"));
            assert!(last_event.is_none_or(|l| n > l), "events in order");
            last_event = Some(n);
        }
        if let Some(d) = u.devices.first()
            && let Some(base) = d.read_at_ns
        {
            let want: Vec<Option<u64>> = (0..16).map(|k| Some(base + k)).collect();
            assert_eq!(figures_of(d).to_vec(), want, "device slot torn at {base}");
        }
        if let Some(st) = &u.status {
            let step = st.step.expect("step");
            assert_eq!(st.label, format!("label {step}"), "status torn");
        }
    };
    loop {
        let finished = done.load(Ordering::Acquire);
        let u = ch.poll().expect("poll");
        polls += 1;
        samples += u.samples.len() as u64;
        events += u.events.len() as u64;
        check(&u);
        if finished {
            let (w, appended_events) = producer.join().expect("writer thread");
            assert_eq!(
                samples + u.lost_samples,
                SAMPLES,
                "accepted + lost == appended"
            );
            assert_eq!(events + u.lost_events, appended_events);
            assert_eq!(w.samples_appended(), SAMPLES);
            eprintln!(
                "{polls} polls: {samples} samples accepted, {} lost; {events} events, {} lost",
                u.lost_samples, u.lost_events
            );
            assert!(samples > 0 && polls > 1);
            break;
        }
    }
}

#[test]
fn a_clean_finish_removes_the_file_and_reads_as_ended() {
    let dir = private_dir();
    let mut w = writer(dir.path(), small(1, 0, 8, 8));
    let path = w.path().to_path_buf();
    w.sample(&numbered(1));
    let mut ch = Channel::open(&path, &Policy::current()).expect("open");
    w.finish(Exit::Clean).expect("finish");
    assert!(!path.exists(), "clean exit unlinks");
    let u = ch.poll().expect("the open descriptor still reads");
    assert_eq!(u.state, WriterState::ExitedClean);
    assert_eq!(u.liveness, Liveness::Ended { crashed: false });
    assert_eq!(u.events.len(), 1);
    assert_eq!(
        (u.events[0].kind, u.events[0].args[0]),
        (EventKind::Exit, 0)
    );
}

#[test]
fn an_error_finish_keeps_the_file_with_an_exit_event() {
    let dir = private_dir();
    let w = writer(dir.path(), small(1, 0, 8, 8));
    let path = w.path().to_path_buf();
    w.finish(Exit::Error("CUDA out of memory".into()))
        .expect("finish");
    let mut ch = Channel::open(&path, &from_start()).expect("kept");
    let u = ch.poll().expect("poll");
    assert_eq!(u.state, WriterState::ExitedError);
    assert_eq!(u.liveness, Liveness::Ended { crashed: false });
    let e = &u.events[0];
    assert_eq!(
        (e.kind, e.args[0], e.text.as_str()),
        (EventKind::Exit, 1, "CUDA out of memory")
    );
}

#[test]
fn a_writer_dropped_by_a_panic_ends_with_an_error() {
    let dir = private_dir();
    let path = std::panic::catch_unwind(|| {
        let w = writer(dir.path(), small(1, 0, 8, 8));
        let path = w.path().to_path_buf();
        std::panic::panic_any(path);
    })
    .expect_err("panicked")
    .downcast::<std::path::PathBuf>()
    .expect("path");
    let u = Channel::open(&path, &from_start())
        .expect("kept")
        .poll()
        .expect("poll");
    assert_eq!(u.state, WriterState::ExitedError);
    assert_eq!(u.events[0].text, "panicked");
}

#[test]
fn a_second_channel_in_the_same_directory_is_refused_and_harms_nothing() {
    let dir = private_dir();
    let mut first = writer(dir.path(), small(1, 0, 8, 8));
    let err = Writer::create(channel_support::config(dir.path()))
        .err()
        .expect("refused");
    assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
    first.sample(&numbered(7));
    let u = Channel::open(first.path(), &from_start())
        .expect("first intact")
        .poll()
        .expect("poll");
    assert_eq!(times(&u.samples), [7]);
    assert_eq!(
        fs::read_dir(dir.path()).expect("list").count(),
        1,
        "no leftovers"
    );
}

#[test]
fn capacities_a_reader_would_reject_are_refused_at_creation() {
    let dir = private_dir();
    for caps in [
        small(0, 0, 8, 8),
        small(65, 0, 8, 8),
        small(1, 0, 6, 8),
        small(1, 2000, 8, 8),
    ] {
        let err = Writer::create(WriterConfig {
            capacities: caps,
            ..channel_support::config(dir.path())
        })
        .err()
        .expect("refused");
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{caps:?}");
    }
    assert_eq!(fs::read_dir(dir.path()).expect("list").count(), 0);
}

#[test]
fn unsafe_directories_are_refused() {
    let base = private_dir();
    let make = |name: &str, mode: u32| {
        let d = base.path().join(name);
        fs::create_dir(&d).expect("mkdir");
        fs::set_permissions(&d, fs::Permissions::from_mode(mode)).expect("chmod");
        d
    };
    let refused = |d: &Path| {
        Writer::create(channel_support::config(d))
            .err()
            .expect("refused")
    };
    let err = refused(&make("group", 0o770));
    assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
    assert!(err.to_string().contains("mode 0770"), "{err}");
    let err = refused(&make("other-read", 0o704));
    assert!(err.to_string().contains("mode 0704"), "{err}");

    let good = make("good", 0o700);
    let link = base.path().join("link");
    std::os::unix::fs::symlink(&good, &link).expect("symlink");
    let err = refused(&link);
    assert!(err.to_string().contains("symlink"), "{err}");

    if Policy::current().euid == 0 {
        let other = make("other", 0o700);
        std::os::unix::fs::chown(&other, Some(65534), None).expect("chown");
        let err = refused(&other);
        assert!(err.to_string().contains("owned by uid 65534"), "{err}");
    } else {
        eprintln!("note: not root, the other-owner directory case is not run");
    }

    // A missing last component is created, 0700.
    let fresh = base.path().join("fresh");
    let w = Writer::create(channel_support::config(&fresh)).expect("created");
    assert_eq!(fs::metadata(&fresh).expect("dir").mode() & 0o777, 0o700);
    drop(w);
}

#[test]
fn a_forked_child_closes_its_copy_and_neither_publishes_nor_ends_the_channel() {
    let dir = private_dir();
    let mut w = writer(dir.path(), small(1, 0, 8, 8));
    w.sample(&numbered(1));
    let path = w.path().to_path_buf();
    // SAFETY: the child calls only the writer (atomic loads, munmap, free) and then _exit; it
    // never returns into the test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        w.sample(&numbered(2));
        w.status(Some(9), "child");
        // Exit 3 if the child still holds a descriptor of the channel (the parent's lock).
        let holds = fs::read_dir("/proc/self/fd")
            .map(|it| {
                it.flatten()
                    .any(|e| fs::read_link(e.path()).is_ok_and(|t| t == path))
            })
            .unwrap_or(true);
        drop(w);
        // SAFETY: ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(if holds { 3 } else { 0 }) };
    }
    let mut status = 0;
    // SAFETY: waits for our own child.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid);
    assert!(libc::WIFEXITED(status), "child exited");
    assert_eq!(
        libc::WEXITSTATUS(status),
        0,
        "child kept the channel's descriptor"
    );
    assert!(
        path.exists(),
        "the child's drop did not remove the parent's channel"
    );
    w.sample(&numbered(3));
    let u = Channel::open(&path, &from_start())
        .expect("open")
        .poll()
        .expect("poll");
    assert_eq!(times(&u.samples), [1, 3]);
    assert_eq!(u.status, None);
    assert_eq!(u.state, WriterState::Running);
    assert_eq!(
        u.liveness,
        Liveness::Alive,
        "the parent's lock is still held"
    );
}
