//! Recording benchmark: prints figures, asserts nothing.
//!
//! Writes a synthetic but realistic stream through the real `Recorder` (8 GPUs sampled at
//! 1 Hz with 8 processes each, the host every 2 s as the sampler does, with those 64
//! processes, and 8 instrumented training ranks publishing 50 allocator samples a second),
//! its figures moving like a training run (steps of varying length, activations rising and
//! falling with each batch's sequence length, spikes, the odd cache growth, power and clocks
//! that never repeat exactly), then prints bytes per device sample, per host sample and per
//! allocator point, the 24 h extrapolation against the 500 MB budget, and the writer's CPU
//! time per second of recorded data. Each kind is also written to a file of its own, so its
//! compressed cost is measured rather than apportioned.
//!
//! `cargo bench --bench recording` (add `-- MINUTES` to change the 10 simulated minutes).
//!
//! `cargo bench --bench recording -- --e2e [SECS]` measures the cost where it counts instead:
//! the monitor in a 200x50 tmux pane against the fake NVML library (8 GPUs, 64 real `sleep`
//! processes) with 8 channels written from this process at 50 Hz, at a 1 s refresh, without
//! and with `--record FILE.zst`, alternately, SECS seconds each (default 30), and prints the
//! CPU time per refresh of each (threads' schedstat) and the increase.
//!
//! `cargo bench --bench recording -- --replay-rss [MINUTES...]` writes recordings of those
//! lengths (default 5, 15, 30 and 60 simulated minutes, `.zst`) and prints, for each, the
//! peak RSS of a process that replays it (opens it, plays to the end, jumps to the largest
//! peak, back to the start, to the OOM, a sample forward and 10 s back, as the keys do),
//! with how long each move took, beside the peak RSS of `vramscope report` on the same file.

#[path = "../tests/common/mod.rs"]
mod common;
mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use vramscope::channel::thread_cpu_ns;
use vramscope::model::SourceEvent;
use vramscope::model::{
    Absent, AllocatorDevice, AllocatorEvent, AllocatorPoint, ChannelBatch, ChannelPoll,
    DeviceSample, EventKind, GpuProcess, HostMemory, HostProcess, HostSample, MemoryInfo,
    ProcessKind, WriterIdentity, WriterLiveness,
};
use vramscope::recording::{Header, Recorder, Recording};

const GPUS: usize = 8;
const PROCS_PER_GPU: usize = 8;
const RANK_HZ: u64 = 50;
const HOST_EVERY_S: u64 = 2;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const T0: u64 = 1_760_000_000_000;
const BUDGET_BYTES: f64 = 500e6;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, gpu, dir] = args.as_slice()
        && flag == "--e2e-writer"
    {
        e2e::write_channel(gpu.parse().expect("gpu"), Path::new(dir));
        return;
    }
    if let [_, flag, file] = args.as_slice()
        && flag == "--replay-child"
    {
        replay_rss::child(Path::new(file));
        return;
    }
    if std::env::args().any(|a| a == "--replay-rss") {
        replay_rss::run(&args);
        return;
    }
    if std::env::args().any(|a| a == "--e2e") {
        let seconds = std::env::args()
            .skip(1)
            .find_map(|a| a.parse().ok())
            .unwrap_or(30);
        e2e::run(seconds);
        return;
    }
    let minutes: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(10);
    let seconds = minutes * 60;
    let dir = tempfile::tempdir().expect("tempdir");
    println!(
        "vramscope recording: {GPUS} GPUs x {PROCS_PER_GPU} processes at 1 Hz, host every \
         {HOST_EVERY_S} s, {GPUS} ranks at {RANK_HZ} Hz; {minutes} simulated minutes per file"
    );
    for extension in ["jsonl.zst", "jsonl"] {
        println!("\n{extension}:");
        let all = run(dir.path(), extension, seconds, Kinds::ALL);
        let devices = run(dir.path(), extension, seconds, Kinds::DEVICES);
        let host = run(dir.path(), extension, seconds, Kinds::HOST);
        let channels = run(dir.path(), extension, seconds, Kinds::CHANNELS);
        let per = |bytes: u64, n: u64| bytes as f64 / n.max(1) as f64;
        println!(
            "  {:>10.1} B per device sample ({} samples, each with {PROCS_PER_GPU} processes)",
            per(devices.bytes, devices.device_samples),
            devices.device_samples
        );
        println!(
            "  {:>10.1} B per host sample ({} samples, each with {} processes)",
            per(host.bytes, host.host_samples),
            host.host_samples,
            GPUS * PROCS_PER_GPU
        );
        println!(
            "  {:>10.2} B per allocator point ({} points; with the polls' device figures and \
             {} events)",
            per(channels.bytes, channels.points),
            channels.points,
            channels.events
        );
        let day = all.bytes as f64 * 86_400.0 / seconds as f64;
        println!(
            "  {:>10.1} MB for 24 h (all together: {} B for {seconds} s); budget {:.0} MB: {}",
            day / 1e6,
            all.bytes,
            BUDGET_BYTES / 1e6,
            if day <= BUDGET_BYTES {
                "within"
            } else {
                "OVER"
            }
        );
        println!(
            "  {:>10.3} ms writer CPU per second of recorded data ({:.1} µs per record, \
             {:.2} µs per allocator point)",
            all.cpu.as_secs_f64() * 1e3 / seconds as f64,
            all.cpu.as_secs_f64() * 1e6 / all.records as f64,
            channels.cpu.as_secs_f64() * 1e6 / channels.points.max(1) as f64,
        );
        println!(
            "  {:>10.1} s to read 24 h back (reader CPU, {:.2} ms per second of data)",
            all.read_cpu.as_secs_f64() * 86_400.0 / seconds as f64,
            all.read_cpu.as_secs_f64() * 1e3 / seconds as f64,
        );
    }
}

