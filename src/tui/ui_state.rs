//! What the person has asked the screen to show: sort, filter, selection, pause, overlays.
//! Changed only by key handling; read by panels through `View`.

use crate::model::Snapshot;
use crate::state::ProcessKey;
use std::sync::Arc;

/// Columns of the process table, in display order. `s` cycles through them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SortColumn {
    Pid,
    User,
    Gpu,
    #[default]
    Vram,
    VramPeak,
    Sm,
    HostRss,
    Cpu,
    Command,
}

impl SortColumn {
    pub const ALL: [SortColumn; 9] = [
        SortColumn::Pid,
        SortColumn::User,
        SortColumn::Gpu,
        SortColumn::Vram,
        SortColumn::VramPeak,
        SortColumn::Sm,
        SortColumn::HostRss,
        SortColumn::Cpu,
        SortColumn::Command,
    ];

    pub fn next(self) -> Self {
        let at = Self::ALL.iter().position(|c| *c == self).unwrap_or(0);
        Self::ALL[(at + 1) % Self::ALL.len()]
    }

    pub fn label(self) -> &'static str {
        match self {
            SortColumn::Pid => "PID",
            SortColumn::User => "USER",
            SortColumn::Gpu => "GPU",
            SortColumn::Vram => "VRAM",
            SortColumn::VramPeak => "PEAK",
            SortColumn::Sm => "SM%",
            SortColumn::HostRss => "RSS",
            SortColumn::Cpu => "CPU%",
            SortColumn::Command => "COMMAND",
        }
    }

    /// Numbers read best largest first; names alphabetically.
    pub fn default_descending(self) -> bool {
        !matches!(
            self,
            SortColumn::Pid | SortColumn::User | SortColumn::Gpu | SortColumn::Command
        )
    }
}

/// A signal the person may send to a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KillSignal {
    Term,
    Kill,
}

impl KillSignal {
    pub fn name(self) -> &'static str {
        match self {
            KillSignal::Term => "SIGTERM",
            KillSignal::Kill => "SIGKILL",
        }
    }
}

/// The kill confirmation dialog's subject.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KillRequest {
    pub pid: u32,
    pub signal: KillSignal,
    pub user: String,
    pub command: String,
}

/// Which overlay, if any, takes the keys.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Normal,
    /// Typing a filter after `/`.
    Filter,
    Help,
    /// Detail pane for the selected process.
    Detail,
    ConfirmKill(KillRequest),
}

/// Everything the person controls.
#[derive(Clone, Debug, Default)]
pub struct UiState {
    pub mode: Mode,
    pub sort: SortColumn,
    pub sort_descending: bool,
    /// Case-insensitive text matched against pid, user, command and container.
    pub filter: String,
    /// Index of the selected row among the visible (filtered, sorted) rows.
    pub selected: usize,
    /// The selected process, so the selection follows it when rows move.
    pub selected_key: Option<ProcessKey>,
    /// Set while paused: the frozen snapshot, shown at its own time. Sampling goes on
    /// underneath.
    pub frozen: Option<Arc<Snapshot>>,
    pub ascii: bool,
    pub read_only: bool,
    /// Refresh interval in ms, shown in the header.
    pub interval_ms: u64,
    /// A one-off message for the status line (result of a kill, an interval change...).
    pub flash: Option<String>,
}

impl UiState {
    pub fn new(interval_ms: u64, ascii: bool, read_only: bool) -> Self {
        Self {
            sort_descending: SortColumn::default().default_descending(),
            interval_ms,
            ascii,
            read_only,
            ..Self::default()
        }
    }
}
