//! Makes the recording `vramscope demo` plays (assets/demo.jsonl.zst): `vramscope record`
//! runs against the fake NVML library while this process plays an instrumented PyTorch-like
//! training run through the channel, so the recording holds both NVML's and the allocator's
//! figures exactly as a real run would. The run is simulated and the demo says so.
//!
//!     cargo build --workspace && cargo run --example make_demo -- assets/demo.jsonl.zst
//!
//! The story, two minutes long: the model loads; training steps of two seconds each, whose
//! activations rise in the forward pass and peak in the backward pass, slowly leaking; one
//! step spikes for a tenth of a second (an attention matrix); the allocator's cache grows; at
//! the end a step asks for more than is free and the run dies of an OOM.

use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use vramscope::channel::{
    DeviceFigures, DeviceIdentity, EventFields, EventKind, Exit, SampleFields, Writer,
    WriterConfig, WriterKind, parse_uuid,
};

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;
const TOTAL: u64 = 80 * GIB;
const UUID0: &str = "GPU-5a1d4c2e-0f3b-4b7e-9d61-3c8a2f7e1b90";
const UUID1: &str = "GPU-7c2e9b14-6a5d-4e3f-8b21-0d9f4a6c3e57";
/// The CUDA context and libraries: NVML's figure beyond the allocator's reserve.
const CONTEXT: u64 = 612 * MIB;
const STEP_S: f64 = 2.0;
const LOAD_S: f64 = 8.0;
const OOM_AT_S: f64 = 112.0;
const SPIKE_STEP: u64 = 26;

/// 160 MiB more kept alive each step: a list of losses left on the GPU, the slow leak.
fn base(step: u64) -> u64 {
    14 * GIB + step * 160 * MIB
}

/// The highest allocation of a whole step, at its backward pass.
fn step_high(step: u64) -> u64 {
    base(step) + 26 * GIB + if step == SPIKE_STEP { 22 * GIB } else { 0 }
}

/// The allocator's figures at `t` seconds: (allocated, reserved, step, phase).
fn figures(t: f64) -> (u64, u64, u64, &'static str) {
    if t < LOAD_S {
        // Weights, then optimizer state.
        let allocated = (t / LOAD_S * 14.0 * GIB as f64) as u64;
        return (allocated, round_up(allocated + GIB), 0, "load");
    }
    let since = t - LOAD_S;
    let step = (since / STEP_S) as u64 + 1;
    let within = since % STEP_S / STEP_S;
    let g = GIB as f64;
    let (extra, phase) = if within < 0.4 {
        (within / 0.4 * 18.0 * g, "forward")
    } else if within < 0.8 {
        let spike = step == SPIKE_STEP && (0.6..0.65).contains(&within);
        let climb = 18.0 * g + (within - 0.4) / 0.4 * 8.0 * g;
        (climb + if spike { 22.0 * g } else { 0.0 }, "backward")
    } else {
        ((1.0 - within) / 0.2 * 2.0 * g, "optimizer")
    };
    let allocated = base(step) + extra as u64;
    // The caching allocator keeps the segments it once needed: reserved is the highest
    // allocation so far, in 2 GiB segments, and never shrinks.
    let earlier = (1..step).map(step_high).max().unwrap_or(0);
    (allocated, round_up(earlier.max(allocated)), step, phase)
}

fn round_up(bytes: u64) -> u64 {
    bytes.div_ceil(2 * GIB) * 2 * GIB
}

