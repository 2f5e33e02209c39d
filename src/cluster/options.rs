//! What `vramscope cluster` is asked for: the command line's choices, made into this by
//! `cli::ClusterArgs::options`, so that the cluster view does not import the command-line
//! types above it.

use crate::terminal_kit::theme::ThemeName;
use std::path::PathBuf;
use std::time::Duration;

/// `vramscope cluster`'s two views.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ClusterView {
    Jobs,
    Nodes,
}

#[derive(Clone, Debug)]
pub struct Options {
    /// The refresh period (the global `--interval`).
    pub interval: Duration,
    /// `--once` or `--json`: one refresh, printed.
    pub once: bool,
    pub json: bool,
    pub theme: ThemeName,
    pub ascii: bool,
    pub prometheus: Option<String>,
    pub targets: Option<String>,
    pub targets_file: Option<PathBuf>,
    /// `--ssh`: the hosts, as given; `--ssh-vramscope`: the program they run.
    pub ssh: Option<String>,
    pub ssh_vramscope: String,
    pub timeout: Duration,
    pub concurrency: u16,
    pub stale_after: Duration,
    pub view: Option<ClusterView>,
}