/// Which kinds of event a run writes.
#[derive(Clone, Copy)]
struct Kinds {
    devices: bool,
    host: bool,
    channels: bool,
}

impl Kinds {
    const ALL: Kinds = Kinds {
        devices: true,
        host: true,
        channels: true,
    };
    const DEVICES: Kinds = Kinds {
        devices: true,
        host: false,
        channels: false,
    };
    const HOST: Kinds = Kinds {
        devices: false,
        host: true,
        channels: false,
    };
    const CHANNELS: Kinds = Kinds {
        devices: false,
        host: false,
        channels: true,
    };
}

#[derive(Default)]
struct Outcome {
    bytes: u64,
    records: u64,
    device_samples: u64,
    host_samples: u64,
    points: u64,
    events: u64,
    cpu: Duration,
    read_cpu: Duration,
}

fn run(dir: &Path, extension: &str, seconds: u64, kinds: Kinds) -> Outcome {
    let path = dir.join(format!("bench-{}.{extension}", rand_name()));
    let mut out = write(&path, seconds, kinds);
    let before = thread_cpu_ns();
    let read = Recording::open(&path)
        .expect("open")
        .events()
        .inspect(|e| assert!(e.is_ok(), "reads back: {e:?}"))
        .count();
    out.read_cpu = Duration::from_nanos(thread_cpu_ns() - before);
    assert!(read as u64 >= out.records, "{read} events read back");
    let _ = std::fs::remove_file(&path);
    out
}

/// Writes `seconds` of the simulation to `path`.
fn write(path: &Path, seconds: u64, kinds: Kinds) -> Outcome {
    let mut sim = Simulation::new(0x5eed);
    let header = Header {
        started_ms: T0,
        ..Header::new(1000)
    };
    let mut out = Outcome::default();
    let mut recorder = Recorder::create(path, header).expect("create");
    for s in 1..=seconds {
        let tick = sim.tick(s);
        let mut batch = Vec::new();
        if kinds.devices {
            out.device_samples += tick.devices.len() as u64;
            batch.extend(
                tick.devices
                    .into_iter()
                    .map(|d| SourceEvent::Device(Box::new(d))),
            );
        }
        if kinds.host
            && let Some(host) = tick.host
        {
            out.host_samples += 1;
            batch.push(SourceEvent::Host(host));
        }
        if kinds.channels {
            out.points += tick
                .channels
                .polls
                .iter()
                .map(|p| p.points.len() as u64)
                .sum::<u64>();
            out.events += tick
                .channels
                .polls
                .iter()
                .map(|p| p.events.len() as u64)
                .sum::<u64>();
            batch.push(SourceEvent::Channels(tick.channels));
        }
        let event = SourceEvent::Batch(batch);
        let before = thread_cpu_ns();
        recorder.record(T0 + s * 1000, &event).expect("record");
        // Live at a 1 s refresh every batch is flushed (each a zstd block of its own); here
        // the batches come faster than the recorder's clock would flush them.
        recorder.flush().expect("flush");
        out.cpu += Duration::from_nanos(thread_cpu_ns() - before);
    }
    out.records = recorder.records();
    let before = thread_cpu_ns();
    recorder.finish().expect("finish");
    out.cpu += Duration::from_nanos(thread_cpu_ns() - before);
    out.bytes = std::fs::metadata(path).expect("size").len();
    out
}

