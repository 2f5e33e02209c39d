//! What the monitor starts with: the command line's choices, made into this by
//! `cli::Cli::tui_options`, so that the TUI reads its settings without importing the
//! command-line types above it.

use super::columns::ColumnChoice;
use super::ui_state::SortColumn;
use crate::sources::runner::SamplingConfig;
use crate::terminal_kit::theme::ThemeName;
use std::path::PathBuf;

#[derive(Clone, Debug)]
pub struct Options {
    /// The live samplers' settings; the refresh interval is `sampling.interval`.
    pub sampling: SamplingConfig,
    /// `--record FILE`: the live session recorded as it is shown.
    pub record: Option<PathBuf>,
    /// `--on EVENT=CMD`: what to run when something happens (live data only).
    pub hooks: Vec<crate::notify::Hook>,
    pub ascii: bool,
    pub read_only: bool,
    pub theme: ThemeName,
    /// `--units`: how GPU memory figures are written.
    pub units: crate::model::units::MemoryUnits,
    pub columns: Option<ColumnChoice>,
    pub sort: SortColumn,
    /// Largest first: `--sort-order`, else the sort column's own default.
    pub sort_descending: bool,
}
