//! vramscope against nvitop and gpustat, side by side, on the same fake GPUs: prints figures,
//! asserts nothing about time.
//!
//! nvitop and gpustat are installed from the Python package index into a private virtual
//! environment (`target/peers-venv`, pinned versions; `VRAMSCOPE_PEERS_PIP` overrides the pip
//! arguments). All three tools load the same copy of the fake NVML library: the peers through
//! the dynamic loader (`libnvidia-ml.so.1` on `LD_LIBRARY_PATH`, as nvidia-ml-py loads it),
//! vramscope with `--nvml-lib` pointing at that same file. The GPU processes of each scenario
//! are real `sleep` processes, so host-side lookups (psutil in the peers, /proc in vramscope)
//! do real work.
//!
//! Per scenario (1 GPU x 4 processes, 8 x 64, 8 x 512), tool and interval (1 s, 250 ms), each
//! run `--repeats` times in a 200x50 tmux pane (tools interleaved, order rotated):
//! - CPU time per refresh: the CPU time of the tool's process (its threads' schedstat, ns; the
//!   10 ms ticks of /proc/PID/stat are printed beside) over `--seconds` of steady state,
//!   divided by the refreshes it made, counted as its memory reads per GPU in the fake's call
//!   counts (vramscope's utilisation reads: it also reads memory alone between refreshes) (gpustat cannot keep a 250 ms period with 8 GPUs: it sleeps 0.1 s per GPU);
//! - time from start to first full frame: from the `exec` of the tool (the pane's shell writes
//!   the time) to the first capture of the pane showing min(8, all) of the scenario's PIDs
//!   with their command, the pane polled every 5 ms; vramscope's own figure
//!   (VRAMSCOPE_FIRST_FRAME_FILE: every GPU's data, host details not awaited) beside;
//! - peak RSS (VmHWM) and NVML calls per refresh (the fake's counters).
//!
//! Then `--oneshots` timed one-shot runs per tool (`vramscope --once`, `gpustat`, `nvitop -1`)
//! and one structured read per tool (`vramscope --json`, `gpustat --json`, `nvitop -1`) whose
//! memory and process figures are checked against the scenario, i.e. against what NVML
//! reported. Every figure is the median of its runs; the table gives ratios to vramscope and
//! the issue's targets. Screens, outputs and counts of every run are kept under `--out`.
//!
//! `cargo bench --bench peers` (official: 30 s per run, 3 repeats); a smoke run:
//! `cargo bench --bench peers -- --seconds 5 --repeats 1 --scenarios 1x4`. With
//! `VRAMSCOPE_PEERS_BIN=/path/to/vramscope` another build is measured (before and after).

#[path = "../tests/common/mod.rs"]
mod common;
mod support;

use common::tmux::{self, Tmux};
use common::{GIB, MIB};
use common::{parse_counts, read_counts, read_counts_text};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use support::{Children, cpu_ns, cpu_ticks, peak_rss_kb};

const COLS: u16 = 200;
const ROWS: u16 = 50;
/// What `target/peers-venv` gets when `VRAMSCOPE_PEERS_PIP` is unset: pinned, so that a rerun
/// measures the same code.
const DEFAULT_PIP: &str = "nvitop==1.7.2 gpustat==1.1.1 nvidia-ml-py==13.615.71 psutil==7.2.2";
const PIP_ENV: &str = "VRAMSCOPE_PEERS_PIP";
/// Another vramscope binary to measure (a build before and after a change) instead of this
/// checkout's.
const BIN_ENV: &str = "VRAMSCOPE_PEERS_BIN";
/// Steady state starts this long after the first full frame.
const WARMUP: Duration = Duration::from_secs(2);
const FIRST_FRAME_TIMEOUT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(5);
/// A frame is full when it shows this many of the scenario's PIDs (or all, if fewer).
const PIDS_IN_FULL_FRAME: usize = 8;
/// Variables of this shell that would change how the tools run (Python writes to stdout
/// unbuffered with PYTHONUNBUFFERED, a common container default); unset for every tool.
const UNSET: &[&str] = &[
    "PYTHONUNBUFFERED",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONPATH",
    "PYTHONHOME",
    "VRAMSCOPE_NVML_LIB",
    "VRAMSCOPE_FIRST_FRAME_FILE",
    "FAKE_NVML_TIME_SCALE",
    "CUDA_VISIBLE_DEVICES",
    "NVITOP_MONITOR_MODE",
];

fn main() {
    let opts = Options::parse();
    if !tmux::available() {
        std::process::exit(2);
    }
    let target = target_dir();
    let venv = match ensure_venv(&target.join("peers-venv")) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("peers: cannot set up the Python environment: {e}");
            std::process::exit(2);
        }
    };
    let out = opts.out.clone().unwrap_or_else(|| {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        target.join("peers-bench").join(secs.to_string())
    });
    std::fs::create_dir_all(&out).expect("output folder");
    // One copy of the fake for all three tools, named as the driver's library.
    let lib_dir = out.join("lib");
    std::fs::create_dir_all(&lib_dir).expect("lib folder");
    let lib = lib_dir.join("libnvidia-ml.so.1");
    std::fs::copy(common::fake_nvml(), &lib).expect("copy the fake NVML");
    let counts_dir = support::counts_dir("vramscope-peers");
    let env = Env {
        vramscope: std::env::var_os(BIN_ENV).map_or_else(
            || PathBuf::from(env!("CARGO_BIN_EXE_vramscope")),
            PathBuf::from,
        ),
        venv_bin: venv.join("bin"),
        lib,
        lib_dir,
        counts_dir: counts_dir.path().to_path_buf(),
        out: out.clone(),
    };

    let mut header = String::new();
    let _ = writeln!(
        header,
        "vramscope vs peers: {COLS}x{ROWS} tmux pane, {} s per measured run after {} s of \
         warm-up, {} repeat(s) per figure (median), {} one-shot run(s) per tool",
        opts.seconds,
        WARMUP.as_secs(),
        opts.repeats,
        opts.oneshots
    );
    let _ = writeln!(header, "{}", environment_line(&env));
    let _ = writeln!(header, "output: {}", out.display());
    if let Some(floor) = support::idle_wake_cost_us(Duration::from_millis(100), 50) {
        let _ = writeln!(
            header,
            "wake floor: a thread that only sleeps 100 ms and wakes costs {floor:.1} µs of CPU \
             per wake here, so vramscope's 9 peeks a second cost at least {:.3} ms per 1 s refresh",
            floor * 9.0 / 1000.0
        );
    }
    print!("{header}");

    let mut report = Report::default();
    for shape in &opts.shapes {
        let scenario = ScenarioRun::start(shape, &opts, &env);
        eprintln!("== {} ==", shape.label());
        for tool in &opts.tools {
            // Untimed: warms the page cache and Python's bytecode cache.
            let _ = run_oneshot(&env, &scenario, *tool, "warmup", tool.oneshot_args(&env));
        }
        for interval_ms in &opts.intervals_ms {
            for r in 0..opts.repeats {
                let order = rotated(&opts.tools, r);
                for tool in order {
                    let res = run_monitor(&env, &scenario, tool, *interval_ms, r, &opts);
                    eprintln!("   {}", res.line(tool, *interval_ms));
                    report
                        .monitor
                        .entry((shape.label(), tool, *interval_ms))
                        .or_default()
                        .push(res);
                }
            }
        }
        for r in 0..opts.oneshots {
            let order = rotated(&opts.tools, r);
            for tool in order {
                let o = run_oneshot(
                    &env,
                    &scenario,
                    tool,
                    &format!("once-{r}"),
                    tool.oneshot_args(&env),
                );
                eprintln!(
                    "   {:<9} one-shot {:>8.1} ms, {} NVML calls{}",
                    tool.name(),
                    o.wall_ms,
                    o.calls,
                    if o.ok { "" } else { "  (FAILED)" }
                );
                report
                    .oneshot
                    .entry((shape.label(), tool))
                    .or_default()
                    .push(o);
            }
        }
        let mut agreement = Vec::new();
        for tool in &opts.tools {
            let o = run_oneshot(&env, &scenario, *tool, "data", tool.data_args(&env));
            let findings = match tool.read_figures(&o.stdout) {
                Ok(seen) => scenario.truth.check(&seen, *tool),
                Err(e) => vec![format!("cannot read its output: {e}")],
            };
            agreement.push((*tool, findings));
        }
        report.agreement.push((shape.label(), agreement));
        scenario.stop();
    }

    let text = header + &report.render(&opts);
    println!("\n{}", text.split_once('\n').map_or("", |(_, rest)| rest));
    let _ = std::fs::write(out.join("results.txt"), &text);
    let _ = std::fs::write(
        out.join("results.json"),
        serde_json::to_vec_pretty(&report.to_json()).unwrap_or_default(),
    );
}

