//! The allocator view: what an instrumented process publishes, drawn beside NVML's figures.
//! The monitor is fed the same model events the channel sampler sends, at fixed times.

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
    AllocatorDevice, AllocatorEvent, AllocatorPoint, ChannelBatch, ChannelPoll, EventKind,
    WriterIdentity, WriterLiveness,
};
use vramscope::tui::ui_state::Mode;

fn device(allocated: u64, reserved: u64) -> AllocatorDevice {
    AllocatorDevice {
        // CUDA_VISIBLE_DEVICES=1 made NVML's GPU 0 the program's cuda:0... or any ordinal:
        // the join is by UUID.
        ordinal: 3,
        uuid: Some("GPU-00000000-aaaa-bbbb-cccc-dddddddddddd".into()),
        allocated: Ok(allocated),
        allocated_peak: Ok(allocated),
        reserved: Ok(reserved),
        reserved_peak: Ok(reserved),
        active: Ok(allocated),
        inactive_split: Ok(GIB / 4),
        alloc_retries: Ok(2),
        ooms: Ok(1),
        device_free: Ok(40 * GIB),
        step_peak: Ok(allocated),
        ..builders::allocator_device(0)
    }
}

/// pid 4242 (30 GiB in NVML's eyes) publishes allocated 20 GiB, reserved 26 GiB, samples at
/// 10 Hz over the last minute with a 29 GiB spike that lasted 100 ms, step ends every 5 s and
/// an OOM 15 s ago.
fn instrumented() -> vramscope::state::Monitor {
    let mut m = two_gpus();
    let start = NOW - 60_000;
    let points: Vec<AllocatorPoint> = (0..600u64)
        .map(|i| {
            let at_ms = start + i * 100;
            let spike = i == 300;
            AllocatorPoint {
                peak: Some(if spike { 29 * GIB } else { 20 * GIB }),
                step: Some(100 + i / 50),
                new_high_water: spike,
                steps_since_attach: false,
                ..builders::allocator_point(at_ms, 20 * GIB, 26 * GIB)
            }
        })
        .collect();
    let mut events: Vec<AllocatorEvent> = (0..12u64)
        .map(|i| AllocatorEvent {
            step: Some(100 + i),
            ..builders::allocator_event(
                start + i * 5_000,
                EventKind::StepEnd {
                    peak_allocated: Ok(21 * GIB),
                    peak_reserved: Ok(26 * GIB),
                    duration_ns: Ok(5_000_000_000),
                },
            )
        })
        .collect();
    events.push(AllocatorEvent {
        label: "backward/model.lm_head".into(),
        ..oom_in_backward(NOW - 15_000, 111)
    });
    let poll = live_poll(points, events);
    m.ingest(SourceEvent::Channels(Box::new(ChannelBatch {
        rejected: vec!["666-1.vsc: wrong magic".into()],
        ..builders::channel_batch(NOW, vec![poll])
    })));
    m
}

/// An 8 GiB request refused in the backward pass at `step`, with 512 MiB free.
fn oom_in_backward(at_ms: u64, step: u64) -> AllocatorEvent {
    AllocatorEvent {
        step: Some(step),
        phase: "backward".into(),
        ..builders::allocator_event(
            at_ms,
            EventKind::Oom {
                requested: Ok(8 * GIB),
                device_free: Ok(GIB / 2),
                device_total: Ok(80 * GIB),
                allocated: Ok(20 * GIB),
                reserved: Ok(26 * GIB),
                retries: Ok(2),
            },
        )
    }
}

/// pid 4242's live channel, rank 0 of 8, publishing `points` and `events`.
fn live_poll(points: Vec<AllocatorPoint>, events: Vec<AllocatorEvent>) -> ChannelPoll {
    ChannelPoll {
        identity: Arc::new(WriterIdentity {
            world_size: Some(8),
            job_id: "job-7".into(),
            command: "python train.py --epochs 90".into(),
            allocator_config: "expandable_segments:True".into(),
            ..builders::writer_identity(4242, 99)
        }),
        devices: vec![device(20 * GIB, 26 * GIB)],
        step: Some(111),
        label: "backward/model.lm_head".into(),
        points,
        events,
        ..builders::channel_poll(4242, 99)
    }
}

