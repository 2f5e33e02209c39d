//! The zero-code hunt on the real torch: `vramscope run --sites` of a training job that has
//! no line of vramscope in it (python/tests/hunt_job.py: the real torch and its real
//! optimizer, the driver simulated), with `vramscope record` beside it. The job leaks 16 MiB
//! a step, spikes 5 GiB inside every backward, has a caught 7 GiB OOM at batch 60 that
//! `expandable_segments` would have saved and a fatal 10 GiB one at batch 89 that it would
//! not have. The report, the snapshots' answers and the live `--json` must tell one story.

mod common;

use common::{GIB, MIB, Scenario, real_packages_python, stderr, stdout};
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const JOB: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/python/tests/hunt_job.py");

/// `vramscope record` of the scenario, every 200 ms, until `stop` sends it SIGINT.
fn record(scenario: &Scenario, channels: &Path, file: &Path) -> Child {
    let child = scenario
        .command()
        .args(["record", "--interval", "0.2", "-o"])
        .arg(file)
        .env("VRAMSCOPE_DIR", channels)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !file.exists() {
        assert!(Instant::now() < deadline, "the recorder never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

fn stop(mut recorder: Child) {
    // SAFETY: the pid is our own live child's.
    unsafe { libc::kill(recorder.id() as i32, libc::SIGINT) };
    assert!(recorder.wait().unwrap().success());
}

/// The lines of `text` from the one starting with `from` to the next that starts at `indent`
/// or less.
fn section<'a>(text: &'a str, from: &str) -> Vec<&'a str> {
    let mut lines = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with(from));
    let Some(first) = lines.next() else {
        return vec![];
    };
    let indent = first.len() - first.trim_start().len();
    std::iter::once(first)
        .chain(lines.take_while(|l| l.len() - l.trim_start().len() > indent))
        .collect()
}

