//! Shared by the `serve_*` tests: running `vramscope serve` against the fake NVML, scraping
//! it, reading the text format, finding Prometheus's tools, and the scenario and channel
//! writer the end-to-end tests share.

#![allow(
    dead_code,
    reason = "shared by several test crates, each of which uses a different part"
)]

pub mod oom;
pub mod prometheus;
pub mod storm;

use crate::common::{GIB, Scenario, h100, wait};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use vramscope::channel::{DeviceIdentity, Writer, WriterConfig, WriterKind, parse_uuid};

/// The UUID of `h100(0)`.
pub const UUID0: &str = "GPU-00000000-0000-0000-0000-000000000000";

/// Two H100s: GPU 0 lists `ours` (25 GiB); GPU 1 lists `other` (3 GiB) when there is one,
/// and has neither a temperature sensor nor a fan.
pub fn two_gpus(ours: u32, other: Option<u32>) -> Value {
    let mut gpu0 = h100(0);
    gpu0["processes"] = json!([{ "t": 0, "compute": [{ "pid": ours, "used_memory": 25 * GIB }] }]);
    let mut gpu1 = h100(1);
    gpu1["num_fans"] = json!(0);
    if let Some(other) = other {
        gpu1["processes"] =
            json!([{ "t": 0, "compute": [{ "pid": other, "used_memory": 3 * GIB }] }]);
    }
    json!({
        "devices": [gpu0, gpu1],
        "faults": [{ "function": "nvmlDeviceGetTemperature", "error": "NotSupported", "device": 1 }]
    })
}

/// A channel writer in this test process (so NVML's row for our pid joins it): rank 1 of 2
/// in job `job-42`, with GPU 0 (`UUID0`, 80 GiB) in slot 0 and nothing published yet.
pub fn rank_writer(dir: &Path) -> Writer {
    let mut writer = Writer::create(WriterConfig {
        rank: Some(1),
        local_rank: Some(1),
        world_size: Some(2),
        job_id: "job-42".into(),
        dir: Some(dir.to_path_buf()),
        ..WriterConfig::from_process(WriterKind::Rust)
    })
    .expect("create a channel");
    let slot = writer
        .add_device(DeviceIdentity {
            ordinal: 0,
            uuid: parse_uuid(UUID0),
            pci_bus_id: None,
            total: Some(80 * GIB),
        })
        .expect("a device slot");
    assert_eq!(slot, 0);
    writer
}

/// Prometheus's own `Accept` header (2.x), which prefers OpenMetrics.
pub const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// A running `vramscope serve`, killed when dropped.
pub struct Served {
    pub child: Child,
    pub addr: SocketAddr,
    /// stderr lines after the address line, for failure messages.
    pub stderr: mpsc::Receiver<String>,
    /// stderr lines before the address line (NVML's start, on its own thread, may say
    /// why it failed before or after the listener says where it listens).
    pub early: Vec<String>,
}

impl Served {
    /// Starts `serve` on a free loopback port with `args`, the scenario's fake NVML and
    /// `env`, and waits for the line naming the address.
    pub fn start(scenario: &Scenario, args: &[&str], env: &[(&str, &std::path::Path)]) -> Self {
        let mut cmd = scenario.command();
        cmd.args(["serve", "--listen", "127.0.0.1:0"]).args(args);
        for (name, value) in env {
            cmd.env(name, value);
        }
        Self::spawn(cmd)
    }

    pub fn spawn(mut cmd: Command) -> Self {
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start vramscope serve");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut seen = Vec::new();
        let addr = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    let found = line
                        .strip_prefix("vramscope: serving http://")
                        .and_then(|rest| rest.strip_suffix("/metrics"))
                        .and_then(|addr| addr.parse().ok());
                    if let Some(addr) = found {
                        break addr;
                    }
                    seen.push(line);
                }
                Err(_) => {
                    let _ = child.kill();
                    panic!("vramscope serve never said where it listens: {seen:?}");
                }
            }
        };
        Self {
            child,
            addr,
            stderr: rx,
            early: seen,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// GET `/metrics` in the text format.
    pub fn scrape(&self) -> String {
        get(&self.url("/metrics"), None).body
    }

    /// Scrapes until `done` accepts the text format, or panics after `timeout`.
    pub fn scrape_until(&self, timeout: Duration, done: impl Fn(&str) -> bool) -> String {
        let mut last = String::new();
        let found = wait::poll(timeout, Duration::from_millis(100), || {
            let text = self.scrape();
            if done(&text) {
                return Some(text);
            }
            last = text;
            None
        });
        found.unwrap_or_else(|_| panic!("never got the expected metrics; last scrape:\n{last}"))
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A response's status, content type and body.
pub struct Reply {
    pub status: u16,
    pub content_type: String,
    pub body: String,
}

/// One GET with `Accept: accept` (none when `None`), a fresh connection each time.
pub fn get(url: &str, accept: Option<&str>) -> Reply {
    request("GET", url, accept)
}

pub fn request(method: &str, url: &str, accept: Option<&str>) -> Reply {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    let result = match method {
        "GET" => with_accept(agent.get(url), accept).call(),
        "HEAD" => with_accept(agent.head(url), accept).call(),
        "POST" => agent.post(url).send_empty(),
        other => panic!("no {other} here"),
    };
    let mut response = result.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    Reply {
        status: response.status().as_u16(),
        content_type,
        body: response.body_mut().read_to_string().unwrap_or_default(),
    }
}

fn with_accept<B>(
    request: ureq::RequestBuilder<B>,
    accept: Option<&str>,
) -> ureq::RequestBuilder<B> {
    match accept {
        Some(accept) => request.header("Accept", accept),
        None => request,
    }
}

/// One sample of the text format.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Line {
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Every sample in a text-format (or OpenMetrics) exposition. Label values are unescaped.
pub fn samples(text: &str) -> Vec<Line> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| parse_line(l).unwrap_or_else(|| panic!("unparsable sample line: {l}")))
        .collect()
}

fn parse_line(line: &str) -> Option<Line> {
    let (head, value) = line.rsplit_once(' ')?;
    let value: f64 = value.parse().ok()?;
    let Some((name, rest)) = head.split_once('{') else {
        return Some(Line {
            name: head.to_string(),
            labels: vec![],
            value,
        });
    };
    let mut labels = Vec::new();
    let mut chars = rest.strip_suffix('}')?.chars().peekable();
    loop {
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if key.is_empty() {
            break;
        }
        if chars.next() != Some('"') {
            return None;
        }
        let mut value = String::new();
        loop {
            match chars.next()? {
                '\\' => match chars.next()? {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                '"' => break,
                c => value.push(c),
            }
        }
        labels.push((key.trim_start_matches(',').to_string(), value));
        if chars.peek() == Some(&',') {
            chars.next();
        }
    }
    Some(Line {
        name: name.to_string(),
        labels,
        value,
    })
}

/// The samples named `name` whose labels include every pair of `with`.
pub fn find<'a>(all: &'a [Line], name: &str, with: &[(&str, &str)]) -> Vec<&'a Line> {
    all.iter()
        .filter(|l| l.name == name && with.iter().all(|(k, v)| l.label(k) == Some(*v)))
        .collect()
}

/// The value of the one sample named `name` with `with`; `None` when there is none.
pub fn value(all: &[Line], name: &str, with: &[(&str, &str)]) -> Option<f64> {
    let found = find(all, name, with);
    assert!(found.len() <= 1, "several {name} {with:?}: {found:?}");
    found.first().map(|l| l.value)
}

/// A loopback port nothing listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}
