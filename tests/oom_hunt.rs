//! The OOM hunt, end to end: a simulated training run (tests/drivers/oom_hunt.py: 9 GiB
//! steady, a 16 MiB-per-step leak, a 30 ms spike to 12 GiB inside backward at step 40, a
//! 6 GiB request that fails inside forward at step 80 and kills the job) watched at once by
//! the monitor in a real terminal (tmux), `vramscope serve` scraped by a real Prometheus and
//! `vramscope record`; then `--json`, the report, the plot, the CSV export and the replay of
//! the recording. Every one must tell the same story: the same exact peak with its step and
//! phase, one OOM with its requested bytes, free memory, step and phase, marked fatal, with
//! the rank kept.

mod common;
mod serve_support;

use common::tmux::{self, Tmux};
use common::*;
use serde_json::{Value, json};
use serve_support::prometheus::Prometheus;
use serve_support::*;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

const UUID: &str = "GPU-00000000-0000-0000-0000-000000000000";
const SECOND: Duration = Duration::from_secs(1);

/// The training job, waiting for its go.
struct Job {
    child: Child,
    go: ChildStdin,
}

impl Job {
    fn start(channels: &Path) -> Job {
        let package = Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/drivers/oom_hunt.py");
        let mut child = Command::new("python3")
            .arg(script)
            .env("PYTHONPATH", &package)
            .env("VRAMSCOPE_DIR", channels)
            .env("HUNT_UUID", UUID)
            .env("RANK", "3")
            .env("LOCAL_RANK", "3")
            .env("WORLD_SIZE", "8")
            .env("SLURM_JOB_ID", "job-42")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the simulated job");
        let mut ready = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut ready)
            .unwrap();
        assert_eq!(ready.trim(), "ready");
        let go = child.stdin.take().unwrap();
        Job { child, go }
    }

    /// Lets it run to its end; returns its stderr (the uncaught OOM's traceback).
    fn run_to_death(mut self) -> String {
        writeln!(self.go, "go").unwrap();
        let out = self.child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(1), "the job dies of its OOM");
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

/// One 16 GiB GPU on which NVML lists the job with 11 GiB.
fn scenario(pid: u32) -> Scenario {
    let mut gpu = h100(0);
    gpu["memory_total"] = json!(16 * GIB);
    gpu["processes"] = json!([{ "t": 0, "compute": [{ "pid": pid, "used_memory": 11 * GIB }] }]);
    Scenario::new(&json!({ "devices": [gpu] }))
}

/// A `vramscope record` of the scenario, stopped by SIGINT.
struct Recorder {
    child: Child,
    file: PathBuf,
}

impl Recorder {
    fn start(scenario: &Scenario, channels: &Path) -> Recorder {
        let file = scenario.dir().join("hunt.jsonl");
        let child = scenario
            .command()
            .args(["record", "--interval", "1s", "-o"])
            .arg(&file)
            .env("VRAMSCOPE_DIR", channels)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Recorder { child, file }
    }

    fn stop(mut self) -> PathBuf {
        // SAFETY: the pid is our own live child's.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        assert!(self.child.wait().unwrap().success());
        self.file
    }
}

fn bytes_of(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v["Ok"].as_u64())
}

