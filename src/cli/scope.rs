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
const CLUSTER: Mode = Some("cluster");
const SITES: Mode = Some("sites");
const DIFF: Mode = Some("diff");
/// `vramscope config` shows every setting: it reads them all (`config::settings`).
const CONFIG: Mode = Some("config");
/// `run --no-monitor` only runs the job: it reads none of the monitor's options.
const RUN_JOB_ONLY: Mode = Some("run --no-monitor");

/// `run`'s own options that only its monitor reads.
const MONITOR_OF_RUN: [(&str, &str); 2] = [("log", "--log"), ("exit_with_job", "--exit-with-job")];

/// Each global option (clap's id, as spelled on the command line) and the modes that read it.
/// `run` reads what the monitor reads: it is the monitor with a job. `report --json` is
/// JSON, as are `sites --json` and `diff --json`, and `export --csv` names the one format `export` writes.
const READ_BY: [(&str, &str, &[Mode]); 19] = [
    ("nvml_lib", "--nvml-lib", &[MONITOR, RUN, RECORD, SERVE]),
    (
        "interval",
        "--interval",
        &[MONITOR, RUN, RECORD, SERVE, CLUSTER],
    ),
    ("pcie", "--pcie", &[MONITOR, RUN, RECORD, SERVE]),
    ("gpm", "--gpm", &[MONITOR, RUN, RECORD, SERVE]),
    (
        "peak_interval",
        "--peak-interval",
        &[MONITOR, RUN, RECORD, SERVE],
    ),
    ("once", "--once", &[MONITOR, RUN, CLUSTER]),
    (
        "json",
        "--json",
        &[MONITOR, RUN, REPORT, SITES, DIFF, CLUSTER],
    ),
    ("csv", "--csv", &[MONITOR, RUN, EXPORT]),
    ("loop", "--loop", &[MONITOR, RUN]),
    ("record", "--record", &[MONITOR, RUN]),
    ("on", "--on", &[MONITOR, RUN, SERVE]),
    ("read_only", "--read-only", &[MONITOR, RUN, REPLAY, DEMO]),
    ("columns", "--columns", &[MONITOR, RUN, REPLAY, DEMO]),
    ("ascii", "--ascii", &[MONITOR, RUN, REPLAY, DEMO, CLUSTER]),
    ("theme", "--theme", &[MONITOR, RUN, REPLAY, DEMO, CLUSTER]),
    ("units", "--units", &[MONITOR, RUN, REPLAY, DEMO]),
    ("sort", "--sort", &[MONITOR, RUN, REPLAY, DEMO]),
    ("sort_order", "--sort-order", &[MONITOR, RUN, REPLAY, DEMO]),
    (
        "monitor_log",
        "--monitor-log",
        &[MONITOR, RUN, RECORD, SERVE],
    ),
];

/// One line naming the first option given on the command line that the chosen mode would
/// ignore. An option set through the environment (`VRAMSCOPE_NVML_LIB`) is not refused: it
/// is meant for every invocation, whichever mode.
pub fn refuse_ignored(matches: &ArgMatches) -> Result<(), String> {
    let given = |m: &ArgMatches, id| m.value_source(id) == Some(ValueSource::CommandLine);
    let job_only = match matches.subcommand() {
        Some(("run", run)) if run.get_flag("no_monitor") => Some(run),
        _ => None,
    };
    let mode = job_only.map_or_else(|| matches.subcommand_name(), |_| RUN_JOB_ONLY);
    let refused = |flag| {
        let what = mode.map_or_else(|| "the monitor".to_string(), |m| format!("`vramscope {m}`"));
        Err(match instead(mode, flag) {
            Some(advice) => format!("{flag} does not apply to {what}; {advice}"),
            None => format!("{flag} does not apply to {what}"),
        })
    };
    let shown_by_config = |id| {
        mode == CONFIG
            && crate::cli::config::settings::is_setting_id(&crate::cli::config::command(), id)
    };
    for (id, flag, read_by) in READ_BY {
        if given(matches, id) && !read_by.contains(&mode) && !shown_by_config(id) {
            return refused(flag);
        }
    }
    if let Some(run) = job_only {
        for (id, flag) in MONITOR_OF_RUN {
            if given(run, id) {
                return refused(flag);
            }
        }
    }
    // A single `--once` (`--json`, `--csv`) samples once: there is no interval to peek into.
    if mode == MONITOR
        && given(matches, "peak_interval")
        && !given(matches, "loop")
        && let Some((_, printing, _)) = READ_BY
            .iter()
            .find(|(id, _, _)| PRINTING.contains(id) && given(matches, id))
    {
        return Err(format!(
            "--peak-interval does not apply to a single {printing}; add --loop PERIOD"
        ));
    }
    // `run --json` (`--once`, `--csv`, `--loop`) sends the job's output to stderr: a log file
    // would never be written.
    if let Some(("run", run)) = matches.subcommand()
        && given(run, "log")
        && let Some((_, printing, _)) = READ_BY
            .iter()
            .find(|(id, _, _)| PRINTING.contains(id) && given(matches, id))
    {
        return Err(format!(
            "--log does not apply to `vramscope run {printing}`"
        ));
    }
    Ok(())
}