/// The tools in the order of run `r`: each goes first as often as the others.
fn rotated(tools: &[Tool], r: usize) -> Vec<Tool> {
    let mut order = tools.to_vec();
    let n = order.len().max(1);
    order.rotate_left(r % n);
    order
}

// ---------------------------------------------------------------------------------------------
// Options

#[derive(Clone)]
struct Shape {
    gpus: usize,
    procs: usize,
}

impl Shape {
    fn label(&self) -> String {
        format!("{}x{}", self.gpus, self.procs)
    }

    fn parse(s: &str) -> Option<Shape> {
        let (g, p) = s.split_once('x')?;
        let shape = Shape {
            gpus: g.trim().parse().ok()?,
            procs: p.trim().parse().ok()?,
        };
        (shape.gpus > 0 && shape.procs >= shape.gpus && shape.procs.is_multiple_of(shape.gpus))
            .then_some(shape)
    }
}

struct Options {
    seconds: u64,
    repeats: usize,
    oneshots: usize,
    shapes: Vec<Shape>,
    intervals_ms: Vec<u64>,
    tools: Vec<Tool>,
    out: Option<PathBuf>,
}

const USAGE: &str = "\
usage: cargo bench --bench peers -- [--seconds N] [--repeats N] [--oneshots N]
         [--scenarios 1x4,8x64,8x512] [--intervals 1000,250] [--tools vramscope,nvitop,gpustat]
         [--out DIR]
  --seconds    measured seconds per monitor run (default 30)
  --repeats    monitor runs per tool, scenario and interval (default 3)
  --oneshots   timed one-shot runs per tool and scenario (default 5)
  --scenarios  GPUSxPROCESSES, processes spread evenly over the GPUs
  --intervals  refresh periods in ms
  --out        where screens, outputs and results go (default target/peers-bench/<time>)";

impl Options {
    fn parse() -> Options {
        let mut o = Options {
            seconds: 30,
            repeats: 3,
            oneshots: 5,
            shapes: ["1x4", "8x64", "8x512"]
                .iter()
                .filter_map(|s| Shape::parse(s))
                .collect(),
            intervals_ms: vec![1000, 250],
            tools: Tool::ALL.to_vec(),
            out: None,
        };
        let args: Vec<String> = std::env::args().skip(1).collect();
        let mut i = 0;
        let fail = |msg: String| -> ! {
            eprintln!("peers: {msg}\n{USAGE}");
            std::process::exit(2)
        };
        while i < args.len() {
            let flag = args[i].as_str();
            let value = || {
                args.get(i + 1)
                    .cloned()
                    .unwrap_or_else(|| fail(format!("{flag} needs a value")))
            };
            let number = |v: String| -> u64 {
                v.parse()
                    .unwrap_or_else(|_| fail(format!("{flag}: not a number: {v}")))
            };
            match flag {
                // cargo passes --bench to harness = false benchmarks.
                "--bench" => i += 1,
                "-h" | "--help" => {
                    println!("{USAGE}");
                    std::process::exit(0);
                }
                "--seconds" => {
                    o.seconds = number(value()).max(1);
                    i += 2;
                }
                "--repeats" => {
                    o.repeats = number(value()).max(1) as usize;
                    i += 2;
                }
                "--oneshots" => {
                    o.oneshots = number(value()) as usize;
                    i += 2;
                }
                "--scenarios" => {
                    let v = value();
                    o.shapes = v
                        .split(',')
                        .map(|s| {
                            Shape::parse(s).unwrap_or_else(|| {
                                fail(format!("bad scenario {s:?}: GPUSxPROCESSES, e.g. 8x64"))
                            })
                        })
                        .collect();
                    i += 2;
                }
                "--intervals" => {
                    let v = value();
                    o.intervals_ms = v.split(',').map(|s| number(s.to_owned()).max(1)).collect();
                    i += 2;
                }
                "--tools" => {
                    let v = value();
                    o.tools = v
                        .split(',')
                        .map(|s| {
                            Tool::ALL
                                .into_iter()
                                .find(|t| t.name() == s)
                                .unwrap_or_else(|| fail(format!("unknown tool {s:?}")))
                        })
                        .collect();
                    i += 2;
                }
                "--out" => {
                    o.out = Some(PathBuf::from(value()));
                    i += 2;
                }
                other => fail(format!("unknown argument {other:?}")),
            }
        }
        o
    }
}

// ---------------------------------------------------------------------------------------------
// The tools

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Hash)]
enum Tool {
    Vramscope,
    Nvitop,
    Gpustat,
}

struct Env {
    vramscope: PathBuf,
    venv_bin: PathBuf,
    /// The one fake library all three load.
    lib: PathBuf,
    lib_dir: PathBuf,
    counts_dir: PathBuf,
    out: PathBuf,
}

fn seconds_arg(ms: u64) -> String {
    format!("{}", ms as f64 / 1000.0)
}

impl Tool {
    const ALL: [Tool; 3] = [Tool::Vramscope, Tool::Nvitop, Tool::Gpustat];

