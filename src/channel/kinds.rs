//! The enumerations of the format as Rust types, each with an `Unknown` case: a reader shows
//! values from a newer writer rather than rejecting the file.

use super::layout::{event, kind, state};

/// Which kind of program writes the channel (header `0x060`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WriterKind {
    PyTorch,
    Jax,
    TensorFlow,
    CuPy,
    /// Python with the explicit API only.
    Python,
    C,
    Rust,
    Unknown(u32),
}

impl WriterKind {
    pub fn from_code(code: u32) -> WriterKind {
        match code {
            kind::PYTORCH => WriterKind::PyTorch,
            kind::JAX => WriterKind::Jax,
            kind::TENSORFLOW => WriterKind::TensorFlow,
            kind::CUPY => WriterKind::CuPy,
            kind::PYTHON => WriterKind::Python,
            kind::C => WriterKind::C,
            kind::RUST => WriterKind::Rust,
            other => WriterKind::Unknown(other),
        }
    }

    pub fn code(self) -> u32 {
        match self {
            WriterKind::PyTorch => kind::PYTORCH,
            WriterKind::Jax => kind::JAX,
            WriterKind::TensorFlow => kind::TENSORFLOW,
            WriterKind::CuPy => kind::CUPY,
            WriterKind::Python => kind::PYTHON,
            WriterKind::C => kind::C,
            WriterKind::Rust => kind::RUST,
            WriterKind::Unknown(code) => code,
        }
    }

    /// A short name for display: `pytorch`, `jax`, ..., `kind 42`.
    pub fn name(self) -> String {
        match self {
            WriterKind::PyTorch => "pytorch".into(),
            WriterKind::Jax => "jax".into(),
            WriterKind::TensorFlow => "tensorflow".into(),
            WriterKind::CuPy => "cupy".into(),
            WriterKind::Python => "python".into(),
            WriterKind::C => "c".into(),
            WriterKind::Rust => "rust".into(),
            WriterKind::Unknown(code) => format!("kind {code}"),
        }
    }
}

/// The writer's own account of its life (header `state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WriterState {
    Starting,
    Running,
    ExitedClean,
    ExitedError,
    Unknown(u64),
}

impl WriterState {
    pub fn from_code(code: u64) -> WriterState {
        match code {
            state::STARTING => WriterState::Starting,
            state::RUNNING => WriterState::Running,
            state::EXITED_CLEAN => WriterState::ExitedClean,
            state::EXITED_ERROR => WriterState::ExitedError,
            other => WriterState::Unknown(other),
        }
    }

    /// Whether the writer said it exited (cleanly or by an error).
    pub fn exited(self) -> bool {
        matches!(self, WriterState::ExitedClean | WriterState::ExitedError)
    }

    pub fn name(self) -> String {
        match self {
            WriterState::Starting => "starting".into(),
            WriterState::Running => "running".into(),
            WriterState::ExitedClean => "exited_clean".into(),
            WriterState::ExitedError => "exited_error".into(),
            WriterState::Unknown(code) => format!("state {code}"),
        }
    }
}

/// Declares [`EventKind`] from its table: one row per kind, so that adding a kind is one row
/// here plus its payload in `model::allocator_stream` (the compiler then asks for it there).
macro_rules! event_kinds {
    ($($(#[$doc:meta])* $variant:ident = $code:path, $spec:literal, $tag:literal, $title:literal,
       [$($arg:literal),*];)*) => {
        /// What an event record reports (§2.8).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum EventKind {
            $($(#[$doc])* $variant,)*
            Unknown(u16),
        }

        impl EventKind {
            /// Every kind this version knows, in the table's order.
            pub const KNOWN: &'static [EventKind] = &[$(EventKind::$variant),*];

            fn row(self) -> Option<&'static KindRow> {
                const ROWS: &[KindRow] = &[$(KindRow {
                    kind: EventKind::$variant,
                    code: $code,
                    spec: $spec,
                    tag: $tag,
                    title: $title,
                    args: &[$($arg),*],
                }),*];
                ROWS.iter().find(|row| row.kind == self)
            }

            pub fn from_code(code: u16) -> EventKind {
                match code {
                    $($code => EventKind::$variant,)*
                    other => EventKind::Unknown(other),
                }
            }
        }
    };
}

/// One kind's row of the table.
struct KindRow {
    kind: EventKind,
    code: u16,
    /// The spec's name (`OOM`, `STEP_END`).
    spec: &'static str,
    /// The stable identifier in JSON, recordings and `inspect` (`oom`, `step_end`).
    tag: &'static str,
    /// What a person reads: the screen, the replay's status line.
    title: &'static str,
    /// The record's arguments `a0..a5` that the kind uses, named, in order; the names are the
    /// JSON and recording keys of its figures.
    args: &'static [&'static str],
}