/// Replay's peak memory against the recording's length.
mod replay_rss {
    use super::{Kinds, write};
    use std::path::Path;
    use std::process::Command;
    use std::time::Instant;
    use vramscope::replay::{Command as Key, Replay};

    pub fn run(args: &[String]) {
        let mut minutes: Vec<u64> = args.iter().filter_map(|a| a.parse().ok()).collect();
        if minutes.is_empty() {
            minutes = vec![5, 15, 30, 60];
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let me = std::env::current_exe().expect("this benchmark");
        println!("replay peak RSS against recording length (8 GPUs, 64 processes, 8 ranks)");
        for m in minutes {
            let path = dir.path().join(format!("run-{m}min.jsonl.zst"));
            let out = write(&path, m * 60, Kinds::ALL);
            let (replay_kb, said) = peak_rss_of(Command::new(&me).arg("--replay-child").arg(&path));
            let (report_kb, _) = peak_rss_of(
                Command::new(env!("CARGO_BIN_EXE_vramscope"))
                    .arg("report")
                    .arg(&path),
            );
            println!(
                "{m:>4} min: {:>7.1} MB compressed, {:>8} records; replay peak RSS {:>7.1} MiB \
                 ({}); report {:>6.1} MiB",
                out.bytes as f64 / 1e6,
                out.records,
                replay_kb as f64 / 1024.0,
                said.trim(),
                report_kb as f64 / 1024.0,
            );
            let _ = std::fs::remove_file(&path);
        }
    }

    /// Runs `command` to its end; its peak RSS in kB (the kernel's count, from `wait4`) and
    /// what it printed.
    #[expect(
        clippy::zombie_processes,
        reason = "waited for by wait4, which also gives its peak RSS"
    )]
    fn peak_rss_of(command: &mut Command) -> (i64, String) {
        let child = command
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn");
        let pid = child.id() as libc::pid_t;
        let mut stdout = child.stdout.expect("piped");
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut text).expect("read its output");
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: waits for our own child, whose pid we hold, writing into our own locals.
        let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        assert_eq!(waited, pid, "wait4");
        (usage.ru_maxrss, text)
    }

    /// In the child: replays `file` with the keys' moves, printing how long each took.
    pub fn child(file: &Path) {
        let started = Instant::now();
        let mut replay = Replay::open(file).expect("open the recording");
        let mut monitor = replay.fresh_monitor();
        let mut said = vec![format!("open {:.2} s", started.elapsed().as_secs_f64())];
        for (name, key) in [
            ("end", Key::End),
            ("peak", Key::LargestPeak),
            ("start", Key::Start),
            ("oom", Key::NextOom),
            ("step", Key::SampleForward),
            ("back", Key::Back),
        ] {
            let at = Instant::now();
            replay.command(key, &mut monitor);
            said.push(format!("{name} {:.2} s", at.elapsed().as_secs_f64()));
        }
        let (kept, bytes) = replay.checkpoints();
        said.push(format!(
            "{kept} checkpoints of {:.1} MiB history",
            bytes as f64 / (1 << 20) as f64
        ));
        println!("{}", said.join(", "));
    }
}

fn rand_name() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// splitmix64: deterministic, so every run measures the same stream.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    fn float(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (self.next() >> 11) as f64 / (1u64 << 53) as f64 * (hi - lo)
    }
}

fn round512(bytes: f64) -> u64 {
    (bytes as u64).div_ceil(512) * 512
}

