//! vramscope: a live terminal monitor of NVIDIA GPU memory, utilisation and processes.
//!
//! Samplers (`sources`) send owned samples to the one owner of state (`state::Monitor`);
//! the TUI (`tui`) and one-shot output (`output`) read `model::Snapshot` and the history.
//!
//! `channel` (the shared-memory channel's writer and reader) needs only libc; everything else
//! is the monitor, behind the default `monitor` feature.

// The lint policy (Cargo.toml [lints]): no unwrap, expect or panic outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[cfg(feature = "monitor")]
pub mod attach;
pub mod channel;
#[cfg(feature = "monitor")]
pub mod clean;
#[cfg(feature = "monitor")]
pub mod cli;
#[cfg(feature = "monitor")]
pub mod cluster;
#[cfg(feature = "monitor")]
pub mod diff;
#[cfg(feature = "monitor")]
pub mod export;
#[cfg(feature = "monitor")]
pub mod history;
#[cfg(feature = "monitor")]
pub mod job;
#[cfg(feature = "monitor")]
pub mod launch;
#[cfg(feature = "monitor")]
pub mod log_file;
#[cfg(feature = "monitor")]
pub mod memory_snapshot;
#[cfg(feature = "monitor")]
pub mod model;
#[cfg(feature = "monitor")]
pub mod notify;
#[cfg(feature = "monitor")]
pub mod output;
#[cfg(feature = "monitor")]
pub mod plot;
#[cfg(feature = "monitor")]
pub mod record;
#[cfg(feature = "monitor")]
pub mod recording;
#[cfg(feature = "monitor")]
pub mod replay;
#[cfg(feature = "monitor")]
pub mod report;
pub mod safe_fs;
#[cfg(feature = "monitor")]
pub mod serve;
#[cfg(feature = "monitor")]
pub mod sites;
#[cfg(feature = "monitor")]
pub mod sources;
#[cfg(feature = "monitor")]
pub mod state;
#[cfg(feature = "monitor")]
pub mod stdout;
#[cfg(feature = "monitor")]
pub mod terminal_kit;
pub mod text;
#[cfg(feature = "monitor")]
pub mod threads;
#[cfg(feature = "monitor")]
pub mod tui;

#[cfg(feature = "monitor")]
use std::process::ExitCode;
#[cfg(feature = "monitor")]
use std::time::Instant;

/// Runs vramscope with parsed options; `started` is when the process began, for the
/// first-frame benchmark.
#[cfg(feature = "monitor")]
pub fn run(cli: &cli::Cli, started: Instant) -> ExitCode {
    // Asked for, so a log that cannot be written stops the start rather than going unseen.
    if let Err(message) = open_log(cli) {
        eprintln!("vramscope: {message}");
        return ExitCode::from(2);
    }
    let code = dispatch(cli, started);
    // Every orderly exit passes here: NVML sees its session end.
    sources::nvml::shutdown();
    code
}

#[cfg(feature = "monitor")]
fn open_log(cli: &cli::Cli) -> Result<(), String> {
    let Some(arg) = &cli.monitor_log else {
        return Ok(());
    };
    // Only the modes that sample (cli::scope's READ_BY): a log set in the configuration file
    // is not opened by `report` or `plot`.
    let samples = match &cli.command {
        None | Some(cli::Command::Record(_)) | Some(cli::Command::Serve(_)) => true,
        Some(cli::Command::Run(args)) => !args.no_monitor,
        Some(_) => false,
    };
    if !samples {
        return Ok(());
    }
    let state_home = std::env::var("XDG_STATE_HOME").ok();
    let home = std::env::var("HOME").ok();
    let path = log_file::resolve(arg, state_home.as_deref(), home.as_deref())?;
    log_file::open(&path)
}

