//! The borrowed bundle every panel renders from. Panels are pure functions of a `View`: they
//! never change state, and they do not know whether data is live, paused or replayed. They
//! read the snapshot (live, or the one kept while paused) and history through a view capped
//! at the snapshot's moment, never the monitor itself, so nothing sampled after the
//! snapshot reaches the screen.

use super::rows::TableRow;
use super::ui_state::UiState;
use crate::model::Snapshot;
use crate::state::HistoryView;
use crate::terminal_kit::theme::Theme;

pub struct View<'a> {
    /// Live snapshot, or the frozen one while paused.
    pub snapshot: &'a Snapshot,
    /// The charts' series, up to the snapshot's moment (all-time peaks are the snapshot's).
    pub history: HistoryView<'a>,
    pub ui: &'a UiState,
    /// The time the screen shows: now, or the moment of pausing.
    pub now_ms: u64,
    /// The refresh period: the sampling's, or the recording's at the cursor (`Feed`).
    pub interval_ms: u64,
    pub theme: &'a Theme,
    /// The process table's rows, filtered and sorted: computed once per frame from the
    /// fields above, shared by the table, the detail pane and key handling.
    pub rows: &'a [TableRow],
}
