//! A process row joins the channel its own process wrote, by the monitor's rule (pid, start
//! time, liveness), not by pid alone: a pid used again after an instrumented job ended shows
//! none of that job's allocator figures. Written through the real `Recorder`, read through
//! the real `Recording`.

use super::analyse;
use crate::model::writer_fold::test_support::{info, point, poll};
use crate::model::{
    Absent, ChannelBatch, DeviceSample, DriverInfo, Gone, GpuProcess, HostProcess, HostSample,
    MemoryInfo, ProcessKind, SourceEvent,
};
use crate::recording::{Header, Recorder, Recording};

const T0: u64 = 1_700_000_000_000;
const GIB: u64 = 1 << 30;

fn listed(at_ms: u64, pid: u32, used: u64) -> SourceEvent {
    let mut s = DeviceSample::unreadable(0, at_ms, Absent::NotAvailable);
    s.memory = Ok(MemoryInfo {
        total: 80 * GIB,
        used,
        free: 80 * GIB - used,
        reserved: None,
    });
    s.processes = Ok(vec![GpuProcess {
        pid,
        kind: ProcessKind::Compute,
        used_memory: Ok(used),
        sm_util: Err(Absent::NotAvailable),
        mem_util: Err(Absent::NotAvailable),
        enc_util: Err(Absent::NotAvailable),
        dec_util: Err(Absent::NotAvailable),
    }]);
    SourceEvent::Device(Box::new(s))
}

fn host(at_ms: u64, pid: u32, starttime: u64) -> SourceEvent {
    let mut p = HostProcess::unreadable(pid, Some(pid), Absent::NotAvailable, None);
    p.starttime = Some(starttime);
    p.command = Ok(format!("job started at {starttime}"));
    SourceEvent::Host(Box::new(HostSample {
        at_ms,
        load: None,
        memory: Err(Absent::NotAvailable),
        processes: vec![p],
    }))
}

/// pid 7 (start time 9) runs an instrumented job on GPU 0 and ends; then, when `reused`, an
/// uninstrumented process gets pid 7 (start time 500) and holds 5 GiB there.
fn report_of(reused: bool) -> super::Report {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    let header = Header {
        version: 1,
        vramscope_version: "0.1.0".into(),
        started_ms: T0,
        interval_ms: 1_000,
        host: None,
    };
    let rec = Recorder::create(&path, header).unwrap();
    let started = SourceEvent::Started {
        driver: DriverInfo {
            driver_version: Ok("550.54".into()),
            cuda_version: Ok(12040),
            nvml_version: Ok("12.550.54".into()),
        },
        devices: vec![info(0, "GPU-b", "00000000:3B:00.0")],
    };
    let job = poll(vec![point(T0 + 1_000, 3 * GIB, 3 * GIB)], vec![]);
    let channel = job.path.clone();
    let mut events = vec![
        started,
        host(T0 + 1_000, 7, 9),
        listed(T0 + 1_000, 7, 4 * GIB),
        SourceEvent::Channels(Box::new(ChannelBatch {
            at_ms: T0 + 1_000,
            polls: vec![job],
            gone: vec![],
            rejected: vec![],
        })),
        SourceEvent::Channels(Box::new(ChannelBatch {
            at_ms: T0 + 2_000,
            polls: vec![],
            gone: vec![(channel, Gone::Removed)],
            rejected: vec![],
        })),
    ];
    if reused {
        events.push(host(T0 + 3_000, 7, 500));
        events.push(listed(T0 + 3_000, 7, 5 * GIB));
    }
    write_and_analyse(&path, header_events(rec, events))
}

/// The recorder with `events` written, ready to finish.
fn header_events(mut rec: Recorder, events: Vec<SourceEvent>) -> Recorder {
    for event in &events {
        let at = match event {
            SourceEvent::Device(s) => s.at_ms,
            SourceEvent::Host(s) => s.at_ms,
            SourceEvent::Channels(b) => b.at_ms,
            _ => T0,
        };
        rec.record(at, event).unwrap();
    }
    rec
}

fn write_and_analyse(path: &std::path::Path, rec: Recorder) -> super::Report {
    rec.finish().unwrap();
    analyse(Recording::open(path).unwrap())
}

/// A recording written before host readings carried start times: pid 7's instrumented job
/// on GPU 0 ends (its channel removed); when `listed_at_end` NVML still lists pid 7, else its
/// next sample lists nothing.
fn report_without_start_times(listed_at_end: bool) -> super::Report {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.jsonl");
    let header = Header {
        version: 1,
        vramscope_version: "0.1.0".into(),
        started_ms: T0,
        interval_ms: 1_000,
        host: None,
    };
    let rec = Recorder::create(&path, header).unwrap();
    let job = poll(vec![point(T0 + 1_000, 3 * GIB, 3 * GIB)], vec![]);
    let channel = job.path.clone();
    let mut events = vec![
        SourceEvent::Started {
            driver: DriverInfo {
                driver_version: Ok("550.54".into()),
                cuda_version: Ok(12040),
                nvml_version: Ok("12.550.54".into()),
            },
            devices: vec![info(0, "GPU-b", "00000000:3B:00.0")],
        },
        listed(T0 + 1_000, 7, 4 * GIB),
        SourceEvent::Channels(Box::new(ChannelBatch {
            at_ms: T0 + 1_000,
            polls: vec![job],
            gone: vec![],
            rejected: vec![],
        })),
        SourceEvent::Channels(Box::new(ChannelBatch {
            at_ms: T0 + 2_000,
            polls: vec![],
            gone: vec![(channel, Gone::Removed)],
            rejected: vec![],
        })),
    ];
    if listed_at_end {
        events.push(listed(T0 + 3_000, 7, 4 * GIB));
    } else {
        let mut none = DeviceSample::unreadable(0, T0 + 3_000, Absent::NotAvailable);
        none.processes = Ok(vec![]);
        events.push(SourceEvent::Device(Box::new(none)));
    }
    write_and_analyse(&path, header_events(rec, events))
}

#[test]
fn without_start_times_an_exited_job_keeps_its_figures_and_a_listed_pid_shows_none() {
    // The job ended and NVML lists it no more: its row is an exited process's, and joins
    // the ended channel its pid wrote, as the monitor's exited rows do.
    let report = report_without_start_times(false);
    let row = report.processes.iter().find(|p| p.pid == 7).unwrap();
    let allocator = row.allocator.as_ref().expect("the exited job's figures");
    assert_eq!(allocator.peak_allocated.as_ref().unwrap().value, 3 * GIB);
    // NVML still lists pid 7 at the end, and no start time says it is the job's process:
    // no ended channel joins it (it could be a dead namesake's), as under the monitor.
    let report = report_without_start_times(true);
    let row = report.processes.iter().find(|p| p.pid == 7).unwrap();
    assert!(row.allocator.is_none(), "{:?}", row.allocator);
}

#[test]
fn a_pid_used_again_shows_none_of_the_ended_jobs_allocator_figures() {
    let report = report_of(false);
    let row = report.processes.iter().find(|p| p.pid == 7).unwrap();
    let allocator = row
        .allocator
        .as_ref()
        .expect("the job's own row joins its channel");
    assert_eq!(allocator.peak_allocated.as_ref().unwrap().value, 3 * GIB);

    let report = report_of(true);
    let row = report.processes.iter().find(|p| p.pid == 7).unwrap();
    assert_eq!(row.command.as_deref(), Some("job started at 500"));
    assert!(
        row.allocator.is_none(),
        "the second pid 7 showed the first's figures: {:?}",
        row.allocator
    );
}