#[cfg(feature = "monitor")]
fn dispatch(cli: &cli::Cli, started: Instant) -> ExitCode {
    match &cli.command {
        Some(cli::Command::Run(args)) => return launch::run(&args.options(cli), started),
        Some(cli::Command::Serve(args)) => {
            return serve::run(cli.sampling(), &args.options(cli.on.clone()));
        }
        Some(cli::Command::Cluster(args)) => return cluster::run(&args.options(cli), started),
        Some(cli::Command::Record(args)) => {
            if cli.record.is_some() || cli.one_shot() {
                return refused(
                    "`record` writes only its -o FILE; --record, --once, --json, --csv and --loop do not apply",
                );
            }
            return record::command::run(cli.sampling(), args);
        }
        Some(cli::Command::Replay { file }) => {
            let played = replay::usage::Played::File;
            return match replay::Replay::open(file) {
                Ok(_) if !terminal() => refused(&replay::usage::terminal_refusal(played)),
                Ok(replay) => tui::replay(&cli.tui_options(), replay),
                Err(e) => {
                    eprintln!("vramscope: {e}");
                    ExitCode::from(2)
                }
            };
        }
        Some(cli::Command::Demo) => {
            let played = replay::usage::Played::Demo;
            if !terminal() {
                return refused(&replay::usage::terminal_refusal(played));
            }
            return match replay::demo::replay() {
                Ok(replay) => tui::replay(&cli.tui_options(), replay),
                Err(e) => {
                    eprintln!("vramscope: the demo cannot play: {e}");
                    ExitCode::from(1)
                }
            };
        }
        Some(cli::Command::Export {
            file,
            output,
            scope,
        }) => {
            return export::run(file, output.as_deref(), &scope.asked());
        }
        Some(cli::Command::Plot {
            file,
            output,
            width,
            height,
            font,
            scope,
        }) => {
            let options = plot::Options {
                width: *width,
                height: *height,
                font: font.clone(),
            };
            return plot::run(file, output, &options, &scope.asked());
        }
        Some(cli::Command::Report {
            file,
            markdown,
            scope,
        }) => {
            let format = match (markdown, cli.json) {
                (_, true) => report::Format::Json,
                (true, false) => report::Format::Markdown,
                (false, false) => report::Format::Text,
            };
            return report::run(file, format, &scope.asked());
        }
        Some(cli::Command::Sites(args)) => return sites::command::run(args, cli.json),
        Some(cli::Command::Diff { a, b, top, scope }) => {
            return diff::run(a, b, *top as usize, &scope.asked(), cli.json);
        }
        Some(cli::Command::Attach(args)) => {
            let options = attach::Options {
                yes: args.yes,
                timeout: std::time::Duration::from_secs(args.timeout),
                ptrace: args.ptrace,
                python: args.python.clone(),
                shown: args.shown_as,
            };
            return attach::run(args.pid, attach::agent::Request::Attach, options);
        }
        Some(cli::Command::Detach(args)) => {
            let options = attach::Options {
                yes: args.yes,
                timeout: std::time::Duration::from_secs(args.timeout),
                ptrace: args.ptrace,
                python: args.python.clone(),
                shown: args.shown_as,
            };
            return attach::run(args.pid, attach::agent::Request::Detach, options);
        }
        Some(cli::Command::Clean { all_users }) => return clean::run(*all_users),
        Some(cli::Command::Completions { shell }) => return cli::shell_docs::completions(*shell),
        Some(cli::Command::Man) => return cli::shell_docs::man(),
        // main answers it: it needs the layers, not only the options they made.
        Some(cli::Command::Config { .. }) => {}
        Some(cli::Command::Inspect { file }) => {
            return match channel::inspect(file) {
                Ok(json) => match stdout::print(&format!("{json}\n")) {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(status) => status,
                },
                Err(rejected) => {
                    eprintln!("vramscope: {rejected}");
                    ExitCode::from(2)
                }
            };
        }
        None => {}
    }
    if cli.one_shot() {
        output::run(&cli.output_options())
    } else {
        tui::run(&cli.tui_options(), started, None)
    }
}

/// A subcommand asked for what it cannot do: `line` on stderr, usage status.
#[cfg(feature = "monitor")]
fn refused(line: &str) -> ExitCode {
    eprintln!("vramscope: {line}");
    ExitCode::from(2)
}

/// Whether standard input and output are both a terminal, as the monitor needs.
#[cfg(feature = "monitor")]
fn terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}
