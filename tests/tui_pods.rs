//! The process table's POD column drawn on ratatui's `TestBackend`: as wide as the longest
//! `namespace/pod:container` needs, narrowed before a more important column goes, blank for
//! a process in no pod, a deleted pod by its uid; the filter and the sort by pod; the detail
//! pane's pod lines.

mod common;
#[allow(
    dead_code,
    reason = "shared by several test crates, each of which uses a different part"
)]
mod tui_fixtures;

use common::builders;
use tui_fixtures::*;
use vramscope::model::SourceEvent;
use vramscope::model::{Absent, PodInfo};
use vramscope::state::Monitor;
use vramscope::tui::ui_state::{Mode, SortColumn};

const UID: &str = "8e7f6a5b-4c3d-2e1f-0a9b-8c7d6e5f4a3b";
const GONE_UID: &str = "99999999-aaaa-4bbb-8ccc-dddddddddddd";

fn named() -> PodInfo {
    PodInfo {
        uid: UID.into(),
        qos: Some("burstable".into()),
        container_id: Some("ab".repeat(32)),
        namespace: Ok("ml-team".into()),
        name: Ok("trainer-0".into()),
        container: Ok("trainer".into()),
    }
}

fn deleted() -> PodInfo {
    let why = || {
        Err(Absent::Error(
            "pod deleted: no /var/log/pods entry for its uid".into(),
        ))
    };
    PodInfo {
        uid: GONE_UID.into(),
        qos: Some("guaranteed".into()),
        container_id: None,
        namespace: why(),
        name: why(),
        container: why(),
    }
}

/// One GPU: 4242 in a named pod, 5151 in a deleted one, 6000 in none.
fn pods() -> Monitor {
    let mut m = Monitor::new(T0);
    m.ingest(SourceEvent::Started {
        driver: driver(),
        devices: vec![info(0, "NVIDIA H100 80GB HBM3", 80 * GIB)],
    });
    let mut t = NOW - 10_000;
    while t <= NOW {
        let mut s = sample(0, t, 40 * GIB, 80 * GIB, 60);
        s.processes = Ok(vec![
            gpu_process(4242, 30 * GIB, Ok(80)),
            gpu_process(5151, 6 * GIB, Ok(10)),
            gpu_process(6000, 2 * GIB, Ok(1)),
        ]);
        m.ingest(SourceEvent::Device(Box::new(s)));
        let hosts = vec![
            vramscope::model::HostProcess {
                pod: Some(named()),
                ..host_process(4242, "root", "python train.py", 12 * GIB, 100.0)
            },
            vramscope::model::HostProcess {
                pod: Some(deleted()),
                ..host_process(5151, "root", "python serve.py", 3 * GIB, 5.0)
            },
            host_process(6000, "carol", "jupyter-kernel", GIB, 0.0),
        ];
        m.ingest(SourceEvent::Host(Box::new(host_sample(t, hosts))));
        t += INTERVAL_MS;
    }
    m
}

fn header(text: &str) -> String {
    text.lines()
        .find(|l| l.trim_start().starts_with("PID"))
        .unwrap_or_default()
        .to_string()
}

