//! `vramscope diff A B`: why run B peaked higher than run A. Two recordings are each read
//! by `report`'s one pass (`facts`), then compared (`compare`): the peaks, phase by phase
//! and step by step, the sites held at each run's peak where the runs dumped snapshots, the
//! OOMs, and the settings that change memory; every difference becomes a cause with its
//! bytes, ranked (`rank`), and printed (`render`). Two memory snapshots are compared as
//! `vramscope sites A B` compares them.
//!
//! Exit status: 0; 1 when a recording is damaged part-way (compared up to the damage, which
//! is named) or a snapshot cannot answer; 2 when a file cannot be read or the two are not of
//! one kind (one line on standard error).

mod compare;
mod facts;
mod knobs;
mod rank;
mod render;

use crate::recording::scope::Asked;
use crate::recording::scoped;
use std::io::Read;
use std::path::Path;
use std::process::ExitCode;

/// A pickle's first byte (`PROTO`, protocol 2 and later: what torch dumps).
const PICKLE_PROTO: u8 = 0x80;

/// What a file given to `diff` is, by its first byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Snapshot,
    Recording,
}

/// A pickle is a snapshot; anything else is left to the recording's reader to accept or
/// refuse, with its own line. A file that cannot be opened is said here.
fn kind_of(path: &Path) -> Result<Kind, String> {
    let name = crate::text::clean(&path.display().to_string()).into_owned();
    let mut file = crate::safe_fs::open_for_reading(path).map_err(|e| format!("{name}: {e}"))?;
    let mut first = [0u8; 1];
    // A FIFO opened without blocking reads nothing: the recording's reader refuses it.
    let read = file.read(&mut first).unwrap_or(0);
    Ok(if read == 1 && first[0] == PICKLE_PROTO {
        Kind::Snapshot
    } else {
        Kind::Recording
    })
}

/// Compares `a` with `b`; `top`: how many sites to list; `asked`: the part of each
/// recording to read (as `report` reads it).
pub fn run(a: &Path, b: &Path, top: usize, asked: &Asked, json: bool) -> ExitCode {
    let kinds = match (kind_of(a), kind_of(b)) {
        (Ok(ka), Ok(kb)) => (ka, kb),
        (Err(e), _) | (_, Err(e)) => return refused(&e),
    };
    match kinds {
        (Kind::Snapshot, Kind::Snapshot) => {
            if *asked != Asked::default() {
                return refused(
                    "--history, --since, --until, --pid and --job read recordings; A and B are memory snapshots",
                );
            }
            let args = crate::sites::command::SitesArgs {
                files: vec![a.to_path_buf(), b.to_path_buf()],
                at: crate::sites::command::At::Peak,
                against: None,
                top: u32::try_from(top).unwrap_or(u32::MAX),
                device: None,
            };
            crate::sites::command::run(&args, json)
        }
        (Kind::Recording, Kind::Recording) => recordings(a, b, top, asked, json),
        (ka, _) => {
            let (snapshot, recording) = if ka == Kind::Snapshot { (a, b) } else { (b, a) };
            refused(&format!(
                "{} is a memory snapshot and {} a recording: diff compares two recordings or two snapshots",
                crate::text::clean(&snapshot.display().to_string()),
                crate::text::clean(&recording.display().to_string())
            ))
        }
    }
}

fn recordings(a: &Path, b: &Path, top: usize, asked: &Asked, json: bool) -> ExitCode {
    let summarise = |file: &Path| -> Result<facts::Run, String> {
        let (recording, _) = scoped::open(file, asked)?;
        let report = crate::report::analyse(recording);
        Ok(facts::Run::new(&file.display().to_string(), report))
    };
    let (run_a, run_b) = match (summarise(a), summarise(b)) {
        (Ok(ra), Ok(rb)) => (ra, rb),
        (Err(e), _) | (_, Err(e)) => return refused(&e),
    };
    let comparison = compare::compare(&run_a, &run_b, top);
    let text = if json {
        render::json(&comparison)
    } else {
        render::text(&comparison)
    };
    for run in [&run_a, &run_b] {
        if let Some(skipped) = &run.report.skipped {
            eprintln!("vramscope: {}: {skipped}", run.name);
        }
    }
    if let Err(status) = crate::stdout::print(&text) {
        return status;
    }
    if run_a.report.damaged.is_some() || run_b.report.damaged.is_some() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn refused(line: &str) -> ExitCode {
    eprintln!("vramscope: {line}");
    ExitCode::from(2)
}
