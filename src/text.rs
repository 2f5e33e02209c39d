//! Text from outside vramscope made safe for every output. Process names and command lines,
//! user names, container ids, channel strings, recordings and NVML's own strings are written
//! by someone else; any of them may hold a terminal escape (a clipboard write, a screen
//! clear), a line break that forges a line of CSV or of a report, or a bidirectional
//! override that shows text other than it is. They are cleaned once, where they enter the
//! model (`model::foreign`, the channel decoder), so the TUI, `--once`, `--csv`, `--json`,
//! reports, plots and `/metrics` all show the same clean text.
//!
//! A tab or line break becomes a space: words stay apart and the text stays on one line.
//! NUL is dropped: it pads C strings and fixed fields, and never meant a character. Every
//! other control character (C0, DEL, C1) and every bidirectional formatting character
//! becomes U+FFFD, the mark `String::from_utf8_lossy` already leaves for bytes that are not
//! UTF-8: the reader sees that something was withheld, where. It is one column wide (as
//! ratatui and terminals count it), so a cleaned text is at most one column per character
//! wider than the raw one would have drawn, and tables stay aligned.

use std::borrow::Cow;

/// What stands in for a character that must not reach an output.
pub const WITHHELD: char = '\u{FFFD}';

/// What `c` becomes, when it cannot be shown as it is: `Some(None)` when it goes.
fn stand_in(c: char) -> Option<Option<char>> {
    match c {
        '\0' => Some(None),
        // Tabs and line breaks, including NEL and the Unicode line and paragraph separators.
        '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}' => {
            Some(Some(' '))
        }
        // Bidirectional formatting: the Arabic letter mark, LRM and RLM, the embeddings and
        // overrides (LRE, RLE, PDF, LRO, RLO) and the isolates (LRI, RLI, FSI, PDI).
        '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {
            Some(Some(WITHHELD))
        }
        c if c.is_control() => Some(Some(WITHHELD)),
        _ => None,
    }
}

/// Whether `text` can be shown as it is.
pub fn is_clean(text: &str) -> bool {
    !text.chars().any(|c| stand_in(c).is_some())
}

/// `text` safe to show; borrowed when it already is, as nearly all text is.
pub fn clean(text: &str) -> Cow<'_, str> {
    if is_clean(text) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .filter_map(|c| stand_in(c).unwrap_or(Some(c)))
            .collect(),
    )
}

/// Cleans `text` where it is; allocates only when something must change.
pub fn clean_in_place(text: &mut String) {
    if let Cow::Owned(cleaned) = clean(text) {
        *text = cleaned;
    }
}

/// Bytes that should be UTF-8, safe to show: what is not UTF-8 becomes U+FFFD too.
pub fn clean_bytes(bytes: &[u8]) -> String {
    let mut text = String::from_utf8_lossy(bytes).into_owned();
    clean_in_place(&mut text);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_controls_are_withheld_and_breaks_become_spaces() {
        assert_eq!(
            clean("\u{1b}]52;c;aGk=\u{7}\u{1b}[2Jx"),
            "\u{FFFD}]52;c;aGk=\u{FFFD}\u{FFFD}[2Jx"
        );
        assert_eq!(clean("a\tb\nc\r\nd\u{2028}e"), "a b c  d e");
        // C1: CSI and NEL as single characters, and DEL.
        assert_eq!(clean("\u{9b}2J\u{85}\u{7f}"), "\u{FFFD}2J \u{FFFD}");
        assert_eq!(clean("padded\0\0"), "padded");
    }

    #[test]
    fn every_bidirectional_format_character_is_withheld() {
        for c in [
            '\u{61c}', '\u{200e}', '\u{200f}', '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}',
            '\u{202e}', '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}',
        ] {
            assert_eq!(clean(&format!("a{c}b")), "a\u{FFFD}b", "U+{:04X}", c as u32);
        }
    }

    #[test]
    fn clean_text_is_borrowed_and_kept_whole() {
        let text = "python train.py --name ünïcode 日本 🙂 a\u{200d}b";
        assert!(matches!(clean(text), Cow::Borrowed(t) if t == text));
        let mut owned = text.to_string();
        let before = owned.as_ptr();
        clean_in_place(&mut owned);
        assert_eq!(owned.as_ptr(), before, "no copy of clean text");
    }

    #[test]
    fn bytes_that_are_not_utf8_are_withheld_as_well() {
        assert_eq!(clean_bytes(b"a\xFFb\x1b[31m"), "a\u{FFFD}b\u{FFFD}[31m");
    }
}
