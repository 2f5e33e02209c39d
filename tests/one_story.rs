//! One run, one story (issue 29 §2): generated runs (a spike between two polls in any step, a
//! leak or none, a caught OOM at any step and a fatal one at the end or none, a writer that
//! names its GPU by UUID or cannot, on either of two GPUs, dumps at either OOM or none and
//! perhaps at a new peak, and perhaps an earlier writer, dead before the recording began,
//! whose ring history the first poll still delivers) are
//! fed as the same events to the live monitor and to a recording read back by
//! `vramscope report --json`, `vramscope export` and replay's `p` and `o`; all must tell the
//! same peak (value and step), the same OOMs (step, outcome, request, GPU, and the snapshot
//! each left, never another's: live `--json` and the report alike), the same largest spike (its size over the level it fell
//! back to, its step and moment), join the writer to the same GPU and its process's row
//! to the same channel (with or without the host's start time of the process), and keep
//! what came before the recording out of it. Reverting a fix shows it: the OOM counted twice (§1.3),
//! the report naming the newest OOM dump under an OOM that left none (§1.1), the earlier
//! writer's history in `export` and under replay's `p` (§1.5), a spike measured from the
//! low before it alone, so a leak under it inflates it (§1.6: the report's spikes and the
//! GPU section's are one tracker), each fail within the default cases.
//!
//! Fields that may legitimately differ, and so are not compared: the live `recent_events`
//! (the report has no ring of recent events), the live `forecast` while the writer runs (the
//! report forecasts from the end of the recording), NVML's live figures of the last sample
//! (the report keeps the peaks), `true_peak_at.at_ms` against the report's `at_ms` (both are
//! kept but the report may take the moment from NVML's sample at a tie).
//!
//! `/metrics` is asked through `serve::exposition`, the families a scrape returns for the
//! live snapshot: the writer's peak, OOM count and step there are `--json`'s, wherever its
//! process's row joins its channel (its families are the row's).
//!
//! `PROPTEST_CASES` sets the number of runs (128 by default, each one recording, one
//! `vramscope report`, one `vramscope export` and one replay: about a second in all).

mod common;
mod recording_fixture;
mod serve_support;

use common::{builders, stderr};
use proptest::prelude::*;
use recording_fixture::{GIB, PID, T0, device_info, device_sample, start_recording};
use serde_json::Value;
use std::sync::Arc;
use vramscope::model::{
    AllocatorDevice, AllocatorEvent, AllocatorPoint, ChannelPoll, DriverInfo, EventKind,
    SourceEvent, WriterIdentity, WriterLiveness,
};
use vramscope::replay::{Command, Replay};
use vramscope::state::{Monitor, StaleAfter};

const MIB: u64 = 1 << 20;
const CONTEXT: u64 = 500 * MIB;
/// The writer that ended before the recording began.
const EARLIER_PID: u32 = 4100;

#[derive(Clone, Debug)]
struct Run {
    steps: u64,
    base: u64,
    leak: u64,
    /// The spike inside each step, above its steady allocation (bytes; 0 for none).
    spikes: Vec<u64>,
    caught_at: Option<u64>,
    fatal: bool,
    named: bool,
    gpu: u32,
    /// The peak of the earlier writer's history, before the recording (bytes).
    earlier: Option<u64>,
    /// Whether the writer dumped a snapshot at the caught OOM and at the fatal one.
    dumps: [bool; 2],
    /// The step in which it dumped a snapshot of a new peak, if any.
    peak_dump: Option<u64>,
    /// Whether the host read the writer's process (its start time); without it, NVML's row
    /// cannot tell the writer's process from a later one of the same pid.
    host_read: bool,
    /// The writer was attached to the running job (the channel's `ATTACHED`).
    attached: bool,
    /// ...and found no step count in it: its steps count from the attach, and every path
    /// must say so beside each step. Never without `attached`.
    since_attach: bool,
}

