//! Which global options each mode reads. clap's global options are accepted after any
//! subcommand, so `vramscope serve --once` parsed and then started a server as if `--once`
//! were not there; an option the chosen mode would ignore is refused instead, in one line.

use clap::ArgMatches;
use clap::parser::ValueSource;

/// The mode a command line asks for: a subcommand's name, or `None` for the monitor.
type Mode = Option<&'static str>;

const MONITOR: Mode = None;
const RUN: Mode = Some("run");
const RECORD: Mode = Some("record");
const SERVE: Mode = Some("serve");
const REPLAY: Mode = Some("replay");
const DEMO: Mode = Some("demo");
const REPORT: Mode = Some("report");
const EXPORT: Mode = Some("export");

/// Each global option (clap's id, as spelled on the command line) and the modes that read it.
/// `run` reads what the monitor reads: it is the monitor with a job. `report --json` is
/// JSON, and `export --csv` names the one format `export` writes.
const READ_BY: [(&str, &str, &[Mode]); 10] = [
    ("nvml_lib", "--nvml-lib", &[MONITOR, RUN, RECORD, SERVE]),
    ("interval", "--interval", &[MONITOR, RUN, RECORD, SERVE]),
    ("pcie", "--pcie", &[MONITOR, RUN, RECORD, SERVE]),
    ("once", "--once", &[MONITOR, RUN]),
    ("json", "--json", &[MONITOR, RUN, REPORT]),
    ("csv", "--csv", &[MONITOR, RUN, EXPORT]),
    ("loop", "--loop", &[MONITOR, RUN]),
    ("record", "--record", &[MONITOR, RUN]),
    ("read_only", "--read-only", &[MONITOR, RUN, REPLAY, DEMO]),
    ("ascii", "--ascii", &[MONITOR, RUN, REPLAY, DEMO]),
];

/// One line naming the first option given on the command line that the chosen mode would
/// ignore. An option set through the environment (`VRAMSCOPE_NVML_LIB`) is not refused: it
/// is meant for every invocation, whichever mode.
pub fn refuse_ignored(matches: &ArgMatches) -> Result<(), String> {
    let mode = matches.subcommand_name();
    for (id, flag, read_by) in READ_BY {
        let given = matches.value_source(id) == Some(ValueSource::CommandLine);
        if given && !read_by.contains(&mode) {
            let what =
                mode.map_or_else(|| "the monitor".to_string(), |m| format!("`vramscope {m}`"));
            return Err(match instead(mode, flag) {
                Some(advice) => format!("{flag} does not apply to {what}; {advice}"),
                None => format!("{flag} does not apply to {what}"),
            });
        }
    }
    Ok(())
}

/// What to use instead, where a refused option has a clear counterpart: a one-shot print of
/// a recording's figures comes from `report` and `export`, never from its monitor.
fn instead(mode: Option<&str>, flag: &str) -> Option<&'static str> {
    use crate::replay::usage::{Played, instead};
    if !["--once", "--json", "--csv", "--loop"].contains(&flag) {
        return None;
    }
    match mode {
        m if m == REPLAY => Some(instead(Played::File)),
        m if m == DEMO => Some(instead(Played::Demo)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use clap::{CommandFactory, FromArgMatches};

    fn check(args: &[&str]) -> Result<(), String> {
        let matches = Cli::command()
            .try_get_matches_from(std::iter::once("vramscope").chain(args.iter().copied()))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        Cli::from_arg_matches(&matches).unwrap();
        refuse_ignored(&matches)
    }

    #[test]
    fn every_global_option_is_known_to_clap_by_its_id() {
        let cmd = Cli::command();
        for (id, flag, _) in READ_BY {
            let arg = cmd
                .get_arguments()
                .find(|a| a.get_id() == id)
                .unwrap_or_else(|| panic!("no option {id}"));
            assert!(arg.is_global_set(), "{id}");
            assert_eq!(format!("--{}", arg.get_long().unwrap()), flag);
        }
        // And every global option is in the table.
        let globals = cmd.get_arguments().filter(|a| a.is_global_set()).count();
        assert_eq!(globals, READ_BY.len());
    }

    #[test]
    fn options_a_mode_ignores_are_refused_wherever_they_are_written() {
        for (args, flag, mode) in [
            (&["serve", "--once"][..], "--once", "`vramscope serve`"),
            (&["--once", "serve"][..], "--once", "`vramscope serve`"),
            (&["serve", "--csv"][..], "--csv", "`vramscope serve`"),
            (
                &["record", "-o", "x.jsonl", "--json"][..],
                "--json",
                "`vramscope record`",
            ),
            (&["report", "f", "--csv"][..], "--csv", "`vramscope report`"),
            (
                &["report", "f", "--interval", "2s"][..],
                "--interval",
                "`vramscope report`",
            ),
            (
                &["export", "f", "--nvml-lib", "/x"][..],
                "--nvml-lib",
                "`vramscope export`",
            ),
            (
                &["plot", "f", "-o", "x.svg", "--ascii"][..],
                "--ascii",
                "`vramscope plot`",
            ),
            (
                &["inspect", "f", "--read-only"][..],
                "--read-only",
                "`vramscope inspect`",
            ),
            (
                &["replay", "f", "--interval", "2s"][..],
                "--interval",
                "`vramscope replay`",
            ),
            (
                &["replay", "f", "--pcie"][..],
                "--pcie",
                "`vramscope replay`",
            ),
            (
                &["demo", "--record", "x.jsonl"][..],
                "--record",
                "`vramscope demo`",
            ),
            (
                &["serve", "--read-only"][..],
                "--read-only",
                "`vramscope serve`",
            ),
            (&["serve", "-l", "2"][..], "--loop", "`vramscope serve`"),
            (
                &["completions", "bash", "--json"][..],
                "--json",
                "`vramscope completions`",
            ),
            (
                &["man", "--nvml-lib", "/x"][..],
                "--nvml-lib",
                "`vramscope man`",
            ),
        ] {
            assert_eq!(
                check(args),
                Err(format!("{flag} does not apply to {mode}")),
                "{args:?}"
            );
        }
    }

    #[test]
    fn options_a_mode_reads_are_accepted() {
        for args in [
            &[][..],
            &["--once", "--interval", "2s", "--pcie"][..],
            &["--json", "--nvml-lib", "/x"][..],
            &["--ascii", "--read-only", "--record", "x.jsonl"][..],
            &[
                "serve",
                "--interval",
                "2s",
                "--nvml-lib",
                "/x",
                "--pcie",
                "5",
            ][..],
            &["record", "-o", "x.jsonl", "--interval", "500ms"][..],
            &["report", "f", "--json"][..],
            &["replay", "f", "--ascii", "--read-only"][..],
            &["demo", "--ascii"][..],
            &["run", "--json", "--", "python", "x.py"][..],
            &["run", "--ascii", "--interval", "2s", "--", "python", "x.py"][..],
            &["export", "f"][..],
            &["export", "--csv", "-o", "x.csv", "f"][..],
            &["completions", "fish"][..],
            &["man"][..],
        ] {
            assert_eq!(check(args), Ok(()), "{args:?}");
        }
    }
}
