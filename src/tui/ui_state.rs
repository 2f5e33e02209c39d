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
    /// NVML's list: C, G or C+G (`--columns`).
    Type,
    /// The writer's rank, shown only while some writer reports one.
    Rank,
    #[default]
    Vram,
    VramPeak,
    Sm,
    HostRss,
    /// Host RSS as a share of the host's RAM (`--columns`).
    HostMem,
    Cpu,
    /// Time since the process started (`--columns`).
    Elapsed,
    /// Allocator figures, shown only while some process is instrumented.
    Allocated,
    Reserved,
    AllocPeak,
    Step,
    /// The Kubernetes pod (`namespace/pod:container`), shown while some process runs in one.
    Pod,
    Command,
}

impl SortColumn {
    pub const ALL: [SortColumn; 18] = [
        SortColumn::Pid,
        SortColumn::User,
        SortColumn::Gpu,
        SortColumn::Rank,
        SortColumn::Type,
        SortColumn::Vram,
        SortColumn::VramPeak,
        SortColumn::Sm,
        SortColumn::HostRss,
        SortColumn::HostMem,
        SortColumn::Cpu,
        SortColumn::Elapsed,
        SortColumn::Allocated,
        SortColumn::Reserved,
        SortColumn::AllocPeak,
        SortColumn::Step,
        SortColumn::Pod,
        SortColumn::Command,
    ];

    /// The next column to sort by among those on screen.
    pub fn next(self, on_screen: impl Fn(SortColumn) -> bool) -> Self {
        let at = Self::ALL.iter().position(|c| *c == self).unwrap_or(0);
        (1..=Self::ALL.len())
            .map(|step| Self::ALL[(at + step) % Self::ALL.len()])
            .find(|c| on_screen(*c))
            .unwrap_or(self)
    }

    pub fn is_allocator(self) -> bool {
        matches!(
            self,
            SortColumn::Allocated | SortColumn::Reserved | SortColumn::AllocPeak | SortColumn::Step
        )
    }

    pub fn label(self) -> &'static str {
        match self {
            SortColumn::Pid => "PID",
            SortColumn::User => "USER",
            SortColumn::Gpu => "GPU",
            SortColumn::Type => "TYPE",
            SortColumn::HostMem => "%MEM",
            SortColumn::Elapsed => "ELAPSED",
            SortColumn::Rank => "RANK",
            SortColumn::Vram => "VRAM",
            SortColumn::VramPeak => "PEAK",
            SortColumn::Sm => "SM%",
            SortColumn::HostRss => "RSS",
            SortColumn::Cpu => "CPU%",
            SortColumn::Allocated => "ALLOC",
            SortColumn::Reserved => "RESV",
            SortColumn::AllocPeak => "A.PEAK",
            SortColumn::Step => "STEP",
            SortColumn::Pod => "POD",
            SortColumn::Command => "COMMAND",
        }
    }

    /// Numbers read best largest first; names alphabetically.
    pub fn default_descending(self) -> bool {
        !matches!(
            self,
            SortColumn::Pid
                | SortColumn::User
                | SortColumn::Gpu
                | SortColumn::Type
                | SortColumn::Rank
                | SortColumn::Pod
                | SortColumn::Command
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
    /// Set while paused: the frozen snapshot, shown at its own time. Sampling goes on
    /// underneath.
    pub frozen: Option<Arc<Snapshot>>,
    pub ascii: bool,
    pub read_only: bool,
    /// A one-off message for the status line (result of a kill, an interval change...).
    pub flash: Option<String>,
    /// The job `vramscope run` launched, if any.
    pub job: Option<JobView>,
    /// The data is a recording with a time cursor: the replay keys apply.
    pub time_cursor: bool,
    /// What the header says about the data's source when it is not live sampling
    /// (`replay run.jsonl ▶ ×4, 41% of 1h 00m`).
    pub banner: Option<String>,
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
    /// The process table's rows sit under a line per GPU (the `b` key).
    pub group_by_gpu: bool,
    /// The furthest the help can scroll at the last frame's size: set by the help panel, the
    /// one thing a panel writes, because only drawing knows how the text wrapped.
    pub help_scroll_end: std::cell::Cell<usize>,
}

/// The header's time zone: the person's local one, or UTC where the output must not depend
/// on the machine (snapshot tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Clock {
    #[default]
    Utc,
    Local,
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
