//! `vramscope serve`: one process per node serving Prometheus metrics.
//!
//! Threads:
//! - the samplers (`sources::runner::Sampling`), exactly as under the TUI;
//! - `serve-state` (`owner`), the one owner of the `Monitor`: it ingests every
//!   `SourceEvent`, takes one `Snapshot` per tick (the type the TUI and `--json` read), whose
//!   exited rows the monitor remembers for at least the grace period; `retention` says which
//!   processes to export (exited ones through their grace, new ones once settled) and the
//!   result is swapped into `Latest`;
//! - the calling thread runs a one-thread tokio runtime serving HTTP (`http`). A scrape
//!   clones the latest `Arc<Published>` and writes its encoding, made at most once per tick
//!   and format (`published`), so scrapers never reach NVML and a hundred of them cost the
//!   driver nothing more than one.
//!
//! What is exported is decided in `families` (the vocabulary: names, units, labels) and the
//! files that build on it (`device_metrics`, `mig_metrics`, `process_metrics`), put together
//! per scrape in `scrape` and encoded by the ecosystem's crates in `encode`.

mod device_metrics;
mod encode;
mod families;
mod fresh;
mod http;
mod mig_metrics;
mod node;
mod owner;
mod process_metrics;
mod processes;
mod published;
mod retention;
mod scrape;
mod slots;

pub use http::Limits;

/// The text exposition a scrape returns once `snapshot` is published by a node that has just
/// started: the same `processes`, labels (this machine's host name included) and families
/// `owner` publishes each tick, but for `Retention` (no exited process kept over, no new one
/// held back to settle). What the one-story property test holds beside `--json`, `report`
/// and `export`.
pub fn exposition(snapshot: crate::model::Snapshot) -> String {
    let exported = processes::from_snapshot(&snapshot);
    let mut node = node::Node::new(None);
    let labels = node.labels(&snapshot.devices);
    let hostname = node.hostname().map(str::to_string);
    let published =
        published::Published::new(Arc::new(snapshot), labels, exported).with_hostname(hostname);
    String::from_utf8_lossy(&published.body(encode::Format::Text)).into_owned()
}

use crate::sources::runner::{Sampling, SamplingConfig};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use std::net::{SocketAddr, TcpListener};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::mpsc::channel;
use std::thread;
use std::time::Duration;
use tokio::sync::oneshot;

/// Exit status for options that cannot be used (as clap's own errors).
const EXIT_USAGE: u8 = 2;
/// Exit status when the server cannot start (address in use, no permission).
const EXIT_FAILED: u8 = 1;

/// What `vramscope serve` is asked for (`cli::ServeArgs::options`), so that the exporter does
/// not import the command-line types above it.
#[derive(Clone, Debug)]
pub struct Options {
    pub listen: String,
    /// How long an exited process's series stay exported.
    pub grace: Duration,
    pub max_connections: u16,
    pub client_timeout: Duration,
    /// The `hostname` label, as given (checked here).
    pub hostname: Option<String>,
    /// `--on EVENT=CMD`: what to run when something happens.
    pub hooks: Vec<crate::notify::Hook>,
}