/// The fake NVML's view: the GPU and the process, every half second of the run.
fn scenario(pid: u32) -> serde_json::Value {
    let mut timeline = Vec::new();
    let mut processes = Vec::new();
    let mut s = 0.0;
    while s <= OOM_AT_S + 10.0 {
        let (allocated, reserved, _, _) = if s < OOM_AT_S {
            figures(s)
        } else {
            (0, 0, 0, "")
        };
        let used_by_job = if s < OOM_AT_S + 0.5 {
            reserved + CONTEXT
        } else {
            0
        };
        let util = if (LOAD_S..=OOM_AT_S).contains(&s) {
            92 + (allocated / GIB % 7) as u32
        } else {
            3
        };
        timeline.push(json!({
            "t": s, "memory_used": used_by_job + 420 * MIB, "gpu_util": util, "mem_util": util / 2,
            "temperature": 58 + util / 8, "power": 120_000 + util * 5_200, "sm_clock": 1980,
            "mem_clock": 2619, "encoder": 0, "decoder": 0, "throttle_reasons": 0,
            "ecc_corrected": 0, "ecc_uncorrected": 0, "pstate": 0,
        }));
        let compute = if used_by_job > 0 {
            json!([{ "pid": pid, "used_memory": used_by_job }])
        } else {
            json!([])
        };
        processes.push(json!({ "t": s, "compute": compute }));
        s += 0.5;
    }
    let gpu = |index: u32,
               uuid: &str,
               timeline: serde_json::Value,
               processes: serde_json::Value| {
        json!({
            "name": "NVIDIA H100 80GB HBM3", "uuid": uuid,
            "pci_bus_id": format!("00000000:{:02X}:00.0", 0x18 + index),
            "memory_total": TOTAL, "memory_reserved": 512 * MIB, "max_sm_clock": 1980,
            "max_mem_clock": 2619, "power_limit": 700_000, "num_fans": 0, "persistence_mode": true,
            "timeline": timeline, "processes": processes, "process_utilization": [],
        })
    };
    let idle = json!([{ "t": 0, "memory_used": 420 * MIB, "gpu_util": 0, "mem_util": 0,
        "temperature": 34, "power": 68_000, "sm_clock": 345, "mem_clock": 2619, "encoder": 0,
        "decoder": 0, "throttle_reasons": 0, "ecc_corrected": 0, "ecc_uncorrected": 0,
        "pstate": 8 }]);
    json!({ "devices": [
        gpu(0, UUID0, json!(timeline), json!(processes)),
        gpu(1, UUID1, idle, json!([])),
    ] })
}

/// The writer runs as a child named like the training script it plays, so that the process
/// table shows `python train.py ...` rather than this program.
const ROLE: &str = "VRAMSCOPE_DEMO_WRITER";
const TRAIN_ARGS: [&str; 5] = ["train.py", "--model", "gpt-1.3b", "--batch", "24"];

fn main() {
    if let Ok(work) = std::env::var(ROLE) {
        play_training(Path::new(&work));
        return;
    }
    let out = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "assets/demo.jsonl.zst".into()),
    );
    let exe = std::env::current_exe().expect("own path");
    let target = exe.parent().and_then(Path::parent).expect("target dir");
    let vramscope = target.join("vramscope");
    let fake = target.join("deps/libfake_nvml.so");
    assert!(
        vramscope.exists() && fake.exists(),
        "run `cargo build --workspace` first"
    );
    let work = std::env::temp_dir().join(format!("vramscope-demo-{}", std::process::id()));
    std::fs::create_dir_all(&work).expect("work dir");
    use std::os::unix::process::CommandExt;
    let mut training = Command::new(&exe)
        .arg0("python")
        .args(TRAIN_ARGS)
        .env(ROLE, &work)
        .spawn()
        .expect("start the training");
    let scenario_path = work.join("scenario.json");
    std::fs::write(&scenario_path, scenario(training.id()).to_string()).expect("scenario");
    let channels = work.join("channels");
    let _ = std::fs::remove_file(&out);
    let mut recorder = Command::new(&vramscope)
        .env("FAKE_NVML_SCENARIO", &scenario_path)
        .env("VRAMSCOPE_DIR", &channels)
        .arg("--nvml-lib")
        .arg(&fake)
        .args(["record", "--interval", "0.5", "-o"])
        .arg(&out)
        .stdout(Stdio::inherit())
        .spawn()
        .expect("start the recorder");
    // The fake's clock starts when the recorder opens NVML: the training starts with it.
    std::thread::sleep(Duration::from_millis(150));
    std::fs::write(work.join("go"), b"").expect("go");
    training.wait().expect("training");
    std::thread::sleep(Duration::from_secs(4));
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(recorder.id() as i32, libc::SIGINT) };
    let status = recorder.wait().expect("recorder");
    assert!(status.success(), "the recorder failed: {status}");
    let _ = std::fs::remove_dir_all(&work);
    let size = std::fs::metadata(&out).map(|m| m.len()).unwrap_or(0);
    println!("wrote {} ({size} bytes)", out.display());
}

