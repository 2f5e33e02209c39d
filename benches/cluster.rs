//! `vramscope cluster` benchmark: prints figures, asserts nothing about time.
//!
//! 1. Prometheus: a fleet of 256 nodes x 8 GPUs with 2,048 ranks of one job (vramscope's and
//!    dcgm-exporter's families, 10 minutes at a 30 s scrape interval, ending now) written as
//!    OpenMetrics, backfilled with `promtool tsdb create-blocks-from openmetrics`, and served
//!    by a real Prometheus started on that data. Measured: `cluster --json` (wall time, answer
//!    size), then the interactive screen in tmux at 200x50 with `--interval 1s`: time from its
//!    start to its first screen drawn from an answer, queries per refresh (Prometheus's own
//!    request counters over the window, divided by the refreshes), vramscope's CPU per
//!    refresh (its threads' schedstat over the window) and its peak RSS.
//! 2. Direct scraping: 64 loopback exporters (tiny servers in this benchmark, each serving
//!    a vramscope page of 8 GPUs and 8 ranks), the same figures.
//!
//! Run with `cargo bench --bench cluster` (add `-- SECS` for the measuring window, default
//! 20 s). Needs prometheus, promtool and tmux.

#[path = "../tests/common/mod.rs"]
mod common;
mod support;

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const NODES: usize = 256;
const GPUS: usize = 8;
const TARGETS: usize = 64;
const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;
const HISTORY_POINTS: u64 = 21;
const STEP_S: u64 = 30;

