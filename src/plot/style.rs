//! Colours, type sizes and the text-width estimate every layout decision uses.
//!
//! Widths are estimated from the character count rather than measured with a font: SVG
//! needs no font file (the viewer renders its text), and SVG and PNG get the same layout.

use super::contents::Role;
use plotters::style::{FontFamily, FontStyle, IntoFont, RGBColor, TextStyle};

pub const BACKGROUND: RGBColor = RGBColor(255, 255, 255);
pub const INK: RGBColor = RGBColor(33, 33, 33);
pub const MUTED: RGBColor = RGBColor(110, 110, 110);
pub const GRID: RGBColor = RGBColor(225, 225, 225);
pub const GPU_USED: RGBColor = RGBColor(40, 40, 40);
pub const LIMIT: RGBColor = RGBColor(150, 20, 20);
pub const OOM: RGBColor = RGBColor(214, 39, 40);
pub const DAMAGE: RGBColor = RGBColor(190, 30, 30);
/// Every other step: light enough that lines and grid stay readable over it.
pub const STEP_SHADE: RGBColor = RGBColor(232, 238, 247);

/// Distinct colours for the instrumented processes' series, red left out (OOMs and limit).
const PALETTE: [RGBColor; 9] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(23, 190, 207),
    RGBColor(227, 119, 194),
    RGBColor(188, 189, 34),
    RGBColor(127, 127, 127),
];

/// Font sizes in plotters' unit (an em is size / 1.24 pixels).
pub const TITLE_SIZE: f64 = 24.0;
pub const SUBTITLE_SIZE: f64 = 17.0;
pub const HEADER_SIZE: f64 = 18.0;
pub const TEXT_SIZE: f64 = 15.0;
pub const SMALL_SIZE: f64 = 13.0;

/// A series' colour: by process, then by what it measures.
pub fn colour(role: Role, process: Option<usize>) -> RGBColor {
    let offset = match role {
        Role::GpuUsed => return GPU_USED,
        Role::Allocated => 0,
        Role::Reserved => 1,
        Role::ProcessUsed => 2,
    };
    PALETTE[(process.unwrap_or(0) * 3 + offset) % PALETTE.len()]
}

/// A series' line width in pixels: the GPU's total and the allocator's figures stand out.
pub fn stroke(role: Role) -> u32 {
    match role {
        Role::ProcessUsed => 1,
        Role::GpuUsed | Role::Allocated | Role::Reserved => 2,
    }
}

pub fn text(size: f64, colour: RGBColor) -> TextStyle<'static> {
    (FontFamily::SansSerif, size).into_font().color(&colour)
}

pub fn bold(size: f64, colour: RGBColor) -> TextStyle<'static> {
    (FontFamily::SansSerif, size, FontStyle::Bold)
        .into_font()
        .color(&colour)
}

/// Estimated width in pixels of `text` at `size`: an average sans-serif glyph is about 0.55
/// em wide, rounded up so that estimates err towards more room.
pub fn text_width(text: &str, size: f64) -> i32 {
    let em = size / 1.24;
    (text.chars().count() as f64 * em * 0.56).ceil() as i32
}

/// Line height in pixels of text at `size`.
pub fn line_height(size: f64) -> i32 {
    (size / 1.24 * 1.3).ceil() as i32
}
