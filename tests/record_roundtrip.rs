//! Writing events and reading them back, plain and zstd: every kind of event and every
//! absence reason comes back as it was (never a 0), batches come back as their members,
//! and a monitor fed the recording ends in the state of one fed the live events.

mod common;
mod record_support;

use common::builders;
use record_support::*;
use std::sync::Arc;
use vramscope::model::SourceEvent;
use vramscope::model::{Absent, ChannelBatch, ForeignText, WriterLiveness};
use vramscope::recording::{Recorder, Recording};
use vramscope::state::{Monitor, StaleAfter};

fn debug(events: &[SourceEvent]) -> Vec<String> {
    events.iter().map(|e| format!("{e:#?}")).collect()
}

fn round_trip(name: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    write(&path, &every_kind());
    let recording = Recording::open(&path).expect("open");
    assert_eq!(recording.header(), &header());
    assert_eq!(recording.compressed(), name.ends_with(".zst"));
    let read: Vec<(u64, SourceEvent)> = recording.events().map(|e| e.expect("event")).collect();
    let times: Vec<u64> = read.iter().map(|(t, _)| t - T0).collect();
    // The batch (recorded fifth, at T0 + 4) comes back as its four members.
    assert_eq!(times, [0, 1, 2, 3, 4, 4, 4, 4, 5, 6, 7]);
    let read: Vec<SourceEvent> = read.into_iter().map(|(_, e)| e).collect();
    // Text comes back as it enters the model from any source: cleaned (src/text.rs).
    let mut expected = flatten(every_kind());
    expected.iter_mut().for_each(ForeignText::clean_text);
    for (got, want) in debug(&read).iter().zip(debug(&expected)) {
        assert_eq!(got, &want);
    }
    assert_eq!(read.len(), expected.len());
}

#[test]
fn every_kind_round_trips_plain() {
    round_trip("run.jsonl");
}

#[test]
fn every_kind_round_trips_compressed() {
    round_trip("run.jsonl.zst");
}

#[test]
fn absent_figures_stay_absent_with_their_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.jsonl");
    write(
        &path,
        &[
            SourceEvent::Device(Box::new(lost_device(1, T0))),
            SourceEvent::Device(Box::new(device(0, T0, 0))),
        ],
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains(r#""fan_percent":{"absent":"not_supported"}"#),
        "{text}"
    );
    let read = read_all(&path);
    let SourceEvent::Device(lost) = &read[0].1 else {
        panic!("{:?}", read[0])
    };
    assert_eq!(lost.memory, Err(Absent::GpuLost));
    assert_eq!(lost.processes, Err(Absent::GpuLost));
    assert_eq!(lost.pcie_tx_kbs, Some(Ok(0)), "a real 0 stays a 0");
    let SourceEvent::Device(idle) = &read[1].1 else {
        panic!()
    };
    assert_eq!(idle.memory.as_ref().unwrap().used, 0);
    assert_eq!(idle.fan_percent, Err(Absent::NotSupported));
    assert_eq!(idle.decoder_util, Err(Absent::NotAvailable));
    assert_eq!(idle.pcie_tx_kbs, None, "not sampled is not absent");
    assert_eq!(idle.pcie_rx_kbs, Some(Err(Absent::Timeout)));
}

#[test]
fn a_writer_is_named_once_and_its_polls_share_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ids.jsonl");
    let batches: Vec<SourceEvent> = (0..3)
        .map(|i| {
            SourceEvent::Channels(Box::new(builders::channel_batch(
                T0 + i * 1000,
                vec![poll(4242, T0 + i * 1000, WriterLiveness::Live, 5)],
            )))
        })
        .collect();
    write(&path, &batches);
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.matches("big.yaml").count(), 1, "{text}");
    let read = read_all(&path);
    let ids: Vec<_> = read
        .iter()
        .map(|(_, e)| match e {
            SourceEvent::Channels(b) => Arc::clone(&b.polls[0].identity),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(*ids[0], *identity(4242));
    assert!(Arc::ptr_eq(&ids[0], &ids[2]));
}

#[test]
fn a_full_ring_read_at_once_is_split_and_ingests_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.jsonl.zst");
    let mut big = poll(4242, T0 + 200_000, WriterLiveness::Live, 0);
    big.points = points(0, T0, 20_000);
    big.events = (0..3)
        .flat_map(|i| every_event_kind(T0 + i * 100))
        .collect();
    let batch = builders::channel_batch(
        T0 + 200_000,
        vec![big, poll(9, T0 + 200_000, WriterLiveness::Live, 5)],
    );
    let events = vec![started(), SourceEvent::Channels(Box::new(batch.clone()))];
    write(&path, &events);
    let read = read_all(&path);
    let pieces: Vec<&ChannelBatch> = read
        .iter()
        .filter_map(|(_, e)| match e {
            SourceEvent::Channels(b) => Some(&**b),
            _ => None,
        })
        .collect();
    assert!(pieces.len() >= 3, "split into {} records", pieces.len());
    let points: Vec<_> = pieces
        .iter()
        .flat_map(|b| b.polls.iter())
        .filter(|p| p.path == batch.polls[0].path)
        .flat_map(|p| p.points.iter().copied())
        .collect();
    assert_eq!(points, batch.polls[0].points);
    let (live, replayed) = monitors(events, read);
    assert_eq!(replayed, live);
}