fn main() {
    let seconds: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(20);
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_vramscope"));
    let work = tempfile::tempdir().expect("tempdir");
    println!(
        "vramscope cluster benchmark; {} CPUs; window {seconds} s at --interval 1s; screen 200x50",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    // 1. Prometheus.
    let file = work.path().join("fleet.om");
    let began = Instant::now();
    let (series, samples) = write_fleet(&file);
    let data = work.path().join("data");
    let out = Command::new("promtool")
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(&file)
        .arg(&data)
        .output()
        .expect("run promtool");
    assert!(
        out.status.success(),
        "promtool: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_file(&file);
    println!(
        "fleet: {NODES} nodes x {GPUS} GPUs, {} ranks; {series} series, {samples} samples backfilled in {:.1} s",
        NODES * GPUS,
        began.elapsed().as_secs_f64()
    );
    let prometheus = Prometheus::start(work.path(), &data);
    let url = prometheus.base.clone();
    let queries = || prometheus.api_requests();
    // Prometheus alone: the refresh's big query, asked directly, three times.
    let alone: Vec<String> = (0..3)
        .map(|_| {
            let began = Instant::now();
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .timeout_global(Some(Duration::from_secs(60)))
                .build()
                .into();
            let body = agent
                .get(format!("{url}/api/v1/query"))
                .query("query", vramscope::cluster::PRESENT)
                .call()
                .ok()
                .and_then(|mut r| {
                    r.body_mut()
                        .with_config()
                        .limit(1 << 30)
                        .read_to_string()
                        .ok()
                })
                .unwrap_or_default();
            format!(
                "{:.0} ms ({:.1} MB)",
                began.elapsed().as_secs_f64() * 1000.0,
                body.len() as f64 / 1e6
            )
        })
        .collect();
    println!(
        "Prometheus answering the refresh's instant query alone: {}",
        alone.join(", ")
    );
    // The backfilled figures are as old as the backfill: not stale for this.
    let source = [
        "--prometheus",
        url.as_str(),
        "--stale-after",
        "30m",
        "--timeout",
        "30s",
    ];
    let figures = measure(&bin, work.path(), &source, seconds, &queries);
    figures.print("Prometheus, 256 nodes x 8 GPUs, 2,048 ranks");
    drop(prometheus);

    // 2. Direct scraping.
    let targets = Targets::start();
    let list = targets.list();
    let served = || targets.requests.load(Ordering::SeqCst);
    let figures = measure(&bin, work.path(), &["--targets", &list], seconds, &served);
    figures.print("direct scraping, 64 targets x 8 GPUs, 512 ranks");
}

struct Figures {
    /// Seconds a refresh took on average (1 when each fits its interval).
    refresh_s: f64,
    /// Requests per refresh by vramscope's own count.
    sent_per_refresh: f64,
    json_ms: f64,
    json_bytes: usize,
    ranks: usize,
    first_screen_ms: f64,
    requests_per_refresh: f64,
    cpu_ms_per_refresh: f64,
    rss_mb: f64,
}

impl Figures {
    fn print(&self, what: &str) {
        println!("{what}:");
        println!(
            "  cluster --json: {:.0} ms, {} ranks, {:.1} MB of JSON",
            self.json_ms,
            self.ranks,
            self.json_bytes as f64 / 1e6
        );
        println!(
            "  screen: first screen {:.0} ms after start; a refresh every {:.2} s; {:.2} requests per refresh answered ({:.2} sent); CPU {:.1} ms per refresh; peak RSS {:.1} MB",
            self.first_screen_ms,
            self.refresh_s,
            self.requests_per_refresh,
            self.sent_per_refresh,
            self.cpu_ms_per_refresh,
            self.rss_mb
        );
    }
}

fn measure(
    bin: &Path,
    dir: &Path,
    source: &[&str],
    seconds: u64,
    requests: &dyn Fn() -> u64,
) -> Figures {
    if std::env::var_os("VRAMSCOPE_BENCH_HOLD").is_some() {
        eprintln!("holding: {source:?}");
        std::thread::sleep(Duration::from_secs(600));
    }
    let began = Instant::now();
    let out = Command::new(bin)
        .env("VRAMSCOPE_CONFIG", "none")
        .arg("cluster")
        .args(source)
        .arg("--json")
        .output()
        .expect("run cluster --json");
    let json_ms = began.elapsed().as_secs_f64() * 1000.0;
    assert!(
        out.status.success(),
        "cluster --json: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let ranks = doc["jobs"].as_array().map_or(0, |j| {
        j.iter()
            .map(|j| j["ranks"].as_array().map_or(0, Vec::len))
            .sum()
    });

    let first = dir.join("first-frame");
    let _ = std::fs::remove_file(&first);
    let counts = dir.join("refreshes");
    let _ = std::fs::remove_file(&counts);
    // The screen's own count: refreshes taken in, and the requests they made.
    let refreshes = || -> (f64, f64) {
        let text = std::fs::read_to_string(&counts).unwrap_or_default();
        let mut words = text
            .split_whitespace()
            .map(|w| w.parse::<f64>().unwrap_or(0.0));
        (words.next().unwrap_or(0.0), words.next().unwrap_or(0.0))
    };
    let socket = format!("vramscope-cluster-bench-{}", std::process::id());
    let line = format!(
        "exec env VRAMSCOPE_CONFIG=none VRAMSCOPE_FIRST_FRAME_FILE={} VRAMSCOPE_REFRESH_FILE={} {} cluster {} --interval 1s",
        first.display(),
        counts.display(),
        bin.display(),
        source.join(" ")
    );
    let tmux = |args: &[&str]| {
        Command::new("tmux")
            .args(["-L", &socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("tmux")
    };
    tmux(&[
        "new-session",
        "-d",
        "-x",
        "200",
        "-y",
        "50",
        "sh",
        "-c",
        &line,
    ]);
    let pid: u32 = String::from_utf8_lossy(&tmux(&["display", "-p", "#{pane_pid}"]).stdout)
        .trim()
        .parse()
        .expect("the screen's pid");
    let deadline = Instant::now() + Duration::from_secs(60);
    let first_us = loop {
        if let Some(us) = std::fs::read_to_string(&first)
            .ok()
            .and_then(|t| t.trim().parse::<f64>().ok())
        {
            break us;
        }
        assert!(Instant::now() < deadline, "no first screen in 60 s");
        std::thread::sleep(Duration::from_millis(20));
    };
    // Settle, then measure over the window.
    std::thread::sleep(Duration::from_secs(3));
    let cpu0 = support::cpu_ns(pid).expect("cpu");
    let req0 = requests();
    let (fetches0, sent0) = refreshes();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(seconds));
    let cpu1 = support::cpu_ns(pid).expect("cpu");
    let req1 = requests();
    let (fetches1, sent1) = refreshes();
    let window = t0.elapsed().as_secs_f64();
    let rss_kb = support::peak_rss_kb(pid).unwrap_or(0.0);
    tmux(&["kill-server"]);
    let refreshes = (fetches1 - fetches0).max(1.0);
    Figures {
        refresh_s: window / refreshes,
        sent_per_refresh: (sent1 - sent0) / refreshes,
        json_ms,
        json_bytes: out.stdout.len(),
        ranks,
        first_screen_ms: first_us / 1000.0,
        requests_per_refresh: (req1 - req0) as f64 / refreshes,
        cpu_ms_per_refresh: (cpu1 - cpu0) / 1e6 / refreshes,
        rss_mb: rss_kb / 1024.0,
    }
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The fleet's last 10 minutes as OpenMetrics; returns (series, samples).
fn write_fleet(path: &Path) -> (usize, usize) {
    let end = now_s();
    let times: Vec<u64> = (0..HISTORY_POINTS)
        .map(|i| end - (HISTORY_POINTS - 1 - i) * STEP_S)
        .collect();
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
    let mut series = 0;
    let mut samples = 0;
    let mut family =
        |out: &mut dyn Write,
         name: &str,
         each: &dyn Fn(usize, usize, u64, usize) -> Option<(String, f64)>| {
            for node in 0..NODES {
                for gpu in 0..GPUS {
                    let mut wrote = false;
                    for (k, t) in times.iter().enumerate() {
                        if let Some((labels, value)) = each(node, gpu, *t, k) {
                            let _ = writeln!(out, "{name}{{{labels}}} {value} {t}");
                            samples += 1;
                            wrote = true;
                        }
                    }
                    series += usize::from(wrote);
                }
            }
        };
    let host = |n: usize| format!("gpu-node-{n:03}");
    let instance = |n: usize| format!("10.1.{}.{}:9400", n / 250, n % 250 + 1);
    let uuid = |n: usize, g: usize| format!("GPU-{n:08x}-0000-0000-0000-{g:012x}");
    let dcgm = |n: usize, g: usize| {
        format!(
            "gpu=\"{g}\",UUID=\"{}\",pci_bus_id=\"00000000:{:02X}:00.0\",device=\"nvidia{g}\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"{h}\",hostname=\"{h}\",instance=\"{}\",job=\"vramscope\"",
            uuid(n, g),
            0x18 + g,
            instance(n),
            h = host(n)
        )
    };
    let own = |n: usize, g: usize| {
        format!(
            "gpu=\"{g}\",uuid=\"{}\",model_name=\"NVIDIA H100 80GB HBM3\",hostname=\"{}\",instance=\"{}\",job=\"vramscope\"",
            uuid(n, g),
            host(n),
            instance(n)
        )
    };
    let rank_of = |n: usize, g: usize| n * GPUS + g;
    let proc_labels = |n: usize, g: usize| {
        let r = rank_of(n, g);
        format!(
            "gpu=\"{g}\",uuid=\"{}\",pid=\"{}\",user=\"train\",command=\"python train.py --config llama-70b.yaml\",rank=\"{r}\",local_rank=\"{g}\",job_id=\"llama-70b\",hostname=\"{}\",instance=\"{}\",job=\"vramscope\"",
            uuid(n, g),
            100_000 + r,
            host(n),
            instance(n)
        )
    };
    // Allocated memory: 40 GiB plus a little per rank; rank 1234 leaks 64 MiB a step.
    let allocated = |n: usize, g: usize, k: usize| {
        let r = rank_of(n, g) as u64;
        let leak = if r == 1234 { 64 * MIB * k as u64 } else { 0 };
        40 * GIB + (r % 64) * 16 * MIB + leak
    };
    let step = |n: usize, g: usize, k: usize| {
        let r = rank_of(n, g);
        // Rank 77 is a straggler.
        (k as u64) * 20 + if r == 77 { 0 } else { 5 }
    };
    let used = |n: usize, g: usize, k: usize| allocated(n, g, k) + 6 * GIB;
    family(&mut out, "DCGM_FI_DEV_FB_USED", &|n, g, _, k| {
        Some((dcgm(n, g), (used(n, g, k) / MIB) as f64))
    });
    family(&mut out, "DCGM_FI_DEV_FB_FREE", &|n, g, _, k| {
        Some((dcgm(n, g), ((80 * GIB - used(n, g, k)) / MIB) as f64))
    });
    family(&mut out, "DCGM_FI_DEV_FB_TOTAL", &|n, g, _, _| {
        Some((dcgm(n, g), (80 * GIB / MIB) as f64))
    });
    family(&mut out, "DCGM_FI_DEV_GPU_UTIL", &|n, g, _, k| {
        Some((dcgm(n, g), ((n + g + k) % 30 + 70) as f64))
    });
    family(
        &mut out,
        "vramscope_gpu_memory_used_bytes",
        &|n, g, _, k| Some((own(n, g), used(n, g, k) as f64)),
    );
    family(
        &mut out,
        "vramscope_gpu_memory_total_bytes",
        &|n, g, _, _| Some((own(n, g), (80 * GIB) as f64)),
    );
    family(&mut out, "vramscope_gpu_stale", &|n, g, _, _| {
        Some((own(n, g), 0.0))
    });
    family(&mut out, "vramscope_gpu_lost", &|n, g, _, _| {
        Some((own(n, g), 0.0))
    });
    family(&mut out, "vramscope_process_running", &|n, g, _, _| {
        Some((proc_labels(n, g), 1.0))
    });
    family(
        &mut out,
        "vramscope_process_memory_used_bytes",
        &|n, g, _, k| Some((proc_labels(n, g), (allocated(n, g, k) + 4 * GIB) as f64)),
    );
    family(
        &mut out,
        "vramscope_process_allocator_allocated_bytes",
        &|n, g, _, k| Some((proc_labels(n, g), allocated(n, g, k) as f64)),
    );
    family(
        &mut out,
        "vramscope_process_allocator_reserved_bytes",
        &|n, g, _, k| Some((proc_labels(n, g), (allocated(n, g, k) + 2 * GIB) as f64)),
    );
    family(
        &mut out,
        "vramscope_process_allocator_peak_bytes",
        &|n, g, _, k| Some((proc_labels(n, g), (allocated(n, g, k) + GIB) as f64)),
    );
    family(
        &mut out,
        "vramscope_process_allocator_ooms_total",
        &|n, g, _, k| {
            // Rank 2047 ran out of memory two scrapes before the end.
            let oom = rank_of(n, g) == 2047 && k as u64 >= HISTORY_POINTS - 2;
            Some((proc_labels(n, g), if oom { 1.0 } else { 0.0 }))
        },
    );
    family(
        &mut out,
        "vramscope_process_allocator_oom_forecast_steps",
        &|n, g, _, k| {
            (rank_of(n, g) == 1234).then(|| (proc_labels(n, g), (200 - k as u64 * 5) as f64))
        },
    );
    family(&mut out, "vramscope_process_step", &|n, g, _, k| {
        Some((proc_labels(n, g), step(n, g, k) as f64))
    });
    family(
        &mut out,
        "vramscope_snapshot_timestamp_seconds",
        &|n, g, t, _| {
            (g == 0).then(|| {
                (
                    format!("instance=\"{}\",job=\"vramscope\"", instance(n)),
                    t as f64,
                )
            })
        },
    );
    let _ = writeln!(out, "# EOF");
    out.flush().expect("write the fleet");
    (series, samples)
}

struct Prometheus {
    child: std::process::Child,
    base: String,
}

impl Prometheus {
    fn start(dir: &Path, data: &Path) -> Prometheus {
        let config = dir.join("prometheus.yml");
        std::fs::write(&config, "global:\n  scrape_interval: 30s\n").expect("config");
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("port");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", data.display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            // The last backfilled sample stays the present however long the backfill took.
            .arg("--query.lookback-delta=30m")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus");
        let p = Prometheus {
            child,
            base: format!("http://127.0.0.1:{port}"),
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        while get(&format!("{}/-/ready", p.base)).is_none_or(|b| !b.contains("Ready")) {
            assert!(Instant::now() < deadline, "Prometheus never got ready");
            std::thread::sleep(Duration::from_millis(200));
        }
        p
    }

    /// Prometheus's count of the query API requests it answered.
    fn api_requests(&self) -> u64 {
        let text = get(&format!("{}/metrics", self.base)).unwrap_or_default();
        text.lines()
            .filter(|l| {
                l.starts_with("prometheus_http_requests_total{")
                    && l.contains("handler=\"/api/v1/query")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn get(url: &str) -> Option<String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    agent.get(url).call().ok()?.body_mut().read_to_string().ok()
}

/// 64 loopback exporters, each a thread answering a fixed vramscope page.
struct Targets {
    addrs: Vec<String>,
    requests: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Targets {
    fn start() -> Targets {
        let requests = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let mut addrs = Vec::new();
        for n in 0..TARGETS {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
            listener.set_nonblocking(true).expect("nonblocking");
            addrs.push(listener.local_addr().expect("addr").to_string());
            let page = node_page(n);
            let requests = Arc::clone(&requests);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let Ok((mut stream, _)) = listener.accept() else {
                        std::thread::sleep(Duration::from_millis(2));
                        continue;
                    };
                    let _ = stream.set_nonblocking(false);
                    let mut head = Vec::new();
                    let mut buf = [0u8; 2048];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(k) => head.extend_from_slice(&buf[..k]),
                        }
                    }
                    requests.fetch_add(1, Ordering::SeqCst);
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        page.len()
                    );
                    let _ = stream.write_all(page.as_bytes());
                }
            });
        }
        Targets {
            addrs,
            requests,
            stop,
        }
    }

    fn list(&self) -> String {
        self.addrs.join(",")
    }
}

impl Drop for Targets {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// What `vramscope serve` serves for a node of 8 GPUs with one rank each (the families the
/// cluster view reads, and others it skips, as a real page has them).
fn node_page(n: usize) -> String {
    let host = format!("scrape-node-{n:02}");
    let mut page = String::new();
    let gpu_labels = |g: usize| {
        format!(
            "gpu=\"{g}\",UUID=\"GPU-{n:08x}-0000-0000-0000-{g:012x}\",pci_bus_id=\"00000000:{:02X}:00.0\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"{host}\",hostname=\"{host}\"",
            0x18 + g
        )
    };
    for (name, value) in [
        ("DCGM_FI_DEV_FB_USED", 50_000.0),
        ("DCGM_FI_DEV_FB_FREE", 30_000.0),
        ("DCGM_FI_DEV_FB_TOTAL", 81_559.0),
        ("DCGM_FI_DEV_GPU_UTIL", 93.0),
        ("DCGM_FI_DEV_GPU_TEMP", 61.0),
        ("DCGM_FI_DEV_POWER_USAGE", 611.5),
        ("DCGM_FI_DEV_SM_CLOCK", 1980.0),
    ] {
        let _ = writeln!(page, "# HELP {name} x\n# TYPE {name} gauge");
        for g in 0..GPUS {
            let _ = writeln!(page, "{name}{{{}}} {value}", gpu_labels(g));
        }
    }
    for (name, value) in [
        ("vramscope_process_running", 1.0),
        ("vramscope_process_memory_used_bytes", 52e9),
        ("vramscope_process_allocator_allocated_bytes", 45e9),
        ("vramscope_process_allocator_reserved_bytes", 48e9),
        ("vramscope_process_allocator_peak_bytes", 47e9),
        ("vramscope_process_allocator_ooms_total", 0.0),
        ("vramscope_process_allocator_retries_total", 0.0),
        ("vramscope_process_step", 1200.0),
        ("vramscope_process_host_rss_bytes", 9e9),
    ] {
        let _ = writeln!(page, "# HELP {name} x\n# TYPE {name} gauge");
        for g in 0..GPUS {
            let r = n * GPUS + g;
            let _ = writeln!(
                page,
                "{name}{{gpu=\"{g}\",uuid=\"GPU-{n:08x}-0000-0000-0000-{g:012x}\",pid=\"{}\",user=\"train\",command=\"python train.py\",rank=\"{r}\",local_rank=\"{g}\",job_id=\"scrape-job\",hostname=\"{host}\"}} {value}",
                200_000 + r
            );
        }
    }
    page
}
