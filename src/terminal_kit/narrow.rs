//! Symbols known to be one column wide without asking unicode-width. The frame diff and the
//! text writers run over every cell of every frame; most of our symbols are ASCII, bar and
//! sparkline blocks, borders and the degree sign, and a width lookup for each was a large
//! part of their cost.

/// Symbols one column wide without asking unicode-width: ASCII, U+00A0..=U+00FF but the soft
/// hyphen (the degree sign of every temperature is there), and the box drawing, block
/// element and braille characters that borders, bars and sparklines are drawn with. A test
/// checks every one against ratatui. None of them joins the character before it into one
/// grapheme, so a string of them is one cell per character. Any single byte passes, ASCII
/// controls too: ratatui sizes every one-byte symbol as one column, and the writers drop
/// controls before they get here.
pub fn known_narrow(symbol: &[u8]) -> bool {
    match *symbol {
        [_] => true,
        [0xC2, 0xA0..=0xAC | 0xAE..=0xBF] | [0xC3, 0x80..=0xBF] => true,
        // U+2500..=U+257F box drawing, U+2580..=U+259F block elements (not the geometric shapes
        // after them, some of which are wide emoji).
        [0xE2, 0x94 | 0x95, _] => true,
        [0xE2, 0x96, third] => third <= 0x9F,
        // U+2800..=U+28FF braille.
        [0xE2, 0xA0..=0xA3, _] => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::buffer::CellWidth;

    #[test]
    fn every_symbol_taken_as_narrow_is_one_column_by_ratatui() {
        let mut checked = 0;
        for c in (' '..='~').chain('\u{A0}'..='\u{2FFF}') {
            let mut utf8 = [0; 4];
            let symbol = c.encode_utf8(&mut utf8);
            if known_narrow(symbol.as_bytes()) {
                assert_eq!(symbol.cell_width(), 1, "{c:?} (U+{:04X})", u32::from(c));
                checked += 1;
            }
        }
        // ASCII 95, Latin-1 less the soft hyphen 95, box drawing and blocks 160, braille 256.
        assert_eq!(checked, 95 + 95 + 160 + 256);
        assert!(!known_narrow("◽".as_bytes()) && !known_narrow("\u{AD}".as_bytes()));
    }
}
