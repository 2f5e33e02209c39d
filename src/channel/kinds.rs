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

/// What an event record reports (§2.8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    Oom,
    OomError,
    PhaseBegin,
    PhaseEnd,
    StepEnd,
    Mark,
    NewHighWater,
    AllocRetry,
    Exit,
    SnapshotWritten,
    ForeignPeakReset,
    EmptyCache,
    Unknown(u16),
}

impl EventKind {
    pub fn from_code(code: u16) -> EventKind {
        match code {
            event::OOM => EventKind::Oom,
            event::OOM_ERROR => EventKind::OomError,
            event::PHASE_BEGIN => EventKind::PhaseBegin,
            event::PHASE_END => EventKind::PhaseEnd,
            event::STEP_END => EventKind::StepEnd,
            event::MARK => EventKind::Mark,
            event::NEW_HIGH_WATER => EventKind::NewHighWater,
            event::ALLOC_RETRY => EventKind::AllocRetry,
            event::EXIT => EventKind::Exit,
            event::SNAPSHOT_WRITTEN => EventKind::SnapshotWritten,
            event::FOREIGN_PEAK_RESET => EventKind::ForeignPeakReset,
            event::EMPTY_CACHE => EventKind::EmptyCache,
            other => EventKind::Unknown(other),
        }
    }

    pub fn code(self) -> u16 {
        match self {
            EventKind::Oom => event::OOM,
            EventKind::OomError => event::OOM_ERROR,
            EventKind::PhaseBegin => event::PHASE_BEGIN,
            EventKind::PhaseEnd => event::PHASE_END,
            EventKind::StepEnd => event::STEP_END,
            EventKind::Mark => event::MARK,
            EventKind::NewHighWater => event::NEW_HIGH_WATER,
            EventKind::AllocRetry => event::ALLOC_RETRY,
            EventKind::Exit => event::EXIT,
            EventKind::SnapshotWritten => event::SNAPSHOT_WRITTEN,
            EventKind::ForeignPeakReset => event::FOREIGN_PEAK_RESET,
            EventKind::EmptyCache => event::EMPTY_CACHE,
            EventKind::Unknown(code) => code,
        }
    }

    /// The spec's name (`OOM`, `STEP_END`, ...), or `event <n>` for an unknown kind.
    pub fn name(self) -> String {
        let known = match self {
            EventKind::Oom => "OOM",
            EventKind::OomError => "OOM_ERROR",
            EventKind::PhaseBegin => "PHASE_BEGIN",
            EventKind::PhaseEnd => "PHASE_END",
            EventKind::StepEnd => "STEP_END",
            EventKind::Mark => "MARK",
            EventKind::NewHighWater => "NEW_HIGH_WATER",
            EventKind::AllocRetry => "ALLOC_RETRY",
            EventKind::Exit => "EXIT",
            EventKind::SnapshotWritten => "SNAPSHOT_WRITTEN",
            EventKind::ForeignPeakReset => "FOREIGN_PEAK_RESET",
            EventKind::EmptyCache => "EMPTY_CACHE",
            EventKind::Unknown(code) => return format!("event {code}"),
        };
        known.into()
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
}