fn runs() -> impl Strategy<Value = Run> {
    (6u64..24).prop_flat_map(|steps| {
        (
            1u64..8,
            prop_oneof![Just(0u64), 16u64..256],
            proptest::collection::vec(prop_oneof![Just(0u64), 1u64..4096], steps as usize),
            proptest::option::of(1..steps - 1),
            any::<bool>(),
            any::<bool>(),
            0u32..2,
            // Larger than any peak of the run, so a path that lets it in shows it.
            proptest::option::of(100u64..200),
            any::<[bool; 2]>(),
            proptest::option::of(0..steps),
            any::<bool>(),
            // Started with the job; attached, with the job's own step; attached, without.
            prop_oneof![
                Just((false, false)),
                Just((true, false)),
                Just((true, true))
            ],
        )
            .prop_map(
                move |(
                    base,
                    leak,
                    spikes,
                    caught_at,
                    fatal,
                    named,
                    gpu,
                    earlier,
                    dumps,
                    peak_dump,
                    host_read,
                    (attached, since_attach),
                )| Run {
                    steps,
                    base: base * GIB,
                    leak: leak * MIB,
                    spikes: spikes.into_iter().map(|m| m * MIB).collect(),
                    caught_at,
                    fatal,
                    named,
                    gpu,
                    earlier: earlier.map(|g| g * GIB),
                    dumps,
                    peak_dump,
                    host_read,
                    attached,
                    since_attach,
                },
            )
    })
}

impl Run {
    fn allocated(&self, step: u64) -> u64 {
        self.base + step * self.leak
    }

    fn peak(&self, step: u64) -> u64 {
        self.allocated(step) + self.spikes[step as usize]
    }

    /// The run's peak and the first step that reached it.
    fn expected_peak(&self) -> (u64, u64) {
        let mut best = (0, 0);
        for s in 0..self.steps {
            if self.peak(s) > best.0 {
                best = (self.peak(s), s);
            }
        }
        best
    }

    /// The run's events; the writer's channel directory is `channels` (its dumps are
    /// announced there and never written).
    fn events(&self, channels: &std::path::Path) -> Vec<(u64, SourceEvent)> {
        let identity = Arc::new(WriterIdentity {
            exact_peaks: true,
            attached: self.attached,
            ..builders::writer_identity(PID, 1)
        });
        let uuid = self
            .named
            .then(|| recording_fixture::uuid(self.gpu))
            .or(None);
        let mut out = Vec::new();
        let mut ooms = 0;
        let mut high = 0;
        for s in 0..self.steps {
            let at = T0 + s * 1000;
            let reserved = self.allocated(s) + 8 * GIB;
            for gpu in 0..2 {
                let mine = (gpu == self.gpu).then_some(reserved + CONTEXT);
                out.push((at, device_sample(gpu, at, mine.unwrap_or(0) + GIB, mine)));
            }
            // The host reads the writer's process, started when its channel's name says, as
            // a live monitor's host sampler does each tick: its row joins its channel by pid
            // and start time, ended or not.
            if self.host_read {
                out.push((
                    at,
                    SourceEvent::Host(Box::new(builders::host_sample(
                        at,
                        vec![builders::host_process(PID, 1)],
                    ))),
                ));
            }
            high = high.max(self.peak(s));
            let mut events = vec![AllocatorEvent {
                step: Some(s),
                ..builders::allocator_event(
                    at + 900,
                    EventKind::StepEnd {
                        peak_allocated: Ok(self.peak(s)),
                        peak_reserved: Ok(reserved),
                        duration_ns: Ok(1_000_000_000),
                    },
                )
            }];
            if self.caught_at == Some(s) {
                ooms += 1;
                events.insert(
                    0,
                    AllocatorEvent {
                        step: Some(s),
                        ..builders::allocator_event(at + 700, oom_event(40 * GIB, reserved))
                    },
                );
                if self.dumps[0] {
                    events.push(snapshot_event(
                        channels,
                        at + 705,
                        &snapshot_name(s, "oom"),
                        0,
                    ));
                }
            }
            if self.peak_dump == Some(s) {
                events.push(snapshot_event(
                    channels,
                    at + 600,
                    &snapshot_name(s, "peak"),
                    1,
                ));
            }
            let last = s + 1 == self.steps;
            let mut liveness = WriterLiveness::Live;
            if last && self.fatal {
                ooms += 1;
                events.push(AllocatorEvent {
                    step: Some(s),
                    ..builders::allocator_event(at + 950, oom_event(60 * GIB, reserved))
                });
                if self.dumps[1] {
                    events.push(snapshot_event(
                        channels,
                        at + 955,
                        &snapshot_name(s, "oom"),
                        0,
                    ));
                }
                events.push(AllocatorEvent {
                    step: Some(s),
                    label: "torch.OutOfMemoryError: CUDA out of memory.".into(),
                    ..builders::allocator_event(
                        at + 960,
                        EventKind::OomError {
                            requested: Ok(60 * GIB),
                        },
                    )
                });
                events.push(builders::allocator_event(
                    at + 970,
                    EventKind::Exit { error: true },
                ));
                liveness = WriterLiveness::Ended {
                    crashed: false,
                    error: true,
                };
            }
            events.sort_by_key(|e| e.at_ms);
            let device = AllocatorDevice {
                uuid: uuid.clone(),
                allocated: Ok(self.allocated(s)),
                allocated_peak: Ok(high),
                reserved: Ok(reserved),
                reserved_peak: Ok(reserved),
                active: Ok(self.allocated(s)),
                ooms: Ok(ooms),
                step_peak: Ok(self.peak(s)),
                ..builders::allocator_device(0)
            };
            let poll = ChannelPoll {
                identity: Arc::clone(&identity),
                devices: vec![device],
                liveness,
                step: Some(s + 1),
                points: vec![
                    AllocatorPoint {
                        step: Some(s),
                        peak: Some(self.peak(s)),
                        new_high_water: self.peak(s) == high,
                        steps_since_attach: self.since_attach,
                        ..builders::allocator_point(
                            at + 500,
                            self.allocated(s) + self.spikes[s as usize],
                            reserved,
                        )
                    },
                    // Back down: the highest since the spike's sample is the steady level.
                    AllocatorPoint {
                        step: Some(s),
                        steps_since_attach: self.since_attach,
                        ..builders::allocator_point(at + 990, self.allocated(s), reserved)
                    },
                ],
                events,
                ..builders::channel_poll(PID, 1)
            };
            let mut polls = vec![poll];
            if let Some(peak) = self.earlier.filter(|_| s == 0) {
                polls.push(self.earlier_writer(peak, uuid.clone()));
            }
            out.push((
                at + 999,
                SourceEvent::Channels(Box::new(builders::channel_batch(at + 999, polls))),
            ));
        }
        out
    }
}

