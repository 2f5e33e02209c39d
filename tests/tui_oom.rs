//! The screen after a job died of an OOM: its exited row keeps its allocator's last figures,
//! and the detail pane keeps its allocator section with where the true peak was and every
//! OOM with its figures pinned above the scrolling events, whether or not the writer could
//! name its GPU, and also in the moment NVML still lists the dying process.

mod common;
#[allow(
    dead_code,
    reason = "shared by several test crates, each of which uses a different part"
)]
mod tui_fixtures;

use common::builders;
use std::sync::Arc;
use tui_fixtures::*;
use vramscope::model::SourceEvent;
use vramscope::model::{
    Absent, AllocatorDevice, AllocatorEvent, AllocatorPoint, ChannelPoll, EventKind, HostProcess,
    WriterIdentity, WriterLiveness,
};
use vramscope::state::Monitor;
use vramscope::tui::ui_state::Mode;

const PID: u32 = 8888;
/// The writer's start time, as its file name says.
const START: u64 = 77;

/// The job's device: 9 GiB allocated, 10 reserved, 1 GiB free; `uuid` when it names it.
fn device(uuid: Option<&str>) -> AllocatorDevice {
    AllocatorDevice {
        uuid: uuid.map(str::to_string),
        total: Ok(40 * GIB),
        allocated: Ok(9 * GIB),
        allocated_peak: Err(Absent::NotSupported),
        reserved: Ok(10 * GIB),
        reserved_peak: Err(Absent::NotSupported),
        active: Err(Absent::NotSupported),
        inactive_split: Err(Absent::NotSupported),
        device_free: Ok(GIB),
        interval_peak: Err(Absent::NotSupported),
        ..builders::allocator_device(0)
    }
}

fn event(at_ms: u64, kind: EventKind, step: u64, label: &str) -> AllocatorEvent {
    AllocatorEvent {
        step: Some(step),
        label: label.into(),
        ..builders::allocator_event(at_ms, kind)
    }
}

fn poll(uuid: Option<&str>, liveness: WriterLiveness) -> ChannelPoll {
    ChannelPoll {
        identity: Arc::new(WriterIdentity {
            kind: "JAX".into(),
            framework: "jax 0.4.30".into(),
            rank: Some(3),
            local_rank: Some(3),
            world_size: Some(4),
            job_id: "job-9".into(),
            sample_period_us: 50_000,
            ..builders::writer_identity(PID, START)
        }),
        liveness,
        devices: vec![device(uuid)],
        step: Some(40),
        label: "train_step".into(),
        ..builders::channel_poll(PID, START)
    }
}

