//! `vramscope report FILE`: when memory peaked, by how much, in which process, at which step
//! and phase, every OOM, the largest spikes, and advice where the figures call for it.

mod analysis;
mod hints;
#[cfg(test)]
mod join_tests;
mod markdown;
#[cfg(test)]
mod period_tests;
mod render;
mod spikes;

pub use analysis::{
    AllocatorSummary, At, GpuSummary, KEPT_STEPS, OomSummary, ProcessSummary, Report, StepSeries,
    analyse,
};

use crate::recording::scope::Asked;
use crate::recording::scoped;
use std::path::Path;
use std::process::ExitCode;

/// How the summary is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Markdown,
    Json,
}

/// Summarises the part of `file` asked for (`recording::scope`) on standard output; a file that
/// cannot be opened, or a scope that cannot apply to it, is one line on standard error and
/// status 2. A recording damaged part-way is summarised up to the damage, which the summary
/// names, and exits 1.
pub fn run(file: &Path, format: Format, asked: &Asked) -> ExitCode {
    let (recording, told) = match scoped::open(file, asked) {
        Ok(opened) => opened,
        Err(e) => {
            eprintln!("vramscope: {e}");
            return ExitCode::from(2);
        }
    };
    let mut report = analyse(recording);
    // Each list in the order things happened: a channel's first poll brings its whole ring,
    // so the order of reading is not the order of time.
    report.ooms.sort_by_key(|o| o.oom.at_ms);
    report.spikes.sort_by_key(|s| s.rise.at_ms);
    let name = file.display().to_string();
    let notes = told.notes();
    let text = match format {
        Format::Text => render::text(&report, &name, false, &notes),
        Format::Markdown => render::text(&report, &name, true, &notes),
        Format::Json => render::json(&report, told.json()),
    };
    if let Some(skipped) = &report.skipped {
        eprintln!("vramscope: {skipped}");
    }
    if let Err(status) = crate::stdout::print(&text) {
        return status;
    }
    if report.damaged.is_some() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
