//! `vramscope report FILE`: when memory peaked, by how much, in which process, at which step
//! and phase, every OOM, the largest spikes, and advice where the figures call for it.

mod analysis;
mod hints;
mod markdown;
mod render;
mod spikes;

pub use analysis::{Report, analyse};

use crate::record::Recording;
use std::path::Path;
use std::process::ExitCode;

/// How the summary is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Markdown,
    Json,
}

/// Summarises `file` on standard output; a file that cannot be opened is one line on
/// standard error and status 2. A recording damaged part-way is summarised up to the damage,
/// which the summary names, and exits 1.
pub fn run(file: &Path, format: Format) -> ExitCode {
    let recording = match Recording::open(file) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("vramscope: {e}");
            return ExitCode::from(2);
        }
    };
    let report = analyse(recording);
    let name = file.display().to_string();
    let text = match format {
        Format::Text => render::text(&report, &name, false),
        Format::Markdown => render::text(&report, &name, true),
        Format::Json => render::json(&report),
    };
    if let Some(skipped) = &report.skipped {
        eprintln!("vramscope: {skipped}");
    }
    if let Err(status) = crate::output::stdout::print(&text) {
        return status;
    }
    if report.damaged.is_some() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
