//! Command-line options. Global options apply to the monitor and to every one-shot mode.

pub mod config;
pub mod scope;
pub mod shell_docs;

use clap::{Args, Parser, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::cluster::ClusterView;
use crate::model::units::MemoryUnits;
use crate::sources::runner::SamplingConfig;
use crate::terminal_kit::theme::ThemeName;
use crate::tui::ui_state::SortColumn;

/// A live monitor of NVIDIA GPU memory, utilisation and processes.
#[derive(Debug, Parser)]
#[command(name = "vramscope", version, about, long_about = None)]
pub struct Cli {
    /// Load this NVML library instead of libnvidia-ml.so.1 (a driver library in an unusual
    /// place, or the test suite's fake).
    #[arg(long, value_name = "PATH", env = "VRAMSCOPE_NVML_LIB", global = true)]
    pub nvml_lib: Option<PathBuf>,

    /// Refresh period: `1s`, `500ms` or plain seconds (`0.25`); at least 100 ms.
    #[arg(short, long, value_name = "PERIOD", default_value = "1s", value_parser = parse_interval, global = true)]
    pub interval: Duration,

    /// Print one table of GPUs and processes and exit.
    #[arg(long, global = true)]
    pub once: bool,

    /// Print JSON instead of the screen: the monitor's is schema `vramscope.snapshot`
    /// version 1; `report`, `sites` and `cluster` print their own schemas, named in the output.
    #[arg(long, conflicts_with = "csv", global = true)]
    pub json: bool,

    /// Print CSV, one row per GPU and per process, instead of the monitor.
    #[arg(long, global = true)]
    pub csv: bool,

    /// Repeat the one-shot output every SECS seconds, like `nvidia-smi -l`
    /// (JSON: one object per line; CSV: one header, then rows).
    #[arg(short, long, value_name = "SECS", value_parser = parse_interval, global = true)]
    pub r#loop: Option<Duration>,

    /// Sample PCIe throughput every SECS seconds (off by default: the call blocks ~40 ms per GPU).
    #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "5", value_parser = parse_interval, global = true)]
    pub pcie: Option<Duration>,

    /// Read the SM utilisation of each MIG instance through GPM (Hopper and newer), which NVML's
    /// utilisation call cannot give in MIG mode. Off by default: GPM sampling can contend with
    /// DCGM's profiling (dcgm-exporter) on the same GPU.
    #[arg(long, global = true)]
    pub gpm: bool,

    /// Read each GPU's used memory alone this often between refreshes, to catch spikes
    /// shorter than the interval (one cheap NVML call per GPU); `off` reads it only with the
    /// refresh. The highest reading of each interval goes to the charts, --json and the
    /// recording.
    #[arg(long, value_name = "PERIOD|off", default_value = "100ms", value_parser = parse_peak_interval, global = true)]
    pub peak_interval: PeakInterval,

    /// The process table's columns, a comma list of pid, user, gpu, type (C, G or C+G), vram,
    /// peak, sm, rss, mem (host RSS as % of RAM), cpu, elapsed, pod (Kubernetes namespace/pod,
    /// while some process runs in one), command; PID, VRAM and COMMAND always show. Default:
    /// user,gpu,peak,sm,rss,cpu,pod. `x` shows every column.
    #[arg(long, value_name = "LIST", value_parser = crate::tui::columns::parse, global = true)]
    pub columns: Option<crate::tui::columns::ColumnChoice>,

    /// Hide the keys that send signals to processes.
    #[arg(long, global = true)]
    pub read_only: bool,

    #[command(subcommand)]
    pub command: Option<Command>,

    /// Draw with ASCII characters only (no Unicode block glyphs).
    #[arg(long, global = true)]
    pub ascii: bool,

    /// Record everything the monitor sees to FILE while it runs (`.zst`: compressed); see
    /// `vramscope record` to record without a screen.
    #[arg(long, value_name = "FILE", global = true, conflicts_with_all = ["once", "json", "csv", "loop"])]
    pub record: Option<PathBuf>,

    /// Keep a log of the monitor's own: with times, the reason for every n/a and refused
    /// channel as it appears or clears, and every restart of a stuck driver call; rotated at
    /// 10 MiB, two old files kept. `auto`: $XDG_STATE_HOME/vramscope/vramscope.log (else
    /// ~/.local/state/vramscope/vramscope.log).
    #[arg(long, value_name = "FILE", global = true)]
    pub monitor_log: Option<PathBuf>,

    /// Run CMD when EVENT happens, with the event as JSON on its standard input and
    /// VRAMSCOPE_EVENT, _PID, _GPU, _RANK, _JOB, _SUMMARY set; repeatable. EVENT is oom, hang
    /// (no step for K times the median step: `hang:K`, default 5), exit (a watched writer or
    /// `run`'s job ended), peak (a new true peak above a share of the GPU: `peak:0.8`,
    /// default 0.9) or free (a GPU with no process for a while: `free:10m`, default 5m).
    /// CMD is split into words as a shell quotes them, and run without a shell (write
    /// `sh -c '...'` for one); `bell` rings the terminal bell and, inside tmux or screen,
    /// shows a status message. Once per event, at most once per 5 s per hook; a hook still
    /// running after 10 s is killed.
    #[arg(long = "on", value_name = "EVENT=CMD", global = true, action = clap::ArgAction::Append, value_parser = crate::notify::parse)]
    pub on: Vec<crate::notify::Hook>,

    /// Read settings from FILE instead of $XDG_CONFIG_HOME/vramscope/config.toml (else
    /// ~/.config/vramscope/config.toml); `none`: from no file. `vramscope config` shows them.
    #[arg(long, value_name = "FILE", env = "VRAMSCOPE_CONFIG", global = true)]
    pub config: Option<PathBuf>,

    /// How GPU memory is written in `--once`, `--csv` and on the screen: `auto` in the unit
    /// that reads best (4.00 GiB), `mib` in whole MiB as nvidia-smi prints them (4096MiB; in
    /// `--csv`, 4096 MiB). `--json` always gives bytes.
    #[arg(long, value_name = "UNITS", value_enum, default_value_t, global = true)]
    pub units: MemoryUnits,

    /// Colours for a dark or a light terminal background (NO_COLOR still means none).
    #[arg(long, value_name = "NAME", value_enum, default_value_t, global = true)]
    pub theme: ThemeName,

    /// The process table's column to sort by at the start (`s` moves on), by its heading:
    /// vram, pid, user, cpu, command, ...
    #[arg(long, value_name = "COLUMN", default_value = "vram", value_parser = parse_sort, global = true)]
    pub sort: SortColumn,

    /// Sort order [default: the column's own: figures largest first, names from A].
    #[arg(long, value_name = "ORDER", value_enum, global = true)]
    pub sort_order: Option<SortOrder>,
}

/// Which way the process table is sorted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SortOrder {
    #[value(alias = "asc")]
    Ascending,
    #[value(alias = "desc")]
    Descending,
}

