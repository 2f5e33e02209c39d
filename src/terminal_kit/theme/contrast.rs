//! Contrast ratios (WCAG 2) of the colours the light theme uses, so its readability on a white
//! background is checked rather than judged by eye. Only the 256-colour palette's fixed part
//! (16-255) has known values: the first sixteen are whatever each terminal makes them.

use ratatui::style::Color;

/// WCAG's minimum for text, and for graphics such as bars, borders and chart marks.
pub const TEXT_MINIMUM: f64 = 4.5;
pub const GRAPHIC_MINIMUM: f64 = 3.0;

/// The red, green and blue of `color`, where it has fixed values: indexed colours 16-255, RGB
/// colours. `None` for the terminal's own colours (named ones, indices 0-15, `Reset`).
pub fn rgb(color: Color) -> Option<[u8; 3]> {
    match color {
        Color::Rgb(r, g, b) => Some([r, g, b]),
        Color::Indexed(index @ 16..=231) => {
            // The 6x6x6 cube: levels 0, 95, 135, 175, 215, 255.
            let level = |n: u8| if n == 0 { 0 } else { 55 + 40 * n };
            let n = index - 16;
            Some([level(n / 36), level(n / 6 % 6), level(n % 6)])
        }
        Color::Indexed(index @ 232..=255) => {
            let grey = 8 + 10 * (index - 232);
            Some([grey, grey, grey])
        }
        _ => None,
    }
}

/// Relative luminance, 0 (black) to 1 (white).
fn luminance([r, g, b]: [u8; 3]) -> f64 {
    let linear = |c: u8| {
        let c = f64::from(c) / 255.0;
        if c <= 0.040_45 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    };
    0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b)
}

/// The contrast ratio of two colours with fixed values, 1 to 21.
pub fn ratio(a: [u8; 3], b: [u8; 3]) -> f64 {
    let (la, lb) = (luminance(a), luminance(b));
    (la.max(lb) + 0.05) / (la.min(lb) + 0.05)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn palette_values_and_ratios_match_the_known_ones() {
        assert_eq!(rgb(Color::Indexed(16)), Some([0, 0, 0]));
        assert_eq!(rgb(Color::Indexed(231)), Some([255, 255, 255]));
        assert_eq!(rgb(Color::Indexed(25)), Some([0, 95, 175]));
        assert_eq!(rgb(Color::Indexed(232)), Some([8, 8, 8]));
        assert_eq!(rgb(Color::Indexed(255)), Some([238, 238, 238]));
        assert_eq!(rgb(Color::Indexed(3)), None, "the terminal's own");
        assert_eq!(rgb(Color::Yellow), None);
        assert!((ratio([0, 0, 0], [255, 255, 255]) - 21.0).abs() < 1e-9);
        assert!((ratio([255, 255, 255], [255, 255, 255]) - 1.0).abs() < 1e-9);
        // #767676 is the usual example of the lightest grey with 4.5:1 on white.
        let grey = ratio([0x76, 0x76, 0x76], [255, 255, 255]);
        assert!((4.5..4.6).contains(&grey), "{grey}");
    }
}