#[test]
fn the_table_adds_allocator_columns_for_instrumented_processes_only() {
    let m = instrumented();
    let text = screen(&m, &ui(), 160, 40);
    let header = text.lines().find(|l| l.contains("COMMAND")).unwrap();
    for column in ["ALLOC", "RESV", "A.PEAK", "STEP"] {
        assert!(header.contains(column), "{column} in {header}");
    }
    let row = text
        .lines()
        .find(|l| l.contains("python train.py"))
        .unwrap();
    assert!(row.contains("20.0 GiB"), "allocated: {row}");
    assert!(row.contains("26.0 GiB"), "reserved: {row}");
    // The 100 ms spike between two polls is the true peak.
    assert!(row.contains("29.0 GiB"), "true peak: {row}");
    assert!(row.contains("111"), "step: {row}");
    // A process that publishes nothing gets blanks, not a wall of n/a.
    let other = text.lines().find(|l| l.contains("ollama serve")).unwrap();
    assert!(!other.contains("n/a"), "{other}");
    // GPU 0 shows how much of its used memory the allocators hold: 26 of 41.2 GiB.
    assert!(text.contains("63% in allocators"), "{text}");
    assert!(text.contains("channel refused: 666-1.vsc: wrong magic"));
}

#[test]
fn without_instrumented_processes_the_table_is_unchanged() {
    let text = screen(&two_gpus(), &ui(), 160, 40);
    assert!(!text.contains("ALLOC"));
    assert!(!text.contains("in allocators"));
}

#[test]
fn the_detail_pane_splits_nvml_used_and_marks_steps_and_the_oom() {
    let m = instrumented();
    let mut ui = ui();
    let pids = row_pids(&m, &ui);
    ui.selected = pids.iter().position(|p| *p == 4242).unwrap();
    ui.mode = Mode::Detail;
    let text = screen(&m, &ui, 120, 40);
    assert!(
        text.contains("PyTorch torch 2.5.1 │ rank 0/8 │ step 111 │ backward/model.lm_head │ live"),
        "{text}"
    );
    // 30 GiB used = 20 allocated + 6 cache + 4 outside.
    assert!(
        text.contains(
            "█ allocated 20.0 GiB │ ▓ cache 6.00 GiB │ ░ outside 4.00 GiB = 30.0 GiB used (NVML)"
        ),
        "{text}"
    );
    let alloc = text.lines().find(|l| l.contains("│ alloc ")).unwrap();
    assert!(alloc.contains('▲'), "the spike is marked: {alloc}");
    assert!(text.contains("▲ 29.0 GiB 30s ago"), "{text}");
    let ticks = text.lines().find(|l| l.contains("steps")).unwrap();
    assert_eq!(ticks.matches('✖').count(), 1, "{ticks}");
    assert!(ticks.matches('╵').count() >= 10, "{ticks}");
    assert!(
        text.contains(
            "15s ago  OOM caught  step 111  wanted 8.00 GiB, 512 MiB free, alloc 20.0 GiB, resv 26.0 GiB  backward"
        ),
        "{text}"
    );
}

/// The same writer, attached to a job that kept no step count: its steps count from the
/// attach, and every sample says so.
fn attached_from_its_attach() -> vramscope::state::Monitor {
    let mut m = two_gpus();
    let points: Vec<AllocatorPoint> = (0..10u64)
        .map(|i| AllocatorPoint {
            step: Some(83 + i),
            steps_since_attach: true,
            ..builders::allocator_point(NOW - 10_000 + i * 1000, 20 * GIB, 26 * GIB)
        })
        .collect();
    let mut poll = live_poll(points, vec![oom_in_backward(NOW - 500, 92)]);
    poll.step = Some(92);
    poll.identity = Arc::new(WriterIdentity {
        attached: true,
        ..(*poll.identity).clone()
    });
    m.ingest(SourceEvent::Channels(Box::new(builders::channel_batch(
        NOW,
        vec![poll],
    ))));
    m
}