impl Run {
    /// A writer that ran on the same GPU and ended before the recording began: its ring
    /// still holds its samples, the first poll delivers them, all before the recording.
    fn earlier_writer(&self, peak: u64, uuid: Option<String>) -> ChannelPoll {
        let device = AllocatorDevice {
            uuid,
            allocated: Ok(GIB),
            allocated_peak: Ok(peak),
            ..builders::allocator_device(0)
        };
        let point = |at: u64, allocated: u64| AllocatorPoint {
            step: Some(3),
            new_high_water: allocated == peak,
            steps_since_attach: false,
            ..builders::allocator_point(at, allocated, peak)
        };
        ChannelPoll {
            host_pid: None,
            liveness: WriterLiveness::Ended {
                crashed: false,
                error: false,
            },
            devices: vec![device],
            points: vec![point(T0 - 5000, GIB), point(T0 - 4000, peak)],
            ..builders::channel_poll(EARLIER_PID, 7)
        }
    }
}

/// The file the writer names a dump at step `step` for `moment` (`oom`, `peak`).
fn snapshot_name(step: u64, moment: &str) -> String {
    format!("{PID}-1.snap-{step}-{moment}.pickle")
}

/// A dump announced by the writer: `reason` 0 at an OOM, 1 at a new peak. The file itself
/// is not there: the report names the snapshot an OOM left whether or not it can read it.
fn snapshot_event(
    channels: &std::path::Path,
    at_ms: u64,
    name: &str,
    reason: u64,
) -> AllocatorEvent {
    let event = builders::allocator_event(
        at_ms,
        EventKind::SnapshotWritten {
            path: Ok(channels.join(name).to_string_lossy().into_owned()),
            size: Ok(4096),
            peak: Ok(GIB),
            reason: Ok(reason),
            allocated: Ok(GIB),
            max_entries: Ok(100_000),
            deleted: Ok(0),
        },
    );
    // The record's text is the file's name, as the channel carries it.
    AllocatorEvent {
        label: name.to_string(),
        ..event
    }
}

fn oom_event(requested: u64, reserved: u64) -> EventKind {
    EventKind::Oom {
        requested: Ok(requested),
        device_free: Ok(2 * GIB),
        device_total: Ok(80 * GIB),
        allocated: Err(vramscope::model::Absent::NotSupported),
        reserved: Ok(reserved),
        retries: Ok(1),
    }
}