event_kinds! {
    /// Caught by the allocator's OOM observer.
    Oom = event::OOM, "OOM", "oom", "OOM",
        ["requested", "device_free", "device_total", "allocated", "reserved", "retries"];
    /// An out-of-memory error that escaped to the top of the program.
    OomError = event::OOM_ERROR, "OOM_ERROR", "oom_error", "OOM (uncaught)", ["requested"];
    PhaseBegin = event::PHASE_BEGIN, "PHASE_BEGIN", "phase_begin", "phase begins", [];
    PhaseEnd = event::PHASE_END, "PHASE_END", "phase_end", "phase ends", ["peak"];
    StepEnd = event::STEP_END, "STEP_END", "step_end", "step ends",
        ["peak_allocated", "peak_reserved", "duration_ns"];
    Mark = event::MARK, "MARK", "mark", "mark", [];
    NewHighWater = event::NEW_HIGH_WATER, "NEW_HIGH_WATER", "new_high_water", "new peak",
        ["peak", "previous"];
    AllocRetry = event::ALLOC_RETRY, "ALLOC_RETRY", "alloc_retry", "alloc retry", ["retries"];
    /// `a0` is 1 when the program exited by an error.
    Exit = event::EXIT, "EXIT", "exit", "exit", ["error"];
    /// The writer dumped a memory snapshot; the record's text is its file name.
    SnapshotWritten = event::SNAPSHOT_WRITTEN, "SNAPSHOT_WRITTEN", "snapshot_written",
        "snapshot written",
        ["size", "peak", "reason", "allocated", "max_entries", "deleted"];
    ForeignPeakReset = event::FOREIGN_PEAK_RESET, "FOREIGN_PEAK_RESET", "foreign_peak_reset",
        "peak reset by the program", ["before", "after"];
    EmptyCache = event::EMPTY_CACHE, "EMPTY_CACHE", "empty_cache", "cache emptied",
        ["before", "after"];
    /// What the step's end held by kind, in bytes; written only where it changed.
    MemoryKinds = event::MEMORY_KINDS, "MEMORY_KINDS", "memory_kinds", "memory by kind",
        ["parameters", "buffers", "gradients", "optimizer_state"];
}

impl EventKind {
    /// The tag of a kind this version does not know.
    pub const UNKNOWN_TAG: &'static str = "unknown";

    pub fn code(self) -> u16 {
        match (self, self.row()) {
            (EventKind::Unknown(code), _) => code,
            (_, Some(row)) => row.code,
            (_, None) => unreachable!("every known kind has a row"),
        }
    }

    /// The spec's name (`OOM`, `STEP_END`, ...), or `event <n>` for an unknown kind.
    pub fn name(self) -> String {
        match self.row() {
            Some(row) => row.spec.into(),
            None => format!("event {}", self.code()),
        }
    }

    /// The stable identifier in JSON, recordings and `inspect`; `unknown` for a kind from a
    /// newer writer.
    pub fn tag(self) -> &'static str {
        self.row().map_or(Self::UNKNOWN_TAG, |row| row.tag)
    }

    /// What a person reads for the kind.
    pub fn title(self) -> String {
        match self.row() {
            Some(row) => row.title.into(),
            None => format!("event {}", self.code()),
        }
    }

    /// The names of the arguments the kind uses, in the record's order.
    pub fn args(self) -> &'static [&'static str] {
        self.row().map_or(&[], |row| row.args)
    }

    /// Every tag a reader may meet: the known kinds' and `unknown`.
    pub fn tags() -> impl Iterator<Item = &'static str> {
        Self::KNOWN
            .iter()
            .map(|kind| kind.tag())
            .chain([Self::UNKNOWN_TAG])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_unknowns_survive() {
        for code in 0..40u16 {
            assert_eq!(EventKind::from_code(code).code(), code);
        }
        for code in 0..40u32 {
            assert_eq!(WriterKind::from_code(code).code(), code);
        }
        assert_eq!(EventKind::from_code(99).name(), "event 99");
        assert_eq!(EventKind::from_code(5).name(), "STEP_END");
        assert_eq!(WriterState::from_code(7), WriterState::Unknown(7));
        assert!(WriterState::from_code(3).exited());
        assert!(!WriterState::from_code(1).exited());
    }

    #[test]
    fn the_table_names_each_kind_once() {
        let mut codes: Vec<u16> = EventKind::KNOWN.iter().map(|k| k.code()).collect();
        let mut tags: Vec<&str> = EventKind::tags().collect();
        codes.sort_unstable();
        codes.dedup();
        tags.sort_unstable();
        tags.dedup();
        assert_eq!(codes.len(), EventKind::KNOWN.len());
        assert_eq!(tags.len(), EventKind::KNOWN.len() + 1);
        for kind in EventKind::KNOWN {
            assert_eq!(EventKind::from_code(kind.code()), *kind);
            assert!(kind.args().len() <= crate::channel::layout::event::ARG_COUNT);
        }
        assert_eq!(EventKind::Unknown(99).tag(), "unknown");
        assert_eq!(EventKind::Unknown(99).title(), "event 99");
        assert!(EventKind::Unknown(99).args().is_empty());
    }
}