/// One training rank: weights and optimizer state, then activations that rise through the
/// forward pass and fall through the backward, scaled by each batch's sequence length.
struct Rank {
    identity: Arc<WriterIdentity>,
    base: u64,
    /// Bytes per token of each activation tensor of the forward pass.
    per_token: Vec<f64>,
    reserved: u64,
    reserved_peak: u64,
    allocated_peak: u64,
    step: u64,
    step_started_ms: u64,
    step_ms: u64,
    tokens: f64,
    step_peak: u64,
    last_phase: usize,
    true_peak: u64,
    last_allocated: u64,
}

const PHASES: [&str; 3] = ["forward", "backward", "optimizer"];

impl Rank {
    fn new(rank: usize, rng: &mut Rng) -> Rank {
        let base = 30 * GIB + rank as u64 * 37 * MIB;
        Rank {
            identity: Arc::new(WriterIdentity {
                file: format!("{}-98765{rank}.vsc", 41_000 + rank),
                pid: 41_000 + rank as u32,
                kind: "PyTorch".into(),
                framework: "torch 2.5.1+cu124".into(),
                rank: Some(rank as i32),
                local_rank: Some(rank as i32),
                world_size: Some(GPUS as i32),
                job_id: "slurm-4471122".into(),
                command: "python -m torch.distributed.run --nproc-per-node 8 train.py \
                          --config configs/llama-8b.yaml"
                    .into(),
                allocator_config: "expandable_segments:True".into(),
                exact_peaks: true,
                attached: false,
                sample_period_us: 20_000,
                sites: false,
            }),
            base,
            per_token: (0..48)
                .map(|_| rng.float(64.0 * 1024.0, 512.0 * 1024.0))
                .collect(),
            reserved: base + 26 * GIB,
            reserved_peak: base + 26 * GIB,
            allocated_peak: 0,
            step: 1000,
            step_started_ms: T0,
            step_ms: 800,
            tokens: 2048.0,
            step_peak: 0,
            last_phase: 0,
            true_peak: 0,
            last_allocated: base,
        }
    }

    /// Allocated bytes and phase at `at_ms`.
    fn allocated(&self, at_ms: u64) -> (u64, usize) {
        let f = (at_ms - self.step_started_ms) as f64 / self.step_ms as f64;
        let n = self.per_token.len();
        let live = |k: usize| -> f64 { self.per_token[..k].iter().sum::<f64>() * self.tokens };
        if f < 0.4 {
            let k = ((f / 0.4) * n as f64) as usize;
            (self.base + round512(live(k.min(n))), 0)
        } else if f < 0.9 {
            let k = (((0.9 - f) / 0.5) * n as f64) as usize;
            // Gradients accumulate as activations are freed.
            (
                self.base + round512(live(k.min(n)) + 2.0 * GIB as f64 * (f - 0.4)),
                1,
            )
        } else {
            (self.base + GIB + 512 * MIB, 2)
        }
    }