/// GPU 0 (80 GiB) and GPU 1 (40 GiB); NVML lists `PID` on `gpu` with 11 GiB from `T0` until
/// `listed_until`, the host reads it with `starttime` while it is listed. The writer trains
/// (an OOM at step 20 it survives, a 12 GiB spike inside backward at step 40 between two
/// 9 GiB samples, 11 step ends after it), then at `NOW - 2 s` its uncaught OOM error (6 GiB)
/// ends it.
fn crashed(uuid: Option<&str>, gpu: u32, listed_until: u64, starttime: Option<u64>) -> Monitor {
    let mut m = Monitor::new(T0);
    m.ingest(SourceEvent::Started {
        driver: driver(),
        devices: vec![
            info(0, "NVIDIA H100 80GB HBM3", 80 * GIB),
            info(1, "NVIDIA A100-SXM4-40GB", 40 * GIB),
        ],
    });
    let feed = |m: &mut Monitor, t: u64| {
        for index in [0, 1] {
            let total = if index == 0 { 80 * GIB } else { 40 * GIB };
            let mut s = sample(index, t, 12 * GIB, total, 50);
            let listed = index == gpu && t <= listed_until;
            s.processes = Ok(if listed {
                vec![gpu_process(PID, 11 * GIB, Ok(90))]
            } else {
                vec![]
            });
            m.ingest(SourceEvent::Device(Box::new(s)));
        }
        let hosts = if t <= listed_until {
            vec![HostProcess {
                starttime,
                ..host_process(PID, "erin", "python train.py", GIB, 100.0)
            }]
        } else {
            vec![]
        };
        m.ingest(SourceEvent::Host(Box::new(host_sample(t, hosts))));
    };
    let mut t = NOW - 20_000;
    while t <= NOW - 10_000 {
        feed(&mut m, t);
        t += INTERVAL_MS;
    }
    // Training: an OOM at step 20 it catches, then the spike at step 40, inside backward.
    let mut training = poll(uuid, WriterLiveness::Live);
    let spike_at = NOW - 180_000;
    training.points = [(spike_at - 50, 9), (spike_at, 12), (spike_at + 50, 9)]
        .into_iter()
        .map(|(at_ms, gib)| AllocatorPoint {
            peak: Some(gib * GIB),
            step: Some(40),
            new_high_water: gib == 12,
            steps_since_attach: false,
            ..builders::allocator_point(at_ms, 9 * GIB, 10 * GIB)
        })
        .collect();
    let oom = EventKind::Oom {
        requested: Ok(2 * GIB),
        device_free: Ok(GIB / 2),
        device_total: Ok(40 * GIB),
        allocated: Ok(8 * GIB),
        reserved: Ok(9 * GIB),
        retries: Ok(0),
    };
    let mut caught = event(NOW - 300_000, oom, 20, "forward");
    caught.phase = "forward".into();
    let mut events = vec![caught];
    events.push(event(spike_at - 60, EventKind::PhaseBegin, 40, "backward"));
    events.push(event(
        spike_at + 60,
        EventKind::PhaseEnd { peak: Ok(12 * GIB) },
        40,
        "backward",
    ));
    for step in 21..=40 {
        let at = NOW - 300_000 + (step - 20) * 6_000;
        let step_end = EventKind::StepEnd {
            peak_allocated: Ok(9 * GIB),
            peak_reserved: Ok(10 * GIB),
            duration_ns: Ok(6_000_000_000),
        };
        events.push(event(at, step_end, step, ""));
    }
    events.sort_by_key(|e| e.at_ms);
    training.events = events;
    m.ingest(SourceEvent::Channels(Box::new(builders::channel_batch(
        NOW - 10_000,
        vec![training],
    ))));
    // The uncaught OOM error, without figures of its own, ends the writer.
    let mut died = poll(
        uuid,
        WriterLiveness::Ended {
            crashed: false,
            error: true,
        },
    );
    let mut error = event(
        NOW - 2_000,
        EventKind::OomError {
            requested: Ok(6 * GIB),
        },
        40,
        "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 6.00GiB",
    );
    error.slot = None;
    error.phase = "train_step".into();
    died.events = vec![error];
    m.ingest(SourceEvent::Channels(Box::new(builders::channel_batch(
        NOW - 2_000,
        vec![died],
    ))));
    let mut t = NOW - 9_000;
    while t <= NOW {
        feed(&mut m, t);
        t += INTERVAL_MS;
    }
    m
}

fn detail(m: &Monitor) -> String {
    let mut ui = ui();
    ui.selected = row_pids(m, &ui).iter().position(|p| *p == PID).unwrap();
    ui.mode = Mode::Detail;
    screen(m, &ui, 130, 50)
}

/// Where the true peak was and both OOMs, the fatal one first, each with its figures.
fn assert_pinned(text: &str) {
    assert!(
        text.contains("A.PEAK 12.0 GiB at step 40, backward, 3m ago"),
        "{text}"
    );
    assert!(
        text.contains(
            "2s ago  OOM fatal  step 40  wanted 6.00 GiB, 1.00 GiB free, alloc 9.00 GiB, resv 10.0 GiB  train_step"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "5m ago  OOM caught  step 20  wanted 2.00 GiB, 512 MiB free, alloc 8.00 GiB, resv 9.00 GiB  forward"
        ),
        "{text}"
    );
    let fatal = text.find("OOM fatal").unwrap();
    let charts = text.find("alloc ").unwrap();
    assert!(
        fatal < charts,
        "the OOMs are pinned above the charts:\n{text}"
    );
}

