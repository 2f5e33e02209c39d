//! The detail pane's "what held the memory": an instrumented process announces a memory
//! snapshot (made by `sites_support/make_snapshot.py` with known sites); the state hands it
//! to the reduction worker (its own thread, as the monitor's loop does), the pane says
//! "reading snapshot ..." meanwhile, then the top site, whether the answer is exact, and at
//! an OOM why the request did not fit; a file that fails says its one line.

mod common;
#[allow(
    dead_code,
    reason = "shared by several test crates, each of which uses a different part"
)]
mod tui_fixtures;

use common::builders;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::mpsc::channel;
use std::time::Duration;
use tui_fixtures::*;
use vramscope::model::SourceEvent;
use vramscope::model::{
    Absent, AllocatorDevice, AllocatorEvent, ChannelPoll, EventKind, WriterIdentity,
};
use vramscope::sources::sites_worker::{SitesDone, SitesWorker};
use vramscope::state::Monitor;
use vramscope::tui::ui_state::Mode;

fn python3() -> bool {
    Command::new("python3").arg("-V").output().is_ok()
}

fn make_snapshot(path: &Path, mode: &str) -> u64 {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sites_support/make_snapshot.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(path)
        .arg(mode)
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

fn device() -> AllocatorDevice {
    AllocatorDevice {
        uuid: Some("GPU-00000000-aaaa-bbbb-cccc-dddddddddddd".into()),
        allocated: Ok(2 * GIB),
        allocated_peak: Ok(6 * GIB),
        reserved: Ok(8 * GIB),
        reserved_peak: Ok(8 * GIB),
        active: Ok(2 * GIB),
        device_free: Ok(40 * GIB),
        step_peak: Ok(6 * GIB),
        ..builders::allocator_device(0)
    }
}

/// The two-GPU screen, with pid 4242 announcing the snapshot at `path` (`reason` 0 OOM, 1
/// peak) whose announced name is `name`.
fn announcing(path: Result<String, Absent>, name: &str, reason: u64) -> Monitor {
    announcing_on("/dev/shm/vramscope-1000/4242-99.vsc", path, name, reason)
}

/// `announcing`, pid 4242's channel being the file at `channel`.
fn announcing_on(channel: &str, path: Result<String, Absent>, name: &str, reason: u64) -> Monitor {
    with_events(channel, vec![snapshot_event(path, name, reason, 0)])
}

/// The announcement of the snapshot `name` at `path`, the writer having deleted `deleted`.
fn snapshot_event(
    path: Result<String, Absent>,
    name: &str,
    reason: u64,
    deleted: u64,
) -> AllocatorEvent {
    AllocatorEvent {
        step: Some(40),
        label: name.into(),
        phase: "forward".into(),
        ..builders::allocator_event(
            NOW - 5_000,
            EventKind::SnapshotWritten {
                path,
                size: Ok(1_315),
                peak: Ok(6 * GIB),
                reason: Ok(reason),
                allocated: Ok(2 * GIB),
                max_entries: Ok(1000),
                deleted: Ok(deleted),
            },
        )
    }
}

/// The two-GPU screen, pid 4242's channel at `channel` having announced `events`.
fn with_events(channel: &str, events: Vec<AllocatorEvent>) -> Monitor {
    let mut m = two_gpus();
    let poll = ChannelPoll {
        path: channel.into(),
        identity: Arc::new(WriterIdentity {
            rank: None,
            local_rank: None,
            world_size: None,
            sites: true,
            ..builders::writer_identity(4242, 99)
        }),
        devices: vec![device()],
        step: Some(40),
        label: "forward".into(),
        events,
        ..builders::channel_poll(4242, 99)
    };
    m.ingest(SourceEvent::Channels(Box::new(builders::channel_batch(
        NOW,
        vec![poll],
    ))));
    m
}

fn detail(m: &Monitor) -> String {
    let mut ui = ui();
    let pids = row_pids(m, &ui);
    ui.selected = pids.iter().position(|p| *p == 4242).unwrap();
    ui.mode = Mode::Detail;
    screen(m, &ui, 200, 50)
}

/// What the monitor's loop does: hand the wanted reductions to the worker thread, and put
/// its answers into the state; `meanwhile` sees the state while the worker reads.
fn reduce_on_the_worker(m: &mut Monitor, meanwhile: impl Fn(&Monitor)) {
    let (tx, rx) = channel::<SitesDone>();
    let worker = SitesWorker::start(tx).unwrap();
    let jobs = m.reductions_wanted();
    assert_eq!(jobs.len(), 1);
    meanwhile(m);
    for job in jobs {
        assert!(worker.submit(job).is_none());
    }
    let done = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    m.sites_done(&done.channel, &done.path, done.sites);
    // Asked once: being read, then read.
    assert!(m.reductions_wanted().is_empty());
}

#[test]
fn the_detail_pane_shows_reading_then_the_top_site_at_the_peak_and_that_it_is_exact() {
    if !python3() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("4242-99.vsc.snap-1-peak.pickle");
    make_snapshot(&file, "peak");
    let mut m = announcing(
        Ok(file.to_string_lossy().into_owned()),
        "4242-99.vsc.snap-1-peak.pickle",
        1,
    );
    reduce_on_the_worker(&mut m, |m| {
        let before = detail(m);
        assert!(
            before.contains("HELD reading snapshot 4242-99.vsc.snap-1-peak.pickle ..."),
            "{before}"
        );
    });
    let text = detail(&m);
    assert!(
        text.contains("HELD held at the peak (exact): 67% proj/model.py:123 attention 4.00 GiB"),
        "{text}"
    );
    assert!(
        text.contains("snapshot at a new peak, 5s ago, step 40"),
        "{text}"
    );
    assert!(!text.contains("reading snapshot"), "{text}");
}

#[test]
fn a_replay_reads_no_snapshot_and_says_so() {
    let m = announcing(
        Ok("/dev/shm/vramscope-1000/4242-99.vsc.snap-1-peak.pickle".into()),
        "4242-99.vsc.snap-1-peak.pickle",
        1,
    );
    let mut ui = ui();
    let pids = row_pids(&m, &ui);
    ui.selected = pids.iter().position(|p| *p == 4242).unwrap();
    ui.mode = Mode::Detail;
    ui.time_cursor = true;
    let text = screen(&m, &ui, 200, 50);
    assert!(
        text.contains("HELD snapshot 4242-99.vsc.snap-1-peak.pickle: not read in a replay"),
        "{text}"
    );
}

#[test]
fn at_an_oom_the_pane_says_what_was_live_and_why_the_request_did_not_fit() {
    if !python3() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("4242-99.vsc.snap-2-oom.pickle");
    make_snapshot(&file, "oom");
    let mut m = announcing(
        Ok(file.to_string_lossy().into_owned()),
        "4242-99.vsc.snap-2-oom.pickle",
        0,
    );
    reduce_on_the_worker(&mut m, |_| {});
    let text = detail(&m);
    assert!(text.contains("HELD held at the OOM"), "{text}");
    // Where the failed request was made (the `oom` entry's first frame outside torch), on
    // a line of its own, then why it did not fit.
    let request = text
        .lines()
        .find(|l| l.contains("at the OOM: the request"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        request
            .trim_end_matches([' ', '│', '|'])
            .ends_with("at the OOM: the request, 5.00 GiB at proj/model.py:200 mlp"),
        "{request:?}"
    );
    assert!(
        text.contains("  512 MiB free on the device, 2.00 GiB allocated of 8.00 GiB reserved"),
        "{text}"
    );
    // On an 80-column terminal the site stays whole and the longer line is cut with the mark.
    let mut ui = ui();
    let pids = row_pids(&m, &ui);
    ui.selected = pids.iter().position(|p| *p == 4242).unwrap();
    ui.mode = Mode::Detail;
    let narrow = screen(&m, &ui, 80, 50);
    assert!(
        narrow.contains("at the OOM: the request, 5.00 GiB at proj/model.py:200 mlp"),
        "{narrow}"
    );
    let fit = narrow
        .lines()
        .find(|l| l.contains("512 MiB free on the device"))
        .unwrap_or_else(|| panic!("{narrow}"));
    let mark = color().glyphs.cut;
    assert!(
        fit.trim_end_matches([' ', '│', '|']).ends_with(mark),
        "{fit:?}"
    );
}

#[test]
fn a_refused_name_or_a_missing_file_is_one_line_and_nothing_is_read() {
    let mut m = announcing(
        Err(Absent::Error(
            "snapshot name refused: \"../../etc/x\" is not a plain file name".into(),
        )),
        "../../etc/x",
        1,
    );
    assert!(m.reductions_wanted().is_empty());
    let text = detail(&m);
    assert!(
        text.contains("HELD snapshot ../../etc/x: snapshot name refused"),
        "{text}"
    );

    let dir = tempfile::tempdir().unwrap();
    let gone = dir.path().join("4242-99.vsc.snap-1-peak.pickle");
    let mut m = announcing(
        Ok(gone.to_string_lossy().into_owned()),
        "4242-99.vsc.snap-1-peak.pickle",
        1,
    );
    reduce_on_the_worker(&mut m, |_| {});
    let text = detail(&m);
    assert!(text.contains("the file no longer exists"), "{text}");

    // Not a pickle at all, and a pickle that would run code when Python loads it.
    for bytes in [&b"not a pickle"[..], &b"cos\nsystem\n(S'echo hi'\ntR."[..]] {
        std::fs::write(&gone, bytes).unwrap();
        let mut m = announcing(
            Ok(gone.to_string_lossy().into_owned()),
            "4242-99.vsc.snap-1-peak.pickle",
            1,
        );
        reduce_on_the_worker(&mut m, |_| {});
        let text = detail(&m);
        let line = text
            .lines()
            .find(|l| l.contains("HELD snapshot 4242-99.vsc.snap-1-peak.pickle: "))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(!line.contains("held at"), "{line}");
    }
}

/// The `m` key's answer on the status line: whole at 80 columns (the hint gives way when
/// both do not fit), and at 40 cut with the theme's mark rather than run off the edge.
#[test]
fn the_m_keys_answer_fits_80_columns_and_is_cut_with_a_mark_narrower() {
    use vramscope::channel::layout::flags;
    use vramscope::channel::{Writer, WriterConfig, WriterKind};
    use vramscope::model::allocator::RowProcess;
    let dir = tempfile::tempdir().unwrap();
    let writer = Writer::create(WriterConfig {
        dir: Some(dir.path().join("channels")),
        flags: flags::SITES,
        ..WriterConfig::from_process(WriterKind::PyTorch)
    })
    .unwrap();
    let channel = writer.path().to_string_lossy().into_owned();
    let m = announcing_on(&channel, Ok("/nowhere/x.pickle".into()), "x.pickle", 1);
    let message = vramscope::tui::snapshot_ask::ask(
        &snapshot(&m),
        4242,
        RowProcess::Listed { starttime: None },
    );
    assert!(
        message.starts_with("asked pid 4242 for a memory snapshot (#1)"),
        "{message}"
    );
    // The longest pid Linux gives, and a count no run reaches, still fit.
    let longest = vramscope::tui::snapshot_ask::asked(4_194_304, 999_999);
    assert!(longest.chars().count() <= 80, "{longest}");
    let bottom = |ui: &vramscope::tui::ui_state::UiState, width: u16| {
        let text = screen(&m, ui, width, 24);
        text.lines().last().unwrap().trim_end().to_string()
    };
    for text in [message.as_str(), longest.as_str()] {
        let mut ui = ui();
        ui.flash = Some(text.to_string());
        assert_eq!(bottom(&ui, 80), text);
    }
    // Beside the hint when both fit.
    let mut ui = ui();
    ui.flash = Some(message.clone());
    let wide = bottom(&ui, 120);
    assert!(
        wide.starts_with(&message) && wide.ends_with("q quit"),
        "{wide}"
    );
    let narrow = bottom(&ui, 40);
    assert_eq!(narrow.chars().count(), 40, "{narrow}");
    assert!(narrow.ends_with('\u{2026}'), "{narrow}");
    let kept: String = message.chars().take(39).collect();
    assert!(narrow.starts_with(&kept), "{narrow}");
}

/// The snapshots the writer deleted to keep its bound are named under what held the memory.
#[test]
fn the_snapshots_the_writer_deleted_are_named_in_the_detail_pane() {
    let name = |seq: u64| format!("4242-99.vsc.snap-{seq}-peak.pickle");
    // Keeping 2: after the fourth dump the first two are gone.
    let events = (1..=4u64)
        .map(|seq| {
            let path = format!("/nowhere/{}", name(seq));
            snapshot_event(Ok(path), &name(seq), 1, seq.saturating_sub(2))
        })
        .collect();
    let m = with_events("/dev/shm/vramscope-1000/4242-99.vsc", events);
    let mut ui = ui();
    let pids = row_pids(&m, &ui);
    ui.selected = pids.iter().position(|p| *p == 4242).unwrap();
    ui.mode = Mode::Detail;
    let text = screen(&m, &ui, 200, 80);
    assert!(
        text.contains("deleted by the writer (keeps its newest few): snap-1-peak, snap-2-peak "),
        "{text}"
    );
    assert!(!text.contains("snap-3-peak,"), "{text}");
}
