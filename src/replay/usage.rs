//! What `replay` and `demo` cannot do, said plainly. Both are the interactive monitor on a
//! recording; the one-shot options print a live snapshot, which a recording has no single
//! one of, so they are refused with what to use instead (never with advice to use the very
//! options that were given).

use crate::cli::Cli;

/// Which recording the monitor would play.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Played {
    /// `vramscope replay FILE`.
    File,
    /// `vramscope demo`, the recording built into the binary.
    Demo,
}

/// Why `played` cannot run with the options given, in one line; `None` when it can. Said
/// before the recording is opened: no need to read a file to refuse an option.
pub fn option_refusal(cli: &Cli, played: Played) -> Option<String> {
    let option = one_shot_option(cli)?;
    Some(format!(
        "{option} is not supported by `{}`; {}",
        name(played),
        instead(played)
    ))
}

/// Why `played` cannot run without a terminal, in one line. Said once the recording has
/// opened, so that a missing or damaged file is named first.
pub fn terminal_refusal(played: Played) -> String {
    format!("`{}` needs a terminal; {}", name(played), instead(played))
}

fn name(played: Played) -> &'static str {
    match played {
        Played::File => "replay",
        Played::Demo => "demo",
    }
}

fn instead(played: Played) -> &'static str {
    match played {
        Played::File => {
            "for a recording's figures use `vramscope report FILE` (a summary; --json or --markdown) or `vramscope export FILE` (every figure as CSV)"
        }
        Played::Demo => {
            "the demo is only the interactive monitor: run `vramscope demo` in a terminal"
        }
    }
}

/// The first one-shot option given, as it was spelled.
fn one_shot_option(cli: &Cli) -> Option<&'static str> {
    [
        (cli.once, "--once"),
        (cli.json, "--json"),
        (cli.csv, "--csv"),
        (cli.r#loop.is_some(), "--loop"),
    ]
    .into_iter()
    .find_map(|(given, name)| given.then_some(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn said(args: &[&str], played: Played) -> Option<String> {
        let cli = Cli::try_parse_from(std::iter::once("vramscope").chain(args.iter().copied()))
            .expect("parses");
        option_refusal(&cli, played)
    }

    #[test]
    fn one_shot_options_are_refused_naming_what_to_use_instead() {
        for option in ["--once", "--json", "--csv"] {
            let line = said(&["replay", option, "run.jsonl"], Played::File).expect("refused");
            assert!(line.starts_with(&format!("{option} is not supported by `replay`")));
            assert!(line.contains("vramscope report FILE"), "{line}");
            let line = said(&["demo", option], Played::Demo).expect("refused");
            assert!(line.starts_with(&format!("{option} is not supported by `demo`")));
            // Never the advice to use the option just refused.
            assert!(!line[option.len()..].contains(option), "{line}");
        }
        assert_eq!(said(&["replay", "run.jsonl"], Played::File), None);
        assert_eq!(said(&["demo"], Played::Demo), None);
    }

    #[test]
    fn without_a_terminal_the_advice_fits_a_recording() {
        let line = terminal_refusal(Played::File);
        assert!(line.starts_with("`replay` needs a terminal"), "{line}");
        assert!(line.contains("vramscope export FILE"), "{line}");
        assert!(terminal_refusal(Played::Demo).starts_with("`demo` needs a terminal"));
    }
}
