//! `cluster --ssh host1,host2,...`: every host runs `vramscope --json --loop` through the
//! user's own ssh client, and each refresh takes the latest document of each (`ssh_link`
//! keeps one session per host), read as an exporter's series (`ssh_document`), so the job
//! and node views are the ones the Prometheus and direct paths show.
//!
//! Why `--json --loop` and not `serve` on a forwarded port: the loop writes a line every
//! interval, so when the connection goes (the run ends, is killed, or the network drops)
//! its next write fails and it exits on its own: nothing is left listening on the remote
//! host, no remote port needs choosing (or can collide with another user's), and nobody on
//! that host can read the figures from a port meant for this run.

use super::series::Series;
use super::ssh_command::SshSetup;
use super::ssh_link::{self, Link};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The hosts, each with its link, and this run's folder for ssh's control sockets.
#[derive(Debug)]
pub struct Hosts {
    links: Vec<Link>,
    setup: SshSetup,
    control_dir: PathBuf,
}

impl Hosts {
    /// Starts one link per host.
    pub fn start(
        hosts: Vec<String>,
        setup: SshSetup,
        stall_after: Duration,
    ) -> Result<Hosts, String> {
        let control_dir = private_dir()?;
        let mut links = Vec::new();
        for host in hosts {
            match Link::start(host, setup.clone(), control_dir.clone(), stall_after) {
                Ok(link) => links.push(link),
                Err(why) => {
                    let started = Hosts {
                        links,
                        setup,
                        control_dir,
                    };
                    started.stop();
                    return Err(why);
                }
            }
        }
        Ok(Hosts {
            links,
            setup,
            control_dir,
        })
    }

    pub fn len(&self) -> usize {
        self.links.len()
    }

    /// The latest of every host: its document's series, and each host with why it has
    /// none (`None`: it has one).
    pub fn round(&self) -> (Vec<Series>, Vec<(String, Option<String>)>) {
        let mut series = Vec::new();
        let mut origins = Vec::new();
        for link in &self.links {
            let state = link.state();
            let problem = match (&state.latest, &state.problem) {
                (Some(latest), None) => {
                    series.extend_from_slice(latest);
                    None
                }
                (_, Some(why)) => Some(why.clone()),
                (None, None) => Some("no document yet".into()),
            };
            origins.push((crate::text::clean(&link.host).into_owned(), problem));
        }
        (series, origins)
    }

    /// Waits until every host sent its first document or its first session ended, or
    /// `deadline` passed (`--once`, `--json`).
    pub fn wait_settled(&self, deadline: Duration) {
        let until = Instant::now() + deadline;
        while Instant::now() < until && !self.links.iter().all(|l| l.state().settled) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Ends every session, asks each master connection to exit and removes the control
    /// folder.
    pub fn stop(&self) {
        for link in &self.links {
            link.stop();
        }
        let hosts: Vec<&str> = self.links.iter().map(|l| l.host.as_str()).collect();
        ssh_link::exit_masters(&self.setup, &hosts, &self.control_dir);
        // Ours, made 0700 by this run: nobody else could have put anything in it.
        let _ = std::fs::remove_dir_all(&self.control_dir);
    }
}

/// A new folder of this run's own for the control sockets, made 0700 in `/tmp` (a socket's
/// path must stay short, which `$TMPDIR` need not be). `mkdir` fails on anything already
/// there, a symlink included, so a name someone planted is never used: another is tried.
fn private_dir() -> Result<PathBuf, String> {
    use std::os::unix::fs::DirBuilderExt;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut last = None;
    for attempt in 0..16u32 {
        let path = PathBuf::from(format!(
            "/tmp/vramscope-ssh-{}-{:x}",
            std::process::id(),
            nanos.wrapping_add(attempt.wrapping_mul(0x9e37_79b9))
        ));
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => return Ok(path),
            Err(e) => last = Some(e),
        }
    }
    Err(format!(
        "cannot make a folder for ssh's control sockets in /tmp: {}",
        last.map_or_else(String::new, |e| e.to_string())
    ))
}