/// (step, outcome, requested) of each OOM in a `--json` list, oldest first.
fn ooms_of(list: &Value) -> Vec<(Value, Value, Value)> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["step"].clone(),
                o["outcome"].clone(),
                number(&o["requested"]),
            )
        })
        .collect()
}

/// A figure as `--json` writes it: a number, or `{"value": n}` / `null` with a reason.
fn number(v: &Value) -> Value {
    match v {
        Value::Object(o) if o.contains_key("value") => o["value"].clone(),
        other => other.clone(),
    }
}

fn tell(run: &Run) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl.zst");
    let mut rec = start_recording(&path, Some("node-1"));
    let mut monitor = Monitor::new(T0);
    let started = SourceEvent::Started {
        driver: DriverInfo {
            driver_version: Ok("550.54.15".into()),
            cuda_version: Ok(12040),
            nvml_version: Ok("12.550.54.15".into()),
        },
        devices: vec![device_info(0), device_info(1)],
    };
    // The fixture's recorder has recorded a start on GPU 0 alone: record both GPUs again.
    rec.record(T0, &started).unwrap();
    monitor.ingest(started);
    let mut last = T0;
    for (at, event) in run.events(dir.path()) {
        rec.record(at, &event).unwrap();
        monitor.ingest(event);
        last = at;
    }
    rec.finish().unwrap();
    let live =
        vramscope::output::json::to_value(&monitor.snapshot(last, StaleAfter::interval(1000)));
    let metrics = serve_support::samples(&vramscope::serve::exposition(
        monitor.snapshot(last, StaleAfter::interval(1000)),
    ));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vramscope"))
        .args(["report", "--json", path.to_str().unwrap()])
        .output()
        .unwrap();
    prop_assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();

    let writer = live["allocators"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["pid"] == PID)
        .unwrap();
    if std::env::var_os("ONE_STORY_SHOW").is_some() {
        eprintln!("{run:?}\nlive {writer}\nreport {report}");
    }
    let device = &writer["devices"][0];
    let (peak, peak_step) = run.expected_peak();
    prop_assert_eq!(
        &device["gpu_index"],
        &Value::from(run.gpu),
        "live GPU: {}",
        writer
    );
    prop_assert_eq!(&device["true_peak"], &Value::from(peak), "live peak");
    let steps_from = Value::from(if run.since_attach { "attach" } else { "job" });
    prop_assert_eq!(
        &writer["steps_from"],
        &steps_from,
        "live: what steps count from"
    );
    prop_assert_eq!(&device["true_peak_at"]["step"], &Value::from(peak_step));

    let row = report["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == PID && p["gpu_index"] == run.gpu);
    prop_assert!(
        row.is_some(),
        "no report row on GPU {}: {}",
        run.gpu,
        report["processes"]
    );
    let allocator = &row.unwrap()["allocator"];
    // Which process the channel belongs to, one rule on both paths: NVML's row joins a
    // running writer's channel, and an ended one's only when the host's start time says it
    // is that very process (else it could be a dead namesake's).
    let live_row = live["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == PID && p["gpu_index"] == run.gpu)
        .unwrap();
    let joined = !allocator.is_null();
    prop_assert_eq!(
        !live_row["true_peak"].is_null(),
        joined,
        "the row joins its channel live and recorded alike: {} / {}",
        live_row,
        allocator
    );
    prop_assert_eq!(joined, run.host_read || !run.fatal, "the join's rule");
    if joined {
        prop_assert_eq!(
            &allocator["peak_allocated"]["bytes"],
            &device["true_peak"],
            "report peak: {}",
            allocator
        );
        prop_assert_eq!(
            &allocator["peak_allocated"]["step"],
            &device["true_peak_at"]["step"]
        );
        prop_assert_eq!(
            &device["ooms"],
            &allocator["ooms"],
            "the OOM count, live and recorded"
        );
        prop_assert_eq!(
            &allocator["steps_from"],
            &steps_from,
            "report: steps count from"
        );
        prop_assert_eq!(
            &live_row["steps_from"],
            &steps_from,
            "live row: steps count from"
        );
        scraped(run, &metrics, device, writer)?;
    }

    let live_ooms = ooms_of(&writer["ooms"]);
    let recorded_ooms = ooms_of(&report["ooms"]);
    prop_assert_eq!(&live_ooms, &recorded_ooms, "OOMs live and recorded");
    let expected = usize::from(run.caught_at.is_some()) + usize::from(run.fatal);
    prop_assert_eq!(live_ooms.len(), expected, "OOMs: {}", writer["ooms"]);
    // Each OOM with the snapshot it left, and none where it left none (never an earlier
    // OOM's, never a peak's).
    let mut dumped = Vec::new();
    if let Some(s) = run.caught_at {
        dumped.push(run.dumps[0].then(|| snapshot_name(s, "oom")));
    }
    if run.fatal {
        dumped.push(run.dumps[1].then(|| snapshot_name(run.steps - 1, "oom")));
    }
    for (oom, dump) in report["ooms"].as_array().unwrap().iter().zip(&dumped) {
        prop_assert_eq!(&oom["steps_from"], &steps_from, "an OOM's step counts from");
        prop_assert_eq!(&oom["gpu_index"], &Value::from(run.gpu));
        prop_assert_eq!(&oom["pid"], &Value::from(PID));
        let held = oom["held"]["name"].as_str().map(str::to_string);
        prop_assert_eq!(&held, dump, "the snapshot of the OOM: {}", oom["held"]);
    }
    let live_dumps: Vec<Option<String>> = writer["ooms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["snapshot"].as_str().map(str::to_string))
        .collect();
    prop_assert_eq!(&live_dumps, &dumped, "the snapshot of each OOM, live");
    prop_assert_eq!(
        number(&device["ooms"]),
        Value::from(expected),
        "the OOM count: each OOM once, however many told of it"
    );
    spikes_reported(run, &report)?;
    exported(run, &path, device, &live_ooms)?;
    replayed(run, &path, &live_ooms)
}

/// `/metrics` says of the writer's process on its GPU what `--json` says: the true peak, the
/// OOM count (each OOM once), the step.
fn scraped(
    run: &Run,
    metrics: &[serve_support::Line],
    device: &Value,
    writer: &Value,
) -> Result<(), TestCaseError> {
    let pid = PID.to_string();
    let gpu = run.gpu.to_string();
    let of = |family: &str| {
        serve_support::value(metrics, family, &[("pid", &pid), ("gpu", &gpu)])
            .map(|v| Value::from(v as u64))
    };
    prop_assert_eq!(
        of("vramscope_process_allocator_peak_bytes"),
        Some(device["true_peak"].clone()),
        "/metrics peak: {:?}",
        serve_support::find(metrics, "vramscope_process_allocator_peak_bytes", &[])
    );
    prop_assert_eq!(
        of("vramscope_process_allocator_ooms_total"),
        Some(number(&device["ooms"])),
        "/metrics OOM count"
    );
    prop_assert_eq!(
        of("vramscope_process_step"),
        Some(number(&writer["step"])),
        "/metrics step"
    );
    prop_assert_eq!(
        of("vramscope_process_steps_since_attach"),
        Some(Value::from(u64::from(run.since_attach))),
        "/metrics: steps since the attach"
    );
    Ok(())
}

/// The report's largest spike of the writer is the run's largest spike between two polls, in
/// its step: a rise that falls back, measured from the level it fell back to (not the leak
/// under it, not a slow rise, not one timed after it). A spike in the first step has no
/// reading before it to rise from.
fn spikes_reported(run: &Run, report: &Value) -> Result<(), TestCaseError> {
    let of_writer: Vec<&Value> = report["spikes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            s["what"]
                .as_str()
                .is_some_and(|w| w.starts_with(&format!("pid {PID} ")))
        })
        .collect();
    let largest = run.spikes.iter().skip(1).copied().max().unwrap_or(0);
    let top = of_writer.iter().map(|s| s["rise"].as_u64().unwrap()).max();
    if largest == 0 {
        prop_assert!(
            top.is_none_or(|t| t == run.spikes[0]),
            "spikes where the run had none: {:?}",
            of_writer
        );
        return Ok(());
    }
    let top_spike = of_writer
        .iter()
        .find(|s| s["rise"].as_u64() == top)
        .unwrap();
    prop_assert!(
        top == Some(largest) || top == Some(run.spikes[0]),
        "largest spike {largest}: {:?}",
        of_writer
    );
    let step = top_spike["step"].as_u64().unwrap();
    prop_assert_eq!(
        Some(run.spikes[step as usize]),
        top,
        "its step: {}",
        top_spike
    );
    let steps_from = if run.since_attach { "attach" } else { "job" };
    prop_assert_eq!(top_spike["steps_from"].as_str(), Some(steps_from));
    prop_assert_eq!(
        top_spike["at_ms"].as_u64(),
        Some(T0 + step * 1000 + 500),
        "its moment: {}",
        top_spike
    );
    Ok(())
}

/// `vramscope export`: the same peak and OOMs as the live monitor, every allocator row on the
/// writer's GPU and pid, nothing from before the recording.
fn exported(
    run: &Run,
    path: &std::path::Path,
    device: &Value,
    live_ooms: &[(Value, Value, Value)],
) -> Result<(), TestCaseError> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vramscope"))
        .args(["export", path.to_str().unwrap()])
        .output()
        .unwrap();
    prop_assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    let (gpu, pid) = (run.gpu.to_string(), PID.to_string());
    for row in &rows {
        let time: u64 = row[0].parse().unwrap();
        prop_assert!(time >= T0, "a row from before the recording: {:?}", row);
        if row[1] == "allocator" {
            prop_assert!(row[2] == gpu && row[3] == pid, "allocator row {:?}", row);
        }
    }
    let metric = |name: &str| -> Vec<u64> {
        rows.iter()
            .filter(|r| r[1] == "allocator" && r[4] == name)
            .map(|r| r[5].parse().unwrap())
            .collect()
    };
    prop_assert_eq!(
        metric("true_peak"),
        vec![device["true_peak"].as_u64().unwrap()]
    );
    prop_assert_eq!(
        metric("true_peak_step"),
        vec![device["true_peak_at"]["step"].as_u64().unwrap()]
    );
    let exported: Vec<(Value, Value, Value)> = metric("oom_step")
        .into_iter()
        .zip(metric("oom_fatal"))
        .zip(metric("oom_requested"))
        .map(|((step, fatal), requested)| {
            let outcome = if fatal == 1 { "fatal" } else { "caught" };
            (
                Value::from(step),
                Value::from(outcome),
                Value::from(requested),
            )
        })
        .collect();
    prop_assert_eq!(&exported, &live_ooms.to_vec(), "OOMs live and exported");
    // Each step row of a writer counting from its attach is followed by one that says so.
    let step_rows =
        metric("step").len() + metric("oom_step").len() + metric("true_peak_step").len();
    let said = metric("steps_since_attach");
    prop_assert_eq!(said.len(), if run.since_attach { step_rows } else { 0 });
    prop_assert!(
        said.iter().all(|&v| v == 1),
        "steps_since_attach: {:?}",
        said
    );
    Ok(())
}

