//! The `m` key's errand: ask a live writer the screen shows for a memory snapshot, through its
//! channel (`channel::request_snapshot`). The answer arrives later as a `SNAPSHOT_WRITTEN`
//! event and is reduced like any other; here only the status line's words.

use crate::model::Snapshot;
use crate::model::allocator::RowProcess;
use crate::model::snapshot::channel_of;
use std::path::Path;

/// Raises the snapshot requests of the channel process `pid` writes, as the screen's
/// snapshot shows it (the kept one while paused, as every key reads); a line for the status
/// line either way. Each line fits 80 columns (the status line cuts a longer reason).
pub fn ask(snapshot: &Snapshot, pid: u32, process: RowProcess) -> String {
    // A channel whose writer has not said who it is yet has no snapshot entry.
    let Some(channel) = channel_of(&snapshot.allocators, pid, process) else {
        return format!("pid {pid}: no channel of its own is read here");
    };
    let identity = &channel.identity;
    if !identity.sites {
        return format!(
            "pid {pid} records no allocation history: start it with vramscope run --sites"
        );
    }
    if !channel.liveness.is_running() {
        return format!(
            "pid {pid}: its writer is {}; only a live one answers",
            channel.liveness.label()
        );
    }
    match crate::channel::request_snapshot(Path::new(&channel.path), crate::channel::euid()) {
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
