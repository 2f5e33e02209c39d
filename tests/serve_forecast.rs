//! The OOM forecast as Prometheus gauges: a writer whose step peaks climb 1 GiB a step
//! towards its 80 GiB GPU is given the steps and seconds left; a flat one is given nothing.

mod common;
mod serve_support;

use common::*;
use serve_support::*;
use std::time::Duration;
use vramscope::channel::{EventFields, EventKind, Writer};

/// `CLOCK_MONOTONIC` now, in ns: the clock the channel's timestamps use.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// 40 steps ended one a second until now, each peak `rise` above the last from 9 GiB.
fn steps(writer: &mut Writer, rise: u64) {
    let now = monotonic_ns();
    for i in 0..40u64 {
        let peak = 9 * GIB + i * rise;
        writer.event(&EventFields {
            t_ns: Some(now - (40 - i) * 1_000_000_000),
            slot: Some(0),
            step: Some(i),
            args: [peak, peak + GIB, 1_000_000_000, 0, 0, 0],
            ..EventFields::new(EventKind::StepEnd)
        });
    }
    writer.status(Some(40), "train");
}

fn forecast(rise: u64) -> (Option<f64>, Option<f64>) {
    let work = tempfile::tempdir().unwrap();
    let channels = work.path().join("channels");
    let mut writer = rank_writer(&channels);
    steps(&mut writer, rise);
    let scenario = Scenario::new(&two_gpus(std::process::id(), None));
    let served = Served::start(
        &scenario,
        &["--interval", "250ms"],
        &[("VRAMSCOPE_DIR", &channels)],
    );
    let labels = [("rank", "1")];
    let text = served.scrape_until(Duration::from_secs(20), |text| {
        value(&samples(text), "vramscope_process_step", &labels) == Some(40.0)
    });
    let all = samples(&text);
    let _ = writer.finish(vramscope::channel::Exit::Clean);
    (
        value(
            &all,
            "vramscope_process_allocator_oom_forecast_steps",
            &labels,
        ),
        value(
            &all,
            "vramscope_process_allocator_oom_forecast_seconds",
            &labels,
        ),
    )
}

#[test]
fn a_steady_climb_is_given_the_steps_and_seconds_left() {
    // From 48 GiB at the last step, 1 GiB a step to the GPU's 80 GiB (the writer publishes
    // no reserved figure, so nothing is known to be outside the allocator): 32 steps, a
    // second each.
    let (steps, seconds) = forecast(GIB);
    assert_eq!(steps, Some(32.0));
    assert_eq!(seconds, Some(32.0));
}

#[test]
fn flat_step_peaks_are_given_nothing() {
    assert_eq!(forecast(0), (None, None));
}
