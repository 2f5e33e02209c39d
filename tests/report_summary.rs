//! `vramscope report` on recordings: one written event by event with known figures (so every
//! peak, time, step and phase is known exactly), and one made by `vramscope record` against a
//! fake-NVML scenario with a spike at a known time.

mod common;

use common::{GIB, Scenario, h100, stderr, stdout};
use serde_json::{Value, json};
use std::time::Duration;

mod recording_fixture;
use recording_fixture::{T0, write_recording};

fn report(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_vramscope"))
        .arg("report")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn the_summary_names_every_peak_with_its_time_step_and_phase() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl.zst");
    write_recording(&path);
    let out = report(&[path.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let gpu = &doc["gpus"][0];
    assert_eq!(gpu["peak_used"]["bytes"], json!(75 * GIB));
    assert_eq!(gpu["peak_used"]["at_ms"], json!(T0 + 30_000));
    assert_eq!(gpu["headroom"], json!(5 * GIB));
    let p = &doc["processes"][0];
    assert_eq!(
        (p["pid"].clone(), p["gpu_index"].clone()),
        (json!(4242), json!(0))
    );
    assert_eq!(p["command"], json!("python train.py"));
    assert_eq!(p["peak_nvml_used"]["bytes"], json!(30 * GIB));
    let a = &p["allocator"];
    // The 100 ms spike between two polls is the allocated peak, with its step and phase.
    assert_eq!(a["peak_allocated"]["bytes"], json!(29 * GIB));
    assert_eq!(a["peak_allocated"]["at_ms"], json!(T0 + 29_900));
    assert_eq!(a["peak_allocated"]["step"], json!(7));
    assert_eq!(a["peak_allocated"]["phase"], json!("backward/lm_head"));
    assert_eq!(a["peak_reserved"]["bytes"], json!(24 * GIB));
    assert_eq!(a["alloc_retries"], json!(3));
    assert_eq!(a["inactive_split"], json!(6 * GIB));
    let oom = &doc["ooms"][0];
    assert_eq!(oom["at_ms"], json!(T0 + 45_500));
    assert_eq!(oom["requested"], json!(8 * GIB));
    assert_eq!(oom["device_free"], json!(GIB / 2));
    assert_eq!(oom["step"], json!(11));
    assert_eq!(oom["phase"], json!("forward"));
    assert_eq!(oom["outcome"], json!("caught"));
    assert_eq!(oom["gpu_index"], json!(0));
    // The largest spikes, listed in the order they happened.
    let spikes = doc["spikes"].as_array().unwrap();
    let at: Vec<u64> = spikes
        .iter()
        .map(|s| s["at_ms"].as_u64().unwrap())
        .collect();
    assert!(at.windows(2).all(|w| w[0] <= w[1]), "{at:?}");
    let gpu_spike = spikes.iter().find(|s| s["what"] == json!("GPU 0")).unwrap();
    assert_eq!(gpu_spike["rise"], json!(35 * GIB));
    let alloc_spike = spikes
        .iter()
        .find(|s| s["what"] == json!("pid 4242 on GPU 0 (allocated)"))
        .unwrap();
    assert_eq!(alloc_spike["rise"], json!(9 * GIB));
    assert_eq!(alloc_spike["step"], json!(7));
    // 6 GiB of its 24 sat in split blocks, but the OOM's own verdict is that reclaiming the
    // whole cache (4 GiB, with 0.5 free) left the 8 GiB request short: no hint may then
    // recommend expandable_segments under it.
    let explanation = oom["explanation"].as_array().unwrap();
    assert!(
        explanation
            .iter()
            .any(|l| l.as_str().unwrap().contains("would not have saved it")),
        "{explanation:?}"
    );
    let hints = doc["hints"].as_array().unwrap();
    assert!(
        !hints
            .iter()
            .any(|h| h.as_str().unwrap().contains("expandable_segments")),
        "{hints:?}"
    );

    let text = stdout(&report(&[path.to_str().unwrap()]));
    assert!(
        text.contains("GPU 0 NVIDIA H100 80GB HBM3: peak 75.0 GiB of 80.0 GiB at 2023-11-14 22:13:50.000 UTC, headroom 5.00 GiB (6%)"),
        "{text}"
    );
    assert!(
        text.contains(
            "allocated peak 29.0 GiB at 2023-11-14 22:13:49.900 UTC, step 7, backward/lm_head"
        ),
        "{text}"
    );
    assert!(
        text.contains("pid 4242 on GPU 0 (caught): asked for 8.00 GiB, 512 MiB free"),
        "{text}"
    );
    let md = stdout(&report(&[path.to_str().unwrap(), "--markdown"]));
    assert!(md.starts_with("# vramscope report: "), "{md}");
    assert!(
        md.contains("| 0 | NVIDIA H100 80GB HBM3 | 75.0 GiB |"),
        "{md}"
    );
}

#[test]
fn a_damaged_recording_is_summarised_up_to_the_damage_which_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    write_recording(&path);
    let mut text = std::fs::read_to_string(&path).unwrap();
    // Garbage in the middle: not a cut last record, real damage.
    let middle = text.len() / 2;
    let cut = text[middle..].find('\n').unwrap() + middle + 1;
    text.insert_str(cut, "{\"t\": oops}\n");
    std::fs::write(&path, text).unwrap();
    let out = report(&[path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("WARNING: the recording is damaged"), "{text}");
    assert!(text.contains("GPU 0 NVIDIA H100 80GB HBM3: peak"), "{text}");
    let out = report(&["/nonexistent/run.jsonl"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
}

#[test]
fn a_spike_recorded_from_the_fake_nvml_is_the_reported_peak() {
    // GPU 0 sits at 10 GiB and jumps to 70 GiB from 1.0 s to 1.6 s of scenario time.
    let mut gpu = h100(0);
    gpu["timeline"] = json!([
        { "t": 0, "memory_used": 10 * GIB, "gpu_util": 50 },
        { "t": 1.0, "memory_used": 70 * GIB },
        { "t": 1.6, "memory_used": 10 * GIB },
    ]);
    let scenario = Scenario::new(&json!({ "devices": [gpu] }));
    let path = scenario.dir().join("run.jsonl");
    let mut child = scenario
        .command()
        .env("VRAMSCOPE_DIR", scenario.dir().join("no-channels"))
        .args(["record", "--interval", "0.2", "-o"])
        .arg(&path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    // SAFETY: sending SIGINT to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert!(child.wait().unwrap().success());
    let out = report(&[path.to_str().unwrap(), "--json"]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let peak = &doc["gpus"][0]["peak_used"];
    assert_eq!(peak["bytes"], json!(70 * GIB));
    let first = doc["first_ms"].as_u64().unwrap();
    let at = peak["at_ms"].as_u64().unwrap();
    // Read within the spike's 600 ms, about a second into the run.
    assert!((800..=1_900).contains(&(at - first)), "{peak} vs {first}");
    assert_eq!(doc["spikes"][0]["rise"], json!(60 * GIB));
}

#[test]
fn export_writes_every_figure_once_as_a_tidy_row_and_no_absent_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    write_recording(&path);
    let csv_path = dir.path().join("run.csv");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vramscope"))
        .args(["export", "--csv", "-o"])
        .arg(&csv_path)
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&csv_path).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("time_ms,entity,gpu,pid,metric,value"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(rows.iter().all(|r| r.len() == 6));
    let find = |t: u64, entity: &str, metric: &str| -> Vec<String> {
        rows.iter()
            .filter(|r| r[0] == t.to_string() && r[1] == entity && r[4] == metric)
            .map(|r| r[5].to_string())
            .collect()
    };
    // Every value the recording holds comes back exactly, once.
    for s in 0..60u64 {
        let at = T0 + s * 1000;
        let used = if s == 30 { 75 * GIB } else { 40 * GIB };
        assert_eq!(find(at, "gpu", "memory_used"), vec![used.to_string()]);
        // The names `--json` and `--csv` give these figures, not export's own.
        assert_eq!(find(at, "gpu", "power_mw"), vec!["400000"]);
        assert_eq!(find(at, "gpu", "temperature_c"), vec!["60"]);
        assert_eq!(find(at, "gpu", "sm_clock_mhz"), vec!["1980"]);
        assert!(find(at, "gpu", "temperature").is_empty());
        assert_eq!(
            find(at, "process", "used_memory"),
            vec![(30 * GIB).to_string()]
        );
        assert_eq!(find(at, "process", "host_rss"), vec![(4 * GIB).to_string()]);
        for k in 0..10u64 {
            let t = at + k * 100;
            let peak = if s == 29 && k == 9 {
                29 * GIB
            } else {
                20 * GIB
            };
            assert_eq!(
                find(t, "allocator", "interval_peak"),
                vec![peak.to_string()]
            );
            assert_eq!(
                find(t, "allocator", "allocated"),
                vec![(20 * GIB).to_string()]
            );
            assert_eq!(find(t, "allocator", "step"), vec![(s / 4).to_string()]);
        }
    }
    assert_eq!(
        find(T0 + 45_500, "allocator", "oom_requested"),
        vec![(8 * GIB).to_string()]
    );
    let allocator_row = rows.iter().find(|r| r[1] == "allocator").unwrap();
    assert_eq!((allocator_row[2], allocator_row[3]), ("0", "4242"));
    // The fan is absent in every sample: no row, rather than a 0.
    assert!(rows.iter().all(|r| r[4] != "fan" && !r[5].is_empty()));
    // The OOM, caught (step 11 ended after it), with the figures its event gave; the true
    // peak with its step.
    let oom = |metric: &str| find(T0 + 45_500, "allocator", metric);
    assert_eq!(oom("oom_device_free"), vec![(GIB / 2).to_string()]);
    assert_eq!(oom("oom_step"), vec!["11"]);
    assert_eq!(oom("oom_fatal"), vec!["0"]);
    assert_eq!(
        find(T0 + 29_900, "allocator", "true_peak"),
        vec![(29 * GIB).to_string()]
    );
    assert_eq!(find(T0 + 29_900, "allocator", "true_peak_step"), vec!["7"]);
    // 60 s × (2 memory + 6 GPU figures + 2 process + 2 host process + 2 host memory) +
    // 600 writer samples × 4 + 6 of the OOM + 2 of the true peak.
    assert_eq!(rows.len(), 60 * 14 + 600 * 4 + 6 + 2);
}

/// The hunt of issue 13: the spike between two polls is placed by the writer's own new-peak
/// event (step 40, backward), not by the next poll (step 41, optimizer); its cache is the
/// peak's own; the observer's OOM and the uncaught error are one fatal OOM; the start-up
/// ramp is no spike and does not hide the spike on top of it.
#[test]
fn the_hunt_is_told_with_the_folds_peak_one_fatal_oom_and_the_real_spike() {
    use recording_fixture::hunt::{self, MIB};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hunt.jsonl.zst");
    hunt::write_hunt(&path);
    let out = report(&[path.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let a = &doc["processes"][0]["allocator"];
    assert_eq!(
        a["peak_allocated"],
        json!({ "bytes": hunt::SPIKE, "at_ms": hunt::SPIKE_AT, "step": 40, "phase": "backward" })
    );
    // Reserved in the sample that carries the spike (12.5 GiB) minus the spike itself.
    assert_eq!(a["cache_at_peak"], json!(512 * MIB));
    assert_eq!(doc["version"], json!(2), "each OOM once, with its outcome");
    let ooms = doc["ooms"].as_array().unwrap();
    assert_eq!(ooms.len(), 1, "{ooms:?}");
    let oom = &ooms[0];
    assert_eq!(oom["at_ms"], json!(hunt::OOM_AT));
    assert_eq!(oom["outcome"], json!("fatal"));
    assert_eq!(oom["requested"], json!(hunt::REQUESTED));
    assert_eq!(oom["device_free"], json!(hunt::FREE_AT_OOM));
    assert_eq!(oom["step"], json!(80));
    assert_eq!(oom["phase"], json!("forward"));
    assert_eq!(oom["gpu_index"], json!(0));
    // The observer gave no allocated figure: the last sample's, at T0+16.0 s.
    assert_eq!(oom["allocated"], json!(hunt::allocated(16_000)));
    assert_eq!(
        oom["message"],
        json!("CUDA out of memory. Tried to allocate 6.00 GiB")
    );
    let spikes = doc["spikes"].as_array().unwrap();
    assert_eq!(
        spikes.len(),
        1,
        "the ramp and the leak are no spikes: {spikes:?}"
    );
    let spike = &spikes[0];
    assert_eq!(spike["what"], json!("pid 4242 on GPU 0 (allocated)"));
    assert_eq!(spike["to"], json!(hunt::SPIKE));
    // It fell back to where the run stood, not to the ramp's start.
    assert_eq!(spike["from"], json!(hunt::allocated(8_300)));
    assert_eq!(
        (spike["step"].clone(), spike["phase"].clone()),
        (json!(40), json!("backward"))
    );

    let text = stdout(&report(&[path.to_str().unwrap()]));
    assert!(
        text.contains("allocated peak 12.0 GiB at 2023-11-14 22:13:28.120 UTC, step 40, backward"),
        "{text}"
    );
    assert!(
        text.contains("cache at the allocated peak 512 MiB;"),
        "{text}"
    );
    let oom_lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("): asked for"))
        .collect();
    assert_eq!(
        oom_lines,
        vec![
            "  2023-11-14 22:13:36.050 UTC pid 4242 on GPU 0 (fatal): asked for 6.00 GiB, 3.00 GiB free, allocated 10.2 GiB, reserved 12.5 GiB, step 80, forward"
        ],
        "{text}"
    );
    // Under it, why: the cache and the free memory together fell short, so
    // expandable_segments would not have saved it.
    for why in [
        "      asked for 6.00 GiB with 3.00 GiB free on the device (of 16.0 GiB): 3.00 GiB short",
        "falls 768 MiB short: the live tensors (10.2 GiB) left no room",
        "      outside the allocator: 512 MiB (NVML used 13.0 GiB by the process, reserved 12.5 GiB)",
        "      expandable_segments:True would not have saved it",
    ] {
        assert!(text.contains(why), "{why:?} in {text}");
    }
    // The leak of 16 MiB a step is named, as what the step peaks did: the process died of
    // its OOM, so no OOM is to come (the monitor says the same of an ended writer).
    assert!(
        text.contains("  - pid 4242 on GPU 0: memory leaks: each step's peak 16.0 MiB above the one before (its last 38 steps; it has ended)"),
        "{text}"
    );
    assert!(!text.contains("OOM in about"), "{text}");
    assert_eq!(
        doc["processes"][0]["allocator"]["forecast"]["kind"],
        json!("leak")
    );
    let hints = doc["hints"].as_array().unwrap();
    assert!(
        hints
            .iter()
            .any(|h| h.as_str().unwrap().contains("memory leaks")),
        "{hints:?}"
    );
    assert_eq!(oom["explanation"].as_array().unwrap().len(), 4, "{oom}");
    // The allocator retried before the OOM, but its verdict rules expandable_segments out:
    // no hint below says otherwise.
    assert_eq!(a["alloc_retries"], json!(1));
    assert!(
        !hints
            .iter()
            .any(|h| h.as_str().unwrap().contains("expandable_segments")),
        "{hints:?}"
    );
}

/// The hunt exported: one OOM (the observer's and the uncaught error's), fatal, with its
/// request, free memory and step; the true peak at the spike's moment and step.
#[test]
fn the_hunt_exports_one_fatal_oom_and_the_true_peak() {
    use recording_fixture::hunt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hunt.jsonl");
    hunt::write_hunt(&path);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vramscope"))
        .args(["export", "--csv"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let oom_rows: Vec<&str> = text.lines().filter(|l| l.contains(",oom_")).collect();
    let at = hunt::OOM_AT;
    assert_eq!(
        oom_rows,
        vec![
            format!("{at},allocator,0,4242,oom_requested,{}", hunt::REQUESTED),
            format!(
                "{at},allocator,0,4242,oom_device_free,{}",
                hunt::FREE_AT_OOM
            ),
            format!(
                "{at},allocator,0,4242,oom_allocated,{}",
                hunt::allocated(16_000)
            ),
            format!(
                "{at},allocator,0,4242,oom_reserved,{}",
                hunt::reserved(16_050)
            ),
            format!("{at},allocator,0,4242,oom_step,80"),
            format!("{at},allocator,0,4242,oom_fatal,1"),
        ],
        "{text}"
    );
    let peak_rows: Vec<&str> = text.lines().filter(|l| l.contains(",true_peak")).collect();
    let at = hunt::SPIKE_AT;
    assert_eq!(
        peak_rows,
        vec![
            format!("{at},allocator,0,4242,true_peak,{}", hunt::SPIKE),
            format!("{at},allocator,0,4242,true_peak_step,40"),
        ]
    );
}