/// A process table column by its heading, ignoring case and punctuation (`sm`, `SM%`,
/// `a.peak`), so a column added to the table can be sorted by with no list to update here.
pub fn parse_sort(text: &str) -> Result<SortColumn, String> {
    let plain = |s: &str| -> String {
        s.chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    let wanted = plain(text);
    SortColumn::ALL
        .into_iter()
        .find(|c| plain(c.label()) == wanted)
        .ok_or_else(|| {
            let names: Vec<String> = SortColumn::ALL.iter().map(|c| sort_name(*c)).collect();
            format!(
                "no column `{}` (columns: {})",
                crate::text::clean(text),
                names.join(", ")
            )
        })
}

/// The name `--sort` and the configuration file write a column by: its heading in lower case.
pub fn sort_name(column: SortColumn) -> String {
    column.label().to_lowercase()
}

/// What to do instead of monitoring every GPU.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a program with vramscope's Python writer injected (no code change), and monitor
    /// it: `vramscope run -- python train.py`, `vramscope run -- torchrun ...`.
    Run(RunArgs),
    /// Start the allocator writer inside a running Python (CPython 3.8+) process, no restart:
    /// it says first what stands in the way (ptrace rights, Yama, another user), then queues
    /// the writer at the process's next safe point: on CPython 3.14+ through PEP 768's
    /// sys.remote_exec, which stops nothing; before 3.14 (or with --ptrace) by stopping its
    /// main thread for a few milliseconds, which it asks about first unless `--yes`.
    Attach(AttachArgs),
    /// Stop a writer `vramscope attach` started: it removes its channel; the program goes on.
    Detach(AttachArgs),
    /// Open the monitor on a recording, with a time cursor: space plays and pauses, `+`/`-`
    /// change the speed, Left/Right step 10 s, `,`/`.` one sample, `p` jumps to the largest
    /// peak, `o` to the next OOM, `n`/`N` to the next/previous event, `g`/`G` to the start/end,
    /// `z`/`Z` zoom the charts in and out.
    Replay {
        /// A recording made by `vramscope record` or `--record`.
        file: PathBuf,
    },
    /// Replay a simulated training run bundled in vramscope: what it shows, with no GPU needed.
    Demo,
    /// Summarise a recording: per GPU and per process the peaks with their time, step and
    /// phase, every OOM, the largest spikes, and advice where the figures call for it.
    Report {
        /// A recording made by `vramscope record` or `--record` (plain or `.zst`).
        file: PathBuf,
        /// Markdown instead of plain text (`--json` gives JSON, schema `vramscope.report`).
        #[arg(long)]
        markdown: bool,
        #[command(flatten)]
        scope: ScopeArgs,
    },
    /// Write a recording as a tidy long-format CSV (`--csv`, the default): one row per time,
    /// entity and metric; columns `time_ms,entity,gpu,pid,metric,value`.
    Export {
        /// A recording made by `vramscope record` or `--record`.
        file: PathBuf,
        /// Write here instead of standard output.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        #[command(flatten)]
        scope: ScopeArgs,
    },
    /// Print what a channel file holds, as JSON: identity, devices, status, every sample and
    /// event still in its rings, and why it would be refused if it would.
    Inspect {
        /// A `.vsc` file, e.g. /dev/shm/vramscope-1000/4242-123456.vsc.
        file: PathBuf,
    },
    /// What held the memory: the allocation sites live at the peak, at an OOM or at the dump,
    /// read from a PyTorch memory snapshot (the pickle `vramscope run --sites` or
    /// `torch.cuda.memory._dump_snapshot` writes); with two files, which sites grew from
    /// the first to the second (`--json`: schema `vramscope.sites`).
    Sites(crate::sites::command::SitesArgs),
    /// Why run B peaked higher than run A: two recordings compared (their peaks phase by
    /// phase and step by step, the sites held at each peak where `vramscope run --sites`
    /// dumped snapshots, the OOMs, and the settings that change memory), every difference
    /// ranked by its bytes; two memory snapshots are compared as `sites A B` does
    /// (`--json`: schema `vramscope.diff`).
    Diff {
        /// The run that fits: a recording (`vramscope record`, `--record`), or a memory
        /// snapshot.
        a: PathBuf,
        /// The run to explain, of the same kind as A.
        b: PathBuf,
        /// How many allocation sites that changed to list.
        #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000))]
        top: u32,
        #[command(flatten)]
        scope: ScopeArgs,
    },
    /// Remove channel files whose writers ended over an hour ago, yours only (the monitor
    /// does this every minute), and print each one removed.
    Clean {
        /// As root: every user's ended files too, which the monitor never removes.
        #[arg(long)]
        all_users: bool,
    },
    /// Record what the monitor sees, without a screen, until Ctrl-C:
    /// `vramscope record -o run.jsonl.zst`.
    Record(crate::record::RecordArgs),
    /// Serve Prometheus metrics (`/metrics`) for this node: every GPU under dcgm-exporter's
    /// names, every GPU process with its allocator figures under `vramscope_*` names.
    Serve(ServeArgs),
    /// One view of a whole multi-node job: every rank's memory, step and OOMs grouped by
    /// job (riskiest first), and every node's GPUs, read from a Prometheus server
    /// (`--prometheus http://prom:9090`) or scraped from exporters directly (`--targets`);
    /// vramscope's and dcgm-exporter's metrics alike. Read-only.
    Cluster(ClusterArgs),
    /// Draw a recording as a timeline, SVG or PNG by the output's extension: per GPU its
    /// used memory and each instrumented process's NVML used, allocated and reserved bytes,
    /// the device limit, peaks with their values, OOMs and training steps.
    Plot {
        /// A recording made by `vramscope record` or `--record`.
        file: PathBuf,
        /// The image to write: `timeline.svg` or `timeline.png`.
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
        /// Image width in pixels.
        #[arg(long, value_name = "PX", default_value_t = 1400,
              value_parser = clap::value_parser!(u32).range(480..=i64::from(crate::plot::MAX_SIDE)))]
        width: u32,
        /// Image height in pixels, shared among the GPUs' charts [default: 330 px per chart
        /// plus title and legends].
        #[arg(long, value_name = "PX",
              value_parser = clap::value_parser!(u32).range(240..=i64::from(crate::plot::MAX_SIDE)))]
        height: Option<u32>,
        /// TrueType font for PNG text [default: DejaVu Sans from /usr/share/fonts].
        #[arg(long, value_name = "FILE", env = "VRAMSCOPE_FONT")]
        font: Option<PathBuf>,
        #[command(flatten)]
        scope: ScopeArgs,
    },
    /// Print a completion script for SHELL: `vramscope completions bash >
    /// ~/.local/share/bash-completion/completions/vramscope`.
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff): `vramscope man > ~/.local/share/man/man1/vramscope.1`.
    Man,
    /// Print the settings this command line runs with, as a configuration file, each with
    /// where it comes from: an option, the environment, the configuration file or the default.
    Config {
        /// Print the documented default configuration file instead:
        /// `vramscope config --default > ~/.config/vramscope/config.toml`.
        #[arg(long)]
        default: bool,
    },
}

