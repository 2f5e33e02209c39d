//! What the person has asked the screen to show: sort, filter, selection, pause, overlays.
//! Set at the start from the options (`tui::Options`), changed by key handling (`keys`) and by
//! the loop for what it learns (`event_loop`: flash lines, the selection kept on its row, the
//! demo going in and out, the job's end); read by panels through `View`.

use crate::model::Snapshot;
use crate::state::ProcessKey;
use crate::terminal_kit::clock::Clock;
use std::sync::Arc;

// Defined beside the columns it names; here too, where the sort is kept.
pub use super::columns::SortColumn;

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
    /// The process's start time when its row was sampled; the signal goes only if the pid
    /// still has it.
    pub starttime: u64,
    pub signal: KillSignal,
    pub user: String,
    pub command: String,
}

/// The attach (or detach) confirmation dialog's subject (`a`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttachRequest {
    pub pid: u32,
    /// The process's start time when its row was sampled: it goes ahead only if the pid
    /// still has it.
    pub starttime: u64,
    pub user: String,
    pub command: String,
    /// Its writer was started by an attach: `a` stops it.
    pub detach: bool,
    /// Attaching stops its main thread for a few milliseconds (ptrace), rather than not at
    /// all (PEP 768, CPython 3.14+): the dialog says which.
    pub stops: bool,
    /// The process as the dialog opened (start time, executable, uid): the attach refuses a
    /// process that exec'd another program or left its pid to another since.
    pub shown: Option<crate::attach::process::Identity>,
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
    ConfirmAttach(AttachRequest),
    /// Every reason a figure is missing, in full (`w`).
    Reasons,
}

/// Everything the person controls.
#[derive(Clone, Debug, Default)]
pub struct UiState {
    pub mode: Mode,
    pub sort: SortColumn,
    pub sort_descending: bool,
    /// Case-insensitive text matched against pid, user, command, container and pod.
    pub filter: String,
    /// Index of the selected row among the visible (filtered, sorted) rows.
    pub selected: usize,
    /// The selected process, so the selection follows it when rows move.
    pub selected_key: Option<ProcessKey>,
    /// The person (or `run`, opening on its job) put the selection on a process: it follows
    /// that process. Until then it stays on the top row, so a monitor just opened shows the
    /// table from its top however the first frames' rows move.
    pub selection_chosen: bool,
    /// Set while paused: the frozen snapshot, shown at its own time. Sampling goes on
    /// underneath.
    pub frozen: Option<Arc<Snapshot>>,
    pub ascii: bool,
    pub read_only: bool,
    /// How GPU memory figures are written (`--units`).
    pub units: crate::model::units::MemoryUnits,
    /// A one-off message for the status line (result of a kill, an interval change...).
    pub flash: Option<String>,
    /// The job `vramscope run` launched, if any.
    pub job: Option<JobView>,
    /// The data is a recording with a time cursor: the replay keys apply.
    pub time_cursor: bool,
    /// What the header says about the data's source when it is not live sampling
    /// (`replay run.jsonl ▶ ×4, 41% of 1h 00m`).
    pub banner: Option<String>,
    /// `--record`: what the header says about the recording (file and size), while it runs.
    pub recording: Option<String>,
    /// The unzoomed window of the last chart drawn, set by `spark::window` (only drawing
    /// knows a chart's width): `z` and `Z` say the span they lead to.
    pub chart_usual_ms: std::cell::Cell<u64>,
    /// Charts cover 2^zoom times their usual span (negative: zoomed in).
    pub zoom: i8,
    /// The first line the reasons overlay (`w`) shows.
    pub reasons_scroll: usize,
    /// The machine the data comes from (the recording's for a replay), cleaned for the
    /// terminal; None when unreadable.
    pub host: Option<String>,
    /// How the header writes the time.
    pub clock: Clock,
    /// The demo plays over the live screen it was started from; `q` and Esc go back there.
    pub in_demo: bool,
    /// The help's first line shown.
    pub help_scroll: usize,
    /// The process-table columns chosen with `--columns`.
    pub columns: crate::tui::columns::ColumnChoice,
    /// Every column `--columns` can name shows (the `x` key), whatever was chosen.
    pub every_column: bool,
    /// With every column, the page of columns the table shows when they do not all fit: the
    /// first one after PID.
    pub column_page: usize,
    /// Where the next page of columns starts, while some are past the right edge: set by the
    /// table panel (only drawing knows the width), read by `x`.
    pub next_column_page: std::cell::Cell<Option<usize>>,
    /// The process table's rows sit under a line per GPU (the `b` key).
    pub group_by_gpu: bool,
    /// The furthest the help can scroll at the last frame's size: set by the help panel, the
    /// one thing a panel writes, because only drawing knows how the text wrapped.
    pub help_scroll_end: std::cell::Cell<usize>,
    /// The VRAM each process row is sorted by (`rows::hold_vram`): its reading when it last
    /// took its place, so rows whose figures only jitter keep their order.
    pub held_vram: std::collections::HashMap<ProcessKey, u64>,
    /// Where the table's selected row sat on screen at the last frame, set by the table panel
    /// (as `help_scroll_end`, only drawing knows the table's height): the row keeps its line
    /// while the rows around it move.
    pub table_place: std::cell::RefCell<Option<TablePlace>>,
}

/// The selected row's place on screen at the last frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TablePlace {
    /// The process it was.
    pub key: ProcessKey,
    /// Its line among the rows shown (0: just under the header).
    pub line: usize,
    /// The first table line shown.
    pub offset: usize,
}

/// How far `z` and `Z` zoom the charts' time window, each way.
pub const ZOOM_LIMIT: i8 = 6;

/// The launched job as the header shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct JobView {
    pub pid: u32,
    pub end: Option<crate::job::JobEnd>,
    /// The selection has been put on the job's first GPU process once; after that the
    /// person moves it.
    pub focused: bool,
}

impl UiState {
    /// Whether the process table shows `column` (RANK and the allocator columns also need
    /// their data: `process_table::fit_columns`).
    pub fn shows(&self, column: SortColumn) -> bool {
        self.columns.shows(column, self.every_column)
    }

    pub fn new(ascii: bool, read_only: bool) -> Self {
        Self {
            sort_descending: SortColumn::default().default_descending(),
            ascii,
            read_only,
            ..Self::default()
        }
    }
}
