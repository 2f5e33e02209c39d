//! Channel costs: prints figures, asserts nothing about time.
//!
//! 1. The Rust writer: ns per `sample()`, `publish_device()` and `event()` in a tight loop, with
//!    the writer's own clock reading and with caller-supplied timestamps.
//! 2. The reader: 64 live channels, each appending a sample and publishing its device and status
//!    at 100 Hz, polled by one thread at 10 Hz. Prints that thread's CPU time as a share of one
//!    core (CLOCK_THREAD_CPUTIME_ID), the cost per poll, and records accepted and lost.
//!
//! Run with `cargo bench --bench channel` (add `-- SECS` to change the 10 s reader window).

#[path = "../tests/channel_support/mod.rs"]
mod channel_support;

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use vramscope::channel::{
    Channel, DeviceFigures, DeviceIdentity, EventFields, EventKind, Policy, SampleFields, Writer,
    WriterConfig, monotonic_ns, thread_cpu_ns,
};

const CHANNELS: usize = 64;
const WRITE_HZ: u64 = 100;
const POLL_HZ: u64 = 10;

fn writer(dir: &Path) -> Writer {
    Writer::create(WriterConfig {
        sample_period_us: 10_000,
        ..channel_support::config(dir)
    })
    .expect("writer")
}

/// Runs `f` `n` times and returns ns per call.
fn per_call(n: u64, mut f: impl FnMut(u64)) -> f64 {
    for i in 0..n / 10 {
        f(i);
    }
    let t = Instant::now();
    for i in 0..n {
        f(i);
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

fn writer_costs() {
    let d = channel_support::private_dir();
    let mut w = writer(d.path());
    let slot = w.add_device(DeviceIdentity::default()).expect("slot");
    const N: u64 = 5_000_000;
    let sample = |i: u64, t: Option<u64>| SampleFields {
        t_ns: t,
        allocated: Some(black_box(i)),
        reserved: Some(i * 2),
        peak: Some(i + 1),
        active: Some(i),
        step: Some(i / 100),
        ..SampleFields::default()
    };
    let own_clock = per_call(N, |i| w.sample(&sample(i, None)));
    let given_clock = per_call(N, |i| w.sample(&sample(i, Some(i))));
    let figures = |i: u64, t: Option<u64>| DeviceFigures {
        read_at_ns: t,
        allocated: Some(black_box(i)),
        allocated_peak: Some(i),
        reserved: Some(i * 2),
        reserved_peak: Some(i * 2),
        active: Some(i),
        inactive_split: Some(0),
        requested: Some(i),
        alloc_retries: Some(0),
        ooms: Some(0),
        device_allocs: Some(i / 10),
        device_frees: Some(i / 20),
        device_free: Some(1 << 33),
        limit: None,
        interval_peak: Some(i),
        step_peak: Some(i),
    };
    let publish_own = per_call(N, |i| w.publish_device(slot, &figures(i, None)));
    let publish_given = per_call(N, |i| w.publish_device(slot, &figures(i, Some(i))));
    let event = per_call(N / 5, |i| {
        let mut e = EventFields::new(EventKind::Mark);
        e.args[0] = black_box(i);
        e.text = "forward/model.encoder.layers.3";
        w.event(&e);
    });
    let status = per_call(N / 5, |i| {
        w.status(Some(black_box(i)), "forward/model.encoder")
    });
    println!("writer (Rust), ns per call, {N} calls:");
    println!("  sample()          {own_clock:7.1} ns  (timestamp read by the writer)");
    println!("  sample()          {given_clock:7.1} ns  (timestamp given)");
    println!("  publish_device()  {publish_own:7.1} ns  (timestamp read by the writer)");
    println!("  publish_device()  {publish_given:7.1} ns  (timestamp given)");
    println!("  event()           {event:7.1} ns");
    println!("  status()          {status:7.1} ns");
}

fn reader_cost(seconds: u64) {
    let dirs: Vec<_> = (0..CHANNELS)
        .map(|_| channel_support::private_dir())
        .collect();
    let mut writers: Vec<Writer> = dirs.iter().map(|d| writer(d.path())).collect();
    let paths: Vec<_> = writers.iter().map(|w| w.path().to_path_buf()).collect();
    for w in &mut writers {
        w.add_device(DeviceIdentity::default()).expect("slot");
        w.intern("forward");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let stop_writers = Arc::clone(&stop);
    // One thread drives all 64 writers on a 100 Hz deadline schedule.
    let driver = std::thread::spawn(move || {
        let start = Instant::now();
        let mut tick = 0u64;
        let mut appended = 0u64;
        while !stop_writers.load(Ordering::Relaxed) {
            for w in &mut writers {
                w.publish_device(
                    0,
                    &DeviceFigures {
                        allocated: Some(tick),
                        reserved: Some(tick * 2),
                        ..DeviceFigures::default()
                    },
                );
                w.sample(&SampleFields {
                    allocated: Some(tick),
                    reserved: Some(tick * 2),
                    phase: 1,
                    step: Some(tick),
                    ..SampleFields::default()
                });
                w.status(Some(tick), "forward/model.encoder.layers.3");
                appended += 1;
            }
            tick += 1;
            let next = start + Duration::from_micros(tick * 1_000_000 / WRITE_HZ);
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
        }
        appended
    });

    let open_all = || -> (Vec<Channel>, u128) {
        let t = Instant::now();
        let channels = paths
            .iter()
            .map(|p| Channel::open(p, &Policy::current()).expect("open"))
            .collect();
        (channels, t.elapsed().as_micros())
    };
    // The first opening pays for cold caches; the figure printed is the second.
    drop(open_all());
    let (mut channels, open_us) = open_all();
    let (mut accepted, mut lost, mut polls) = (0u64, 0u64, 0u64);
    let cpu0 = thread_cpu_ns();
    let wall0 = monotonic_ns();
    let start = Instant::now();
    let mut round = 0u64;
    while start.elapsed() < Duration::from_secs(seconds) {
        for c in &mut channels {
            let u = c.poll().expect("poll");
            accepted += u.samples.len() as u64;
            lost = lost.max(u.lost_samples);
            polls += 1;
        }
        round += 1;
        let next = start + Duration::from_micros(round * 1_000_000 / POLL_HZ);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    let cpu = thread_cpu_ns() - cpu0;
    let wall = monotonic_ns() - wall0;
    stop.store(true, Ordering::Relaxed);
    let appended = driver.join().expect("driver");
    let share = cpu as f64 / wall as f64 * 100.0;
    println!(
        "reader: {CHANNELS} channels written at {WRITE_HZ} Hz, polled at {POLL_HZ} Hz for {seconds} s:"
    );
    println!("  CPU of the reader thread  {share:.3} % of one core");
    println!(
        "  per poll of one channel   {:.1} µs ({polls} polls)",
        cpu as f64 / polls as f64 / 1000.0
    );
    println!("  opening all {CHANNELS}          {open_us} µs");
    println!("  samples accepted {accepted}, lost {lost} (appended {appended} in all)");
}

fn main() {
    let seconds: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(10);
    writer_costs();
    reader_cost(seconds);
}
