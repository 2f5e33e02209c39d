//! A real Prometheus for the end-to-end tests: it scrapes `vramscope serve`, and what it
//! stored is read back through its HTTP query API.

use super::{free_port, get};
use crate::common::wait;
use serde_json::{Value, json};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A Prometheus on a free loopback port with its storage in a temporary folder, scraping
/// `target` every second; killed when dropped.
pub struct Prometheus {
    child: Child,
    base: String,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    pub fn start(target: std::net::SocketAddr) -> Self {
        Self::start_all(&[target])
    }

    /// The same, scraping every one of `targets`.
    pub fn start_all(targets: &[std::net::SocketAddr]) -> Self {
        let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        let target = targets.join(", ");
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: vramscope\n    static_configs:\n      - targets: [{target}]\n"
            ),
        )
        .unwrap();
        let port = free_port();
        let log = dir.path().join("prometheus.log");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start prometheus");
        let prometheus = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
            _dir: dir,
        };
        prometheus.wait_until(Duration::from_secs(60), "ready", || {
            std::panic::catch_unwind(|| get(&format!("{}/-/ready", prometheus.base), None))
                .is_ok_and(|r| r.status == 200)
        });
        prometheus
    }

    /// Where its HTTP API answers: `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.base
    }

    /// Polls `done` (a query to this Prometheus, so every 200 ms) until it holds; the failure
    /// says `what` never happened and ends with Prometheus's log.
    pub fn wait_until(&self, timeout: Duration, what: &str, done: impl Fn() -> bool) {
        let held = wait::poll(timeout, Duration::from_millis(200), || done().then_some(()));
        if held.is_err() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            panic!(
                "Prometheus: never {what}; its log ends:\n{}",
                tail.join("\n")
            );
        }
    }

    /// The instant vector `query` evaluates to now, as (labels, value) pairs.
    pub fn query(&self, query: &str) -> Vec<(Value, f64)> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(10)))
            .http_status_as_error(false)
            .build()
            .into();
        let text = agent
            .get(&format!("{}/api/v1/query", self.base))
            .query("query", query)
            .call()
            .unwrap_or_else(|e| panic!("query {query}: {e}"))
            .body_mut()
            .read_to_string()
            .unwrap();
        let doc: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(doc["status"], json!("success"), "query {query}: {doc}");
        doc["data"]["result"]
            .as_array()
            .unwrap_or(&Vec::new())
            .iter()
            .map(|r| {
                let value = r["value"][1].as_str().unwrap().parse().unwrap();
                (r["metric"].clone(), value)
            })
            .collect()
    }

    /// The value of a query that must give exactly one series.
    pub fn one(&self, query: &str) -> f64 {
        let result = self.query(query);
        assert_eq!(result.len(), 1, "{query}: {result:?}");
        result[0].1
    }

    pub fn get_json(&self, path: &str) -> Value {
        serde_json::from_str(&get(&format!("{}{path}", self.base), None).body).unwrap()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