#[derive(Debug, Args)]
pub struct AttachArgs {
    /// The process id (as this machine's /proc numbers it).
    pub pid: i32,
    /// Do not ask for confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Seconds to wait for the agent to run before saying it is still pending.
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    pub timeout: u64,
    /// Queue the agent through ptrace (pausing the main thread for a few milliseconds) even
    /// for CPython 3.14 and later, where PEP 768's sys.remote_exec is used by default.
    #[arg(long)]
    pub ptrace: bool,
    /// The Python that calls sys.remote_exec for a 3.14+ target: of the target's version
    /// [default: the target's own executable, else pythonX.Y on PATH].
    #[arg(long, value_name = "PATH")]
    pub python: Option<PathBuf>,
    /// The TUI's own: the identity its dialog showed (STARTTIME:DEV:INO:UID); a process that
    /// is no longer that one is refused.
    #[arg(long, value_name = "IDENTITY", hide = true, value_parser = crate::attach::process::Identity::parse_arg)]
    pub shown_as: Option<crate::attach::process::Identity>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Quit when the job ends, with its exit status (by default the monitor stays, showing
    /// the job as ended).
    #[arg(long)]
    pub exit_with_job: bool,

    /// Where the job's output goes while the monitor owns the terminal
    /// [default: vramscope-run-PID.log in the temp directory].
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,

    /// Only run the job with the writer injected, its output on this terminal, and no
    /// monitor (watch it from another vramscope).
    #[arg(long)]
    pub no_monitor: bool,

    /// Allocation sites (PyTorch): the job's writer records the allocator's history and
    /// dumps memory snapshots beside its channel file at an OOM, a new peak and on request
    /// (sets VRAMSCOPE_SITES=1 for the job; `vramscope sites FILE` reads them).
    #[arg(long)]
    pub sites: bool,

    /// The program and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<OsString>,
}

impl RunArgs {
    /// What `vramscope run` is asked for (`launch::run`), with how the job is watched.
    pub fn options(&self, cli: &Cli) -> crate::launch::Options {
        let watch = if self.no_monitor {
            crate::launch::Watch::Nothing
        } else if cli.one_shot() {
            crate::launch::Watch::Output(cli.output_options())
        } else {
            crate::launch::Watch::Monitor(cli.tui_options())
        };
        crate::launch::Options {
            command: self.command.clone(),
            log: self.log.clone(),
            sites: self.sites,
            exit_with_job: self.exit_with_job,
            watch,
        }
    }
}

/// What part of a recording `report`, `plot` and `export` cover: by default what happened
/// while it recorded (see `recording::scope`).
#[derive(Debug, Args)]
pub struct ScopeArgs {
    /// Include the channels' ring history: what instrumented programs published before the
    /// recording began, which its first read of each channel found.
    #[arg(long)]
    pub history: bool,