#[test]
fn a_step_counted_from_the_attach_is_said_so_in_the_table_and_the_detail_pane() {
    let m = attached_from_its_attach();
    let text = screen(&m, &ui(), 160, 40);
    let row = text
        .lines()
        .find(|l| l.contains("python train.py"))
        .unwrap();
    assert!(row.contains(" 92+a "), "step since the attach: {row}");
    let mut ui = ui();
    let pids = row_pids(&m, &ui);
    ui.selected = pids.iter().position(|p| *p == 4242).unwrap();
    ui.mode = Mode::Detail;
    let text = screen(&m, &ui, 120, 40);
    assert!(text.contains("│ step 92 since attach │"), "{text}");
    assert!(
        text.contains("  step 92 since attach  wanted 8.00 GiB"),
        "{text}"
    );
    assert!(
        text.contains("A.PEAK 20.0 GiB at step 83 since attach"),
        "{text}"
    );
    // The same writer without the flag shows the job's own step, bare.
    let text = screen(&instrumented(), &ui, 120, 40);
    assert!(!text.contains("since attach"), "{text}");
}

#[test]
fn a_killed_writer_keeps_its_figures_on_its_exited_row() {
    let mut m = instrumented();
    // The job is SIGKILLed: its channel reads as ended, then NVML stops listing the pid.
    let ended = ChannelPoll {
        identity: Arc::new(WriterIdentity {
            rank: None,
            local_rank: None,
            world_size: None,
            command: "python train.py --epochs 90".into(),
            ..builders::writer_identity(4242, 99)
        }),
        liveness: WriterLiveness::Ended {
            crashed: true,
            error: false,
        },
        devices: vec![device(20 * GIB, 26 * GIB)],
        step: Some(111),
        label: "backward/model.lm_head".into(),
        ..builders::channel_poll(4242, 99)
    };
    m.ingest(SourceEvent::Channels(Box::new(builders::channel_batch(
        NOW,
        vec![ended],
    ))));
    let mut s0 = sample(0, NOW, 11 * GIB, 80 * GIB, 0);
    s0.processes = Ok(vec![gpu_process(5151, 8 * GIB, Ok(3))]);
    m.ingest(SourceEvent::Device(Box::new(s0)));

    let mut ui = ui();
    let text = screen(&m, &ui, 160, 40);
    let row = text
        .lines()
        .find(|l| l.contains("python train.py"))
        .unwrap();
    assert!(row.contains("exited"), "{row}");
    assert!(
        row.contains("20.0 GiB") && row.contains("26.0 GiB"),
        "{row}"
    );
    // Nobody lives on GPU 0 with an allocator any more: no share is claimed.
    assert!(!text.contains("in allocators"), "{text}");

    let pids = row_pids(&m, &ui);
    ui.selected = pids.iter().position(|p| *p == 4242).unwrap();
    ui.mode = Mode::Detail;
    let text = screen(&m, &ui, 120, 40);
    assert!(text.contains("│ ended (killed)"), "{text}");
    assert!(
        text.contains("15s ago  OOM caught  step 111"),
        "the OOM that killed it:\n{text}"
    );
}

#[test]
fn zooming_widens_and_narrows_every_charts_time_window() {
    let m = two_gpus();
    let mut ui = ui();
    let plain = screen(&m, &ui, 120, 24);
    // At 120 columns the charts span 109 s, one interval per column, rounded up to 2 minutes.
    assert!(plain.contains("  2m ▅"), "{plain}");
    ui.zoom = 2;
    let wide = screen(&m, &ui, 120, 24);
    assert!(
        wide.contains(" 10m ▅"),
        "four times as long (7m16s), rounded:\n{wide}"
    );
    ui.zoom = -1;
    let narrow = screen(&m, &ui, 120, 24);
    assert!(
        narrow.contains("  1m ▅"),
        "half as long (54s), rounded:\n{narrow}"
    );
}

