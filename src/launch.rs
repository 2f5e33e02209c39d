//! `vramscope run -- CMD`: prepares the injected Python writer, launches the job, then
//! monitors it (the TUI, a one-shot output repeated until the job ends, or nothing with
//! `--no-monitor`).

use crate::cli::{Cli, RunArgs};
use crate::job::{Job, JobOutput, ScratchDir};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

pub fn run(cli: &Cli, args: &RunArgs, started: Instant) -> ExitCode {
    let scratch = ScratchDir::create();
    let env = match &scratch {
        Ok(dir) => match crate::inject::prepare(dir.path()) {
            Ok(env) => env,
            Err(e) => {
                eprintln!(
                    "vramscope: cannot prepare the Python writer ({e}); running the job without it"
                );
                Vec::new()
            }
        },
        Err(e) => {
            eprintln!(
                "vramscope: cannot make a scratch directory ({e}); running the job without the Python writer"
            );
            Vec::new()
        }
    };
    // The monitor owns the terminal: the job's output goes to a file.
    let tui = !args.no_monitor && !cli.one_shot();
    let output = if tui {
        JobOutput::File(args.log.clone().unwrap_or_else(default_log))
    } else {
        JobOutput::Inherit
    };
    let job = match Job::launch(&args.command, &env, output) {
        Ok(job) => job,
        Err(e) => {
            eprintln!("vramscope: {e}");
            return ExitCode::from(127);
        }
    };
    let pid = job.pid;
    let log = job.log.clone();
    let status = if args.no_monitor {
        ExitCode::from(job.wait().code)
    } else if cli.one_shot() {
        crate::output::run_with_job(cli, job)
    } else {
        crate::tui::run(
            cli,
            started,
            Some(crate::tui::RunJob {
                job,
                exit_with_job: args.exit_with_job,
            }),
        )
    };
    if let Some(log) = log {
        let alive = std::path::Path::new(&format!("/proc/{pid}")).exists()
            && crate::job::descends_from(pid, std::process::id());
        if alive {
            // Python loads parts of the writer lazily: its files must outlive the monitor.
            if let Ok(dir) = scratch {
                std::mem::forget(dir);
            }
            eprintln!(
                "vramscope: job {pid} is still running; its output goes to {}",
                log.display()
            );
        } else {
            eprintln!("vramscope: the job's output is in {}", log.display());
        }
    }
    status
}

/// `vramscope-run-<pid>.log` in the temp directory.
fn default_log() -> PathBuf {
    std::env::temp_dir().join(format!("vramscope-run-{}.log", std::process::id()))
}
