//! What a reader leaves out of a recording a later 1.x wrote, counted to be said once.

/// What a reader skipped because this vramscope does not know its kind: a later 1.x wrote
/// it (docs/recording-v1.md, Versioning). Skipped, the rest of the file still reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Records of a kind this version does not know.
    pub records: u64,
    /// Writer events of a kind this version does not know.
    pub events: u64,
    /// Channel polls whose writer's liveness is a state this version does not know.
    pub polls: u64,
    /// GPU processes of a kind this version does not know, left out of their sample.
    pub processes: u64,
    /// Channels gone for a reason this version does not know: the channel is still
    /// forgotten, as the recorder forgot it, but the monitor is not told why.
    pub gone: u64,
}

impl Skipped {
    /// One line saying what was skipped in `name`, or `None` when nothing was.
    pub fn notice(&self, name: &str) -> Option<String> {
        let parts: Vec<String> = [
            (self.records, "record"),
            (self.events, "writer event"),
            (self.polls, "channel poll"),
            (self.processes, "GPU process"),
            (self.gone, "gone channel"),
        ]
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}{}", if n == 1 { "" } else { "s" }))
        .collect();
        (!parts.is_empty()).then(|| {
            format!(
                "{name}: skipped {} of kinds this vramscope does not know (recorded by a newer vramscope?)",
                parts.join(", ")
            )
        })
    }
}
