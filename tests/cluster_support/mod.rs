//! Shared by the `cluster_*` tests: a simulated fleet of three nodes on loopback, each a
//! `vramscope serve` on its own fake NVML scenario and host name, with the four ranks of one
//! job (`job-7`) running as Python processes that publish through the real writer; and
//! running `vramscope cluster`.

#![allow(
    dead_code,
    reason = "shared by several test crates, each of which uses a different part"
)]

pub mod page;
pub mod sshd;

use crate::common::{GIB, NO_CONFIG, Scenario, h100};
use crate::serve_support::{Served, samples, value};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

pub const JOB: &str = "job-7";
pub const NODES: [&str; 3] = ["node-a", "node-b", "node-c"];

/// Where each rank runs: (rank, node index, GPU, allocated GiB, steps taken).
pub const LAYOUT: [(u32, usize, u32, u64, u32); 4] = [
    (0, 0, 0, 9, 10),
    (1, 0, 1, 10, 10),
    // Four steps behind the others: a straggler.
    (2, 1, 0, 11, 6),
    (3, 2, 1, 12, 10),
];

/// GPU memory each node's fake NVML reports used, per GPU (GiB): distinct on every node.
pub fn used_gib(node: usize, gpu: u32) -> u64 {
    20 + 10 * node as u64 + u64::from(gpu)
}

/// Each node's GPU temperature (C): distinct on every node, for the single-node figures.
pub fn temperature(node: usize, gpu: u32) -> u64 {
    40 + 10 * node as u64 + u64::from(gpu)
}

/// One rank: a Python process publishing through vramscope's writer.
pub struct Rank {
    pub rank: u32,
    pub node: usize,
    pub gpu: u32,
    pub child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Rank {
    fn start(
        channels: &Path,
        (rank, node, gpu, alloc_gib, steps): (u32, usize, u32, u64, u32),
    ) -> Rank {
        let package = Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/drivers/cluster_rank.py");
        let uuid = h100(gpu)["uuid"].as_str().unwrap().to_string();
        let local_rank = LAYOUT.iter().filter(|l| l.1 == node && l.0 < rank).count();
        let mut child = Command::new("python3")
            .arg(script)
            .env("PYTHONPATH", &package)
            .env("VRAMSCOPE_DIR", channels)
            .env("RANK_UUID", uuid)
            .env("RANK_ALLOC", (alloc_gib * GIB).to_string())
            .env("RANK_STEPS", steps.to_string())
            .env("RANK", rank.to_string())
            .env("LOCAL_RANK", local_rank.to_string())
            .env("WORLD_SIZE", LAYOUT.len().to_string())
            .env("SLURM_JOB_ID", JOB)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start a rank");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut r = Rank {
            rank,
            node,
            gpu,
            child,
            stdin,
            stdout,
        };
        assert_eq!(r.line(), "ready", "rank {rank} did not start");
        r
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        line.trim().to_string()
    }

    /// Sends one command (`oom`, `alloc BYTES`, `step`) and waits until it is done.
    pub fn send(&mut self, command: &str) {
        writeln!(self.stdin, "{command}").unwrap();
        assert_eq!(self.line(), "done", "rank {}: {command}", self.rank);
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Rank {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub struct Node {
    pub name: &'static str,
    pub scenario: Scenario,
    pub served: Served,
}

/// Three nodes, four ranks.
pub struct Fleet {
    pub ranks: Vec<Rank>,
    pub nodes: Vec<Node>,
    /// Each node's channel folder (`VRAMSCOPE_DIR`), where its ranks publish.
    pub channels: Vec<std::path::PathBuf>,
    _work: tempfile::TempDir,
}

impl Fleet {
    pub fn start() -> Fleet {
        let work = tempfile::tempdir().unwrap();
        let channels: Vec<_> = NODES
            .iter()
            .map(|n| work.path().join(format!("channels-{n}")))
            .collect();
        let ranks: Vec<Rank> = LAYOUT
            .iter()
            .map(|l| Rank::start(&channels[l.1], *l))
            .collect();
        let nodes = NODES
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let devices: Vec<Value> = (0..2)
                    .map(|gpu| {
                        let mut d = h100(gpu);
                        d["timeline"][0]["memory_used"] = json!(used_gib(i, gpu) * GIB);
                        d["timeline"][0]["gpu_util"] = json!(50 + 10 * i as u64 + u64::from(gpu));
                        d["timeline"][0]["temperature"] = json!(temperature(i, gpu));
                        let listed: Vec<Value> = ranks
                            .iter()
                            .filter(|r| r.node == i && r.gpu == gpu)
                            .map(|r| json!({ "pid": r.pid(), "used_memory": 14 * GIB }))
                            .collect();
                        d["processes"] = json!([{ "t": 0, "compute": listed }]);
                        d
                    })
                    .collect();
                let scenario = Scenario::new(&json!({ "devices": devices }));
                let served = Served::start(
                    &scenario,
                    &["--interval", "250ms", "--hostname", name],
                    &[("VRAMSCOPE_DIR", &channels[i])],
                );
                Node {
                    name,
                    scenario,
                    served,
                }
            })
            .collect();
        Fleet {
            ranks,
            nodes,
            channels,
            _work: work,
        }
    }

    /// Scrapes every exporter until each serves every rank's allocator figures.
    pub fn wait_until_served(&self) {
        for (i, node) in self.nodes.iter().enumerate() {
            let ranks: Vec<String> = self
                .ranks
                .iter()
                .filter(|r| r.node == i)
                .map(|r| r.rank.to_string())
                .collect();
            node.served.scrape_until(Duration::from_secs(30), |text| {
                let all = samples(text);
                ranks.iter().all(|r| {
                    value(
                        &all,
                        "vramscope_process_allocator_allocated_bytes",
                        &[("rank", r)],
                    )
                    .is_some()
                        && value(&all, "vramscope_process_step", &[("rank", r)]).is_some()
                })
            });
        }
    }

    /// What `rank`'s exporter serves as `name`.
    pub fn served(&self, rank: &Rank, name: &str) -> Option<f64> {
        let text = self.nodes[rank.node].served.scrape();
        value(&samples(&text), name, &[("rank", &rank.rank.to_string())])
    }

    pub fn targets(&self) -> String {
        let addrs: Vec<String> = self
            .nodes
            .iter()
            .map(|n| n.served.addr.to_string())
            .collect();
        addrs.join(",")
    }
}

/// `vramscope cluster ARGS --json`, parsed; its exit status too.
pub fn cluster_json(args: &[&str]) -> (Value, Option<i32>) {
    let out = Command::new(env!("CARGO_BIN_EXE_vramscope"))
        .env(NO_CONFIG.0, NO_CONFIG.1)
        .arg("cluster")
        .args(args)
        .arg("--json")
        .output()
        .expect("run vramscope cluster");
    let text = String::from_utf8_lossy(&out.stdout);
    let doc = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "cluster --json is not JSON ({e}): {text}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (doc, out.status.code())
}

/// The row of `rank` in `job`, if the output has it.
pub fn rank_row<'a>(doc: &'a Value, job: &str, rank: u32) -> Option<&'a Value> {
    doc["jobs"].as_array()?.iter().find(|j| j["job"] == job)?["ranks"]
        .as_array()?
        .iter()
        .find(|r| r["rank"] == rank)
}