    fn name(self) -> &'static str {
        match self {
            Tool::Vramscope => "vramscope",
            Tool::Nvitop => "nvitop",
            Tool::Gpustat => "gpustat",
        }
    }

    fn program(self, env: &Env) -> String {
        match self {
            Tool::Vramscope => env.vramscope.display().to_string(),
            Tool::Nvitop => env.venv_bin.join("nvitop").display().to_string(),
            Tool::Gpustat => env.venv_bin.join("gpustat").display().to_string(),
        }
    }

    fn with(self, env: &Env, args: &[&str]) -> Vec<String> {
        let mut v = vec![self.program(env)];
        if self == Tool::Vramscope {
            v.extend(["--nvml-lib".to_owned(), env.lib.display().to_string()]);
        }
        v.extend(args.iter().map(|s| (*s).to_owned()));
        v
    }

    /// The live monitor at `interval_ms`. nvitop in its default mode (`auto`: `full` with one
    /// GPU, `compact` with eight in 50 rows); gpustat with the user, command and PID of each
    /// process (what the other two show; it reads them either way).
    fn monitor_args(self, env: &Env, interval_ms: u64) -> Vec<String> {
        let secs = seconds_arg(interval_ms);
        match self {
            Tool::Vramscope => self.with(env, &["--interval", &format!("{interval_ms}ms")]),
            Tool::Nvitop => self.with(env, &["--monitor", "auto", "--interval", &secs]),
            Tool::Gpustat => self.with(
                env,
                &[
                    "--show-user",
                    "--show-cmd",
                    "--show-pid",
                    "--interval",
                    &secs,
                ],
            ),
        }
    }

    /// One-shot output as the issue names it.
    fn oneshot_args(self, env: &Env) -> Vec<String> {
        match self {
            Tool::Vramscope => self.with(env, &["--once"]),
            Tool::Nvitop => self.with(env, &["-1"]),
            Tool::Gpustat => self.with(env, &[]),
        }
    }

    /// The most structured output each has, for the figures check.
    fn data_args(self, env: &Env) -> Vec<String> {
        match self {
            Tool::Vramscope => self.with(env, &["--json"]),
            Tool::Nvitop => self.with(env, &["-1"]),
            Tool::Gpustat => self.with(env, &["--json"]),
        }
    }

    fn read_figures(self, stdout: &str) -> Result<Seen, String> {
        match self {
            Tool::Vramscope => read_vramscope_json(stdout),
            Tool::Gpustat => read_gpustat_json(stdout),
            Tool::Nvitop => read_nvitop_text(stdout),
        }
    }
}

/// `target/`, from this benchmark's path (`target/<profile>/deps/peers-<hash>`).
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("benchmark path");
    exe.ancestors()
        .nth(3)
        .map(Path::to_path_buf)
        .expect("target folder")
}

