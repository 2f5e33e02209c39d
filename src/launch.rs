//! `vramscope run -- CMD`: prepares the injected Python writer, launches the job, then
//! monitors it (the TUI, a one-shot output repeated until the job ends, or nothing with
//! `--no-monitor`).

use crate::job::{Job, JobOutput, ScratchDir};
use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Turns allocation sites on in the Python writer (`python/vramscope/_config.py`).
const SITES_VAR: &str = "VRAMSCOPE_SITES";

/// What `vramscope run` is asked for: the command line's choices, made into this by
/// `cli::RunArgs::options`, so that launching does not import the command-line types above it.
#[derive(Clone, Debug)]
pub struct Options {
    pub command: Vec<OsString>,
    /// `--log FILE`: where the job's output goes while the monitor has the terminal.
    pub log: Option<PathBuf>,
    pub sites: bool,
    pub exit_with_job: bool,
    pub watch: Watch,
}

/// How the job is watched.
#[derive(Clone, Debug)]
pub enum Watch {
    /// `--no-monitor`.
    Nothing,
    /// `--once`, `--json`, `--csv` or `--loop`, repeated until the job ends.
    Output(crate::output::Options),
    Monitor(crate::tui::Options),
}

pub fn run(args: &Options, started: Instant) -> ExitCode {
    // The monitor owns the terminal: the job's output goes to a file.
    let tui = matches!(args.watch, Watch::Monitor(_));
    let no_monitor = matches!(args.watch, Watch::Nothing);
    if tui && !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
        // Checked before launching: a job started for a monitor that cannot open would run
        // on unwatched.
        eprintln!(
            "vramscope: the monitor needs a terminal; use `run --json`, `run --once` or `run --no-monitor` for a file or pipe"
        );
        return ExitCode::from(2);
    }
    if let Some(why) = crate::terminal_kit::guard::unsuitable().filter(|_| tui) {
        eprintln!("vramscope: {why}");
        return ExitCode::from(2);
    }
    // The log first: a name refused (a symlink, a folder root may not rely on) is one line and
    // status 2, as any refused option, before anything is made or launched.
    let output = if tui {
        let path = args.log.clone().unwrap_or_else(default_log);
        match crate::job::create_log(&path) {
            Ok(file) => JobOutput::File(path, file),
            Err(e) => {
                eprintln!("vramscope: cannot create {}: {e}", path.display());
                return ExitCode::from(2);
            }
        }
    } else if no_monitor {
        JobOutput::Inherit
    } else {
        JobOutput::StdoutToStderr
    };
    let scratch = ScratchDir::create();
    let env = match &scratch {
        Ok(dir) => match crate::job::inject::prepare(dir.path()) {
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
    let mut env = env;
    if args.sites {
        // Set whether or not the writer could be injected: a job that starts vramscope
        // itself reads it too.
        env.push((SITES_VAR.to_string(), OsString::from("1")));
    }
    // Without a monitor on screen, whatever would end vramscope goes to the job, and
    // vramscope waits to exit with its status; held from before the job starts, so that
    // none is lost before its pid is known.
    if !tui && let Err(e) = crate::job::signals::hold() {
        eprintln!("vramscope: cannot pass signals on to the job: {e}");
    }
    let job = match Job::launch(&args.command, &env, output) {
        Ok(job) => job,
        // The shell's status for a command that cannot be run.
        Err(e) => {
            eprintln!("vramscope: {e}");
            return ExitCode::from(127);
        }
    };
    let pid = job.pid;
    if !tui && let Err(e) = crate::job::signals::forward_to(pid) {
        eprintln!("vramscope: cannot pass signals on to the job: {e}");
    }
    let log = job.log.clone();
    let status = match &args.watch {
        Watch::Nothing => ExitCode::from(job.wait().code),
        Watch::Output(options) => crate::output::run_with_job(options, job),
        Watch::Monitor(options) => crate::tui::run(
            options,
            started,
            Some(crate::tui::RunJob {
                job,
                exit_with_job: args.exit_with_job,
            }),
        ),
    };
    // A job that is gone has no /proc/PID/stat to descend through.
    let alive = crate::job::descends_from(pid, std::process::id());
    if alive && let Ok(dir) = scratch {
        // Python loads parts of the writer lazily: its files must outlive the monitor.
        dir.remove_after(pid);
    }
    match (log, alive) {
        (Some(log), true) => eprintln!(
            "vramscope: job {pid} is still running; its output goes to {}",
            log.display()
        ),
        (Some(log), false) => eprintln!("vramscope: the job's output is in {}", log.display()),
        (None, true) => eprintln!("vramscope: job {pid} is still running"),
        (None, false) => {}
    }
    status
}

/// `vramscope-run-<pid>-<nanos>.log` in the temp directory.
fn default_log() -> PathBuf {
    std::env::temp_dir().join(format!("vramscope-run-{}.log", crate::job::unique_suffix()))
}