    /// One second of samples ending at `until_ms`, and the events in it.
    fn second(
        &mut self,
        until_ms: u64,
        rng: &mut Rng,
    ) -> (Vec<AllocatorPoint>, Vec<AllocatorEvent>) {
        let mut points = Vec::with_capacity(RANK_HZ as usize);
        let mut events = Vec::new();
        let period = 1000 / RANK_HZ;
        for i in 0..RANK_HZ {
            let at = until_ms - 1000 + (i + 1) * period + rng.below(3);
            while at >= self.step_started_ms + self.step_ms {
                let end = self.step_started_ms + self.step_ms;
                events.push(self.event(
                    end,
                    EventKind::PhaseEnd {
                        peak: Ok(self.step_peak),
                    },
                ));
                events.push(self.event(
                    end,
                    EventKind::StepEnd {
                        peak_allocated: Ok(self.step_peak),
                        peak_reserved: Ok(self.reserved),
                        duration_ns: Ok(self.step_ms * 1_000_000 + rng.below(1_000_000)),
                    },
                ));
                self.step += 1;
                self.step_started_ms = end;
                self.step_ms = 700 + rng.below(250);
                self.tokens = 1024.0 + rng.below(1025) as f64;
                self.step_peak = 0;
                self.last_phase = 0;
                events.push(self.event(end, EventKind::PhaseBegin));
            }
            let (allocated, phase) = self.allocated(at);
            if phase != self.last_phase {
                events.push(self.event(
                    at,
                    EventKind::PhaseEnd {
                        peak: Ok(self.step_peak),
                    },
                ));
                self.last_phase = phase;
                events.push(self.event(at, EventKind::PhaseBegin));
            }
            let spike = if rng.chance(0.2) {
                round512(rng.float(1.0, 256.0) * MIB as f64)
            } else {
                0
            };
            // The interval's peak: where it began, or where it is, plus a passing spike.
            let peak = allocated.max(self.last_allocated) + spike;
            self.last_allocated = allocated;
            if rng.chance(0.002) {
                self.reserved += (1 + rng.below(64)) * 2 * MIB;
            }
            self.reserved = self.reserved.max(peak.div_ceil(2 * MIB) * 2 * MIB);
            self.reserved_peak = self.reserved_peak.max(self.reserved);
            self.step_peak = self.step_peak.max(peak);
            let high = peak > self.true_peak;
            self.true_peak = self.true_peak.max(peak);
            self.allocated_peak = self.allocated_peak.max(peak);
            points.push(AllocatorPoint {
                at_ms: at,
                slot: 0,
                allocated: Some(allocated),
                reserved: Some(self.reserved),
                peak: Some(peak),
                step: Some(self.step),
                new_high_water: high,
                steps_since_attach: false,
            });
        }
        (points, events)
    }

    fn event(&self, at_ms: u64, kind: EventKind) -> AllocatorEvent {
        AllocatorEvent {
            at_ms,
            kind,
            slot: Some(0),
            step: Some(self.step),
            label: PHASES[self.last_phase].into(),
            phase: PHASES[self.last_phase].into(),
        }
    }

    fn device(&self, gpu: usize, latest: &AllocatorPoint, rng: &mut Rng) -> AllocatorDevice {
        let allocated = latest.allocated.unwrap_or(0);
        AllocatorDevice {
            slot: 0,
            ordinal: 0,
            uuid: Some(uuid(gpu)),
            pci_bus_id: Some(format!("0000:{:02x}:00.0", 0x18 + gpu)),
            total: Ok(80 * GIB),
            allocated: Ok(allocated),
            allocated_peak: Ok(self.allocated_peak),
            reserved: Ok(self.reserved),
            reserved_peak: Ok(self.reserved_peak),
            active: Ok(allocated + round512(rng.float(0.0, 64.0) * MIB as f64)),
            inactive_split: Ok(round512(rng.float(0.0, 300.0) * MIB as f64)),
            requested: Ok(allocated - rng.below(4096) * 8),
            alloc_retries: Ok(0),
            ooms: Ok(0),
            device_free: Ok(80 * GIB - self.reserved - 2 * GIB),
            limit: Err(Absent::NotSupported),
            interval_peak: Ok(self.true_peak),
            step_peak: Ok(self.step_peak),
        }
    }
}

fn uuid(gpu: usize) -> String {
    format!("GPU-7f3c2a1e-5b6d-4e8f-9a0b-1c2d3e4f5a{gpu:02x}")
}

struct Simulation {
    rng: Rng,
    ranks: Vec<Rank>,
    temperature: Vec<f64>,
    rss: Vec<u64>,
    commands: Vec<String>,
    host_used: u64,
}

struct Tick {
    devices: Vec<DeviceSample>,
    host: Option<Box<HostSample>>,
    channels: Box<ChannelBatch>,
}

impl Simulation {
    fn new(seed: u64) -> Simulation {
        let mut rng = Rng(seed);
        let ranks = (0..GPUS).map(|r| Rank::new(r, &mut rng)).collect();
        let commands = (0..GPUS * PROCS_PER_GPU)
            .map(|i| match i % PROCS_PER_GPU {
                0 => format!(
                    "python -u train.py --config configs/llama-8b.yaml --local-rank {}",
                    i / PROCS_PER_GPU
                ),
                1..=4 => format!("python -u train.py (dataloader worker {})", i % PROCS_PER_GPU),
                5 => "/usr/bin/python3 -m vllm.entrypoints.openai.api_server --model meta-llama/Llama-3.1-8B".into(),
                6 => "jupyter-kernel --ip=127.0.0.1 --stdin=52113 --control=41707 --hb=39231".into(),
                _ => "/opt/tritonserver/bin/tritonserver --model-repository=/models".into(),
            })
            .collect();
        Simulation {
            rss: (0..GPUS * PROCS_PER_GPU)
                .map(|_| (2 + rng.below(30)) * GIB)
                .collect(),
            rng,
            ranks,
            temperature: vec![62.0; GPUS],
            commands,
            host_used: 600 * GIB,
        }
    }