/// Creates the virtual environment and installs the peers from the package index (a no-op
/// when the pinned versions are there already).
fn ensure_venv(venv: &Path) -> Result<PathBuf, String> {
    let python = venv.join("bin").join("python");
    if !python.exists() {
        eprintln!("peers: creating {}", venv.display());
        let ok = Command::new("python3")
            .args(["-m", "venv"])
            .arg(venv)
            .status()
            .map_err(|e| format!("python3 -m venv: {e}"))?
            .success();
        if !ok {
            return Err("python3 -m venv failed (Debian: apt-get install python3-venv)".into());
        }
    }
    let spec = std::env::var(PIP_ENV).unwrap_or_else(|_| DEFAULT_PIP.to_owned());
    let have = |name: &str| venv.join("bin").join(name).exists();
    let pinned_present = spec.split_whitespace().all(|req| {
        let Some((name, version)) = req.split_once("==") else {
            return false;
        };
        let dist = name.replace('-', "_");
        std::fs::read_dir(venv.join("lib"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|py| {
                py.path()
                    .join("site-packages")
                    .join(format!("{dist}-{version}.dist-info"))
                    .exists()
            })
    });
    if !(have("nvitop") && have("gpustat") && pinned_present) {
        eprintln!("peers: pip install {spec}");
        let ok = Command::new(&python)
            .args(["-m", "pip", "install", "--disable-pip-version-check", "-q"])
            .args(spec.split_whitespace())
            .status()
            .map_err(|e| format!("pip: {e}"))?
            .success();
        if !ok || !have("nvitop") || !have("gpustat") {
            return Err(format!("pip install {spec} failed"));
        }
    }
    // Bytecode for every module, as a normal install has (this shell may forbid writing it).
    let _ = Command::new(&python)
        .env_remove("PYTHONDONTWRITEBYTECODE")
        .args(["-m", "compileall", "-q", "-j", "0"])
        .arg(venv.join("lib"))
        .stdout(Stdio::null())
        .status();
    Ok(venv.to_path_buf())
}

fn environment_line(env: &Env) -> String {
    let versions = Command::new(env.venv_bin.join("python"))
        .args([
            "-c",
            "import importlib.metadata as m, platform\n\
             print('python', platform.python_version(), *(f'{p} {m.version(p)}' for p in \
             ('nvitop', 'gpustat', 'nvidia-ml-py', 'psutil')), sep=', ')",
        ])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_default();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    format!(
        "host: {cpus} CPU(s) {cpu_model}, load {}; {versions}; vramscope {} ({})",
        load.join(" "),
        env!("CARGO_PKG_VERSION"),
        env.vramscope.display()
    )
}

// ---------------------------------------------------------------------------------------------
// Scenarios

/// What NVML reports for the scenario: the reference every tool is checked against.
struct Truth {
    gpus: Vec<GpuTruth>,
    reserved: u64,
}

struct GpuTruth {
    total: u64,
    used: u64,
    /// pid -> (bytes, type as "C", "G" or "C+G", SM %).
    procs: BTreeMap<u32, (u64, &'static str, u32)>,
}

struct ScenarioRun {
    shape: Shape,
    path: PathBuf,
    pids: HashSet<u32>,
    truth: Truth,
    sleepers: Children,
}

const MEMORY_TOTAL: u64 = 85_520_809_984; // an H100 80GB HBM3: 81559 MiB
const MEMORY_RESERVED: u64 = 566_231_040;

impl ScenarioRun {
    fn start(shape: &Shape, opts: &Options, env: &Env) -> ScenarioRun {
        let sleepers = Children::spawn(shape.procs, |_| {
            let mut sleep = support::sleep(100_000);
            sleep.stdin(Stdio::null());
            sleep
        });
        let pids = sleepers.pids();
        let per_gpu = shape.procs / shape.gpus;
        // Long enough for the longest run; values freeze after that.
        let horizon = opts.seconds as f64 + 90.0;
        let mut devices = Vec::new();
        let mut truth = Truth {
            gpus: Vec::new(),
            reserved: MEMORY_RESERVED,
        };
        for g in 0..shape.gpus {
            let mine = &pids[g * per_gpu..(g + 1) * per_gpu];
            // About 60% of the GPU shared by its processes; odd byte counts, so that every
            // tool's rounding shows.
            let unit = MEMORY_TOTAL * 6 / 10 / per_gpu as u64 / 9 * 2;
            let mut procs = BTreeMap::new();
            let mut compute = Vec::new();
            let mut graphics = Vec::new();
            let mut util = Vec::new();
            for (i, pid) in mine.iter().enumerate() {
                let bytes = unit * (i as u64 % 8 + 1) + i as u64 * 12_345 + 4_567;
                let sm = 20 + (i as u32 * 7 + g as u32) % 70;
                // The first process of each GPU also has a graphics context, the last one
                // only that (a display server): both lists are read by every tool.
                let kind = match i {
                    0 if per_gpu > 1 => "C+G",
                    i if i == per_gpu - 1 && per_gpu > 2 => "G",
                    _ => "C",
                };
                let entry = json!({ "pid": pid, "used_memory": bytes });
                if kind.contains('C') {
                    compute.push(entry.clone());
                }
                if kind.contains('G') {
                    graphics.push(entry);
                }
                util.push(json!({ "t": 0, "pid": pid, "sm": sm, "mem": sm / 3, "every": 0.5 }));
                procs.insert(*pid, (bytes, kind, sm));
            }
            let context = 311 * MIB + g as u64 * 4_096;
            let used = procs.values().map(|p| p.0).sum::<u64>() + context;
            // Memory stays put (the figures check reads it at any time); the rest moves
            // every 250 ms, so every refresh has something to redraw.
            let mut timeline = vec![json!({
                "t": 0, "memory_used": used, "gpu_util": 50, "mem_util": 30, "temperature": 60,
                "power": 400_000, "sm_clock": 1755, "mem_clock": 2619, "encoder": 0,
                "decoder": 0, "throttle_reasons": 0, "ecc_corrected": 0, "ecc_uncorrected": 0,
                "pstate": 0, "pcie_tx": 1200, "pcie_rx": 3400,
            })];
            let steps = (horizon * 4.0) as u64;
            timeline.extend((1..steps).map(|k| {
                json!({
                    "t": k as f64 * 0.25, "gpu_util": 40 + (k * 7 + g as u64) % 60,
                    "mem_util": 20 + (k * 3) % 40, "temperature": 55 + (k / 4) % 15,
                    "power": 300_000 + (k * 9_731) % 350_000,
                })
            }));
            devices.push(json!({
                "name": "NVIDIA H100 80GB HBM3",
                "uuid": format!("GPU-5f0c1d2e-7a3b-4c5d-8e9f-{:012x}", 0x1000 + g),
                "pci_bus_id": format!("00000000:{:02X}:00.0", 0x18 + g * 0x11),
                "pci_device_id": 0x2330_10DE_u32, "pci_subsystem_id": 0x16C1_10DE_u32,
                "memory_total": MEMORY_TOTAL, "memory_reserved": MEMORY_RESERVED,
                "max_sm_clock": 1980, "max_mem_clock": 2619, "power_limit": 700_000,
                "num_fans": 0, "persistence_mode": true, "compute_mode": 0,
                "display_mode": false, "display_active": false, "mig_mode": false,
                "timeline": timeline,
                "processes": [{ "t": 0, "compute": compute, "graphics": graphics }],
                "process_utilization": util,
            }));
            truth.gpus.push(GpuTruth {
                total: MEMORY_TOTAL,
                used,
                procs,
            });
        }
        let dir = env.out.join(shape.label());
        std::fs::create_dir_all(&dir).expect("scenario folder");
        let path = dir.join("scenario.json");
        std::fs::write(&path, json!({ "devices": devices }).to_string()).expect("scenario");
        // The fake keeps a parsed scenario across gpustat's init/shutdown per refresh once
        // the file is a second old.
        std::thread::sleep(Duration::from_millis(1100));
        ScenarioRun {
            shape: shape.clone(),
            path,
            pids: pids.into_iter().collect(),
            truth,
            sleepers,
        }
    }

    fn stop(self) {
        drop(self.sleepers);
    }
}

/// What every tool run sets: the fake, its scenario and counts (each run also removes the
/// variables in `UNSET`).
fn tool_env(env: &Env, scenario: &ScenarioRun, counts: &Path) -> Vec<(String, String)> {
    vec![
        ("LD_LIBRARY_PATH".into(), env.lib_dir.display().to_string()),
        (
            "FAKE_NVML_SCENARIO".into(),
            scenario.path.display().to_string(),
        ),
        ("FAKE_NVML_COUNTS".into(), counts.display().to_string()),
    ]
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

// ---------------------------------------------------------------------------------------------
// Monitor runs

#[derive(Default, Clone, serde::Serialize)]
struct MonitorResult {
    first_frame_ms: Option<f64>,
    own_first_frame_ms: Option<f64>,
    cpu_ms_per_refresh: f64,
    tick_cpu_ms_per_refresh: f64,
    cpu_percent: f64,
    refresh_period_ms: f64,
    peak_rss_mb: f64,
    calls_per_refresh: f64,
    calls_by_function: BTreeMap<String, f64>,
    tmux_cpu_ms_per_refresh: f64,
    note: String,
}

impl MonitorResult {
    fn line(&self, tool: Tool, interval_ms: u64) -> String {
        format!(
            "{:<9} {:>4} ms: {:>7.3} ms CPU/refresh ({:.2}% CPU, period {:.0} ms), first frame \
             {}, RSS {:.1} MB, {:.1} NVML calls/refresh{}",
            tool.name(),
            interval_ms,
            self.cpu_ms_per_refresh,
            self.cpu_percent,
            self.refresh_period_ms,
            self.first_frame_ms
                .map_or("timeout".to_owned(), |f| format!("{f:.0} ms")),
            self.peak_rss_mb,
            self.calls_per_refresh,
            if self.note.is_empty() {
                String::new()
            } else {
                format!("  ({})", self.note)
            }
        )
    }
}

fn run_monitor(
    env: &Env,
    scenario: &ScenarioRun,
    tool: Tool,
    interval_ms: u64,
    repeat: usize,
    opts: &Options,
) -> MonitorResult {
    let label = format!("{}-{interval_ms}ms-{repeat}", tool.name());
    let run_dir = env.out.join(scenario.shape.label()).join(&label);
    std::fs::create_dir_all(&run_dir).expect("run folder");
    let counts = env
        .counts_dir
        .join(format!("{}-{label}.json", scenario.shape.label()));
    let _ = std::fs::remove_file(&counts);
    let start_file = run_dir.join("start-ns");
    let own_first = run_dir.join("own-first-frame-us");
    let mut vars = tool_env(env, scenario, &counts);
    if tool == Tool::Vramscope {
        vars.push((
            "VRAMSCOPE_FIRST_FRAME_FILE".into(),
            own_first.display().to_string(),
        ));
    }
    let mut inner = format!(
        "date +%s%N > {}; exec env",
        shell_quote(&start_file.display().to_string())
    );
    for u in UNSET.iter().filter(|u| !vars.iter().any(|(k, _)| k == *u)) {
        let _ = write!(inner, " -u {u}");
    }
    for (k, v) in &vars {
        let _ = write!(inner, " {k}={}", shell_quote(v));
    }
    for a in tool.monitor_args(env, interval_ms) {
        let _ = write!(inner, " {}", shell_quote(&a));
    }
    let pane = Tmux::start(
        &run_dir,
        COLS,
        ROWS,
        &format!("sh -c {}", shell_quote(&inner)),
    );
    let pid = pane.pid();
    let mut result = MonitorResult::default();

    // First full frame, by polling the pane.
    let need = scenario.pids.len().min(PIDS_IN_FULL_FRAME);
    let polling = Instant::now();
    let screen = loop {
        let before = wall_ns();
        let screen = pane.screen();
        let after = wall_ns();
        if visible_pids(&screen, &scenario.pids) >= need {
            if let Some(start) = read_number(&start_file) {
                result.first_frame_ms = Some(((before + after) / 2.0 - start) / 1e6);
            }
            break screen;
        }
        if polling.elapsed() > FIRST_FRAME_TIMEOUT {
            result.note = format!("no full frame in {} s", FIRST_FRAME_TIMEOUT.as_secs());
            break screen;
        }
        std::thread::sleep(POLL);
    };
    let _ = std::fs::write(run_dir.join("first-frame.txt"), &screen);
    if tool == Tool::Vramscope {
        result.own_first_frame_ms = read_number(&own_first).map(|us| us / 1000.0);
    }
    std::thread::sleep(WARMUP);

    // Steady state, aligned to the fake's writes of the counts (at most once a second).
    let server = pane
        .tmux(&["display-message", "-p", "#{pid}"])
        .trim()
        .parse::<u32>()
        .ok();
    let before = next_counts(&counts, None);
    // A tool that exited reads as 0 (and gets a note below).
    let cpu = |pid| cpu_ns(pid).unwrap_or(0.0);
    let ticks = |pid| cpu_ticks(pid).unwrap_or(0.0);
    let cpu0 = (cpu(pid), ticks(pid), server.map(cpu));
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(opts.seconds));
    let after = next_counts(&counts, Some(&before.1));
    let cpu1 = (cpu(pid), ticks(pid), server.map(cpu));
    let elapsed = t0.elapsed().as_secs_f64();
    result.peak_rss_mb = peak_rss_kb(pid).unwrap_or(0.0) / 1024.0;
    let _ = std::fs::write(run_dir.join("last-frame.txt"), pane.screen());
    let alive = std::fs::metadata(format!("/proc/{pid}")).is_ok();
    drop(pane);
    if !alive {
        result.note = "exited during the run".into();
    }

    let delta = |name: &str| {
        after.0.get(name).copied().unwrap_or(0.0) - before.0.get(name).copied().unwrap_or(0.0)
    };
    // vramscope reads memory alone between refreshes too (the fast memory sampling): its
    // refreshes are its utilisation reads, one per GPU per refresh.
    let memory_reads = if tool == Tool::Vramscope {
        delta("nvmlDeviceGetUtilizationRates")
    } else {
        delta("nvmlDeviceGetMemoryInfo_v2") + delta("nvmlDeviceGetMemoryInfo")
    };
    let nominal = elapsed * 1000.0 / interval_ms as f64;
    let refreshes = if memory_reads > 0.0 {
        memory_reads / scenario.shape.gpus as f64
    } else {
        result.note = "no memory reads: refreshes counted by the interval".into();
        nominal
    };
    let refreshes = refreshes.max(1.0);
    let mut total = 0.0;
    for name in after.0.keys() {
        let d = delta(name);
        if d > 0.0 {
            result.calls_by_function.insert(name.clone(), d / refreshes);
            total += d;
        }
    }
    let cpu_ns_delta = cpu1.0 - cpu0.0;
    result.cpu_ms_per_refresh = cpu_ns_delta / 1e6 / refreshes;
    result.tick_cpu_ms_per_refresh =
        (cpu1.1 - cpu0.1) / support::ticks_per_second() * 1000.0 / refreshes;
    result.cpu_percent = cpu_ns_delta / 1e9 / elapsed * 100.0;
    result.refresh_period_ms = elapsed * 1000.0 / refreshes;
    result.calls_per_refresh = total / refreshes;
    if let (Some(a), Some(b)) = (cpu0.2, cpu1.2) {
        result.tmux_cpu_ms_per_refresh = (b - a) / 1e6 / refreshes;
    }
    result
}

fn wall_ns() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_nanos() as f64)
}

