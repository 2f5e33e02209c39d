//! The borrowed bundle every panel renders from. Panels are pure functions of a `View`: they
//! never change state, and they do not know whether data is live, paused or (later) replayed.

use super::rows::TableRow;
use super::theme::Theme;
use super::ui_state::UiState;
use crate::model::Snapshot;
use crate::state::Monitor;

pub struct View<'a> {
    /// Live snapshot, or the frozen one while paused.
    pub snapshot: &'a Snapshot,
    /// History and peaks.
    pub monitor: &'a Monitor,
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