/// Runs the exporter, sampling with `config`, until SIGTERM or SIGINT (then exit 0), or until
/// it cannot start or the server fails.
pub fn run(config: SamplingConfig, args: &Options) -> ExitCode {
    let addr = match parse_listen(&args.listen) {
        Ok(addr) => addr,
        Err(message) => {
            eprintln!("vramscope: {message}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let listener = match bind(addr) {
        Ok(listener) => listener,
        Err(message) => {
            eprintln!("vramscope: {message}");
            return ExitCode::from(EXIT_FAILED);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("vramscope: cannot start the HTTP server: {e}");
            return ExitCode::from(EXIT_FAILED);
        }
    };
    let latest = Arc::new(published::Latest::default());
    let (tx, rx) = channel();
    let sampling = match Sampling::start(config, tx) {
        Ok(sampling) => sampling,
        Err(e) => {
            eprintln!("vramscope: {e}");
            return ExitCode::from(EXIT_FAILED);
        }
    };
    let hostname = match args.hostname.as_deref().map(parse_hostname).transpose() {
        Ok(hostname) => hostname,
        Err(message) => {
            eprintln!("vramscope: {message}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let settings = owner::Settings {
        grace: args.grace,
        hostname,
        notifier: match crate::notify::Notifier::start(&args.hooks, crate::model::now_ms()) {
            Ok(n) => n,
            Err(e) => {
                eprintln!("vramscope: {e}");
                return ExitCode::from(EXIT_FAILED);
            }
        },
    };
    if let Err(e) = owner::spawn(rx, sampling, Arc::clone(&latest), settings) {
        eprintln!("vramscope: cannot start the sampling thread: {e}");
        return ExitCode::from(EXIT_FAILED);
    }
    let limits = Limits {
        max_connections: usize::from(args.max_connections),
        client_timeout: args.client_timeout,
        max_lifetime: args.client_timeout.max(Duration::from_secs(120)),
    };
    // Before the address is said, so that a signal sent as soon as it is read ends the
    // server in order.
    let stop = match stop_on_signal() {
        Ok(stop) => stop,
        Err(e) => {
            eprintln!("vramscope: cannot handle signals: {e}");
            return ExitCode::from(EXIT_FAILED);
        }
    };
    // The address actually bound (port 0 picks one): tests and scripts read it here.
    let bound = listener.local_addr().unwrap_or(addr);
    eprintln!("vramscope: serving http://{bound}/metrics");
    let stop = async {
        // A dropped sender (the signal thread gone) is no request to stop.
        if stop.await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    // On return the caller shuts NVML down (`crate::run`), as after every orderly exit.
    match runtime.block_on(http::serve(listener, latest, limits, stop)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vramscope: the HTTP server stopped: {e}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// Completes at the first SIGTERM or SIGINT: a service manager's stop or Ctrl-C ends the
/// server in order (stop accepting, finish the responses in flight, shut NVML down, exit 0)
/// instead of killing it. A second one ends the process at once.
fn stop_on_signal() -> std::io::Result<oneshot::Receiver<()>> {
    let mut signals = Signals::new([SIGTERM, SIGINT])?;
    let (tx, rx) = oneshot::channel();
    thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut received = signals.forever();
            if received.next().is_some() {
                let _ = tx.send(());
            }
            // A second signal while stopping: whoever sent it will not wait; end at once,
            // as the default action would have.
            if let Some(signal) = received.next() {
                std::process::exit(128 + signal);
            }
        })?;
    Ok(rx)
}

/// `IP:PORT` (`[::1]:9400` for IPv6). Host names are refused: which address a name resolves
/// to decides who can read the metrics, so it must be written out.
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    text.trim().parse().map_err(|_| {
        format!(
            "--listen `{text}` is not IP:PORT (e.g. 127.0.0.1:9400, or 0.0.0.0:9400 for every interface)"
        )
    })
}

/// `--hostname`: printable text of at most 253 bytes (a DNS name's limit), never blank.
pub fn parse_hostname(text: &str) -> Result<String, String> {
    let name = text.trim();
    if name.is_empty() || name.len() > 253 || !crate::text::is_clean(name) {
        return Err(format!(
            "--hostname `{}` is not a host name (printable text, 1 to 253 bytes)",
            crate::text::clean(text)
        ));
    }
    Ok(name.to_string())
}

fn bind(addr: SocketAddr) -> Result<TcpListener, String> {
    TcpListener::bind(addr)
        .and_then(|listener| listener.set_nonblocking(true).map(|()| listener))
        .map_err(|e| format!("cannot listen on {addr}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_takes_ip_and_port_only() {
        assert_eq!(
            parse_listen("127.0.0.1:9400"),
            Ok("127.0.0.1:9400".parse().unwrap())
        );
        assert_eq!(parse_listen("[::1]:0"), Ok("[::1]:0".parse().unwrap()));
        for bad in [
            "localhost:9400",
            "9400",
            ":9400",
            "127.0.0.1",
            "1.2.3.4:99999",
            "",
        ] {
            let message = parse_listen(bad).unwrap_err();
            assert!(message.contains("is not IP:PORT"), "{bad}: {message}");
            assert!(!message.contains('\n'));
        }
    }

    #[test]
    fn a_host_name_is_printable_and_not_blank() {
        assert_eq!(parse_hostname(" node-a "), Ok("node-a".to_string()));
        for bad in ["", "  ", "node\u{1b}[2J", "a\nb"] {
            let message = parse_hostname(bad).unwrap_err();
            assert!(message.contains("is not a host name"), "{message}");
            assert!(crate::text::is_clean(&message), "{message}");
        }
        assert!(parse_hostname(&"x".repeat(254)).is_err());
    }
}