#[test]
fn the_zero_code_run_on_the_real_torch_tells_one_story_in_report_sites_and_json() {
    let Some(python) = real_packages_python() else {
        return;
    };
    let scenario = Scenario::new(&json!({ "devices": [] }));
    let idle = std::process::Command::new(&python)
        .args([JOB, "idle"])
        .arg(&scenario.path)
        .output()
        .unwrap();
    assert!(idle.status.success(), "{}", stderr(&idle));
    let channels = scenario.dir().join("channels");
    // Plain, so that the test can see what has been recorded while it records.
    let file = scenario.dir().join("hunt.jsonl");
    let recorder = record(&scenario, &channels, &file);
    let job = scenario
        .command()
        .env("VRAMSCOPE_DIR", &channels)
        .args(["run", "--sites", "--no-monitor", "--"])
        .args([python.as_str(), JOB, "0.05"])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    // The fatal OOM is the job's own uncaught error.
    assert_eq!(job.status.code(), Some(1), "{}", stderr(&job));
    assert!(stdout(&job).contains("batch 60 skipped: CUDA out of memory"));
    assert!(
        stderr(&job)
            .contains("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 10.00 GiB"),
        "{}",
        stderr(&job)
    );
    // Stopped only once the recording holds the writer's end (its poll of the ended
    // channel, flushed within 500 ms of the next record), however slow the machine.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&file)
        .unwrap_or_default()
        .contains(r#""liveness":{"state":"ended""#)
    {
        assert!(
            Instant::now() < deadline,
            "the recording never saw the job end"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    stop(recorder);

    let out = scenario.run(&["report", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);

    // Each OOM once, with the optimizer's step (one behind the batch after the skipped one),
    // and an explanation whose verdict the snapshot's answer repeats.
    let caught = section(&text, "20");
    assert!(caught[0].contains("(caught): asked for 7.00 GiB, 4.08 GiB free, allocated 5.94 GiB, reserved 10.9 GiB, step 60"), "{text}");
    assert!(
        caught
            .iter()
            .any(|l| l.contains("with expandable_segments:True it would likely have fit")),
        "{text}"
    );
    let fatal: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("(fatal): asked for"))
        .take(5)
        .collect();
    assert!(fatal[0].contains("(fatal): asked for 10.0 GiB, 3.64 GiB free, allocated 6.38 GiB, reserved 11.4 GiB, step 88"), "{text}");
    // NVML's figure is the one read nearest the OOM (the job's 1 GiB context, give or take
    // the leak of a step NVML's read may predate): known, not n/a.
    assert!(
        fatal.iter().any(|l| l.contains("outside the allocator: ")
            && l.contains("(NVML used ")
            && !l.contains("outside the allocator: n/a")),
        "{text}"
    );
    assert!(
        fatal.iter().any(|l| l.contains("expandable_segments:True would not have saved it: with all of the cache reclaimed the request was still 1.38 GiB short")),
        "{text}"
    );
    // The snapshots dumped at each OOM say why in the same words of the same verdict: the
    // caught one was fragmentation of the cache and the free memory together, the fatal one
    // was not.
    let whys: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("why it did not fit"))
        .collect();
    assert_eq!(whys.len(), 2, "{text}");
    assert!(
        whys[0].contains("fragmentation: 4.98 GiB free in the cache and 4.08 GiB on the device held the 7.00 GiB asked for together, but not as one block"),
        "{}",
        whys[0]
    );
    assert!(
        whys[1].contains("truly full: 10.0 GiB asked for, 3.64 GiB free on the device and 4.98 GiB free in the cache, 1.38 GiB short even together"),
        "{}",
        whys[1]
    );
    // Each OOM under its own snapshot, dumped at it: the fatal one's is not the caught one's.
    let dumps: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("What held the memory"))
        .filter(|l| l.contains("-oom.pickle"))
        .collect();
    assert_eq!(dumps.len(), 2, "{text}");
    for (line, step) in dumps.iter().zip([60, 88]) {
        assert!(
            line.contains("-oom.pickle (at the OOM, ")
                && line.ends_with(&format!(", step {step})")),
            "{text}"
        );
    }
    // The leak, said as what the step peaks did: the job has ended, no OOM is to come.
    let hints = section(&text, "Hints");
    let leak: Vec<&&str> = hints
        .iter()
        .filter(|l| l.contains("memory leaks"))
        .collect();
    assert_eq!(leak.len(), 1, "{text}");
    assert!(
        leak[0].contains("each step's peak 16.0 MiB above the one before (its last")
            && leak[0].contains("steps; it has ended)"),
        "{}",
        leak[0]
    );
    assert!(!text.contains("OOM in about"), "{text}");
    // No hint recommends what the fatal OOM's verdict rules out.
    assert!(
        !hints.iter().any(|l| l.contains("expandable_segments")),
        "{text}"
    );

    // The live monitor, on the channel the job left: the same peak, OOMs and leak.
    let live = scenario.json_reading(&channels);
    let device = &live["allocators"][0]["devices"][0];
    let report: Value = serde_json::from_slice(
        &scenario
            .run(&["report", file.to_str().unwrap(), "--json"])
            .stdout,
    )
    .unwrap();
    let allocator = &report["processes"][0]["allocator"];
    assert_eq!(device["true_peak"], allocator["peak_allocated"]["bytes"]);
    assert_eq!(
        device["true_peak"],
        json!(2 * GIB + 3 * GIB + 5 * GIB + 87 * 16 * MIB)
    );
    assert_eq!(device["ooms"], json!(2));
    assert_eq!(report["ooms"].as_array().unwrap().len(), 2);
    assert_eq!(device["forecast"]["kind"], json!("leak"), "{device}");
    assert_eq!(
        device["forecast"]["bytes_per_step"],
        json!(16.0 * MIB as f64)
    );
    assert_eq!(
        allocator["forecast"]["bytes_per_step"],
        device["forecast"]["bytes_per_step"]
    );
}