#[test]
fn a_paused_detail_pane_keeps_the_events_and_charts_of_its_moment() {
    let mut m = instrumented();
    let mut ui = ui();
    let pids = row_pids(&m, &ui);
    ui.selected = pids.iter().position(|p| *p == 4242).unwrap();
    ui.mode = Mode::Detail;
    ui.frozen = Some(Arc::new(snapshot(&m)));
    let before = screen(&m, &ui, 120, 40);
    // After the pause the writer goes on: a 40 GiB spike, a step's end and a second OOM.
    let points = (1..=20u64)
        .map(|i| AllocatorPoint {
            peak: Some(if i == 10 { 40 * GIB } else { 22 * GIB }),
            step: Some(112),
            new_high_water: i == 10,
            steps_since_attach: false,
            ..builders::allocator_point(NOW + i * 100, 22 * GIB, 30 * GIB)
        })
        .collect();
    let step_end = AllocatorEvent {
        step: Some(112),
        label: "after/the.pause".into(),
        ..builders::allocator_event(
            NOW + 1_000,
            EventKind::StepEnd {
                peak_allocated: Ok(22 * GIB),
                peak_reserved: Ok(30 * GIB),
                duration_ns: Ok(5_000_000_000),
            },
        )
    };
    let events = vec![
        step_end,
        AllocatorEvent {
            step: Some(112),
            label: "forward/model.embed".into(),
            phase: "forward".into(),
            ..builders::allocator_event(
                NOW + 1_500,
                EventKind::Oom {
                    requested: Ok(16 * GIB),
                    device_free: Ok(GIB / 4),
                    device_total: Ok(80 * GIB),
                    allocated: Ok(22 * GIB),
                    reserved: Ok(30 * GIB),
                    retries: Ok(3),
                },
            )
        },
    ];
    let mut poll = live_poll(points, events);
    poll.step = Some(112);
    m.ingest(SourceEvent::Channels(Box::new(builders::channel_batch(
        NOW + 2_000,
        vec![poll],
    ))));
    let after = screen(&m, &ui, 120, 40);
    assert!(!after.contains("forward/model.embed"), "{after}");
    assert!(!after.contains("after/the.pause"), "{after}");
    assert!(!after.contains("step 112"), "{after}");
    assert!(!after.contains("40.0 GiB"), "{after}");
    assert!(after.contains("15s ago  OOM caught  step 111"), "{after}");
    assert_eq!(before, after, "the paused detail pane changed");
}

#[test]
fn the_allocator_charts_are_scaled_to_their_own_series_with_the_gpus_total_named() {
    // Allocated climbs from 2 to 8 GiB over the last minute on an 80 GiB GPU: scaled to the
    // whole GPU it was a row of `▁`.
    let mut m = two_gpus();
    let start = NOW - 60_000;
    let points: Vec<AllocatorPoint> = (0..=600u64)
        .map(|i| AllocatorPoint {
            step: Some(100 + i / 50),
            ..builders::allocator_point(start + i * 100, 2 * GIB + i * (6 * GIB / 600), 10 * GIB)
        })
        .collect();
    m.ingest(SourceEvent::Channels(Box::new(builders::channel_batch(
        NOW,
        vec![live_poll(points, Vec::new())],
    ))));
    let mut ui = ui();
    let pids = row_pids(&m, &ui);
    ui.selected = pids.iter().position(|p| *p == 4242).unwrap();
    ui.mode = Mode::Detail;
    let text = screen(&m, &ui, 120, 40);
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains("│ alloc "))
        .unwrap_or_else(|| panic!("an alloc chart:\n{text}"));
    let levels: std::collections::BTreeSet<char> = lines[at]
        .chars()
        .filter(|c| "▁▂▃▄▅▆▇█".contains(*c))
        .collect();
    assert!(
        levels.len() >= 6,
        "the climb spreads over the row's heights, not along its floor: {levels:?}\n{}",
        lines[at]
    );
    let label = lines[at + 1];
    assert!(
        label.contains("of 80.0G GPU") && label.contains("-8.0G"),
        "the label says what the row spans, of the GPU's total: {label}"
    );
    let low = label
        .split(" of 80.0G GPU")
        .next()
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|span| span.split('-').next())
        .unwrap_or_default();
    assert!(
        ["2.0G", "2.1G", "2.2G", "2.3G"].contains(&low),
        "from about the window's lowest reading: {label}"
    );
    // Reserved is flat at 10 GiB: its row keeps the absolute scale and says so.
    let resv = lines
        .iter()
        .position(|l| l.contains("│ resv "))
        .unwrap_or_else(|| panic!("a resv chart:\n{text}"));
    assert!(
        lines[resv + 1].contains("flat at 10.0 GiB") && lines[resv + 1].contains("│ of 80.0G GPU"),
        "{}",
        lines[resv + 1]
    );
}
