//! What `replay` and `demo` cannot do, said plainly. Both are the interactive monitor on a
//! recording; the one-shot options print a live snapshot, which a recording has no single
//! one of, so `cli::scope` refuses them with the advice below (never with advice to use the
//! very options that were given), and without a terminal they are refused here.

/// Which recording the monitor would play.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Played {
    /// `vramscope replay FILE`.
    File,
    /// `vramscope demo`, the recording built into the binary.
    Demo,
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

/// What to use instead of `played`'s monitor.
pub fn instead(played: Played) -> &'static str {
    match played {
        Played::File => {
            "for a recording's figures use `vramscope report FILE` (a summary; --json or --markdown) or `vramscope export FILE` (every figure as CSV)"
        }
        Played::Demo => {
            "the demo is only the interactive monitor: run `vramscope demo` in a terminal"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn without_a_terminal_the_advice_fits_a_recording() {
        let line = terminal_refusal(Played::File);
        assert!(line.starts_with("`replay` needs a terminal"), "{line}");
        assert!(line.contains("vramscope export FILE"), "{line}");
        assert!(terminal_refusal(Played::Demo).starts_with("`demo` needs a terminal"));
    }
}
