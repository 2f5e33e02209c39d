//! A command line as the screen shows it. The table names a process by its program and
//! script (`python3 train.py --lr 3`), not by the interpreter's full path, which filled the
//! column and cut the line before the script's name; a command cut at its column ends in a
//! mark so it does not read as the whole; the detail pane wraps the full line.

use ratatui::text::Span;
use std::borrow::Cow;

/// Files run by an interpreter named before them: their name is what tells jobs apart.
const SCRIPT_EXTENSIONS: &[&str] = &[
    ".py", ".sh", ".js", ".mjs", ".rb", ".pl", ".lua", ".jl", ".R", ".r", ".ipynb",
];

/// `python3 train.py --lr 3` for `/opt/conda/bin/python3 /home/u/proj/train.py --lr 3`: the
/// program and the first script argument by their file names, everything else as it is.
pub fn short(command: &str) -> Cow<'_, str> {
    let mut words = command.split(' ');
    let Some(program) = words.next() else {
        return Cow::Borrowed(command);
    };
    let mut out = String::with_capacity(command.len());
    out.push_str(file_name(program));
    let mut script_seen = false;
    for word in words {
        out.push(' ');
        if !script_seen && is_script_path(word) {
            out.push_str(file_name(word));
            script_seen = true;
        } else {
            out.push_str(word);
        }
    }
    if out == command {
        Cow::Borrowed(command)
    } else {
        Cow::Owned(out)
    }
}

fn file_name(path: &str) -> &str {
    match path.rsplit_once('/') {
        Some((_, name)) if !name.is_empty() => name,
        _ => path,
    }
}

fn is_script_path(word: &str) -> bool {
    !word.starts_with('-')
        && word.contains('/')
        && SCRIPT_EXTENSIONS.iter().any(|ext| word.ends_with(ext))
}

/// Cells `text` takes, as ratatui counts them.
pub fn cells(text: &str) -> usize {
    Span::raw(text).width()
}

/// `text` cut to `max` cells with `mark` as its last cell(s), or `None` when it fits whole.
pub fn cut(text: &str, max: usize, mark: &str) -> Option<String> {
    if cells(text) <= max {
        return None;
    }
    let room = max.saturating_sub(cells(mark));
    let mut out = String::with_capacity(max * 3);
    let mut used = 0;
    let mut buf = [0; 4];
    for ch in text.chars() {
        let w = cells(ch.encode_utf8(&mut buf));
        if used + w > room {
            break;
        }
        out.push(ch);
        used += w;
    }
    if cells(mark) <= max {
        out.push_str(mark);
    }
    Some(out)
}

/// `text` in lines of at most `width` cells, the first `first_width` (what a label leaves).
pub fn wrap(text: &str, first_width: usize, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    let mut used = 0;
    let mut limit = first_width.max(1);
    let mut buf = [0; 4];
    for ch in text.chars() {
        let w = cells(ch.encode_utf8(&mut buf));
        if used + w > limit && !line.is_empty() {
            lines.push(std::mem::take(&mut line));
            used = 0;
            limit = width.max(1);
        }
        line.push(ch);
        used += w;
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_and_script_by_name() {
        assert_eq!(
            short("/root/.pyenv/versions/3.11.7/bin/python3 /home/u/proj/train.py --lr 3e-4"),
            "python3 train.py --lr 3e-4"
        );
        assert_eq!(short("python train.py"), "python train.py");
        assert_eq!(
            short("/usr/bin/python3 -m torch.distributed.run --out /data/x.py"),
            "python3 -m torch.distributed.run --out x.py",
        );
        assert_eq!(short("ollama serve"), "ollama serve");
        assert_eq!(short("/usr/bin/"), "/usr/bin/");
        assert_eq!(short(""), "");
    }

    #[test]
    fn a_cut_ends_in_the_mark_and_fits() {
        assert_eq!(cut("python train.py", 20, "…"), None);
        assert_eq!(
            cut("python train.py", 10, "…").as_deref(),
            Some("python tr…")
        );
        assert_eq!(
            cut("python train.py", 10, "~").as_deref(),
            Some("python tr~")
        );
        let wide = cut("训练训练训练", 5, "…").unwrap_or_default();
        assert_eq!(wide, "训练…");
        assert!(cells(&wide) <= 5);
    }

    #[test]
    fn wrapping_keeps_every_character() {
        let text = "python3 train.py --config configs/big.yaml --epochs 90";
        let lines = wrap(text, 10, 20);
        assert_eq!(lines.concat(), text);
        assert!(cells(&lines[0]) <= 10);
        assert!(lines[1..].iter().all(|l| cells(l) <= 20));
        assert_eq!(wrap("", 10, 20), vec![String::new()]);
    }
}
