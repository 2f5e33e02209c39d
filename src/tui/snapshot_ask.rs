//! The `m` key's errand: ask a live writer the screen shows for a memory snapshot, through its
//! channel (`channel::request_snapshot`). The answer arrives later as a `SNAPSHOT_WRITTEN`
//! event and is reduced like any other; here only the status line's words.

use crate::model::Snapshot;
use crate::model::allocator::RowProcess;
use crate::model::snapshot::channel_of;
use std::path::Path;

/// Raises the snapshot requests of the channel process `pid` writes, as the screen's
/// snapshot shows it (the kept one while paused, as every key reads); a line for the status
/// line either way.
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
        Ok(count) => format!(
            "asked pid {pid} for a memory snapshot (request {count}); it shows in the details when written"
        ),
        Err(why) => format!("no snapshot asked of pid {pid}: {why}"),
    }
}