    /// Only from this moment: `30s` or `2m` after the recording began (`-5m`: before it,
    /// with --history), a local time `14:05:30`, or `2026-11-21T09:41:12Z`.
    #[arg(long, value_name = "WHEN", value_parser = crate::recording::when::parse)]
    pub since: Option<crate::recording::when::When>,

    /// Only up to this moment, written as for --since.
    #[arg(long, value_name = "WHEN", value_parser = crate::recording::when::parse)]
    pub until: Option<crate::recording::when::When>,

    /// Only this process (its host pid) and the GPUs it used; repeat for more. With --job,
    /// the processes of either.
    #[arg(long = "pid", value_name = "PID")]
    pub pids: Vec<u32>,

    /// Only the instrumented processes of this job (the job id their writers give, e.g.
    /// Slurm's) and the GPUs they used.
    #[arg(long, value_name = "ID")]
    pub job: Option<String>,
}

impl ScopeArgs {
    pub fn asked(&self) -> crate::recording::scope::Asked {
        crate::recording::scope::Asked {
            history: self.history,
            since: self.since.clone(),
            until: self.until.clone(),
            pids: self.pids.clone(),
            job: self.job.clone(),
        }
    }
}

/// Options of `vramscope serve`. The sampling period is the global `--interval`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address and port to serve on, e.g. `0.0.0.0:9400`; other machines reach it only
    /// when an address other than loopback is given.
    #[arg(long, value_name = "IP:PORT", default_value = "127.0.0.1:9400")]
    pub listen: String,