#[test]
fn every_output_tells_the_same_story_of_a_spike_a_leak_and_a_fatal_oom() {
    if !python3_available() || !tmux::available() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let channels = work.path().join("channels");
    let job = Job::start(&channels);
    let pid = job.child.id();
    let scenario = scenario(pid);

    let served = Served::start(
        &scenario,
        &["--interval", "1s", "--grace", "5m"],
        &[("VRAMSCOPE_DIR", &channels)],
    );
    let prometheus = tool_available("prometheus", "--version", "apt-get install prometheus")
        .then(|| Prometheus::start(served.addr));
    let recorder = Recorder::start(&scenario, &channels);
    let screen = Tmux::start(
        scenario.dir(),
        160,
        48,
        &format!(
            "env VRAMSCOPE_DIR={} {}",
            channels.display(),
            scenario.monitor_line("--interval 1s")
        ),
    );
    let (ok, text) = screen.wait_for(10 * SECOND, |s| s.contains(&pid.to_string()));
    assert!(ok, "the job's row: {text}");

    let traceback = job.run_to_death();
    assert!(traceback.contains("CUDA out of memory"), "{traceback}");
    // Past the exporter's old one-second cliff, and a few of everyone's polls.
    std::thread::sleep(3 * SECOND);

    // --json: the one-shot snapshot of the dead writer.
    let doc = scenario.json_reading(&channels);
    let writer = doc["allocators"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["pid_in_namespace"] == json!(pid))
        .unwrap_or_else(|| panic!("the job's writer: {doc}"));
    assert_eq!(writer["rank"], json!(3));
    let device = &writer["devices"][0];
    assert_eq!(device["gpu_index"], json!(0), "{device}");
    assert_eq!(device["true_peak"], json!(12 * GIB), "{device}");
    let at = &device["true_peak_at"];
    assert_eq!(
        (&at["step"], &at["phase"]),
        (&json!(40), &json!("backward"))
    );
    // The leak of 16 MiB a step, seen through the spike: said of the dead writer as what its
    // step peaks did, with no OOM to come (it has ended).
    let forecast = &device["forecast"];
    assert_eq!(forecast["kind"], json!("leak"), "{forecast}");
    let per_step = forecast["bytes_per_step"].as_f64().unwrap();
    // A least-squares fit over exact figures: exact but for the float's last bits.
    assert!(
        (per_step / (16 * MIB) as f64 - 1.0).abs() < 1e-9,
        "{forecast}"
    );
    let ooms = writer["ooms"].as_array().unwrap();
    assert_eq!(
        ooms.len(),
        1,
        "one OOM, however many events told of it: {ooms:?}"
    );
    let oom = &ooms[0];
    assert_eq!(oom["outcome"], json!("fatal"));
    assert_eq!(bytes_of(&oom["requested"]), Some(6 * GIB));
    let step80 = 9 * GIB + 80 * 16 * MIB;
    assert_eq!(
        bytes_of(&oom["device_free"]),
        Some(16 * GIB - step80 - 3 * GIB)
    );
    assert_eq!(
        (&oom["step"], &oom["phase"]),
        (&json!(80), &json!("forward"))
    );

    // serve: the OOM counted and the peak kept, with the rank's labels, after the death.
    let labels = [("rank", "3"), ("job_id", "job-42")];
    let metrics = samples(&served.scrape());
    assert_eq!(
        value(&metrics, "vramscope_process_allocator_ooms_total", &labels),
        Some(1.0),
        "{metrics:?}"
    );
    assert_eq!(
        value(&metrics, "vramscope_process_allocator_peak_bytes", &labels),
        Some((12 * GIB) as f64)
    );
    if let Some(prometheus) = &prometheus {
        prometheus.wait_until(Duration::from_secs(20), "stored the OOM", || {
            prometheus
                .query("vramscope_process_allocator_ooms_total{rank=\"3\",job_id=\"job-42\"}")
                .first()
                .is_some_and(|(_, v)| *v == 1.0)
        });
    }

    // The monitor: the exited row keeps its figures; its detail pane shows the peak's place
    // and the OOM.
    screen.keys(&["Enter"]);
    let (shown, text) = screen.wait_for(10 * SECOND, |s| {
        s.contains("6.00 GiB") && s.contains("fatal")
    });
    assert!(shown, "never the OOM in the detail pane:\n{text}");
    assert!(text.contains("12.0 GiB"), "{text}");
    assert!(
        text.contains("step 40") && text.contains("backward"),
        "{text}"
    );

    // The recording: report, plot, export and replay.
    let file = recorder.stop();
    let report = scenario.run(&["report", file.to_str().unwrap()]);
    assert!(report.status.success(), "{}", stderr(&report));
    let report = stdout(&report);
    assert!(report.contains("12.0 GiB"), "{report}");
    assert!(report.contains("step 40, backward"), "{report}");
    let oom_lines: Vec<&str> = report
        .lines()
        // The OOM's own line; the explanation under it says "asked for" too.
        .filter(|l| l.contains("): asked for 6.00 GiB"))
        .collect();
    assert_eq!(oom_lines.len(), 1, "{report}");
    assert!(oom_lines[0].contains("fatal"), "{report}");
    assert!(
        oom_lines[0].contains("step 80") && oom_lines[0].contains("forward"),
        "{report}"
    );

    let csv_path = scenario.dir().join("hunt.csv");
    let export = scenario.run(&[
        "export",
        file.to_str().unwrap(),
        "-o",
        csv_path.to_str().unwrap(),
    ]);
    assert!(export.status.success(), "{}", stderr(&export));
    let csv = std::fs::read_to_string(&csv_path).unwrap();
    let requested = (6 * GIB).to_string();
    let oom_rows = csv.lines().filter(|l| l.contains(&requested)).count();
    assert_eq!(oom_rows, 1, "{csv}");

    let svg_path = scenario.dir().join("hunt.svg");
    let plot = scenario.run(&[
        "plot",
        file.to_str().unwrap(),
        "-o",
        svg_path.to_str().unwrap(),
    ]);
    assert!(plot.status.success(), "{}", stderr(&plot));
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(
        svg.contains("step 40") && svg.contains("backward"),
        "the peak's place"
    );
    assert_eq!(svg.matches("6.00 GiB").count(), 1, "one OOM label");

    let mut replay = vramscope::replay::Replay::open(&file).unwrap();
    let mut monitor = replay.fresh_monitor();
    let said = replay
        .command(vramscope::replay::Command::NextOom, &mut monitor)
        .unwrap_or_default();
    assert!(said.contains("6.00 GiB"), "{said}");
    let said = replay
        .command(vramscope::replay::Command::LargestPeak, &mut monitor)
        .unwrap_or_default();
    assert!(said.contains("12.0 GiB"), "{said}");
}