/// Replay's `p` lands in the step of the run's peak and `o` on each OOM's step in turn,
/// never on the earlier writer's history.
fn replayed(
    run: &Run,
    path: &std::path::Path,
    live_ooms: &[(Value, Value, Value)],
) -> Result<(), TestCaseError> {
    let step_of = |at_ms: u64| (at_ms - T0) / 1000;
    let mut replay = Replay::open(path).unwrap();
    let mut monitor = replay.fresh_monitor();
    let said = replay.command(Command::LargestPeak, &mut monitor);
    prop_assert!(
        replay.now_ms() >= T0,
        "p went before the recording: {:?}",
        said
    );
    prop_assert_eq!(
        step_of(replay.now_ms()),
        run.expected_peak().1,
        "p: {:?}",
        said
    );
    let label = said.unwrap_or_default();
    prop_assert_eq!(
        label.contains(" since attach"),
        run.since_attach,
        "p says what its step counts from: {}",
        label
    );
    let mut replay = Replay::open(path).unwrap();
    let mut monitor = replay.fresh_monitor();
    let mut steps = Vec::new();
    loop {
        let before = replay.now_ms();
        let said = replay.command(Command::NextOom, &mut monitor);
        if replay.now_ms() == before {
            prop_assert!(
                said.as_deref() == Some("no OOM after this moment"),
                "o: {:?}",
                said
            );
            break;
        }
        steps.push(Value::from(step_of(replay.now_ms())));
    }
    let live: Vec<Value> = live_ooms.iter().map(|o| o.0.clone()).collect();
    prop_assert_eq!(steps, live, "o: each OOM in turn, live and replayed");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(128),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn live_and_recorded_tell_one_story(run in runs()) {
        tell(&run)?;
    }
}