    /// How long an exited process's last figures stay in the output, so that a scrape after
    /// it ended still sees its final OOM count and peak.
    #[arg(long, value_name = "PERIOD", default_value = "5m", value_parser = parse_interval)]
    pub grace: Duration,

    /// Most client connections open at once; a new one beyond this closes one that has not
    /// sent a request yet, never one that sent a request recently (then it is refused).
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..))]
    pub max_connections: u16,

    /// A connection that sends no complete request for this long is closed (slow or idle
    /// clients).
    #[arg(long, value_name = "PERIOD", default_value = "10s", value_parser = parse_interval)]
    pub client_timeout: Duration,

    /// The node's name in the `hostname` (and dcgm-exporter's `Hostname`) labels, instead of
    /// this machine's host name: e.g. the Kubernetes node's name in a pod, as
    /// `--hostname=$NODE_NAME`.
    #[arg(long, value_name = "NAME", env = "VRAMSCOPE_HOSTNAME")]
    pub hostname: Option<String>,
}

impl ServeArgs {
    /// What the exporter is asked for (`serve::run`), with the global `--on` hooks.
    pub fn options(&self, hooks: Vec<crate::notify::Hook>) -> crate::serve::Options {
        crate::serve::Options {
            hooks,
            listen: self.listen.clone(),
            grace: self.grace,
            max_connections: self.max_connections,
            client_timeout: self.client_timeout,
            hostname: self.hostname.clone(),
        }
    }
}

