//! What `--on EVENT=CMD` asks for: the event kind with its optional threshold, and the
//! command split into words without a shell.

use std::time::Duration;

/// What happened, as `--on` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Oom,
    Hang,
    Exit,
    Peak,
    Free,
}

impl Kind {
    pub const ALL: [Kind; 5] = [Kind::Oom, Kind::Hang, Kind::Exit, Kind::Peak, Kind::Free];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Oom => "oom",
            Kind::Hang => "hang",
            Kind::Exit => "exit",
            Kind::Peak => "peak",
            Kind::Free => "free",
        }
    }
}

/// The built-in action instead of a command: the terminal bell, and a status message in the
/// tmux or screen session the monitor runs in.
pub const BELL: &str = "bell";

/// A hang is a step that takes this many times the median step; `hang:K` changes it.
pub const DEFAULT_HANG_FACTOR: f64 = 5.0;
/// A peak worth a word holds this share of the GPU's memory; `peak:0.8` changes it.
pub const DEFAULT_PEAK_SHARE: f64 = 0.9;
/// A GPU is free after this long with no process; `free:10m` changes it.
pub const DEFAULT_FREE_AFTER: Duration = Duration::from_secs(300);

/// What one `--on` runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// The user's program and its arguments, run directly (no shell).
    Command(Vec<String>),
    Bell,
}

/// One `--on EVENT=CMD`, parsed.
#[derive(Clone, Debug, PartialEq)]
pub struct Hook {
    pub kind: Kind,
    /// The threshold: the hang factor, the peak's share of the GPU, or the free time in
    /// seconds; the kind's default when not given.
    pub threshold: f64,
    pub action: Action,
    /// As written, to name the hook when something is said of it.
    pub text: String,
}

/// `KIND[:THRESHOLD]=CMD`, e.g. `oom=notify-send OOM`, `peak:0.8=./peak.sh`,
/// `free:10m=sh -c 'echo free | mail me'`, `exit=bell`.
pub fn parse(text: &str) -> Result<Hook, String> {
    let (event, command) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?}: EVENT=CMD expected (e.g. oom=./notify.sh)"))?;
    let (name, threshold) = match event.split_once(':') {
        Some((name, t)) => (name.trim(), Some(t.trim())),
        None => (event.trim(), None),
    };
    let kind = Kind::ALL
        .into_iter()
        .find(|k| k.name() == name)
        .ok_or_else(|| format!("{name:?}: an event is one of oom, hang, exit, peak, free"))?;
    let threshold = threshold_of(kind, threshold)?;
    let words = split_words(command)?;
    let action = match words.as_slice() {
        [] => return Err(format!("{event}=: a command is needed after `=`")),
        [one] if one == BELL => Action::Bell,
        _ => Action::Command(words),
    };
    Ok(Hook {
        kind,
        threshold,
        action,
        text: text.to_string(),
    })
}

fn threshold_of(kind: Kind, given: Option<&str>) -> Result<f64, String> {
    let number = |t: &str| t.parse::<f64>().ok().filter(|v| v.is_finite() && *v > 0.0);
    match (kind, given) {
        (Kind::Hang, None) => Ok(DEFAULT_HANG_FACTOR),
        (Kind::Peak, None) => Ok(DEFAULT_PEAK_SHARE),
        (Kind::Free, None) => Ok(DEFAULT_FREE_AFTER.as_secs_f64()),
        (Kind::Oom | Kind::Exit, None) => Ok(0.0),
        (Kind::Oom | Kind::Exit, Some(_)) => Err(format!("{}: takes no threshold", kind.name())),
        (Kind::Hang, Some(t)) => number(t)
            .filter(|k| *k >= 1.0)
            .ok_or_else(|| format!("hang:{t}: a factor of the median step, 1 or more, expected")),
        (Kind::Peak, Some(t)) => number(t)
            .filter(|s| *s <= 1.0)
            .ok_or_else(|| format!("peak:{t}: a share of the GPU's memory, 0 to 1, expected")),
        (Kind::Free, Some(t)) => duration_seconds(t)
            .ok_or_else(|| format!("free:{t}: a time such as 90s, 10m or 1h expected")),
    }
}

/// `90s`, `10m`, `1h` or plain seconds.
fn duration_seconds(text: &str) -> Option<f64> {
    let (digits, scale) = match text.as_bytes().last()? {
        b's' => (&text[..text.len() - 1], 1.0),
        b'm' => (&text[..text.len() - 1], 60.0),
        b'h' => (&text[..text.len() - 1], 3600.0),
        _ => (text, 1.0),
    };
    let value = digits.parse::<f64>().ok()?;
    (value.is_finite() && value > 0.0).then_some(value * scale)
}

/// Splits a command line into words as a POSIX shell's quoting would, and nothing more:
/// blanks separate words, `'...'` keeps everything literally, `"..."` keeps everything but
/// `\"` and `\\`, a backslash outside quotes keeps the next character. No variables, globs,
/// pipes or redirections: write `sh -c '...'` for those.
pub fn split_words(text: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => {
                if let Some(done) = word.take() {
                    words.push(done);
                }
            }
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => return Err(format!("{text:?}: a ' is not closed")),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\')) => w.push(c),
                            Some(c) => {
                                w.push('\\');
                                w.push(c);
                            }
                            None => return Err(format!("{text:?}: a \" is not closed")),
                        },
                        Some(c) => w.push(c),
                        None => return Err(format!("{text:?}: a \" is not closed")),
                    }
                }
            }
            '\\' => match chars.next() {
                Some(c) => word.get_or_insert_with(String::new).push(c),
                None => return Err(format!("{text:?}: ends in a lone \\")),
            },
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_as_a_shell_quotes_them_and_nothing_more() {
        let words = split_words(r#"sh -c 'echo $X | tee f' "a \"b\"" c\ d '' $HOME"#).unwrap();
        assert_eq!(
            words,
            ["sh", "-c", "echo $X | tee f", "a \"b\"", "c d", "", "$HOME"]
        );
        assert!(
            split_words("echo 'open")
                .unwrap_err()
                .contains("not closed")
        );
    }

    #[test]
    fn an_event_takes_its_threshold_and_a_command() {
        let hook = parse("peak:0.8=./p.sh --now").unwrap();
        assert_eq!(hook.kind, Kind::Peak);
        assert_eq!(hook.threshold, 0.8);
        assert_eq!(
            hook.action,
            Action::Command(vec!["./p.sh".into(), "--now".into()])
        );
        assert_eq!(parse("free:10m=x").unwrap().threshold, 600.0);
        assert_eq!(parse("hang=x").unwrap().threshold, DEFAULT_HANG_FACTOR);
        assert_eq!(parse("exit=bell").unwrap().action, Action::Bell);
        assert!(parse("boom=x").unwrap_err().contains("one of oom"));
        assert!(parse("oom=").unwrap_err().contains("command is needed"));
        assert!(parse("peak:2=x").unwrap_err().contains("0 to 1"));
        assert!(parse("oom:3=x").unwrap_err().contains("no threshold"));
        assert!(parse("oom").unwrap_err().contains("EVENT=CMD"));
    }
}
