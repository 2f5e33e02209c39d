//! Non-interactive output: a table for people, JSON and CSV for programs. All three print the
//! same `Snapshot`.

pub mod csv;
pub mod fields;
pub mod json;
pub mod table;

use crate::cli::Cli;
use crate::model::NvmlProblem;
use crate::sources::oneshot::OneShot;
use std::io::Write;
use std::process::ExitCode;
use std::time::Instant;

/// Exit status when NVML cannot be used at all.
pub const EXIT_NO_NVML: u8 = 3;

/// Runs `--once`, `--json`, `--csv` or `--loop` and returns the exit status.
pub fn run(cli: &Cli) -> ExitCode {
    let mut sampler = match OneShot::open(cli.nvml_lib.as_deref(), cli.pcie) {
        Ok(s) => s,
        Err(problem) => return fail(&problem),
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut first = true;
    loop {
        let started = Instant::now();
        let snapshot = sampler.take();
        let text = if cli.json {
            json::render(&snapshot, cli.r#loop.is_none())
        } else if cli.csv {
            csv::render(&snapshot, first)
        } else {
            table::render(&snapshot)
        };
        let separator = if !first && !cli.json && !cli.csv {
            "\n"
        } else {
            ""
        };
        // A closed pipe (`| head`) ends the loop quietly.
        if write!(out, "{separator}{text}")
            .and_then(|_| out.flush())
            .is_err()
        {
            return ExitCode::SUCCESS;
        }
        first = false;
        let Some(period) = cli.r#loop else {
            return ExitCode::SUCCESS;
        };
        if let Some(rest) = period.checked_sub(started.elapsed()) {
            std::thread::sleep(rest);
        }
    }
}

fn fail(problem: &NvmlProblem) -> ExitCode {
    eprintln!("vramscope: {}", problem.one_line());
    ExitCode::from(EXIT_NO_NVML)
}