/// How many of `pids` the screen shows as whole numbers on a line that also names their
/// command (`sleep`): a row whose user and command are still unknown does not count.
fn visible_pids(screen: &str, pids: &HashSet<u32>) -> usize {
    screen
        .lines()
        .filter(|l| l.contains("sleep"))
        .flat_map(|l| l.split(|c: char| !c.is_ascii_digit()))
        .filter_map(|t| t.parse::<u32>().ok())
        .filter(|p| pids.contains(p))
        .collect::<HashSet<_>>()
        .len()
}

fn read_number(path: &Path) -> Option<f64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

type Counts = BTreeMap<String, f64>;

/// The counts file's next version after `previous` (the first one found when `None`), read
/// right after the fake rewrote it, so that counts and CPU times cover the same window.
fn next_counts(path: &Path, previous: Option<&str>) -> (Counts, String) {
    let deadline = Instant::now() + Duration::from_secs(3);
    let first = read_counts_text(path);
    loop {
        let text = read_counts_text(path);
        let changed = match previous {
            Some(p) => text != p && text != first,
            None => text != first,
        };
        if (changed && !text.is_empty()) || Instant::now() > deadline {
            return (parse_counts(&text), text);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

// ---------------------------------------------------------------------------------------------
// One-shot runs

#[derive(Clone, serde::Serialize)]
struct OneShot {
    wall_ms: f64,
    calls: u64,
    ok: bool,
    /// Kept for the figures check and under `--out`, not in results.json.
    #[serde(skip)]
    stdout: String,
}

fn run_oneshot(
    env: &Env,
    scenario: &ScenarioRun,
    tool: Tool,
    label: &str,
    args: Vec<String>,
) -> OneShot {
    let counts = env.counts_dir.join(format!(
        "{}-{}-{label}.json",
        scenario.shape.label(),
        tool.name()
    ));
    let _ = std::fs::remove_file(&counts);
    let mut cmd = Command::new(&args[0]);
    cmd.args(&args[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for u in UNSET {
        cmd.env_remove(u);
    }
    // No terminal: the pane's size, as the monitors get it from tmux.
    cmd.envs(tool_env(env, scenario, &counts))
        .env("COLUMNS", COLS.to_string())
        .env("LINES", ROWS.to_string());
    let start = Instant::now();
    let output = cmd.output();
    let wall_ms = start.elapsed().as_secs_f64() * 1000.0;
    let (ok, stdout, stderr) = match output {
        Ok(o) => (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        ),
        Err(e) => (false, String::new(), e.to_string()),
    };
    let dir = env.out.join(scenario.shape.label());
    let _ = std::fs::write(dir.join(format!("{}-{label}.out", tool.name())), &stdout);
    if !stderr.is_empty() {
        let _ = std::fs::write(dir.join(format!("{}-{label}.err", tool.name())), &stderr);
    }
    let calls = read_counts(&counts).values().sum::<f64>() as u64;
    OneShot {
        wall_ms,
        calls,
        ok,
        stdout,
    }
}

// ---------------------------------------------------------------------------------------------
// What each tool shows, against the scenario

/// Figures as one tool shows them; sizes in bytes (as precise as the tool shows them) with
/// the unit of the last digit, so that checks allow for the tool's rounding.
#[derive(Default, Debug)]
struct Seen {
    gpus: BTreeMap<usize, SeenGpu>,
}

#[derive(Default, Debug)]
struct SeenGpu {
    used: Option<Size>,
    total: Option<Size>,
    procs: BTreeMap<u32, SeenProcess>,
}

/// A process row: memory, type (`C`, `G`, `C+G`), SM %, as far as the tool shows them.
type SeenProcess = (Option<Size>, Option<String>, Option<u32>);

/// Per scenario, per tool: what differs from NVML (or that all agrees).
type Agreement = Vec<(String, Vec<(Tool, Vec<String>)>)>;

/// A shown size: `value` bytes, shown to within `step` bytes, rounded (`floor` false) or
/// truncated.
#[derive(Debug, Clone, Copy)]
struct Size {
    value: f64,
    step: f64,
    floor: bool,
}

impl Size {
    fn exact(bytes: u64) -> Size {
        Size {
            value: bytes as f64,
            step: 1.0,
            floor: true,
        }
    }

    fn shows(&self, bytes: u64) -> bool {
        let b = bytes as f64;
        if self.floor {
            b >= self.value - 1e-6 && b < self.value + self.step
        } else {
            (b - self.value).abs() <= self.step / 2.0 + 1e-6
        }
    }
}

fn read_vramscope_json(stdout: &str) -> Result<Seen, String> {
    let v: Value = serde_json::from_str(stdout).map_err(|e| e.to_string())?;
    let mut seen = Seen::default();
    for d in v["devices"].as_array().ok_or("no devices")? {
        let i = d["index"].as_u64().ok_or("device without index")? as usize;
        let g = seen.gpus.entry(i).or_default();
        g.used = d["memory_used"].as_u64().map(Size::exact);
        g.total = d["memory_total"].as_u64().map(Size::exact);
    }
    for p in v["processes"].as_array().ok_or("no processes")? {
        let i = p["gpu_index"].as_u64().ok_or("process without GPU")? as usize;
        let pid = p["pid"].as_u64().ok_or("process without pid")? as u32;
        seen.gpus.entry(i).or_default().procs.insert(
            pid,
            (
                p["used_memory"].as_u64().map(Size::exact),
                p["type"].as_str().map(str::to_owned),
                p["sm_util"].as_u64().map(|s| s as u32),
            ),
        );
    }
    Ok(seen)
}

fn read_gpustat_json(stdout: &str) -> Result<Seen, String> {
    let v: Value = serde_json::from_str(stdout).map_err(|e| e.to_string())?;
    let mib = |x: &Value| {
        x.as_u64().map(|m| Size {
            value: (m * MIB) as f64,
            step: MIB as f64,
            floor: true,
        })
    };
    let mut seen = Seen::default();
    for d in v["gpus"].as_array().ok_or("no gpus")? {
        let i = d["index"].as_u64().ok_or("gpu without index")? as usize;
        let g = seen.gpus.entry(i).or_default();
        g.used = mib(&d["memory.used"]);
        g.total = mib(&d["memory.total"]);
        for p in d["processes"].as_array().into_iter().flatten() {
            let pid = p["pid"].as_u64().ok_or("process without pid")? as u32;
            g.procs
                .insert(pid, (mib(&p["gpu_memory_usage"]), None, None));
        }
    }
    Ok(seen)
}

/// `36.38GiB`, `1024MiB`: bytes and the step of the last digit shown.
fn parse_size(token: &str) -> Option<Size> {
    let split = token.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = token.split_at(split);
    let scale = match unit {
        "B" => 1.0,
        "KiB" => 1024.0,
        "MiB" => MIB as f64,
        "GiB" => GIB as f64,
        "TiB" => GIB as f64 * 1024.0,
        _ => return None,
    };
    let value: f64 = number.parse().ok()?;
    let decimals = number.split_once('.').map_or(0, |(_, d)| d.len());
    Some(Size {
        value: value * scale,
        step: scale / 10f64.powi(decimals as i32),
        floor: false,
    })
}

/// nvitop's one-shot table: device rows (`full`: index on the first line of a block, memory
/// on the second; `compact`: both on one line), then the process rows.
fn read_nvitop_text(stdout: &str) -> Result<Seen, String> {
    let mut seen = Seen::default();
    let mut current: Option<usize> = None;
    let mut in_processes = false;
    for line in stdout.lines() {
        if line.contains("Processes:") {
            in_processes = true;
            continue;
        }
        let cells: Vec<&str> = line.split('│').collect();
        let Some(first) = cells.get(1).map(|c| c.trim()) else {
            continue;
        };
        let words: Vec<&str> = first.split_whitespace().collect();
        let leading_index = words.first().and_then(|w| w.parse::<usize>().ok());
        if in_processes {
            // GPU PID TYPE USER GPU-MEM %SM ...
            let (Some(i), Some(pid)) = (leading_index, words.get(1).and_then(|w| w.parse().ok()))
            else {
                continue;
            };
            let memory = words.get(4).and_then(|w| parse_size(w));
            // Its monitor writes a process with both contexts as `X`.
            let kind = words.get(2).map(|w| {
                if *w == "X" {
                    "C+G".to_owned()
                } else {
                    (*w).to_owned()
                }
            });
            let sm = words.get(5).and_then(|w| w.parse().ok());
            seen.gpus
                .entry(i)
                .or_default()
                .procs
                .insert(pid, (memory, kind, sm));
            continue;
        }
        if let Some(i) = leading_index {
            current = Some(i);
        }
        for cell in &cells {
            let parts: Vec<&str> = cell.split_whitespace().collect();
            if let [used, "/", total] = parts.as_slice()
                && let (Some(used), Some(total), Some(i)) =
                    (parse_size(used), parse_size(total), current)
            {
                let g = seen.gpus.entry(i).or_default();
                if g.used.is_none() {
                    g.used = Some(used);
                    g.total = Some(total);
                }
            }
        }
    }
    if seen.gpus.is_empty() {
        return Err("no GPU rows found".into());
    }
    Ok(seen)
}

fn show(bytes: u64) -> String {
    format!("{bytes} B ({:.2} MiB)", bytes as f64 / MIB as f64)
}

impl Truth {
    /// Differences between what `tool` shows and what NVML reported.
    fn check(&self, seen: &Seen, tool: Tool) -> Vec<String> {
        let mut out = Vec::new();
        for (i, g) in self.gpus.iter().enumerate() {
            let Some(s) = seen.gpus.get(&i) else {
                out.push(format!("GPU {i}: missing"));
                continue;
            };
            match s.used {
                Some(u) if u.shows(g.used) => {}
                Some(u) if u.shows(g.used + self.reserved) => out.push(format!(
                    "GPU {i}: used {:.0} B is NVML's v2 `used` plus `reserved` ({}): v1 figures",
                    u.value,
                    show(self.reserved)
                )),
                Some(u) => out.push(format!(
                    "GPU {i}: used shown as {:.0} B, NVML says {}",
                    u.value,
                    show(g.used)
                )),
                None => out.push(format!("GPU {i}: no used memory shown")),
            }
            match s.total {
                Some(t) if t.shows(g.total) => {}
                Some(t) if t.shows(g.total - self.reserved) => out.push(format!(
                    "GPU {i}: total {:.0} B is NVML's total minus reserved",
                    t.value
                )),
                Some(t) => out.push(format!(
                    "GPU {i}: total shown as {:.0} B, NVML says {}",
                    t.value,
                    show(g.total)
                )),
                None => out.push(format!("GPU {i}: no total shown")),
            }
            let missing: Vec<u32> = g
                .procs
                .keys()
                .filter(|p| !s.procs.contains_key(p))
                .copied()
                .collect();
            if !missing.is_empty() {
                out.push(format!(
                    "GPU {i}: {} process(es) missing, e.g. {:?}",
                    missing.len(),
                    &missing[..missing.len().min(3)]
                ));
            }
            let extra: Vec<u32> = s
                .procs
                .keys()
                .filter(|p| !g.procs.contains_key(p))
                .copied()
                .collect();
            if !extra.is_empty() {
                out.push(format!("GPU {i}: unknown PIDs shown {extra:?}"));
            }
            let mut wrong_memory = Vec::new();
            let mut wrong_kind = Vec::new();
            let mut wrong_sm = Vec::new();
            for (pid, (bytes, kind, sm)) in &g.procs {
                let Some((m, k, u)) = s.procs.get(pid) else {
                    continue;
                };
                if let Some(m) = m {
                    if !m.shows(*bytes) {
                        wrong_memory.push(format!("{pid}: {:.0} B for {}", m.value, show(*bytes)));
                    }
                } else {
                    wrong_memory.push(format!("{pid}: no memory shown"));
                }
                if let Some(k) = k
                    && k != kind
                {
                    wrong_kind.push(format!("{pid}: {k} for {kind}"));
                }
                if let Some(u) = u
                    && u != sm
                {
                    wrong_sm.push(format!("{pid}: {u}% for {sm}%"));
                }
            }
            for (what, list) in [
                ("process memory", wrong_memory),
                ("process type", wrong_kind),
                ("process SM %", wrong_sm),
            ] {
                if !list.is_empty() {
                    out.push(format!(
                        "GPU {i}: {what} differs for {} of {} process(es), e.g. {}",
                        list.len(),
                        g.procs.len(),
                        list[..list.len().min(2)].join("; ")
                    ));
                }
            }
        }
        if out.is_empty() {
            out.push(format!(
                "agrees: memory used/total of {} GPU(s), {} PIDs, their memory{}",
                self.gpus.len(),
                self.gpus.iter().map(|g| g.procs.len()).sum::<usize>(),
                match tool {
                    Tool::Gpustat => " (it shows no process type or SM %)",
                    _ => ", type and SM %",
                }
            ));
        }
        out
    }
}

// ---------------------------------------------------------------------------------------------
// The report

#[derive(Default)]
struct Report {
    monitor: BTreeMap<(String, Tool, u64), Vec<MonitorResult>>,
    oneshot: BTreeMap<(String, Tool), Vec<OneShot>>,
    agreement: Agreement,
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// One figure of a monitor run, for a row of the table.
type Figure = fn(&MonitorResult) -> f64;

struct Row {
    label: String,
    unit: &'static str,
    decimals: usize,
    values: Vec<Option<f64>>,
}

impl Report {
    fn monitor_median(
        &self,
        scenario: &str,
        tool: Tool,
        interval: u64,
        f: impl Fn(&MonitorResult) -> f64,
    ) -> Option<f64> {
        let runs = self.monitor.get(&(scenario.to_owned(), tool, interval))?;
        median(runs.iter().map(f).collect())
    }

    fn oneshot_median(
        &self,
        scenario: &str,
        tool: Tool,
        f: impl Fn(&OneShot) -> f64,
    ) -> Option<f64> {
        let runs = self.oneshot.get(&(scenario.to_owned(), tool))?;
        median(runs.iter().filter(|o| o.ok).map(&f).collect())
    }

    fn rows(&self, opts: &Options, scenario: &str) -> Vec<Row> {
        let tools = &opts.tools;
        let mut rows = Vec::new();
        let per_tool = |f: &dyn Fn(Tool) -> Option<f64>| tools.iter().map(|t| f(*t)).collect();
        let per_interval: [(&str, &'static str, usize, Figure); 5] = [
            ("CPU per refresh", "ms", 3, |r| r.cpu_ms_per_refresh),
            ("  same, /proc/PID/stat ticks", "ms", 3, |r| {
                r.tick_cpu_ms_per_refresh
            }),
            ("  CPU of a core", "%", 2, |r| r.cpu_percent),
            ("  refresh period", "ms", 0, |r| r.refresh_period_ms),
            ("NVML calls per refresh", "", 1, |r| r.calls_per_refresh),
        ];
        for &iv in &opts.intervals_ms {
            let s = seconds_arg(iv);
            for (label, unit, decimals, figure) in per_interval {
                rows.push(Row {
                    label: format!("{label} @{s}s"),
                    unit,
                    decimals,
                    values: per_tool(&|t| self.monitor_median(scenario, t, iv, figure)),
                });
            }
        }
        let all_intervals = |t: Tool, f: &dyn Fn(&MonitorResult) -> Option<f64>| {
            median(
                opts.intervals_ms
                    .iter()
                    .filter_map(|iv| self.monitor.get(&(scenario.to_owned(), t, *iv)))
                    .flatten()
                    .filter_map(f)
                    .collect(),
            )
        };
        rows.push(Row {
            label: "first full frame".into(),
            unit: "ms",
            decimals: 0,
            values: per_tool(&|t| all_intervals(t, &|r| r.first_frame_ms)),
        });
        rows.push(Row {
            label: "peak RSS".into(),
            unit: "MB",
            decimals: 1,
            values: per_tool(&|t| all_intervals(t, &|r| Some(r.peak_rss_mb))),
        });
        rows.push(Row {
            label: "one-shot wall time".into(),
            unit: "ms",
            decimals: 1,
            values: per_tool(&|t| self.oneshot_median(scenario, t, |o| o.wall_ms)),
        });
        rows.push(Row {
            label: "  NVML calls, one-shot".into(),
            unit: "",
            decimals: 0,
            values: per_tool(&|t| self.oneshot_median(scenario, t, |o| o.calls as f64)),
        });
        rows
    }

    fn render(&self, opts: &Options) -> String {
        let mut s = String::new();
        let tools = &opts.tools;
        let vs = tools.iter().position(|t| *t == Tool::Vramscope);
        let fmt = |v: Option<f64>, d: usize, unit: &str| {
            v.map_or("-".to_owned(), |v| {
                format!("{v:.d$}{}{unit}", if unit.is_empty() { "" } else { " " })
            })
        };
        let _ = write!(s, "\n{:<32}", "");
        for t in tools {
            let _ = write!(s, "{:>14}", t.name());
        }
        if vs.is_some() {
            for t in tools.iter().filter(|t| **t != Tool::Vramscope) {
                let _ = write!(s, "{:>14}", format!("{}/vs", t.name()));
            }
        }
        s.push('\n');
        let mut targets = Vec::new();
        for shape in &opts.shapes {
            let scenario = shape.label();
            let _ = writeln!(
                s,
                "scenario {scenario} ({} GPU(s), {} processes)",
                shape.gpus, shape.procs
            );
            for row in self.rows(opts, &scenario) {
                let _ = write!(s, "  {:<30}", row.label);
                for v in &row.values {
                    let _ = write!(s, "{:>14}", fmt(*v, row.decimals, row.unit));
                }
                if let Some(vi) = vs {
                    for (ti, _) in tools
                        .iter()
                        .enumerate()
                        .filter(|(_, t)| **t != Tool::Vramscope)
                    {
                        let ratio = match (row.values[ti], row.values[vi]) {
                            (Some(p), Some(v)) if v > 0.0 => format!("{:.1}x", p / v),
                            _ => "-".into(),
                        };
                        let _ = write!(s, "{ratio:>14}");
                    }
                }
                s.push('\n');
                if let Some(vi) = vs {
                    let peers: Vec<f64> = row
                        .values
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| *i != vi)
                        .filter_map(|(_, v)| *v)
                        .collect();
                    let best_peer = peers.iter().copied().reduce(f64::min);
                    if let (Some(v), Some(p)) = (row.values[vi], best_peer) {
                        if row.label.starts_with("CPU per refresh") {
                            targets.push(format!(
                                "{scenario} {}: vramscope {v:.3} ms <= 1/5 of the lighter peer's {p:.3} ms ({:.3}): {}",
                                row.label,
                                p / 5.0,
                                verdict(v <= p / 5.0)
                            ));
                        } else if row.label == "one-shot wall time" {
                            targets.push(format!(
                                "{scenario} one-shot: vramscope {v:.1} ms <= 1/3 of the faster peer's {p:.1} ms ({:.1}): {}",
                                p / 3.0,
                                verdict(v <= p / 3.0)
                            ));
                        } else if row.label.starts_with("NVML calls per refresh") {
                            targets.push(format!(
                                "{scenario} {}: vramscope {v:.1} < both peers (fewest {p:.1}): {}",
                                row.label,
                                verdict(v < p)
                            ));
                        }
                    }
                }
            }
        }
        let _ = writeln!(
            s,
            "\nCPU per refresh: the tool's CPU time over the run (its threads' schedstat in ns; \
             below it the same from /proc/PID/stat, whole 10 ms ticks) / its refreshes (memory \
             reads per GPU; vramscope's utilisation reads, as it also reads memory alone \
             between refreshes); medians of {} run(s); a/vs = ratio to vramscope.",
            opts.repeats
        );
        let _ = writeln!(s, "\nTargets:");
        for t in &targets {
            let _ = writeln!(s, "  {t}");
        }
        let _ = writeln!(s, "\nSame figures (checked against what NVML reported):");
        for (scenario, list) in &self.agreement {
            for (tool, findings) in list {
                for f in findings {
                    let _ = writeln!(s, "  {scenario} {:<9} {f}", tool.name());
                }
            }
        }
        let _ = writeln!(s, "\nDetails (medians):");
        for ((scenario, tool, iv), runs) in &self.monitor {
            let m = |f: &dyn Fn(&MonitorResult) -> f64| {
                median(runs.iter().map(f).collect()).unwrap_or(f64::NAN)
            };
            let own = median(runs.iter().filter_map(|r| r.own_first_frame_ms).collect());
            let _ = writeln!(
                s,
                "  {scenario} {:<9} @{:>4} ms: CPU/refresh {:.3} ms (stat ticks {:.3}), tmux \
                 server {:.3} ms/refresh{}",
                tool.name(),
                iv,
                m(&|r| r.cpu_ms_per_refresh),
                m(&|r| r.tick_cpu_ms_per_refresh),
                m(&|r| r.tmux_cpu_ms_per_refresh),
                own.map_or(String::new(), |o| format!(
                    ", own first-frame figure {o:.1} ms"
                ))
            );
            let mut names: Vec<&String> = runs
                .iter()
                .flat_map(|r| r.calls_by_function.keys())
                .collect();
            names.sort();
            names.dedup();
            let calls: Vec<String> = names
                .iter()
                .map(|n| {
                    let v = median(
                        runs.iter()
                            .map(|r| r.calls_by_function.get(*n).copied().unwrap_or(0.0))
                            .collect(),
                    )
                    .unwrap_or(0.0);
                    format!("{} {v:.2}", n.trim_start_matches("nvml"))
                })
                .collect();
            let _ = writeln!(s, "      calls/refresh: {}", calls.join(", "));
            for r in runs.iter().filter(|r| !r.note.is_empty()) {
                let _ = writeln!(s, "      note: {}", r.note);
            }
        }
        s
    }

    fn to_json(&self) -> Value {
        let monitor: Vec<Value> = self
            .monitor
            .iter()
            .map(|((scenario, tool, iv), runs)| {
                json!({
                    "scenario": scenario, "tool": tool.name(), "interval_ms": iv,
                    "runs": runs,
                })
            })
            .collect();
        let oneshot: Vec<Value> = self
            .oneshot
            .iter()
            .map(|((scenario, tool), runs)| {
                json!({
                    "scenario": scenario, "tool": tool.name(),
                    "runs": runs,
                })
            })
            .collect();
        let agreement: Vec<Value> = self
            .agreement
            .iter()
            .flat_map(|(scenario, list)| {
                list.iter().map(move |(tool, findings)| {
                    json!({"scenario": scenario, "tool": tool.name(), "findings": findings})
                })
            })
            .collect();
        json!({ "monitor": monitor, "oneshot": oneshot, "agreement": agreement })
    }
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "MISSED" }
}