/// The options that make the monitor print instead of drawing a screen.
const PRINTING: [&str; 4] = ["once", "json", "csv", "loop"];

/// What to use instead, where a refused option has a clear counterpart: a one-shot print of
/// a recording's figures comes from `report` and `export`, never from its monitor.
fn instead(mode: Option<&str>, flag: &str) -> Option<&'static str> {
    use crate::replay::usage::{Played, instead};
    if !READ_BY
        .iter()
        .any(|(id, spelled, _)| PRINTING.contains(id) && *spelled == flag)
    {
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

    /// Global options every mode reads, so none is refused: the configuration file holds
    /// settings for all of them.
    const READ_BY_EVERY_MODE: [&str; 1] = ["config"];

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
        assert_eq!(globals, READ_BY.len() + READ_BY_EVERY_MODE.len());
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
                &["serve", "--columns", "pid,type"][..],
                "--columns",
                "`vramscope serve`",
            ),
            (
                &["replay", "f", "--peak-interval", "off"][..],
                "--peak-interval",
                "`vramscope replay`",
            ),
            (
                &["report", "f", "--peak-interval", "50ms"][..],
                "--peak-interval",
                "`vramscope report`",
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
            (&["config", "--once"][..], "--once", "`vramscope config`"),
            (
                &["serve", "--theme", "light"][..],
                "--theme",
                "`vramscope serve`",
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
            &[
                "replay",
                "f",
                "--theme",
                "light",
                "--sort",
                "pid",
                "--sort-order",
                "asc",
            ][..],
            // `config` shows every setting, and the file is read whatever the mode.
            &[
                "config",
                "--interval",
                "2s",
                "--theme",
                "light",
                "--nvml-lib",
                "/x",
                "--ascii",
            ][..],
            &["report", "f", "--config", "none"][..],
            &["run", "--json", "--", "python", "x.py"][..],
            &["run", "--ascii", "--interval", "2s", "--", "python", "x.py"][..],
            &["export", "f"][..],
            &["export", "--csv", "-o", "x.csv", "f"][..],
            // A recording's scope: the options of report, plot and export alike.
            &[
                "report",
                "f",
                "--json",
                "--history",
                "--since",
                "2m",
                "--until",
                "14:05:30",
            ][..],
            &[
                "plot", "f", "-o", "x.svg", "--pid", "1", "--pid", "2", "--job", "j",
            ][..],
            &[
                "export",
                "f",
                "--csv",
                "--since",
                "2026-11-21T09:41:12Z",
                "--pid",
                "3",
            ][..],
            &["completions", "fish"][..],
            &["man"][..],
            &["--peak-interval", "off"][..],
            &["--columns", "user,type,elapsed,mem"][..],
            &["replay", "f", "--columns", "type"][..],
            &["--json", "--loop", "1s", "--peak-interval", "50ms"][..],
            &["serve", "--peak-interval", "200ms"][..],
            &["record", "-o", "x.jsonl", "--peak-interval", "off"][..],
            &[
                "run",
                "--json",
                "--peak-interval",
                "off",
                "--",
                "python",
                "x.py",
            ][..],
        ] {
            assert_eq!(check(args), Ok(()), "{args:?}");
        }
    }

    #[test]
    fn a_single_printout_refuses_the_peak_interval() {
        for args in [
            &["--once", "--peak-interval", "50ms"][..],
            &["--json", "--peak-interval", "off"][..],
        ] {
            let refused = check(args).unwrap_err();
            assert!(
                refused.starts_with("--peak-interval does not apply to a single --")
                    && refused.ends_with("add --loop PERIOD"),
                "{args:?}: {refused}"
            );
        }
    }

    #[test]
    fn run_without_a_monitor_refuses_what_only_the_monitor_reads() {
        for (args, flag) in [
            (
                &["run", "--no-monitor", "--record", "x.jsonl", "--", "true"][..],
                "--record",
            ),
            (
                &["run", "--no-monitor", "--json", "--", "true"][..],
                "--json",
            ),
            (
                &["run", "--no-monitor", "--interval", "2s", "--", "true"][..],
                "--interval",
            ),
            (
                &["--ascii", "run", "--no-monitor", "--", "true"][..],
                "--ascii",
            ),
            (
                &["run", "--no-monitor", "--log", "x.log", "--", "true"][..],
                "--log",
            ),
            (
                &["run", "--no-monitor", "--exit-with-job", "--", "true"][..],
                "--exit-with-job",
            ),
        ] {
            assert_eq!(
                check(args),
                Err(format!(
                    "{flag} does not apply to `vramscope run --no-monitor`"
                )),
                "{args:?}"
            );
        }
        assert_eq!(
            check(&["run", "--no-monitor", "--", "python", "x.py"]),
            Ok(())
        );
        assert_eq!(
            check(&["run", "--json", "--log", "x.log", "--", "true"]),
            Err("--log does not apply to `vramscope run --json`".to_string())
        );
        assert_eq!(check(&["run", "--log", "x.log", "--", "true"]), Ok(()));
        // After the command, the words are the job's.
        assert_eq!(check(&["run", "--no-monitor", "--", "x", "--json"]), Ok(()));
    }

    #[test]
    fn every_example_command_in_the_documentation_is_accepted() {
        // The README, the writer's README and every chapter of the book (docs/).
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = vec![root.join("README.md"), root.join("python/README.md")];
        let mut book: Vec<_> = std::fs::read_dir(root.join("docs"))
            .expect("docs/")
            .map(|e| e.expect("an entry of docs/").path())
            .filter(|p| p.extension().is_some_and(|e| e == "md"))
            .collect();
        book.sort();
        files.extend(book);
        let docs: Vec<(String, String)> = files
            .iter()
            .map(|f| {
                let text = std::fs::read_to_string(f).expect("read a doc");
                (f.display().to_string(), text)
            })
            .collect();
        let mut examples = 0;
        for (file, text) in &docs {
            // The indented command lines, each without its trailing comment.
            for line in text.lines().filter(|l| l.starts_with("    vramscope ")) {
                let command = line.split(" #").next().unwrap_or(line);
                // The shell's words (quotes taken as a shell takes them), which end where a
                // redirection or a pipe begins.
                let words = crate::notify::split_words(command)
                    .unwrap_or_else(|e| panic!("{file}: {line}: {e}"));
                let args: Vec<&str> = words
                    .iter()
                    .map(String::as_str)
                    .skip(1)
                    .take_while(|w| !matches!(*w, ">" | ">>" | "<" | "|" | "&&" | ";"))
                    .collect();
                let matches = Cli::command()
                    .try_get_matches_from(std::iter::once("vramscope").chain(args.iter().copied()))
                    .unwrap_or_else(|e| panic!("{file}: {line}: {e}"));
                assert_eq!(refuse_ignored(&matches), Ok(()), "{file}: {line}");
                examples += 1;
            }
        }
        // The README's and the book's run, one-shot, record and serve examples at least.
        assert!(examples >= 40, "only {examples} examples found");
    }
}