    fn tick(&mut self, s: u64) -> Tick {
        let now = T0 + s * 1000;
        let mut polls = Vec::with_capacity(GPUS);
        for (gpu, rank) in self.ranks.iter_mut().enumerate() {
            let (points, events) = rank.second(now, &mut self.rng);
            let latest = *points.last().expect("points");
            polls.push(ChannelPoll {
                path: format!("/dev/shm/vramscope-1000/{}", rank.identity.file),
                identity: Arc::clone(&rank.identity),
                host_pid: Some(rank.identity.pid),
                liveness: WriterLiveness::Live,
                devices: vec![rank.device(gpu, &latest, &mut self.rng)],
                step: Some(rank.step),
                label: PHASES[rank.last_phase].into(),
                points,
                events,
                lost_samples: 0,
                lost_events: 0,
            });
        }
        let devices = (0..GPUS).map(|gpu| self.device(gpu, now)).collect();
        let host = s
            .is_multiple_of(HOST_EVERY_S)
            .then(|| Box::new(self.host(now)));
        Tick {
            devices,
            host,
            channels: Box::new(ChannelBatch {
                at_ms: now,
                polls,
                gone: Vec::new(),
                rejected: Vec::new(),
            }),
        }
    }

    fn device(&mut self, gpu: usize, now: u64) -> DeviceSample {
        let rng = &mut self.rng;
        let rank_used = self.ranks[gpu].reserved + 600 * MIB;
        let processes: Vec<GpuProcess> = (0..PROCS_PER_GPU)
            .map(|i| GpuProcess {
                pid: 41_000 + (gpu * PROCS_PER_GPU + i) as u32,
                kind: ProcessKind::Compute,
                used_memory: Ok(if i == 0 {
                    rank_used
                } else {
                    (400 + 40 * i as u64) * MIB
                }),
                sm_util: if i == 0 {
                    Ok(70 + rng.below(30) as u32)
                } else {
                    Ok(rng.below(3) as u32)
                },
                mem_util: if i == 0 {
                    Ok(20 + rng.below(30) as u32)
                } else {
                    Err(Absent::NotAvailable)
                },
                enc_util: Ok(0),
                dec_util: Ok(0),
            })
            .collect();
        let used: u64 = processes
            .iter()
            .filter_map(|p| p.used_memory.as_ref().ok())
            .sum();
        self.temperature[gpu] = (self.temperature[gpu] + rng.float(-0.6, 0.6)).clamp(55.0, 83.0);
        DeviceSample {
            index: gpu as u32,
            at_ms: now - 3 + rng.below(6),
            memory: Ok(MemoryInfo {
                total: 80 * GIB,
                reserved: Some(512 * MIB),
                used,
                free: 80 * GIB - 512 * MIB - used,
            }),
            gpu_util: Ok(85 + rng.below(16) as u32),
            mem_util: Ok(30 + rng.below(30) as u32),
            temperature_c: Ok(self.temperature[gpu] as u32),
            power_mw: Ok(350_000 + rng.below(340_000) as u32),
            power_limit_mw: Ok(700_000),
            sm_clock_mhz: Ok(if rng.chance(0.7) {
                1980
            } else {
                1755 + 15 * rng.below(15) as u32
            }),
            mem_clock_mhz: Ok(2619),
            fan_percent: Err(Absent::NotSupported),
            encoder_util: Ok(0),
            decoder_util: Ok(0),
            throttle_reasons: Ok(if rng.chance(0.3) { 4 } else { 0 }),
            pstate: Ok(0),
            ecc_corrected: Ok(0),
            ecc_uncorrected: Ok(0),
            pcie_tx_kbs: None,
            pcie_rx_kbs: None,
            processes: Ok(processes),
            list_gaps: Default::default(),
            memory_peak: None,
            lost: false,
            mig: None,
        }
    }

