//! `vramscope cluster`: one view of a multi-node job, read from the Prometheus server users
//! already run, or from exporters scraped directly.
//!
//! Layers, each importing only those below it:
//! - `url`, `http`: plain-HTTP GETs with a deadline and a size cap (hyper's client);
//! - `series`, `exposition`: samples, and reading an exporter's page;
//! - `answer`: Prometheus's answers decoded within their bounds;
//! - `prometheus`, `scrape`: the two HTTP sources; `ssh_command`, `ssh_document`,
//!   `ssh_link`, `ssh`: hosts over ssh (`--ssh`), each running `vramscope --json --loop`;
//!   `fetch`: one refresh of any, and the thread that refreshes;
//! - `normalise`: vramscope's and dcgm-exporter's spellings onto one model;
//! - `charts`: each job's and node's history for the charts (the start's range query, then
//!   every refresh);
//! - `model`: the fleet with last-good values, ages and "missing since", and its charts;
//! - `view`: the job and node views, built once per refresh; `cells`: their text;
//! - outputs: `table` (`--once`), `json` (`--json`), `screen` (the interactive view).

mod answer;
mod cells;
mod charts;
mod exposition;
mod fetch;
mod http;
mod json;
mod model;
mod normalise;
mod options;
mod prometheus;
mod scrape;
mod screen;
mod series;
mod ssh;
mod ssh_command;
mod ssh_document;
mod ssh_link;
mod table;
mod url;
mod view;

use crate::model::now_ms;
use fetch::Source;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Options that cannot be used, as clap's own errors.
const EXIT_USAGE: u8 = 2;
/// `--once`/`--json` when the source gave nothing at all, or nothing usable.
const EXIT_NO_SOURCE: u8 = 1;

pub use json::{SCHEMA, VERSION};
pub use options::{ClusterView, Options};
/// The instant query of each refresh (for the benchmark, which times Prometheus alone).
pub use prometheus::PRESENT;

/// Runs `vramscope cluster`; `started` is when the process began, for the first-screen
/// benchmark.
pub fn run(options: &Options, started: Instant) -> ExitCode {
    let source = match source(options) {
        Ok(source) => source,
        Err(message) => {
            eprintln!("vramscope: {message}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let stale_after = stale_after(options);
    let hosts = match &source {
        Source::Ssh(hosts) => Some(Arc::clone(hosts)),
        _ => None,
    };
    let status = if options.once {
        if let Some(hosts) = &hosts {
            // Each host's first document, or why none: at most a connection's deadline
            // and a refresh's, as a stalled session is given.
            hosts.wait_settled(ssh_first_wait(options));
        }
        once(options, &source, stale_after)
    } else {
        screen::run(options, source, stale_after, started)
    };
    if let Some(hosts) = hosts {
        hosts.stop();
    }
    status
}

/// How long a host's session may send nothing before it counts as stalled: three refreshes
/// missed, each allowed its deadline (as a target not read is counted stale).
fn ssh_stall_after(args: &Options) -> Duration {
    3 * args.interval + args.timeout
}

/// `--once` waits this long at most for each host's first document.
fn ssh_first_wait(args: &Options) -> Duration {
    args.timeout + ssh_stall_after(args) + Duration::from_millis(500)
}

/// The source the options name.
fn source(args: &Options) -> Result<Source, String> {
    if let Some(url) = &args.prometheus {
        let url = url::Url::parse(url, 9090).map_err(|e| format!("--prometheus {e}"))?;
        return Ok(Source::Prometheus(prometheus::Prometheus {
            url,
            deadline: args.timeout,
        }));
    }
    if let Some(list) = &args.ssh {
        let hosts = ssh_command::parse_hosts(list).map_err(|e| format!("--ssh: {e}"))?;
        let program = ssh_command::parse_remote_program(&args.ssh_vramscope)
            .map_err(|e| format!("--ssh-vramscope: {e}"))?;
        let setup = ssh_command::SshSetup {
            program,
            interval: args.interval,
            connect_timeout: args.timeout,
        };
        let hosts = ssh::Hosts::start(hosts, setup, ssh_stall_after(args))?;
        return Ok(Source::Ssh(Arc::new(hosts)));
    }
    let text = match (&args.targets, &args.targets_file) {
        (Some(list), _) => list.clone(),
        (None, Some(file)) => read_targets_file(file)?,
        (None, None) => {
            return Err("give --prometheus URL, --targets LIST or --ssh HOSTS".into());
        }
    };
    let targets = scrape::Targets::parse_list(&text).map_err(|e| format!("--targets: {e}"))?;
    Ok(Source::Targets(scrape::Targets {
        targets: Arc::from(targets),
        deadline: args.timeout,
        concurrency: usize::from(args.concurrency),
    }))
}

/// A `--targets-file`, read within its bound: a FIFO or a device is refused at once, a file
/// over the bound by its size before any of it is read.
fn read_targets_file(file: &std::path::Path) -> Result<String, String> {
    let shown = || crate::text::clean(&file.display().to_string()).into_owned();
    let bytes = crate::safe_fs::read_file(file, crate::safe_fs::bounds::TARGETS_FILE)
        .map_err(|e| format!("--targets-file {}: {e}", shown()))?;
    String::from_utf8(bytes).map_err(|_| format!("--targets-file {}: is not UTF-8 text", shown()))
}

fn stale_after(args: &Options) -> view::StaleAfter {
    let interval = args.interval;
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    view::StaleAfter {
        // Three refreshes missed, each allowed its deadline.
        unread_ms: 3 * ms(interval) + ms(args.timeout),
        sampled_ms: ms(args.stale_after),
    }
}

/// `--once` and `--json`: one refresh, printed.
fn once(options: &Options, source: &Source, stale_after: view::StaleAfter) -> ExitCode {
    let runtime = match fetch::runtime() {
        Ok(r) => r,
        Err(message) => {
            eprintln!("vramscope: {message}");
            return ExitCode::from(EXIT_NO_SOURCE);
        }
    };
    // The single-node figures of every GPU: a script reads them all, in one query more.
    let ask = fetch::Ask {
        history: true,
        detail: fetch::Detail::All,
    };
    let fetched = runtime.block_on(fetch::fetch(source, &ask));
    let nothing = fetched.origins.iter().all(|o| match o {
        fetch::Origin::Prometheus { problem } => problem.is_some(),
        fetch::Origin::Target { problem, .. } => problem.is_some(),
    });
    let mut cluster = model::Cluster::default();
    cluster.ingest(fetched);
    let screen = view::build(&cluster, &source.describe(), now_ms(), stale_after);
    let text = if options.json {
        format!("{}\n", json::render(&screen))
    } else {
        table::render(&screen)
    };
    if let Err(status) = crate::stdout::print(&text) {
        return status;
    }
    if nothing {
        for p in &screen.problems {
            eprintln!("vramscope: {p}");
        }
        return ExitCode::from(EXIT_NO_SOURCE);
    }
    // An answer with nothing usable in it (no GPU, no job: a source that is not a fleet's,
    // or one whose answer was cut) is said to be, and fails, as no answer does.
    if screen.nodes.is_empty() && screen.jobs.is_empty() {
        for p in &screen.problems {
            eprintln!("vramscope: {p}");
        }
        eprintln!(
            "vramscope: {} answered, but with no GPU and no job in it: nothing to show",
            screen.source
        );
        return ExitCode::from(EXIT_NO_SOURCE);
    }
    ExitCode::SUCCESS
}
