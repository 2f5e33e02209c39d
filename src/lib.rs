//! vramscope: a live terminal monitor of NVIDIA GPU memory, utilisation and processes.
//!
//! Samplers (`sources`) send owned samples to the one owner of state (`state::Monitor`);
//! the TUI (`tui`) and one-shot output (`output`) read `model::Snapshot` and the history.

pub mod cli;
pub mod history;
pub mod model;
pub mod output;
pub mod sources;
pub mod state;
pub mod tui;

use std::process::ExitCode;
use std::time::Instant;

/// Runs vramscope with parsed options; `started` is when the process began, for the
/// first-frame benchmark.
pub fn run(cli: &cli::Cli, started: Instant) -> ExitCode {
    if cli.one_shot() {
        output::run(cli)
    } else {
        tui::run(cli, started)
    }
}
