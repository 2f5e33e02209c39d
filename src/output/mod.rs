//! Non-interactive output: a table for people, JSON and CSV for programs. All three print the
//! same `Snapshot`.

pub mod csv;
pub mod fields;
pub mod json;
pub mod table;
mod taken;

use crate::job::Job;
use crate::model::NvmlProblem;
use crate::model::now_ms;
use crate::model::units::MemoryUnits;
use crate::sources::runner::SamplingConfig;
use crate::stdout;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use taken::Takes;

/// Exit status when NVML cannot be used at all.
pub const EXIT_NO_NVML: u8 = 3;

/// Exit status of a single `--once`, `--json` or `--csv` when a GPU is lost (fell off the
/// bus, needs a reset): the output is printed in full, and cron or an alerting check sees
/// the failure without parsing it.
pub const EXIT_GPU_LOST: u8 = 4;

/// What one-shot output is asked for: the command line's choices, made into this by
/// `cli::Cli::output_options`, so that output does not import the command-line types above it.
#[derive(Clone, Debug)]
pub struct Options {
    pub sampling: SamplingConfig,
    /// `--loop PERIOD`: print again every period.
    pub every: Option<Duration>,
    pub json: bool,
    pub csv: bool,
    pub ascii: bool,
    /// `--units`: how `--once` and `--csv` write GPU memory.
    pub units: MemoryUnits,
    /// `--on EVENT=CMD`: what to run when something happens, looked for in each take.
    pub hooks: Vec<crate::notify::Hook>,
}

/// Runs `--once`, `--json`, `--csv` or `--loop` and returns the exit status.
pub fn run(options: &Options) -> ExitCode {
    run_until(options, None)
}

/// The same output under `vramscope run`: repeated every `--loop` period (else every
/// `--interval`) until the job ends, then once more; the exit status is the job's.
pub fn run_with_job(options: &Options, job: Job) -> ExitCode {
    run_until(options, Some(job))
}

fn run_until(options: &Options, mut job: Option<Job>) -> ExitCode {
    let sampling = &options.sampling;
    let period = options.every.or(job.as_ref().map(|_| sampling.interval));
    let mut job_end: Option<crate::job::JobEnd> = None;
    let opened = Takes::open(
        sampling.nvml_lib.as_deref(),
        sampling.pcie_every,
        period.is_some(),
        sampling.peak_every,
        sampling.gpm,
    );
    let mut sampler = match opened {
        Ok(s) => s,
        Err(problem) => match job {
            // The job runs on: it is waited for, so its status is not lost.
            Some(job) => return wait_without_nvml(&problem, job),
            None => return fail(&problem),
        },
    };
    let mut notifier = match crate::notify::Notifier::start(&options.hooks, now_ms()) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("vramscope: {e}");
            return ExitCode::from(1);
        }
    };
    if let (Some(n), Some(job)) = (notifier.as_mut(), job.as_ref()) {
        n.watch_job(job.pid);
    }
    let mut out = stdout::lock();
    // Commands are cut to fit a terminal only; piped, they stay whole for grep and scripts.
    let command_cut = out
        .is_terminal()
        .then_some(if options.ascii { "..." } else { "…" });
    let mut first = true;
    loop {
        let started = Instant::now();
        let snapshot = sampler.take();
        if let Some(n) = notifier.as_mut() {
            n.observe(&snapshot);
            if let Some(end) = &job_end
                && let Some(pid) = job.as_ref().map(|j| j.pid)
            {
                n.job_ended(pid, end.code, &end.text, snapshot.taken_at_ms);
            }
            said(n);
        }
        let text = if options.json {
            json::render(&snapshot, period.is_none())
        } else if options.csv {
            csv::render(&snapshot, first, options.units)
        } else {
            table::render(&snapshot, command_cut, period.is_some(), options.units)
        };
        let separator = if !first && !options.json && !options.csv {
            "\n"
        } else {
            ""
        };
        // A closed pipe (`| head`) ends the loop quietly, a full disk with a line.
        if let Err(e) = write!(out, "{separator}{text}").and_then(|_| out.flush()) {
            return stdout::failed(&e);
        }
        first = false;
        if let Some(end) = &job_end {
            finish_hooks(notifier.as_mut());
            return ExitCode::from(end.code);
        }
        let Some(period) = period else {
            return single_status(&snapshot);
        };
        if let Some(rest) = period.checked_sub(started.elapsed()) {
            sampler.wait(rest);
        }
        // One more snapshot after the job ends shows how it ended.
        job_end = job.as_mut().and_then(Job::try_end);
    }
}

/// What the hooks have to say, on standard error (standard output is the document's); a
/// bell, when one is due and standard error is a terminal.
fn said(notifier: &mut crate::notify::Notifier) {
    for line in notifier.take_said() {
        eprintln!("vramscope: {line}");
    }
    if notifier.take_bell() && std::io::stderr().is_terminal() {
        eprint!("\u{7}");
    }
}

/// Before `run` exits with its job: the hooks the job's end started are given their time
/// (at most the hook timeout), so that the word is not lost with vramscope.
fn finish_hooks(notifier: Option<&mut crate::notify::Notifier>) {
    if let Some(n) = notifier {
        n.wait_idle(crate::notify::HOOK_TIMEOUT + std::time::Duration::from_secs(1));
        said(n);
    }
}

/// A single snapshot's status: `EXIT_GPU_LOST`, with a line naming the lost GPUs, when any
/// is lost; else success.
fn single_status(snapshot: &crate::model::Snapshot) -> ExitCode {
    let lost: Vec<String> = snapshot
        .devices
        .iter()
        .filter(|d| d.sample.as_ref().is_some_and(|s| s.lost))
        .map(|d| d.info.index.to_string())
        .collect();
    if lost.is_empty() {
        return ExitCode::SUCCESS;
    }
    let noun = if lost.len() == 1 { "GPU" } else { "GPUs" };
    eprintln!(
        "vramscope: {noun} {} lost (exit status {EXIT_GPU_LOST})",
        lost.join(", ")
    );
    ExitCode::from(EXIT_GPU_LOST)
}

/// `run` where NVML cannot be used: says so, then waits for the job and exits with its status.
fn wait_without_nvml(problem: &NvmlProblem, job: Job) -> ExitCode {
    eprintln!(
        "vramscope: {}; job {} runs without GPU figures",
        problem.one_line(),
        job.pid
    );
    ExitCode::from(job.wait().code)
}

fn fail(problem: &NvmlProblem) -> ExitCode {
    eprintln!("vramscope: {}", problem.one_line());
    ExitCode::from(EXIT_NO_NVML)
}
