//! Errors as `plot` reports them, for every drawing file.

/// An error (plotters', the encoder's, the recording's) as the one line `plot` reports.
pub fn fail(e: impl std::fmt::Display) -> String {
    e.to_string()
}