/// Snapshots of a monitor fed `live` and one fed what was read back.
fn monitors(
    live: Vec<SourceEvent>,
    read: Vec<(u64, SourceEvent)>,
) -> (vramscope::model::Snapshot, vramscope::model::Snapshot) {
    let mut a = Monitor::new(T0);
    for e in live {
        a.ingest(e);
    }
    let mut b = Monitor::new(T0);
    for (_, e) in read {
        b.ingest(e);
    }
    let now = T0 + 300_000;
    (
        a.snapshot(now, StaleAfter::NEVER),
        b.snapshot(now, StaleAfter::NEVER),
    )
}

#[test]
fn a_monitor_fed_the_recording_matches_one_fed_live() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl.zst");
    write(&path, &every_kind());
    let (live, replayed) = monitors(every_kind(), read_all(&path));
    assert_eq!(replayed, live);
    assert!(!live.allocators.is_empty() && !live.devices.is_empty());
}

#[test]
fn recording_refuses_to_overwrite_or_follow_a_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("taken.jsonl");
    std::fs::write(&path, "precious").unwrap();
    let err = Recorder::create(&path, header()).err().expect("refused");
    assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "precious");
    let link = dir.path().join("link.jsonl");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    assert!(Recorder::replace(&link, header()).is_err());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "precious");
    let recorder = Recorder::replace(&path, header()).expect("replace");
    recorder.finish().unwrap();
    assert_eq!(read_all(&path).len(), 0);
}

#[test]
fn an_unfinished_recorder_dropped_still_leaves_a_whole_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dropped.jsonl.zst");
    {
        let mut recorder = Recorder::create(&path, header()).unwrap();
        recorder.record(T0, &started()).unwrap();
    }
    assert_eq!(read_all(&path).len(), 1);
}

#[test]
fn events_in_memory_read_like_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("demo.jsonl.zst");
    write(&path, &every_kind());
    let bytes: &'static [u8] = Box::leak(std::fs::read(&path).unwrap().into_boxed_slice());
    let recording = Recording::from_bytes("demo", bytes).expect("from bytes");
    assert!(recording.compressed());
    assert_eq!(recording.events().count(), flatten(every_kind()).len());
}

#[test]
fn events_can_be_read_on_another_thread() {
    fn send<T: Send + 'static>(_: &T) {}
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("send.jsonl.zst");
    write(&path, &every_kind());
    let events = Recording::open(&path).unwrap().events();
    send(&events);
    let count = std::thread::spawn(move || events.count()).join().unwrap();
    assert_eq!(count, flatten(every_kind()).len());
}

#[test]
fn a_record_waits_at_most_the_flush_period_even_when_nothing_follows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("quiet.jsonl.zst");
    let mut recorder = Recorder::create(&path, header()).unwrap();
    recorder.record(T0, &started()).unwrap();
    recorder.flush().unwrap();
    recorder.record(T0 + 1, &started()).unwrap();
    // Just flushed: the second record waits in the buffer.
    recorder.flush_if_due().unwrap();
    assert_eq!(read_all(&path).len(), 1, "read while the recorder is open");
    std::thread::sleep(vramscope::recording::FLUSH_EVERY);
    // Nothing else arrives; the owner's next turn hands it to the file.
    recorder.flush_if_due().unwrap();
    assert_eq!(read_all(&path).len(), 2);
    drop(recorder);
}

#[test]
fn memory_without_a_reserved_figure_comes_back_without_one() {
    // A driver before R510 counts reserved memory in `used`: unknown, recorded as null.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old_driver.jsonl");
    let mut old = device(0, T0, 5 * GIB);
    if let Ok(memory) = old.memory.as_mut() {
        memory.reserved = None;
    }
    write(
        &path,
        &[
            SourceEvent::Device(Box::new(old)),
            SourceEvent::Device(Box::new(device(0, T0 + 1, 5 * GIB))),
        ],
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains(&format!(r#""memory":[{},null,"#, 80 * GIB)),
        "{text}"
    );
    let read = read_all(&path);
    let reserved: Vec<Option<u64>> = read
        .iter()
        .map(|(_, e)| match e {
            SourceEvent::Device(d) => d.memory.as_ref().unwrap().reserved,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(reserved, [None, Some(512 << 20)]);
}