/// Options of `vramscope cluster`. The refresh period is the global `--interval`; `--once`
/// and `--json` print once.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["prometheus", "targets", "targets_file", "ssh"])))]
pub struct ClusterArgs {
    /// The Prometheus server to query (HTTP API, read-only), e.g. `http://prom:9090`.
    #[arg(long, value_name = "URL")]
    pub prometheus: Option<String>,

    /// Exporters to scrape directly instead: `host:port` (port 9400 when left out) or
    /// `http://host:port/path`, comma-separated.
    #[arg(long, value_name = "LIST")]
    pub targets: Option<String>,

    /// The same list from a file: one or more targets a line, `#` comments.
    #[arg(long, value_name = "FILE")]
    pub targets_file: Option<PathBuf>,

    /// Hosts to reach with your own ssh client instead (your ~/.ssh/config, keys, agent and
    /// jump hosts): `[user@]host` entries, comma-separated; each runs `vramscope --json
    /// --loop` at the refresh period (`--timeout` is ssh's ConnectTimeout).
    #[arg(long, value_name = "HOSTS")]
    pub ssh: Option<String>,

    /// The program `--ssh` runs on each host, when `vramscope` is not on its PATH for
    /// commands run over ssh (e.g. `~/.cargo/bin/vramscope`).
    #[arg(
        long,
        value_name = "PATH",
        default_value = "vramscope",
        requires = "ssh"
    )]
    pub ssh_vramscope: String,

    /// Each request's deadline (connect, ask, read the answer).
    #[arg(long, value_name = "PERIOD", default_value = "2s", value_parser = parse_interval)]
    pub timeout: Duration,

    /// Most targets scraped at once.
    #[arg(long, value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub concurrency: u16,

    /// Figures an exporter sampled longer ago than this are marked stale (allow for
    /// Prometheus's scrape interval).
    #[arg(long, value_name = "PERIOD", default_value = "60s", value_parser = parse_interval)]
    pub stale_after: Duration,

    /// The view to open with [default: jobs when some process has a rank, else nodes].
    #[arg(long, value_name = "VIEW", value_enum)]
    pub view: Option<ClusterView>,
}

impl ClusterArgs {
    /// What the cluster view is asked for (`cluster::run`), with the global options it reads.
    pub fn options(&self, cli: &Cli) -> crate::cluster::Options {
        crate::cluster::Options {
            interval: cli.interval,
            once: cli.once || cli.json,
            json: cli.json,
            theme: cli.theme,
            ascii: cli.ascii,
            prometheus: self.prometheus.clone(),
            targets: self.targets.clone(),
            targets_file: self.targets_file.clone(),
            ssh: self.ssh.clone(),
            ssh_vramscope: self.ssh_vramscope.clone(),
            timeout: self.timeout,
            concurrency: self.concurrency,
            stale_after: self.stale_after,
            view: self.view,
        }
    }
}

impl Cli {
    /// Whether a non-interactive output was asked for.
    pub fn one_shot(&self) -> bool {
        self.once || self.json || self.csv || self.r#loop.is_some()
    }

    /// What the live samplers need from the global options, for every mode that starts them
    /// (the TUI, `record`, `serve`).
    pub fn sampling(&self) -> SamplingConfig {
        SamplingConfig {
            nvml_lib: self.nvml_lib.clone(),
            interval: self.interval,
            pcie_every: self.pcie,
            peak_every: self.peak_interval.0,
            gpm: self.gpm,
        }
    }