/// Polls `cluster ARGS --json` until `done` accepts it, for at most `timeout`.
pub fn json_until(args: &[&str], timeout: Duration, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + timeout;
    loop {
        let (doc, _) = cluster_json(args);
        if done(&doc) {
            return doc;
        }
        assert!(
            Instant::now() < deadline,
            "cluster --json never showed what was expected; last:\n{doc:#}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Every rank of the fleet on its node and GPU with the figures its exporter serves.
pub fn check_every_rank(doc: &Value, fleet: &Fleet) {
    for r in &fleet.ranks {
        let row =
            rank_row(doc, JOB, r.rank).unwrap_or_else(|| panic!("no rank {} in {doc:#}", r.rank));
        let (_, node, gpu, alloc, steps) = LAYOUT[r.rank as usize];
        assert_eq!(row["node"], NODES[node], "rank {}: {row}", r.rank);
        assert_eq!(row["gpu"], gpu, "rank {}: {row}", r.rank);
        assert_eq!(row["pid"], r.pid(), "rank {}: {row}", r.rank);
        assert_eq!(
            row["allocated_bytes"],
            alloc * GIB,
            "rank {}: {row}",
            r.rank
        );
        assert_eq!(
            row["reserved_bytes"],
            (alloc + 1) * GIB,
            "rank {}: {row}",
            r.rank
        );
        assert_eq!(row["step"], steps, "rank {}: {row}", r.rank);
        for (field, family) in [
            (
                "allocated_bytes",
                "vramscope_process_allocator_allocated_bytes",
            ),
            (
                "reserved_bytes",
                "vramscope_process_allocator_reserved_bytes",
            ),
            ("peak_bytes", "vramscope_process_allocator_peak_bytes"),
            ("step", "vramscope_process_step"),
            ("ooms", "vramscope_process_allocator_ooms_total"),
        ] {
            let served = fleet.served(r, family);
            assert_eq!(
                row[field].as_f64(),
                served,
                "rank {} {field}: the exporter serves {served:?}; {row}",
                r.rank
            );
        }
        assert_eq!(row["freshness"]["current"], true, "{row}");
    }
    let straggler = rank_row(doc, JOB, 2).unwrap();
    assert_eq!(straggler["steps_behind"], 4, "{straggler}");
    assert_eq!(rank_row(doc, JOB, 0).unwrap()["steps_behind"], Value::Null);
    // Every node with both GPUs, as its fake NVML says.
    for (i, name) in NODES.iter().enumerate() {
        let node = doc["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["node"] == *name)
            .unwrap_or_else(|| panic!("no node {name} in {doc:#}"));
        let gpus = node["gpus"].as_array().unwrap();
        assert_eq!(gpus.len(), 2, "{node}");
        for g in gpus {
            let index = g["gpu"].as_u64().unwrap() as u32;
            assert_eq!(g["memory_used_bytes"], used_gib(i, index) * GIB, "{g}");
            assert_eq!(g["memory_total_bytes"], 80 * GIB, "{g}");
            assert_eq!(
                g["utilization_percent"],
                50.0 + 10.0 * i as f64 + f64::from(index),
                "{g}"
            );
            let ranks: Vec<u64> = LAYOUT
                .iter()
                .filter(|l| l.1 == i && l.2 == index)
                .map(|l| u64::from(l.0))
                .collect();
            assert_eq!(g["ranks"], json!(ranks), "{g}");
        }
    }
}
