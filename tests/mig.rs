//! A GPU in MIG mode, through the real binary and the fake NVML: its instances with their
//! profiles, memory and processes, utilisation absent with the reason, a mode change pending
//! a reset, instances destroyed and created while vramscope runs, and writers whose CUDA
//! device is a MIG device joined to their instance by its UUID.

mod common;

use common::{GIB, MIB, Scenario, h100, python3_available, stderr};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use vramscope::channel::{DeviceFigures, DeviceIdentity, Writer, WriterConfig, WriterKind};
use vramscope::channel::{Exit, parse_uuid};

const MIG_A: &str = "MIG-aaaaaaaa-1111-2222-3333-000000000001";
const MIG_B: &str = "MIG-bbbbbbbb-1111-2222-3333-000000000002";
const MIG_C: &str = "MIG-cccccccc-1111-2222-3333-000000000003";

/// An instance of `profile` with `used` of `total` bytes and compute processes `pids` (each
/// using 1 GiB), alive from `from` until `until`.
fn instance(
    gi: u32,
    profile: &str,
    uuid: &str,
    (used, total): (u64, u64),
    pids: &[u32],
    (from, until): (f64, Option<f64>),
) -> Value {
    let procs: Vec<Value> = pids
        .iter()
        .map(|pid| json!({ "pid": pid, "used_memory": GIB }))
        .collect();
    json!({
        "gpu_instance_id": gi, "compute_instance_id": 0, "profile": profile, "uuid": uuid,
        "memory_total": total, "from": from, "until": until,
        "timeline": [{ "t": 0, "memory_used": used }],
        "processes": [{ "t": 0, "compute": procs }],
    })
}

/// GPU 0 in MIG mode with `instances`; GPU 1 without MIG, its MIG mode to be enabled at the
/// next reset.
fn scenario_with(instances: Vec<Value>) -> Value {
    let mut gpu0 = h100(0);
    gpu0["name"] = json!("NVIDIA A100-SXM4-80GB");
    gpu0["mig"] = json!({ "current": true, "instances": instances });
    let mut gpu1 = h100(1);
    gpu1["mig"] = json!({ "current": false, "pending": true });
    json!({ "devices": [gpu0, gpu1] })
}

fn two_instances(pid_a: u32, pid_b: u32) -> Value {
    scenario_with(vec![
        instance(
            1,
            "3g.40gb",
            MIG_A,
            (4 * GIB, 40 * GIB),
            &[pid_a],
            (0.0, None),
        ),
        instance(2, "1g.10gb", MIG_B, (GIB, 10 * GIB), &[pid_b], (0.0, None)),
    ])
}