#[test]
fn a_writer_without_a_uuid_keeps_its_figures_and_its_oom_on_its_exited_row() {
    // JAX names no GPU: it is the one NVML listed the pid on (GPU 1), kept after the death.
    let m = crashed(None, 1, NOW - 5_000, Some(START));
    let text = screen(&m, &ui(), 160, 40);
    let row = text
        .lines()
        .find(|l| l.contains("python train.py"))
        .unwrap_or_else(|| panic!("no row:\n{text}"));
    assert!(row.contains("exited"), "{row}");
    for figure in ["9.00 GiB", "10.0 GiB", "12.0 GiB", " 40 "] {
        assert!(row.contains(figure), "{figure} in {row}");
    }
    let text = detail(&m);
    assert!(text.contains("│ ended (error)"), "{text}");
    assert_pinned(&text);
}

#[test]
fn the_section_stays_while_nvml_still_lists_the_dying_process() {
    // The writer ended on its error; NVML and the host still see the same process.
    let m = crashed(
        Some("GPU-00000000-aaaa-bbbb-cccc-dddddddddddd"),
        0,
        NOW,
        Some(START),
    );
    let text = detail(&m);
    assert!(text.contains("│ ended (error)"), "{text}");
    assert_pinned(&text);
    // A process that reused the pid (another start time) shows none of it.
    let m = crashed(
        Some("GPU-00000000-aaaa-bbbb-cccc-dddddddddddd"),
        0,
        NOW,
        Some(START + 1),
    );
    let text = detail(&m);
    assert!(!text.contains("ended (error)"), "{text}");
    assert!(!text.contains("OOM"), "{text}");
}

#[test]
fn a_peak_only_the_frameworks_counter_knows_says_its_time_is_unknown() {
    let mut m = crashed(None, 1, NOW, Some(START));
    let mut counter = poll(None, WriterLiveness::Live);
    counter.path = "/dev/shm/vramscope-1000/8888-5.vsc".into();
    let mut id = (*counter.identity).clone();
    id.file = "8888-5.vsc".into();
    counter.identity = Arc::new(id);
    counter.devices[0].allocated_peak = Ok(14 * GIB);
    m.ingest(SourceEvent::Channels(Box::new(builders::channel_batch(
        NOW,
        vec![counter],
    ))));
    let text = detail(&m);
    assert!(
        text.contains("A.PEAK 14.0 GiB (time unknown: framework counter)"),
        "{text}"
    );
}

#[test]
fn the_table_shows_each_writers_rank_and_sorts_by_it() {
    let m = crashed(None, 1, NOW, Some(START));
    let mut ui = ui();
    let text = screen(&m, &ui, 160, 40);
    let header = text.lines().find(|l| l.contains("COMMAND")).unwrap();
    let at = |name: &str| {
        header
            .find(name)
            .unwrap_or_else(|| panic!("{name}: {header}"))
    };
    assert!(
        at("GPU") < at("RANK") && at("RANK") < at("VRAM"),
        "{header}"
    );
    let row = text
        .lines()
        .find(|l| l.contains("python train.py"))
        .unwrap();
    // Right-aligned under its label.
    assert_eq!(&row[at("RANK")..at("RANK") + 4], "   3", "{header}\n{row}");
    // `s` reaches RANK right after GPU, ascending.
    ui.sort = vramscope::tui::ui_state::SortColumn::Gpu;
    let next = ui.sort.next(|c| ui.shows(c));
    assert_eq!(next, vramscope::tui::ui_state::SortColumn::Rank);
    assert!(!next.default_descending());
    assert_eq!(
        ui.sort
            .next(|c| ui.shows(c) && c != vramscope::tui::ui_state::SortColumn::Rank),
        vramscope::tui::ui_state::SortColumn::Vram
    );
}

#[test]
fn without_a_rank_there_is_no_rank_column() {
    let m = two_gpus();
    let text = screen(&m, &ui(), 160, 40);
    assert!(!text.contains("RANK"), "{text}");
}
