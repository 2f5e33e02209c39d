//! The `m` key's errand: ask a live writer the screen shows for a memory snapshot, through its
//! channel (`channel::request_snapshot`). The answer arrives later as a `SNAPSHOT_WRITTEN`
//! event and is reduced like any other; here only the status line's words.

use crate::model::allocator::RowProcess;
use crate::state::Monitor;
use std::path::Path;

/// Raises the snapshot requests of the channel process `pid` writes; a line for the status
/// line either way.
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
        Ok(count) => format!(
            "asked pid {pid} for a memory snapshot (request {count}); it shows in the details when written"
        ),
        Err(why) => format!("no snapshot asked of pid {pid}: {why}"),
    }
}