fn json_of(scenario: &Scenario, channels: &Path) -> Value {
    let out = scenario
        .command()
        .env("VRAMSCOPE_DIR", channels)
        .arg("--json")
        .output()
        .expect("run vramscope");
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

fn row(doc: &Value, pid: u32) -> &Value {
    doc["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == json!(pid))
        .unwrap_or_else(|| panic!("no row for {pid}: {doc}"))
}

#[test]
fn json_lists_the_instances_their_memory_and_processes_and_says_why_utilisation_is_absent() {
    let work = tempfile::tempdir().unwrap();
    let scenario = Scenario::new(&two_instances(4_100_001, 4_100_002));
    let doc = json_of(&scenario, work.path());
    let d0 = &doc["devices"][0];
    assert_eq!(d0["mig_mode"], "enabled");
    assert_eq!(d0["mig_instance_count"], 2);
    let instances = d0["mig"]["instances"].as_array().expect("instances");
    let summary: Vec<(Value, Value, Value, Value, Value)> = instances
        .iter()
        .map(|i| {
            (
                i["profile"].clone(),
                i["gpu_instance_id"].clone(),
                i["uuid"].clone(),
                i["memory_used"].clone(),
                i["memory_total"].clone(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (
                json!("3g.40gb"),
                json!(1),
                json!(MIG_A),
                json!(4 * GIB),
                json!(40 * GIB)
            ),
            (
                json!("1g.10gb"),
                json!(2),
                json!(MIG_B),
                json!(GIB),
                json!(10 * GIB)
            ),
        ]
    );
    assert_eq!(instances[0]["compute_instance_id"], 0);
    assert_eq!(instances[0]["memory_free"], 36 * GIB);
    assert_eq!(
        instances[0]["processes"],
        json!([{ "pid": 4_100_001, "used_memory": GIB, "unavailable": {} }])
    );
    assert_eq!(instances[1]["processes"][0]["pid"], 4_100_002);
    // No utilisation in MIG mode: absent with the reason, never 0, on the GPU, on each
    // instance and on each process.
    assert_eq!(d0["gpu_util"], Value::Null);
    let reason = "NVML does not support it in MIG mode";
    assert_eq!(d0["unavailable"]["gpu_util"], reason);
    assert_eq!(instances[0]["sm_util"], Value::Null);
    assert_eq!(instances[0]["unavailable"]["sm_util"], reason);
    // Each process row names its instance.
    let a = row(&doc, 4_100_001);
    assert_eq!(a["gpu_index"], 0);
    assert_eq!(a["mig_profile"], "3g.40gb");
    assert_eq!(a["gpu_instance_id"], 1);
    assert_eq!(a["compute_instance_id"], 0);
    assert_eq!(a["mig_uuid"], MIG_A);
    assert_eq!(a["used_memory"], GIB);
    assert_eq!(a["sm_util"], Value::Null);
    assert_eq!(a["unavailable"]["sm_util"], reason);
    assert_eq!(row(&doc, 4_100_002)["mig_profile"], "1g.10gb");
    // The other GPU's figures are its own; its MIG mode waits for a reset.
    let d1 = &doc["devices"][1];
    assert_eq!(d1["gpu_util"], 87);
    assert_eq!(d1["mig_mode"], "disabled");
    assert_eq!(d1["mig"]["pending"], true);
    assert_eq!(
        d1["mig_pending"],
        "MIG pending: reset the GPU to turn it on"
    );
    assert_eq!(d1["mig"]["instances"], json!([]));
    assert_eq!(
        d1["unavailable"]["mig_instance_count"],
        "GPU not in MIG mode"
    );
    assert_eq!(
        doc["devices"][0]["unavailable"]["mig_pending"],
        "no MIG mode change pending"
    );
}

#[test]
fn once_and_csv_carry_the_instance_of_each_process() {
    let scenario = Scenario::new(&two_instances(4_100_001, 4_100_002));
    let out = scenario.run(&["--csv"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("no {name} in {header:?}"))
    };
    let (pid, profile, gi) = (col("pid"), col("mig_profile"), col("gpu_instance_id"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let ours = rows
        .iter()
        .find(|r| r.get(pid) == Some(&"4100002"))
        .expect("the process's row");
    assert_eq!((ours[profile], ours[gi]), ("1g.10gb", "2"));
}

/// `vramscope --json --loop` on `scenario`, its lines on a channel.
fn looping(scenario: &Scenario, interval: &str) -> (Child, std::sync::mpsc::Receiver<String>) {
    let mut child = scenario
        .command()
        .env("FAKE_NVML_TIME_SCALE", "1")
        .args(["--json", "--loop", interval])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run vramscope");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    (child, rx)
}

fn profiles(doc: &Value) -> Vec<String> {
    doc["devices"][0]["mig"]["instances"]
        .as_array()
        .unwrap_or_else(|| panic!("instances unreadable: {doc}"))
        .iter()
        .map(|i| {
            format!(
                "{}@{}",
                i["profile"].as_str().unwrap(),
                i["uuid"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn instances_destroyed_and_created_while_running_leave_no_stale_row_and_no_error() {
    // B lives until 1.5 s, C from 1.5 s; each instance's process with it. A stays.
    let scenario = Scenario::new(&scenario_with(vec![
        instance(
            1,
            "3g.40gb",
            MIG_A,
            (4 * GIB, 40 * GIB),
            &[4_200_001],
            (0.0, None),
        ),
        instance(
            2,
            "1g.10gb",
            MIG_B,
            (GIB, 10 * GIB),
            &[4_200_002],
            (0.0, Some(1.5)),
        ),
        instance(
            3,
            "2g.20gb",
            MIG_C,
            (2 * GIB, 20 * GIB),
            &[4_200_003],
            (1.5, None),
        ),
    ]));
    let (mut child, lines) = looping(&scenario, "0.1");
    let a = format!("3g.40gb@{MIG_A}");
    let b = format!("1g.10gb@{MIG_B}");
    let c = format!("2g.20gb@{MIG_C}");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen_before = false;
    let mut seen_after = false;
    while !seen_after {
        let left = deadline
            .checked_duration_since(Instant::now())
            .expect("C never appeared");
        let line = lines.recv_timeout(left).expect("another snapshot");
        let doc: Value = serde_json::from_str(&line).unwrap();
        let now = profiles(&doc);
        let pids: Vec<u64> = doc["processes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["pid"].as_u64().unwrap())
            .collect();
        if now == [a.clone(), b.clone()] {
            assert!(!seen_after, "B came back");
            assert_eq!(pids, [4_200_001, 4_200_002]);
            seen_before = true;
        } else if now == [a.clone(), c.clone()] {
            assert_eq!(pids, [4_200_001, 4_200_003], "no stale process row");
            let c_row = doc["processes"][1].clone();
            assert_eq!(c_row["mig_profile"], "2g.20gb");
            assert_eq!(c_row["gpu_instance_id"], 3);
            seen_after = true;
        } else {
            panic!("neither before nor after: {now:?}");
        }
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    assert!(seen_before, "B was never seen");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("rror"), "stderr: {err}");
}

/// A Rust writer in this process on the MIG device `uuid`.
fn writer_on(dir: &Path, uuid: &str) -> Writer {
    let mut writer = Writer::create(WriterConfig {
        dir: Some(dir.to_path_buf()),
        ..WriterConfig::from_process(WriterKind::Rust)
    })
    .expect("create a channel");
    writer
        .add_device(DeviceIdentity {
            ordinal: 0,
            uuid: parse_uuid(uuid),
            pci_bus_id: None,
            total: Some(10 * GIB),
        })
        .expect("a device slot");
    writer.publish_device(
        0,
        &DeviceFigures {
            allocated: Some(700 * MIB),
            reserved: Some(900 * MIB),
            ..DeviceFigures::default()
        },
    );
    writer
}

#[test]
fn a_writer_naming_its_mig_device_joins_the_instance_and_its_gpu() {
    let work = tempfile::tempdir().unwrap();
    let channels = work.path().join("channels");
    let me = std::process::id();
    // The Rust writer stores the MIG device's 16 bytes without saying they name a MIG
    // device: the join is by the bytes.
    let writer = writer_on(&channels, MIG_B);
    let scenario = Scenario::new(&two_instances(4_100_001, me));
    let doc = json_of(&scenario, &channels);
    writer.finish(Exit::Clean).unwrap();
    let ours = row(&doc, me);
    assert_eq!(ours["gpu_index"], 0);
    assert_eq!(ours["mig_uuid"], MIG_B);
    assert_eq!(ours["allocated"], 700 * MIB, "{ours}");
    assert_eq!(ours["reserved"], 900 * MIB);
    let allocator = &doc["allocators"][0];
    assert_eq!(allocator["devices"][0]["gpu_index"], 0, "{allocator}");
}

#[test]
fn the_python_writer_publishes_the_mig_uuid_of_cuda_visible_devices() {
    if !python3_available() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let channels = work.path().join("channels");
    let package = Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
    // The framework reports the GPU's UUID (as CUDA runtimes before MIG UUIDs did) while
    // CUDA_VISIBLE_DEVICES names the MIG device: the writer publishes the MIG UUID.
    let mut child = std::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import vramscope, sys, time\n\
             vramscope.report(device=0, allocated=3 << 30, reserved=4 << 30, total=40 << 30,\n\
             \x20   uuid='GPU-00000000-0000-0000-0000-000000000000')\n\
             print('ready', flush=True)\n\
             time.sleep(30)\n",
        )
        .env("PYTHONPATH", &package)
        .env("VRAMSCOPE_DIR", &channels)
        .env("CUDA_VISIBLE_DEVICES", MIG_A)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready.trim(), "ready");
    let pid = child.id();
    let scenario = Scenario::new(&two_instances(pid, 4_100_002));
    let doc = json_of(&scenario, &channels);
    let _ = child.kill();
    let _ = child.wait();
    let allocator = doc["allocators"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["pid"] == json!(pid))
        .unwrap_or_else(|| panic!("no channel of {pid}: {doc}"));
    assert_eq!(allocator["devices"][0]["uuid"], MIG_A, "{allocator}");
    assert_eq!(allocator["devices"][0]["gpu_index"], 0);
    let ours = row(&doc, pid);
    assert_eq!(ours["mig_profile"], "3g.40gb");
    assert_eq!(ours["allocated"], 3 * GIB, "{ours}");
}

#[test]
fn once_lists_the_instances_under_their_gpu_and_the_pending_change() {
    let scenario = Scenario::new(&two_instances(4_100_001, 4_100_002));
    let out = scenario.run(&["--once"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let gpu0 = lines
        .iter()
        .position(|l| l.contains("NVIDIA A100-SXM4-80GB"))
        .expect("GPU 0's line");
    assert!(lines[gpu0].contains(" n/a "), "util n/a: {}", lines[gpu0]);
    assert_eq!(
        lines[gpu0 + 1].split_whitespace().collect::<Vec<_>>(),
        [
            "MIG", "3g.40gb", "GI", "1", "CI", "0", "4.00", "GiB", "/", "40.0", "GiB", "pids",
            "4100001"
        ]
    );
    assert!(lines[gpu0 + 2].contains("1g.10gb") && lines[gpu0 + 2].ends_with("4100002"));
    let gpu1 = lines
        .iter()
        .position(|l| l.contains("NVIDIA H100"))
        .unwrap();
    assert_eq!(
        lines[gpu1 + 1].trim(),
        "MIG pending: reset the GPU to turn it on"
    );
    assert!(
        text.contains("GPU 0 util: NVML does not support it in MIG mode"),
        "{text}"
    );
}

#[test]
fn the_monitor_shows_the_instances_in_place_of_the_utilisation_chart() {
    use common::tmux::{self, Tmux};
    if !tmux::available() {
        return;
    }
    let scenario = Scenario::new(&two_instances(4_100_001, 4_100_002));
    let line = scenario.monitor_line("--interval 200ms");
    // Tall enough for charts of three rows: two instances and the note take their place.
    let t = Tmux::start(scenario.dir(), 120, 60, &line);
    let (ok, screen) = t.wait_for(Duration::from_secs(5), |s| s.contains("1g.10gb  GI 2 CI 0"));
    assert!(ok, "the instances:\n{screen}");
    let instance = screen
        .lines()
        .find(|l| l.contains("3g.40gb"))
        .unwrap_or_default();
    assert!(
        instance.contains("4.00 GiB / 40.0 GiB") && instance.contains("pid 4100001"),
        "{screen}"
    );
    assert!(
        screen.contains("util n/a: NVML does not support utilisation in MIG mode"),
        "{screen}"
    );
    assert!(screen.contains("[MIG]"), "{screen}");
    assert!(
        screen.contains("[MIG pending: reset the GPU to turn it on]"),
        "{screen}"
    );
}

#[test]
fn a_recording_carries_the_instances_and_reads_back_the_same() {
    use vramscope::model::SourceEvent;
    use vramscope::recording::Recording;
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("mig.jsonl");
    let scenario = Scenario::new(&two_instances(4_100_001, 4_100_002));
    let out = scenario
        .command()
        .env("VRAMSCOPE_DIR", work.path().join("none"))
        .args(["--interval", "100ms", "record", "-o"])
        .arg(&file)
        .args(["--duration", "1s"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    // The file says it in words: instances, profiles, and why utilisation is absent.
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("\"profile\":\"1g.10gb\""), "{text}");
    assert!(text.contains("{\"absent\":\"mig_mode\"}"), "{text}");
    let recording = Recording::open(&file).expect("open");
    let mut samples = recording
        .events()
        .map(|e| e.expect("event").1)
        .flat_map(|e| match e {
            SourceEvent::Batch(events) => events,
            other => vec![other],
        })
        .filter_map(|e| match e {
            SourceEvent::Device(s) if s.index == 0 => Some(s),
            _ => None,
        });
    let sample = samples.next().expect("a sample of GPU 0");
    let mig = sample.mig.as_ref().expect("its MIG state");
    assert!(mig.enabled && mig.pending.is_none());
    let instances = mig.instances.as_ref().unwrap();
    assert_eq!(instances.len(), 2);
    assert_eq!(instances[1].profile.as_deref(), Ok("1g.10gb"));
    assert_eq!(instances[1].uuid.as_deref(), Ok(MIG_B));
    assert_eq!(instances[1].gpu_instance_id, Ok(2));
    assert_eq!(instances[1].memory.as_ref().unwrap().used, GIB);
    assert_eq!(instances[1].processes.as_ref().unwrap()[0].pid, 4_100_002);
    assert_eq!(sample.gpu_util, Err(vramscope::model::Absent::MigMode));

    // The report names each process's instance, and its --json carries it.
    let report = scenario.run(&["report", file.to_str().unwrap()]);
    assert!(report.status.success(), "{}", stderr(&report));
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(
        text.contains("pid 4100002 on GPU 0 (MIG 1g.10gb GI 2)"),
        "{text}"
    );
    let json_out = scenario.run(&["report", "--json", file.to_str().unwrap()]);
    assert!(json_out.status.success(), "{}", stderr(&json_out));
    let doc: Value = serde_json::from_slice(&json_out.stdout).unwrap();
    let p = doc["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == 4_100_001)
        .unwrap_or_else(|| panic!("{doc:#}"));
    assert_eq!(p["mig_profile"], "3g.40gb", "{p}");
    assert_eq!(p["gpu_instance_id"], 1);
    assert_eq!(p["mig_uuid"], MIG_A);
}

/// GPU 0 with GPM (an H100) whose first instance's SMs are 42 % busy; GPU 1 in MIG mode
/// without GPM (an A100).
fn with_gpm() -> Value {
    let mut s = two_instances(4_100_001, 4_100_002);
    s["devices"][0]["mig"]["gpm"] = json!(true);
    s["devices"][0]["mig"]["instances"][0]["timeline"][0]["sm_util"] = json!(42.4);
    s["devices"][1]["mig"] = json!({ "current": true, "instances": [
        instance(1, "7g.80gb", MIG_C, (GIB, 80 * GIB), &[], (0.0, None)) ] });
    s
}

#[test]
fn with_gpm_each_instance_has_its_sm_utilisation_and_without_it_gpm_is_never_called() {
    let scenario = Scenario::new(&with_gpm());
    let counts = scenario.dir().join("counts.json");
    let (mut child, lines) = {
        let mut child = scenario
            .command()
            .env("FAKE_NVML_COUNTS", &counts)
            .args(["--json", "--loop", "0.1", "--gpm"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        (child, BufReader::new(stdout).lines())
    };
    let mut found = None;
    for line in lines.take(50) {
        let doc: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if doc["devices"][0]["mig"]["instances"][0]["sm_util"].is_number() {
            found = Some(doc);
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let doc = found.expect("an instance's SM utilisation from GPM");
    let i0 = &doc["devices"][0]["mig"]["instances"][0];
    assert_eq!(i0["sm_util"], 42, "{i0}");
    // An instance whose timeline has no figure: absent, with GPM's word.
    let i1 = &doc["devices"][0]["mig"]["instances"][1];
    assert_eq!(i1["sm_util"], Value::Null);
    assert_eq!(i1["unavailable"]["sm_util"], "not supported", "{i1}");
    // The GPU's own utilisation stays absent: GPM gives instances, NVML's call gives none.
    assert_eq!(doc["devices"][0]["gpu_util"], Value::Null);
    let other = &doc["devices"][1]["mig"]["instances"][0];
    assert_eq!(
        other["unavailable"]["sm_util"],
        "no GPM on this GPU (Hopper or newer has it)"
    );

    // Without --gpm, no GPM call at all: it could contend with DCGM's profiling.
    let counts_off = scenario.dir().join("counts-off.json");
    let out = scenario
        .command()
        .env("FAKE_NVML_COUNTS", &counts_off)
        .args(["--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let calls = common::read_counts(&counts_off);
    assert!(
        calls.contains_key("nvmlDeviceGetMigDeviceHandleByIndex"),
        "{calls:?}"
    );
    assert!(calls.keys().all(|k| !k.starts_with("nvmlGpm")), "{calls:?}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["devices"][0]["mig"]["instances"][0]["unavailable"]["sm_util"],
        "NVML does not support it in MIG mode"
    );
}

#[test]
fn an_instances_hostile_profile_and_uuid_reach_no_output_raw() {
    let scenario = Scenario::new(&scenario_with(vec![instance(
        1,
        "1g.10gb\u{1b}]52;c;cHduZWQ=\u{7}\u{202e}",
        "MIG-\u{1b}[2Jaaaa",
        (GIB, 10 * GIB),
        &[4_100_001],
        (0.0, None),
    )]));
    for args in [&["--json"][..], &["--once"], &["--csv"]] {
        let out = scenario.run(args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{202e}') && !text.contains('\u{7}'),
            "{args:?}: {text:?}"
        );
        assert!(text.contains("1g.10gb\u{fffd}"), "{args:?}: {text}");
    }
}

#[test]
fn a_handle_gone_stale_in_the_middle_of_a_refresh_is_walked_again_not_shown_as_an_error() {
    // B ends at 1 s. From 0.3 s to 1 s every UUID read sleeps 0.4 s (wall clock) first, so
    // a refresh that got B's handle before 1 s reads its UUID after: the handle is stale.
    let mut s = scenario_with(vec![
        instance(
            1,
            "3g.40gb",
            MIG_A,
            (4 * GIB, 40 * GIB),
            &[4_200_001],
            (0.0, None),
        ),
        instance(
            2,
            "1g.10gb",
            MIG_B,
            (GIB, 10 * GIB),
            &[4_200_002],
            (0.0, Some(1.0)),
        ),
    ]);
    s["blocks"] = json!([{ "function": "nvmlDeviceGetUUID", "device": 0, "from": 0.3,
                           "until": 1.0, "seconds": 0.4 }]);
    let scenario = Scenario::new(&s);
    let (mut child, lines) = looping(&scenario, "0.1");
    let a = format!("3g.40gb@{MIG_A}");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut docs = 0;
    loop {
        let left = deadline
            .checked_duration_since(Instant::now())
            .expect("B never left");
        let doc: Value = serde_json::from_str(&lines.recv_timeout(left).unwrap()).unwrap();
        docs += 1;
        let instances = &doc["devices"][0]["mig"]["instances"];
        assert!(instances.is_array(), "instances unreadable: {doc}");
        for i in instances.as_array().unwrap() {
            assert!(
                i["memory_used"].is_number(),
                "an instance with an error: {i}"
            );
        }
        if profiles(&doc) == [a.clone()] {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(docs >= 2, "B was seen before it left");
}

#[test]
fn a_mig_mode_that_cannot_be_read_is_unknown_not_disabled() {
    // NVML refuses the mode (no permission) on a GPU in MIG mode: the mode is n/a with the
    // reason, never "disabled", and the instances, found by walking them anyway, are shown.
    let work = tempfile::tempdir().unwrap();
    let mut doc = two_instances(4_100_001, 4_100_002);
    doc["faults"] = json!([
        { "function": "nvmlDeviceGetMigMode", "error": "NoPermission" }
    ]);
    let scenario = Scenario::new(&doc);
    let doc = json_of(&scenario, work.path());
    let d0 = &doc["devices"][0];
    assert_eq!(d0["mig_mode"], Value::Null, "{d0:#}");
    assert_eq!(
        d0["unavailable"]["mig_mode"],
        "MIG mode unreadable: no permission"
    );
    assert_eq!(d0["mig"]["enabled"], Value::Null);
    assert_eq!(
        d0["mig_instance_count"], 2,
        "the instances are walked anyway"
    );
    assert_eq!(
        d0["unavailable"]["gpu_util"],
        "NVML does not support it in MIG mode"
    );
    assert_eq!(row(&doc, 4_100_001)["mig_profile"], "3g.40gb");
    // GPU 1 has no instances: its mode is as unknown, and its utilisation says so too.
    let d1 = &doc["devices"][1];
    assert_eq!(d1["mig_mode"], Value::Null);
    assert_eq!(
        d1["unavailable"]["mig_mode"],
        "MIG mode unreadable: no permission"
    );

    let csv = scenario.run(&["--csv"]);
    assert!(csv.status.success(), "{}", stderr(&csv));
    let text = String::from_utf8_lossy(&csv.stdout);
    assert!(!text.contains("disabled"), "no mode made up:\n{text}");
}

#[test]
fn a_single_json_run_with_gpm_has_each_instances_sm_utilisation() {
    // One run, no --loop: it takes GPM's two samples itself, a short interval apart.
    let scenario = Scenario::new(&with_gpm());
    let out = scenario
        .command()
        .args(["--json", "--gpm"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let i0 = &doc["devices"][0]["mig"]["instances"][0];
    assert_eq!(i0["sm_util"], 42, "{i0}");
    let once = scenario.run(&["--once", "--gpm"]);
    assert!(once.status.success(), "{}", stderr(&once));
    let text = String::from_utf8_lossy(&once.stdout);
    assert!(text.contains("sm 42%"), "{text}");
}

#[test]
fn a_recording_holds_an_instances_hostile_profile_and_uuid_cleaned() {
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("mig.jsonl");
    let scenario = Scenario::new(&scenario_with(vec![instance(
        1,
        "1g.10gb\u{1b}]52;c;cHduZWQ=\u{7}\u{202e}",
        "MIG-\u{1b}[2Jaaaa\u{202e}",
        (GIB, 10 * GIB),
        &[4_100_001],
        (0.0, None),
    )]));
    let out = scenario
        .command()
        .env("VRAMSCOPE_DIR", work.path().join("none"))
        .args(["--interval", "100ms", "record", "-o"])
        .arg(&file)
        .args(["--duration", "1s"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("1g.10gb\u{fffd}"), "{text}");
    for raw in ['\u{202e}', '\u{1b}', '\u{7}'] {
        assert!(!text.contains(raw), "U+{:04X} in:\n{text}", raw as u32);
    }
    for escaped in ["\\u001b", "\\u0007"] {
        assert!(!text.contains(escaped), "{escaped} in:\n{text}");
    }
}
