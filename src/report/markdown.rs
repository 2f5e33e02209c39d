//! Foreign text inside the Markdown report. A command line or GPU name holding `|` would
//! forge a table column, a backtick a code span, `[..](..)` a link and `<..>` raw HTML in
//! whatever renders the report (a pull request, a wiki). Each such character is
//! backslash-escaped, which CommonMark and GitHub's tables read back as the character itself.

use std::borrow::Cow;

/// The ASCII punctuation that can start or end Markdown syntax inside a line or table cell.
const SYNTAX: &[char] = &[
    '\\', '`', '*', '_', '[', ']', '<', '>', '|', '~', '#', '&', '!', '(', ')',
];

/// `text` as literal Markdown inline text: syntax characters escaped, line breaks as spaces
/// (the model already made them so; kept here so a table row can never be split).
pub fn literal(text: &str) -> Cow<'_, str> {
    if !text.contains(SYNTAX) && !text.contains(['\n', '\r']) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' | '\r' => out.push(' '),
            c if SYNTAX.contains(&c) => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_as_it_is() {
        assert!(matches!(
            literal("python train.py --lr 0.1"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn table_and_inline_syntax_is_escaped() {
        assert_eq!(literal("a | b"), "a \\| b");
        assert_eq!(literal("`rm -rf`"), "\\`rm -rf\\`");
        assert_eq!(literal("[x](http://e)"), "\\[x\\]\\(http://e\\)");
        assert_eq!(literal("<img src=x>"), "\\<img src=x\\>");
        assert_eq!(literal("a\\|b"), "a\\\\\\|b");
        assert_eq!(literal("one\ntwo\rthree"), "one two three");
    }
}
