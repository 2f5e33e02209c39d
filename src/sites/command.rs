//! `vramscope sites FILE [FILE2]`: what held the memory in a snapshot, or which sites grew
//! between two. Exit status: 0; 1 when a file cannot be read or cannot answer (one line on
//! standard error); 2 for a usage error (clap's, or `--against` with two files).

use super::render;
use super::writer_json;
use crate::memory_snapshot::{self, Held, Limits, MemorySnapshot, Moment, SitesError};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// A moment, as the command line names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum At {
    Peak,
    Oom,
    End,
}

impl From<At> for Moment {
    fn from(at: At) -> Moment {
        match at {
            At::Peak => Moment::Peak,
            At::Oom => Moment::Oom,
            At::End => Moment::End,
        }
    }
}

/// Options of `vramscope sites`.
#[derive(Debug, Args)]
pub struct SitesArgs {
    /// A memory snapshot (`*.pickle`); a second one compares the two: which sites grew
    /// from the first to the second.
    #[arg(value_name = "FILE", num_args = 1..=2, required = true)]
    pub files: Vec<PathBuf>,

    /// The moment: the most memory the history shows, the last failed request, or the
    /// dump itself; with two files, the same moment of each.
    #[arg(long, value_enum, default_value = "peak")]
    pub at: At,

    /// Compare `--at` with this other moment of the same file: `--at peak --against end`
    /// shows what was freed after the peak (one file only).
    #[arg(long, value_enum, value_name = "MOMENT")]
    pub against: Option<At>,

    /// How many sites to list.
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub top: u32,

    /// The CUDA device to look at [default: the one the writer dumped for, else the first].
    #[arg(long, value_name = "N")]
    pub device: Option<u32>,
}

/// The file's size in bytes, or why it cannot be told.
fn file_size(file: &Path) -> memory_snapshot::Known<u64> {
    std::fs::metadata(file)
        .map(|m| m.len())
        .map_err(|e| format!("cannot stat the file: {e}"))
}

/// Runs the subcommand; `json` is the global `--json`.
pub fn run(args: &SitesArgs, json: bool) -> ExitCode {
    if args.against.is_some() && args.files.len() == 2 {
        eprintln!("vramscope: --against compares two moments of one file; give one file");
        return ExitCode::from(2);
    }
    let top = args.top as usize;
    // The command reads its files once and exits: their buffers may take 2 MiB pages.
    let limits = Limits {
        huge_pages: true,
        ..Limits::default()
    };
    let read = |path: &Path| memory_snapshot::read_file(path, &limits);
    let answer = |snap: &MemorySnapshot, moment: At| -> Result<Held, SitesError> {
        memory_snapshot::held_on(snap, args.device, moment.into(), None, top)
    };
    let writer = |snap: &MemorySnapshot, file: &Path| {
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        writer_json::writer(snap, &crate::text::clean(&name))
    };
    let text = match (&args.files[..], args.against) {
        ([file], against) => read(file).and_then(|snap| {
            let held = answer(&snap, args.at)?;
            Ok(match against {
                Some(other) => {
                    let after = answer(&snap, other)?;
                    let writers = (writer(&snap, file), writer(&snap, file));
                    render::diff(&held, &after, (file, file), top, json, writers)
                }
                None if json => render::json(&held, file, &snap, &file_size(file)),
                None => render::text(&held, file, &render::context(&snap, file)),
            })
        }),
        // Either file may be the one that cannot answer: the line names it.
        ([first, second], _) => {
            let one = |file: &Path| {
                read(file)
                    .and_then(|snap| Ok((answer(&snap, args.at)?, writer(&snap, file))))
                    .map_err(|e| e.in_file(file))
            };
            one(first).and_then(|(before, w1)| {
                let (after, w2) = one(second)?;
                Ok(render::diff(
                    &before,
                    &after,
                    (first, second),
                    top,
                    json,
                    (w1, w2),
                ))
            })
        }
        _ => return ExitCode::from(2),
    };
    match text {
        Ok(text) => match crate::stdout::print(&text) {
            Ok(()) => ExitCode::SUCCESS,
            Err(status) => status,
        },
        Err(e) => {
            eprintln!("vramscope: {e}");
            ExitCode::from(1)
        }
    }
}
