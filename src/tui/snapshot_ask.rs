//! The `m` key's errand: ask a live writer the screen shows for a memory snapshot, through its
//! channel (`channel::request_snapshot`). The answer arrives later as a `SNAPSHOT_WRITTEN`
//! event and is reduced like any other; here only the status line's words.

use crate::model::allocator::RowProcess;
use crate::state::Monitor;
use std::path::Path;

/// Raises the snapshot requests of the channel process `pid` writes; a line for the status
/// line either way. Each line fits 80 columns (the status line cuts a longer reason).
pub fn ask(monitor: &Monitor, pid: u32, process: RowProcess) -> String {
    let Some(state) = monitor.allocators().for_pid(pid, process) else {
        return format!("pid {pid}: no channel of its own is read here");
    };
    let fold = &state.fold;
    let Some(identity) = &fold.identity else {
        return format!("pid {pid}: its channel is not read yet");
    };
    if !identity.sites {
        return format!(
            "pid {pid} records no allocation history: start it with vramscope run --sites"
        );
    }
    if !fold.liveness.is_running() {
        return format!(
            "pid {pid}: its writer is {}; only a live one answers",
            fold.liveness.label()
        );
    }
    match crate::channel::request_snapshot(Path::new(&fold.path), crate::channel::euid()) {
        Ok(count) => asked(pid, count),
        Err(why) => format!("no snapshot asked of pid {pid}: {why}"),
    }
}

/// The answer to a request raised: it fits an 80-column status line with the longest pid
/// Linux gives (7 digits) and a request count of up to 6; the detail pane shows the
/// snapshot once written.
pub fn asked(pid: u32, count: u64) -> String {
    format!("asked pid {pid} for a memory snapshot (#{count}); details show it when written")
}
