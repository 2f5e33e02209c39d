//! `scripts/gpu-check --simulated`: the check every issue runs on a real GPU, run here with
//! the real torch and only the driver simulated (its CUDA through python/tests/_simulated_cuda.py,
//! its NVML the fake), so that the script itself is tested wherever the suite runs. No line may
//! say FAIL, and every check must have said PASS. Step time is only said here (a CPU model on
//! a shared CPU judges nothing); on a GPU the script judges it.

mod common;

use std::process::Command;

/// The PASS lines the script prints, by their start: what each compares is in the script.
fn expected(tmux: bool) -> Vec<String> {
    let mut lines = vec![
        "serve and record started".to_string(),
        "serve stopped cleanly".to_string(),
        "record stopped cleanly".to_string(),
    ];
    for moment in ["warm", "in-spike", "after-spike", "caught"] {
        for figure in [
            "GPU used (NVML) MiB: nvidia-smi",
            "GPU total (NVML) MiB",
            "job pid",
            "allocated bytes",
            "reserved bytes",
            "peak allocated bytes",
            "optimizer steps",
            "OOMs",
            "outside the allocator",
        ] {
            lines.push(format!("[{moment}] {figure}"));
        }
    }
    lines.extend(
        [
            "the spike inside one step",
            "the job: caught OOM skipped, fatal OOM uncaught",
            "--json after the end: writer ended, both OOMs",
            "/metrics after the end: OOMs",
            "/metrics after the end: peak",
            "report: the caught OOM once",
            "report: the fatal OOM once",
            "report --json: the OOMs",
            "report --json: the peak is the spike's, in its step",
            "report --json: the caught OOM's snapshot and site",
            "report --json: the fatal OOM's snapshot and site",
            "report --json: each OOM under its own snapshot",
            "vramscope sites --at oom: ",
            "vramscope sites --at oom: the fatal request's site",
            "vramscope sites --at oom: the verdict: truly full",
        ]
        .map(String::from),
    );
    if tmux {
        lines.extend(
            [
                "the monitor's screen at the caught OOM: the job's row with its step",
                "the monitor's screen after the fatal OOM: the job's end",
                "the monitor's detail pane (Enter) after the end",
            ]
            .map(String::from),
        );
    }
    lines
}

#[test]
fn the_gpu_check_passes_on_the_simulated_gpu() {
    let Some(python) = common::real_packages_python() else {
        return;
    };
    let tmux = common::tmux::available();
    // The script keeps its files (channels, snapshots, recording, screens) in a folder under
    // TMPDIR: this test's own, removed with it.
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut cmd = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/gpu-check"));
    cmd.arg("--simulated")
        .env("TMPDIR", tmp.path())
        .env("VRAMSCOPE", env!("CARGO_BIN_EXE_vramscope"))
        .env("GPU_CHECK_FAKE_NVML", common::fake_nvml())
        .env("GPU_CHECK_PYTHON", &python);
    if !tmux {
        cmd.arg("--no-tmux");
    }
    let out = cmd.output().expect("run scripts/gpu-check");
    let text = common::stdout(&out);
    let all = format!("{text}\n--- stderr\n{}", common::stderr(&out));
    let fails: Vec<&str> = text.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert!(fails.is_empty(), "{all}");
    assert!(out.status.success(), "{all}");
    assert!(
        text.contains("simulated: nvidia-smi figures are the fake driver's scenario"),
        "{all}"
    );
    for line in expected(tmux) {
        assert!(
            text.lines().any(|l| l
                .strip_prefix("PASS ")
                .is_some_and(|l| l.starts_with(&line))),
            "no PASS line for {line:?}:\n{all}"
        );
    }
    let summary = text.lines().last().unwrap_or_default();
    assert!(summary.starts_with("SUMMARY PASS: "), "{all}");
}