/// The instrumented "training": waits for the recorder, then plays the story.
fn play_training(work: &Path) {
    while !work.join("go").exists() {
        std::thread::sleep(Duration::from_millis(5));
    }
    let started = Instant::now();
    let channels = work.join("channels");
    let mut writer = Writer::create(WriterConfig {
        framework: "torch 2.5.1+cu124 (simulated)".into(),
        sample_period_us: 50_000,
        rank: Some(0),
        local_rank: Some(0),
        world_size: Some(1),
        job_id: "demo".into(),
        cmdline: format!("python {}", TRAIN_ARGS.join(" ")),
        dir: Some(channels.clone()),
        ..WriterConfig::from_process(WriterKind::PyTorch)
    })
    .expect("channel");
    let slot = writer
        .add_device(DeviceIdentity {
            ordinal: 0,
            uuid: parse_uuid(UUID0),
            pci_bus_id: None,
            total: Some(TOTAL),
        })
        .expect("slot");
    let mut last_step = 0;
    let mut last_phase = "";
    let mut step_peak = 0;
    let mut phase_peak = 0;
    let mut high = 0;
    let mut retries = 0;
    loop {
        let t = started.elapsed().as_secs_f64();
        if t >= OOM_AT_S {
            break;
        }
        let (allocated, reserved, step, phase) = figures(t);
        let phase_id = writer.intern(phase);
        if phase != last_phase {
            if !last_phase.is_empty() {
                let mut end = EventFields::new(EventKind::PhaseEnd);
                end.text = last_phase;
                end.slot = Some(0);
                end.step = Some(last_step);
                end.args[0] = phase_peak;
                writer.event(&end);
                phase_peak = 0;
            }
            let mut begin = EventFields::new(EventKind::PhaseBegin);
            begin.text = phase;
            begin.slot = Some(0);
            begin.step = Some(step);
            writer.event(&begin);
            last_phase = phase;
            writer.status(Some(step), phase);
        }
        if step != last_step {
            let mut end = EventFields::new(EventKind::StepEnd);
            end.step = Some(last_step);
            end.slot = Some(0);
            end.args[0] = step_peak;
            end.args[1] = reserved;
            end.args[2] = (STEP_S * 1e9) as u64;
            writer.event(&end);
            step_peak = 0;
            last_step = step;
        }
        step_peak = step_peak.max(allocated);
        phase_peak = phase_peak.max(allocated);
        let mut flags = 0;
        if allocated > high + GIB {
            let mut event = EventFields::new(EventKind::NewHighWater);
            event.slot = Some(0);
            event.step = Some(step);
            event.args[0] = allocated;
            event.args[1] = high;
            event.text = phase;
            writer.event(&event);
            high = allocated;
            flags |= 1 << 1;
        }
        if step == SPIKE_STEP + 1 && retries == 0 {
            retries = 1;
            let mut event = EventFields::new(EventKind::AllocRetry);
            event.slot = Some(0);
            event.args[0] = retries;
            writer.event(&event);
        }
        writer.sample(&SampleFields {
            slot: slot as u8,
            flags,
            phase: phase_id,
            allocated: Some(allocated),
            reserved: Some(reserved),
            peak: Some(allocated),
            active: Some(allocated),
            step: Some(step),
            ..SampleFields::default()
        });
        writer.publish_device(
            slot,
            &DeviceFigures {
                allocated: Some(allocated),
                allocated_peak: Some(high.max(allocated)),
                reserved: Some(reserved),
                reserved_peak: Some(reserved),
                active: Some(allocated),
                inactive_split: Some(reserved.saturating_sub(allocated) / 5),
                alloc_retries: Some(retries),
                ooms: Some(0),
                device_free: Some(TOTAL - reserved - CONTEXT - 420 * MIB),
                limit: None,
                ..DeviceFigures::default()
            },
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The last step asks for 24 GiB of activations with about 11 GiB free.
    let (allocated, reserved, step, _) = figures(OOM_AT_S - 0.05);
    let free = TOTAL - reserved - CONTEXT - 420 * MIB;
    let mut oom = EventFields::new(EventKind::Oom);
    oom.slot = Some(0);
    oom.step = Some(step);
    oom.text = "forward/model.layers.23.attn";
    oom.args = [24 * GIB, free, TOTAL, allocated, reserved, retries];
    writer.event(&oom);
    writer.publish_device(
        slot,
        &DeviceFigures {
            allocated: Some(allocated),
            allocated_peak: Some(high),
            reserved: Some(reserved),
            reserved_peak: Some(reserved),
            alloc_retries: Some(retries),
            ooms: Some(1),
            device_free: Some(free),
            ..DeviceFigures::default()
        },
    );
    writer.status(Some(step), "forward/model.layers.23.attn");
    writer
        .finish(Exit::Error(
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 24.00 GiB".into(),
        ))
        .expect("finish");
}