fn row(text: &str, pid: u32) -> String {
    text.lines()
        .find(|l| l.trim_start().starts_with(&pid.to_string()))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_wide_table_shows_namespace_pod_and_container() {
    let m = pods();
    let text = screen(&m, &ui(), 160, 30);
    assert!(header(&text).contains("POD"), "{text}");
    assert!(
        row(&text, 4242).contains("ml-team/trainer-0:trainer "),
        "{text}"
    );
    assert!(
        row(&text, 5151).contains(&format!("pod {GONE_UID}")),
        "{text}"
    );
    let host = row(&text, 6000);
    assert!(!host.contains("pod") && !host.contains('/'), "{host}");
    assert!(
        row(&text, 4242).contains("root"),
        "USER still fits:\n{text}"
    );
}

#[test]
fn a_narrow_table_narrows_pod_before_it_loses_peak() {
    let m = pods();
    let text = screen(&m, &ui(), 80, 24);
    insta::assert_snapshot!("pods_80x24", text);
    let head = header(&text);
    assert!(head.contains("POD") && head.contains("PEAK"), "{text}");
    assert!(!head.contains("USER"), "USER went before POD:\n{text}");
    assert!(row(&text, 4242).contains("ml-team/trainer…"), "{text}");
}

#[test]
fn no_pod_no_column() {
    let text = screen(&two_gpus(), &ui(), 160, 30);
    assert!(!header(&text).contains("POD"), "{text}");
    // Not chosen: gone even with pods.
    let mut chosen = ui();
    chosen.columns = vramscope::tui::columns::parse("user,peak").expect("columns");
    let text = screen(&pods(), &chosen, 160, 30);
    assert!(!header(&text).contains("POD"), "{text}");
}

#[test]
fn the_filter_and_the_sort_know_pods() {
    let m = pods();
    let mut ui = ui();
    for (filter, pids) in [
        ("ML-TEAM", vec![4242]),
        ("trainer-0", vec![4242]),
        ("trainer-0:trainer", vec![4242]),
        ("TRAINER", vec![4242]),
        ("ml-team/trainer", vec![4242]),
        ("99999999-aaaa", vec![5151]),
        ("pod deleted", vec![]),
    ] {
        ui.filter = filter.into();
        assert_eq!(row_pids(&m, &ui), pids, "filter {filter}");
    }
    ui.filter.clear();
    ui.sort = SortColumn::Pod;
    ui.sort_descending = false;
    assert_eq!(
        row_pids(&m, &ui),
        vec![4242, 5151, 6000],
        "named, unnamed, none"
    );
    ui.sort_descending = true;
    assert_eq!(
        row_pids(&m, &ui),
        vec![5151, 4242, 6000],
        "a process in no pod stays last"
    );
}

#[test]
fn the_detail_pane_names_the_pod() {
    let m = pods();
    let mut ui = ui();
    ui.mode = Mode::Detail;
    let text = screen(&m, &ui, 100, 30);
    assert!(
        text.contains("pod ml-team/trainer-0  container trainer"),
        "{text}"
    );
    assert!(
        text.contains(&format!("pod uid {UID}  qos burstable")),
        "{text}"
    );
    ui.selected = 1;
    let text = screen(&m, &ui, 100, 30);
    assert!(
        text.contains("pod n/a (pod deleted: no /var/log/pods entry for its uid)"),
        "{text}"
    );
    assert!(
        text.contains(&format!("pod uid {GONE_UID}  qos guaranteed")),
        "{text}"
    );
}

/// `pods()` with 4242 instrumented: the allocator columns (ALLOC, RESV, A.PEAK, STEP) join.
fn pods_instrumented() -> Monitor {
    use std::sync::Arc;
    use vramscope::model::{AllocatorDevice, ChannelPoll, WriterIdentity};
    let mut m = pods();
    let device = AllocatorDevice {
        uuid: Some("GPU-00000000-aaaa-bbbb-cccc-dddddddddddd".into()),
        allocated: Ok(20 * GIB),
        allocated_peak: Ok(20 * GIB),
        reserved: Ok(26 * GIB),
        reserved_peak: Ok(26 * GIB),
        active: Ok(20 * GIB),
        device_free: Ok(40 * GIB),
        step_peak: Ok(20 * GIB),
        ..builders::allocator_device(0)
    };
    let poll = ChannelPoll {
        path: "/dev/shm/vramscope-0/4242-99.vsc".into(),
        identity: Arc::new(WriterIdentity {
            rank: None,
            local_rank: None,
            world_size: None,
            ..builders::writer_identity(4242, 99)
        }),
        devices: vec![device],
        step: Some(111),
        ..builders::channel_poll(4242, 99)
    };
    m.ingest(SourceEvent::Channels(Box::new(builders::channel_batch(
        NOW,
        vec![poll],
    ))));
    m
}

#[test]
fn pod_outlasts_step_when_a_process_is_instrumented() {
    let m = pods_instrumented();
    let wide = header(&screen(&m, &ui(), 240, 30));
    assert!(wide.contains("POD") && wide.contains("STEP"), "{wide}");
    let mut narrowed = false;
    for width in 80..240 {
        let head = header(&screen(&m, &ui(), width, 30));
        if head.contains("STEP") {
            assert!(
                head.contains("POD"),
                "POD went before STEP at {width}: {head}"
            );
        }
        narrowed |= head.contains("POD") && !head.contains("STEP");
    }
    assert!(narrowed, "some width keeps POD without STEP");
}