    /// What the monitor starts with (`tui::run`, `tui::replay`).
    pub fn tui_options(&self) -> crate::tui::Options {
        crate::tui::Options {
            sampling: self.sampling(),
            record: self.record.clone(),
            hooks: self.on.clone(),
            ascii: self.ascii,
            read_only: self.read_only,
            theme: self.theme,
            units: self.units,
            columns: self.columns.clone(),
            sort: self.sort,
            sort_descending: self
                .sort_order
                .map_or(self.sort.default_descending(), |order| {
                    order == SortOrder::Descending
                }),
        }
    }

    /// What one-shot output prints (`output::run`).
    pub fn output_options(&self) -> crate::output::Options {
        crate::output::Options {
            sampling: self.sampling(),
            every: self.r#loop,
            json: self.json,
            csv: self.csv,
            ascii: self.ascii,
            units: self.units,
            hooks: self.on.clone(),
        }
    }
}

/// The fast memory sampling's period (`--peak-interval`); `None`: off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeakInterval(pub Option<Duration>);

/// `off`, or a period as `parse_interval` reads it, at least 20 ms: a used-memory read is a
/// single driver call, not a figure the driver itself averages over 100 ms or more.
pub fn parse_peak_interval(text: &str) -> Result<PeakInterval, String> {
    if text.trim() == "off" {
        return Ok(PeakInterval(None));
    }
    parse_period(text, 0.02).map(|p| PeakInterval(Some(p)))
}

/// `1s`, `250ms`, `2m`, `0.5` (seconds). Below 100 ms NVML's own sampling makes no sense.
pub fn parse_interval(text: &str) -> Result<Duration, String> {
    parse_period(text, 0.1)
}

/// A period of at least `min_seconds` and at most a day.
fn parse_period(text: &str, min_seconds: f64) -> Result<Duration, String> {
    let text = text.trim();
    let (number, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60.0)
    } else {
        (text, 1.0)
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a period (try 1s, 500ms or 0.5)"))?;
    let seconds = value * scale;
    if !seconds.is_finite() || seconds < min_seconds {
        let min_ms = (min_seconds * 1000.0).round();
        return Err(format!("`{text}` is below the {min_ms} ms minimum"));
    }
    if seconds > 86_400.0 {
        return Err(format!("`{text}` is longer than a day"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_columns_are_named_by_their_heading_in_any_case() {
        assert_eq!(parse_sort("vram"), Ok(SortColumn::Vram));
        assert_eq!(parse_sort("SM%"), Ok(SortColumn::Sm));
        assert_eq!(parse_sort("sm"), Ok(SortColumn::Sm));
        assert_eq!(parse_sort("a.peak"), Ok(SortColumn::AllocPeak));
        assert_eq!(parse_sort("Command"), Ok(SortColumn::Command));
        let wrong = parse_sort("colour\u{202e}").unwrap_err();
        assert!(wrong.starts_with("no column `colour"), "{wrong}");
        assert!(
            wrong.contains("pid, user, gpu, rank, type, vram"),
            "{wrong}"
        );
        assert!(!wrong.contains('\u{202e}'), "foreign text cleaned: {wrong}");
        for column in SortColumn::ALL {
            assert_eq!(parse_sort(&sort_name(column)), Ok(column));
        }
    }

    #[test]
    fn periods_parse_in_every_spelling() {
        assert_eq!(parse_interval("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_interval("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_interval("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_interval("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_interval("50ms").unwrap_err().contains("100 ms"));
        assert!(parse_interval("fast").is_err());
        assert!(parse_interval("NaN").is_err());
    }

    #[test]
    fn peak_intervals_are_a_period_or_off() {
        assert_eq!(parse_peak_interval("off"), Ok(PeakInterval(None)));
        assert_eq!(
            parse_peak_interval("50ms"),
            Ok(PeakInterval(Some(Duration::from_millis(50))))
        );
        assert!(parse_peak_interval("5ms").unwrap_err().contains("20 ms"));
        assert!(parse_peak_interval("never").is_err());
    }
}