    fn host(&mut self, now: u64) -> HostSample {
        let rng = &mut self.rng;
        self.host_used = (self.host_used as i64 + (rng.below(4 * GIB) as i64 - 2 * GIB as i64))
            .clamp(100 * GIB as i64, 1800 * GIB as i64) as u64;
        let processes = (0..GPUS * PROCS_PER_GPU)
            .map(|i| {
                self.rss[i] =
                    (self.rss[i] + rng.below(64) * 4096).saturating_sub(rng.below(64) * 4096);
                HostProcess {
                    pid: 41_000 + i as u32,
                    local_pid: Some(41_000 + i as u32),
                    user: Ok(["alice", "bob", "carol", "svc-infer"][i % 4].into()),
                    command: Ok(self.commands[i].clone()),
                    rss_bytes: Ok(self.rss[i]),
                    cpu_percent: Ok(if i.is_multiple_of(PROCS_PER_GPU) {
                        rng.float(95.0, 130.0) as f32
                    } else {
                        rng.float(0.0, 12.0) as f32
                    }),
                    container: i.is_multiple_of(3).then(|| "3f2a9c1b7d4e".into()),
                    pod: None,
                    pod_unreadable: None,
                    uid: Some(1000 + (i % 4) as u32),
                    starttime: None,
                }
            })
            .collect();
        HostSample {
            at_ms: now + 1,
            load: None,
            memory: Ok(HostMemory {
                total: 2048 * GIB,
                used: self.host_used,
                available: 2048 * GIB - self.host_used,
                swap_total: 0,
                swap_used: 0,
            }),
            processes,
        }
    }
}

/// The monitor itself, without and with `--record`.
mod e2e {
    use super::common::{self, tmux::Tmux};
    use super::support::{self, Children, cpu_ns};
    use super::{GIB, GPUS, PROCS_PER_GPU, RANK_HZ};
    use serde_json::{Value, json};
    use std::path::Path;
    use std::process::Command;
    use std::time::{Duration, Instant};
    use vramscope::channel::{
        DeviceFigures, DeviceIdentity, EventFields, EventKind, SampleFields, Writer, WriterConfig,
        WriterKind, parse_uuid,
    };

