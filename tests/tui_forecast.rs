//! The forecast on the monitor's status line: a writer whose step peaks climb steadily
//! towards its GPU's memory is named there with the steps and time left; a flat one is not.
//! A running writer the table cannot show is named there too, with why.

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
    Absent, AllocatorDevice, AllocatorEvent, ChannelPoll, EventKind, WriterIdentity, WriterLiveness,
};
use vramscope::tui::ui_state::Mode;

const MIB: u64 = 1024 * 1024;

fn device() -> AllocatorDevice {
    AllocatorDevice {
        uuid: Some("GPU-00000000-aaaa-bbbb-cccc-dddddddddddd".into()),
        allocated: Ok(20 * GIB),
        allocated_peak: Err(Absent::NotSupported),
        reserved: Ok(26 * GIB),
        reserved_peak: Err(Absent::NotSupported),
        active: Err(Absent::NotSupported),
        inactive_split: Err(Absent::NotSupported),
        alloc_retries: Err(Absent::NotSupported),
        device_free: Err(Absent::NotSupported),
        interval_peak: Err(Absent::NotSupported),
        step_peak: Err(Absent::NotSupported),
        ..builders::allocator_device(0)
    }
}

/// pid 4242 on GPU 0 ended 60 steps, one a second, each peak `rise` above the last.
fn stepping(rise: u64) -> vramscope::state::Monitor {
    let mut m = two_gpus();
    let events = (0..60u64)
        .map(|i| AllocatorEvent {
            step: Some(i),
            ..builders::allocator_event(
                NOW - 60_000 + i * 1_000,
                EventKind::StepEnd {
                    peak_allocated: Ok(9 * GIB + i * rise),
                    peak_reserved: Ok(10 * GIB + i * rise),
                    duration_ns: Ok(1_000_000_000),
                },
            )
        })
        .collect();
    let poll = ChannelPoll {
        events,
        ..channel_poll()
    };
    m.ingest(SourceEvent::Channels(Box::new(builders::channel_batch(
        NOW,
        vec![poll],
    ))));
    m
}

/// pid 4242's channel, live, at step 60, with no samples or events.
fn channel_poll() -> ChannelPoll {
    ChannelPoll {
        identity: Arc::new(WriterIdentity {
            world_size: Some(8),
            exact_peaks: true,
            ..builders::writer_identity(4242, 99)
        }),
        devices: vec![device()],
        step: Some(60),
        ..builders::channel_poll(4242, 99)
    }
}

#[test]
fn a_steady_climb_towards_the_gpus_memory_is_on_the_status_line_and_in_the_detail_pane() {
    // A quarter GiB a step, 23.75 GiB at the last one. GPU 0 has 38.8 GiB free (80 GiB less
    // the 41.2 NVML counts used: this process's 30, pid 5151's 8, the rest outside any listed
    // process) and the allocator already holds 26 GiB it can hand out again, so its peak can
    // reach 64.8 GiB: 164.2 steps, so the 165th fails, shown as about 170 (two figures), a
    // second each. The device total less this process's own 4 GiB outside the allocator
    // (76 GiB, 209 steps) would forget pid 5151 and the rest.
    let m = stepping(GIB / 4);
    let text = screen(&m, &ui(), 160, 40);
    let status = text.lines().last().unwrap();
    assert!(
        status.contains("pid 4242 GPU 0: OOM in about 170 steps (3 min)"),
        "{status}"
    );
    let mut ui = ui();
    let pids = row_pids(&m, &ui);
    ui.selected = pids.iter().position(|p| *p == 4242).unwrap();
    ui.mode = Mode::Detail;
    let text = screen(&m, &ui, 160, 40);
    let peak = text
        .lines()
        .find(|l| l.contains("A.PEAK") && !l.contains("COMMAND"))
        .unwrap();
    assert!(peak.contains("OOM in about 170 steps (3 min)"), "{peak}");
}

#[test]
fn json_gives_the_forecast_the_screen_gives() {
    // The same 165 steps as the screen: NVML's free memory beside the writer's slot, not the
    // writer's own room (the whole 80 GiB: 225 steps).
    let m = stepping(GIB / 4);
    let doc = vramscope::output::json::to_value(&snapshot(&m));
    let writer = &doc["allocators"][0];
    let forecast = &writer["devices"][0]["forecast"];
    assert_eq!(forecast["kind"], "oom_in", "{forecast}");
    assert_eq!(forecast["steps"], 165, "{forecast}");
    assert_eq!(
        writer["devices"][0]["forecast_text"],
        "OOM in about 170 steps (3 min)"
    );
}

#[test]
fn an_ended_process_is_given_no_oom_to_come() {
    let mut m = stepping(GIB / 4);
    let mut last = ChannelPoll {
        liveness: WriterLiveness::Ended {
            crashed: false,
            error: true,
        },
        ..channel_poll()
    };
    last.step = Some(60);
    m.ingest(SourceEvent::Channels(Box::new(builders::channel_batch(
        NOW,
        vec![last],
    ))));
    let text = screen(&m, &ui(), 160, 40);
    assert!(!text.contains("OOM in about"), "{text}");
    let doc = vramscope::output::json::to_value(&snapshot(&m));
    // What its step peaks did stays said; no OOM is to come.
    let forecast = &doc["allocators"][0]["devices"][0]["forecast"];
    assert_eq!(forecast["kind"], "leak", "{forecast}");
    assert_eq!(
        doc["allocators"][0]["devices"][0]["forecast_text"],
        "step peaks rising 256 MiB/step"
    );
}

#[test]
fn a_running_writer_no_gpu_lists_is_named_on_the_status_line_not_all_readable() {
    // `vramscope run` of a job NVML lists on no GPU (its pid, 7777, is in no list).
    let mut m = two_gpus();
    let mut poll = channel_poll();
    poll.host_pid = Some(7777);
    poll.path = "/dev/shm/vramscope-1000/7777-99.vsc".into();
    m.ingest(SourceEvent::Channels(Box::new(builders::channel_batch(
        NOW,
        vec![poll],
    ))));
    let text = screen(&m, &ui(), 160, 40);
    let status = text.lines().last().unwrap();
    assert!(
        status.contains("instrumented pid 4242 not in the table:"),
        "{status}"
    );
    assert!(!status.contains("figures readable"), "{status}");
}

#[test]
fn flat_step_peaks_foresee_nothing() {
    let text = screen(&stepping(0), &ui(), 160, 40);
    assert!(!text.contains("OOM in about"), "{text}");
    // A slow leak with the ceiling far away is no alarm either.
    let text = screen(&stepping(MIB), &ui(), 160, 40);
    assert!(!text.contains("OOM in about"), "{text}");
}