    pub fn run(seconds: u64) {
        if !common::tmux::available() {
            std::process::exit(2);
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let channels = dir.path().join("channels");
        // On each GPU one instrumented rank (this benchmark again, writing a channel) and
        // seven other processes.
        let exe = std::env::current_exe().expect("own path");
        let children = Children::spawn(GPUS * PROCS_PER_GPU, |i| {
            if i.is_multiple_of(PROCS_PER_GPU) {
                let mut writer = Command::new(&exe);
                writer
                    .arg("--e2e-writer")
                    .arg((i / PROCS_PER_GPU).to_string())
                    .arg(&channels);
                writer
            } else {
                support::sleep(3600)
            }
        });
        let pids = children.pids();
        let scenario = dir.path().join("scenario.json");
        std::fs::write(&scenario, scenario_json(&pids).to_string()).expect("scenario");
        println!(
            "vramscope in a 200x50 pane: {GPUS} GPUs, {} processes, {GPUS} channels at \
             {RANK_HZ} Hz, 1 s refresh, {seconds} s per run",
            pids.len()
        );
        let mut plain = Vec::new();
        let mut recording = Vec::new();
        for round in 0..3 {
            plain.push(measure(dir.path(), &scenario, &channels, None, seconds));
            let file = dir.path().join(format!("e2e-{round}.jsonl.zst"));
            recording.push(measure(
                dir.path(),
                &scenario,
                &channels,
                Some(&file),
                seconds,
            ));
            let size = std::fs::metadata(&file).map_or(0, |m| m.len());
            println!(
                "  round {round}: {:.3} ms without, {:.3} ms with --record ({} B recorded)",
                plain[round], recording[round], size
            );
        }
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let (a, b) = (mean(&plain), mean(&recording));
        println!(
            "  CPU per refresh: {a:.3} ms without, {b:.3} ms with --record: {:+.1} % \
             (limit +25 %)",
            (b - a) / a * 100.0
        );
    }

    /// CPU ms per refresh of one run.
    fn measure(
        dir: &Path,
        scenario: &Path,
        channels: &Path,
        record: Option<&Path>,
        seconds: u64,
    ) -> f64 {
        let run_dir = tempfile::tempdir_in(dir).expect("run dir");
        let record = record
            .map(|f| format!("--record {}", f.display()))
            .unwrap_or_default();
        let command = format!(
            "env FAKE_NVML_SCENARIO={} VRAMSCOPE_DIR={} {} --nvml-lib {} --interval 1s {record}",
            scenario.display(),
            channels.display(),
            env!("CARGO_BIN_EXE_vramscope"),
            common::fake_nvml().display(),
        );
        let pane = Tmux::start(run_dir.path(), 200, 50, &command);
        let pid = pane.pid();
        // Past start-up (NVML opening, the channels' first full read).
        std::thread::sleep(Duration::from_secs(3));
        let before = cpu_ns(pid).expect("task dir");
        let start = Instant::now();
        std::thread::sleep(Duration::from_secs(seconds));
        let used = cpu_ns(pid).expect("task dir") - before;
        let refreshes = start.elapsed().as_secs_f64();
        pane.keys(&["q"]);
        std::thread::sleep(Duration::from_millis(500));
        drop(pane);
        used / 1e6 / refreshes
    }

    /// The rank on GPU `g`, sampling at `RANK_HZ` like a training loop, until killed.
    pub fn write_channel(g: usize, dir: &Path) {
        let mut w = Writer::create(WriterConfig {
            framework: "torch 2.5.1+cu124".into(),
            rank: Some(g as i32),
            dir: Some(dir.to_path_buf()),
            ..WriterConfig::from_process(WriterKind::Rust)
        })
        .expect("channel");
        w.add_device(DeviceIdentity {
            ordinal: 0,
            uuid: parse_uuid(&super::uuid(g)),
            pci_bus_id: None,
            total: Some(80 * GIB),
        })
        .expect("slot");
        let mut rng = super::Rng(7 + g as u64);
        for i in 0u64.. {
            let allocated = 30 * GIB + (i % 40) * (300 << 20) + rng.below(1 << 20) * 512;
            w.sample(&SampleFields {
                slot: 0,
                allocated: Some(allocated),
                reserved: Some(56 * GIB),
                peak: Some(allocated + rng.below(2) * (64 << 20)),
                step: Some(i / 40),
                ..SampleFields::default()
            });
            if i % 40 == 39 {
                w.event(&EventFields {
                    slot: Some(0),
                    step: Some(i / 40),
                    args: [allocated, 56 * GIB, 800_000_000, 0, 0, 0],
                    text: "train",
                    ..EventFields::new(EventKind::StepEnd)
                });
            }
            if i.is_multiple_of(10) {
                w.publish_device(
                    0,
                    &DeviceFigures {
                        allocated: Some(allocated),
                        reserved: Some(56 * GIB),
                        ..DeviceFigures::default()
                    },
                );
                w.status(Some(i / 40), ["forward", "backward"][(i / 20 % 2) as usize]);
            }
            std::thread::sleep(Duration::from_millis(1000 / RANK_HZ));
        }
    }

    fn scenario_json(pids: &[u32]) -> Value {
        let devices: Vec<Value> = (0..GPUS)
            .map(|g| {
                let mine = &pids[g * PROCS_PER_GPU..(g + 1) * PROCS_PER_GPU];
                let util: Vec<Value> = (0..600)
                    .flat_map(|s| {
                        mine.iter().map(move |pid| {
                            json!({ "t": s as f64 * 0.5, "pid": pid, "sm": 40 + s % 20, "mem": 10 })
                        })
                    })
                    .collect();
                let timeline: Vec<Value> = (0..600)
                    .map(|s| {
                        let power = 400_000 + s * 37;
                        support::timeline_point(s as f64 * 0.5, s % 7, 50 + s % 40, power)
                    })
                    .collect();
                support::h100(g, super::uuid(g), mine, timeline, util)
            })
            .collect();
        json!({ "devices": devices })
    }
}
