//! Every style and glyph the panels draw with, one field per UI role, so panels never pick a
//! colour or a character themselves. Three switches shape it: the palette (`--theme`: `dark`
//! for a dark terminal background, `light` for a white one), colour (off under `NO_COLOR`,
//! whatever the palette, when only modifiers such as bold and reverse are used) and ASCII (for
//! terminals and fonts without block characters: every glyph then has a plain 7-bit stand-in).

pub mod contrast;

use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols::border;

/// Border set drawn with `+`, `-` and `|` for `--ascii`; ratatui ships no such set.
const ASCII_BORDER: border::Set<'static> = border::Set {
    top_left: "+",
    top_right: "+",
    bottom_left: "+",
    bottom_right: "+",
    vertical_left: "|",
    vertical_right: "|",
    horizontal_top: "-",
    horizontal_bottom: "-",
};

/// The characters panels draw with.
#[derive(Clone, Debug)]
pub struct Glyphs {
    /// Filled and empty cells of a horizontal bar.
    pub bar_fill: &'static str,
    pub bar_empty: &'static str,
    /// Brackets around a bar.
    pub bar_left: &'static str,
    pub bar_right: &'static str,
    /// Sparkline levels from lowest to highest; index 0 is blank and marks "no data", so a
    /// reading of zero still draws the first visible level and a gap stays distinguishable.
    pub spark: &'static [&'static str],
    /// Drawn on a plot at the column holding the window's peak.
    pub peak: &'static str,
    pub sort_ascending: &'static str,
    pub sort_descending: &'static str,
    /// Separates groups of figures on one line.
    pub separator: &'static str,
    /// Appended to a pid that is not visible from vramscope's pid namespace.
    pub hidden_pid: &'static str,
    pub degree_c: &'static str,
    pub border: border::Set<'static>,
    /// The allocator breakdown bar's three parts (allocated, allocator cache, outside the
    /// allocator): distinct shapes, so the parts read apart without colour.
    pub breakdown: [&'static str; 3],
    /// On the allocator chart's event line: a step's end, an OOM.
    pub step_tick: &'static str,
    pub oom: &'static str,
    /// Ends text cut at its column, so it does not read as the whole.
    pub cut: &'static str,
}

impl Glyphs {
    pub fn unicode() -> Self {
        Glyphs {
            bar_fill: "█",
            bar_empty: "░",
            bar_left: "▕",
            bar_right: "▏",
            spark: &[" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"],
            peak: "▲",
            sort_ascending: "▲",
            sort_descending: "▼",
            separator: "│",
            hidden_pid: "*",
            degree_c: "°C",
            border: border::PLAIN,
            breakdown: ["█", "▓", "░"],
            step_tick: "╵",
            oom: "✖",
            cut: "…",
        }
    }

    pub fn ascii() -> Self {
        Glyphs {
            bar_fill: "#",
            bar_empty: ".",
            bar_left: "[",
            bar_right: "]",
            spark: &[" ", ".", ":", "-", "=", "+", "*", "#", "%", "@"],
            peak: "^",
            sort_ascending: "^",
            sort_descending: "v",
            separator: "|",
            hidden_pid: "*",
            degree_c: "C",
            border: ASCII_BORDER,
            breakdown: ["#", "=", "."],
            step_tick: "|",
            oom: "X",
            cut: "~",
        }
    }

    /// The sparkline glyph for `value` on a `0..=max` scale; at least the first visible level.
    pub fn spark_level(&self, value: f64, max: f64) -> &'static str {
        let visible = self.spark.len().saturating_sub(1);
        if visible == 0 {
            return "";
        }
        let fraction = if max > 0.0 && value.is_finite() {
            (value / max).clamp(0.0, 1.0)
        } else {
            0.0
        };
        // Rounds up so any non-zero reading is taller than a zero one.
        let level = ((fraction * visible as f64).ceil() as usize).clamp(1, visible);
        self.spark.get(level).copied().unwrap_or("")
    }
}

/// The palettes `--theme` and the configuration file's `theme` key choose from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ThemeName {
    /// For a dark terminal background (the terminal's own colours).
    #[default]
    Dark,
    /// For a white or light terminal background.
    // Colours of the 256-colour palette, whose values are fixed (unlike the first sixteen,
    // which each terminal redefines), so their contrast against white is known and checked.
    Light,
}

/// One style per UI role.
#[derive(Clone, Debug)]
pub struct Theme {
    pub color: bool,
    pub ascii: bool,
    /// The program name and panel titles.
    pub title: Style,
    /// Words naming a figure (`mem`, `util`, `host RAM`).
    pub label: Style,
    /// The figures themselves.
    pub value: Style,
    /// Secondary text: exited processes, expected absences, `n/a`.
    pub dim: Style,
    pub warn: Style,
    pub crit: Style,
    pub ok: Style,
    pub selected: Style,
    pub header_row: Style,
    pub bar_fill: Style,
    pub bar_empty: Style,
    pub sparkline: Style,
    /// Second sparkline on a panel (utilisation, host RSS), so the two read apart.
    pub sparkline_alt: Style,
    pub peak_marker: Style,
    pub status_error: Style,
    pub border: Style,
    /// Key names in the help overlay and the status hint.
    pub key: Style,
    /// The PAUSED marker.
    pub paused: Style,
    pub glyphs: Glyphs,
}

impl Theme {
    /// The dark palette (the default).
    pub fn new(color: bool, ascii: bool) -> Self {
        Theme::named(ThemeName::Dark, color, ascii)
    }

    /// The palette `name`; without colour every palette is the same modifiers-only theme.
    pub fn named(name: ThemeName, color: bool, ascii: bool) -> Self {
        let glyphs = if ascii {
            Glyphs::ascii()
        } else {
            Glyphs::unicode()
        };
        let plain = Style::new();
        let bold = Style::new().add_modifier(Modifier::BOLD);
        if !color {
            // NO_COLOR: modifiers only, never a foreground or background colour.
            return Theme {
                color,
                ascii,
                title: bold,
                label: plain,
                value: plain,
                dim: Style::new().add_modifier(Modifier::DIM),
                warn: bold,
                crit: bold.add_modifier(Modifier::REVERSED),
                ok: plain,
                selected: Style::new().add_modifier(Modifier::REVERSED),
                header_row: bold.add_modifier(Modifier::UNDERLINED),
                bar_fill: plain,
                bar_empty: Style::new().add_modifier(Modifier::DIM),
                sparkline: plain,
                sparkline_alt: plain,
                peak_marker: bold,
                status_error: bold,
                border: plain,
                key: bold,
                paused: bold.add_modifier(Modifier::REVERSED),
                glyphs,
            };
        }
        if name == ThemeName::Light {
            return light(ascii, glyphs);
        }
        Theme {
            color,
            ascii,
            title: bold.fg(Color::Cyan),
            label: Style::new().fg(Color::Gray),
            value: Style::new().fg(Color::White),
            dim: Style::new().fg(Color::DarkGray),
            warn: Style::new().fg(Color::Yellow),
            crit: bold.fg(Color::Red),
            ok: Style::new().fg(Color::Green),
            selected: Style::new().bg(Color::Blue).fg(Color::White),
            header_row: bold.fg(Color::Black).bg(Color::Cyan),
            bar_fill: Style::new().fg(Color::Green),
            bar_empty: Style::new().fg(Color::DarkGray),
            sparkline: Style::new().fg(Color::Cyan),
            sparkline_alt: Style::new().fg(Color::Magenta),
            peak_marker: bold.fg(Color::Red),
            status_error: Style::new().fg(Color::Red),
            border: Style::new().fg(Color::DarkGray),
            key: bold.fg(Color::Yellow),
            paused: bold.fg(Color::Black).bg(Color::Yellow),
            glyphs,
        }
    }

    /// The dark palette in colour unless `NO_COLOR` is set to a non-empty value
    /// (no-color.org).
    pub fn from_env(ascii: bool) -> Self {
        Theme::from_env_named(ThemeName::Dark, ascii)
    }

    /// The palette `name` in colour unless `NO_COLOR` is set to a non-empty value: NO_COLOR
    /// outranks a chosen theme.
    pub fn from_env_named(name: ThemeName, ascii: bool) -> Self {
        let no_color = std::env::var_os("NO_COLOR");
        Theme::named(name, color_allowed(no_color.as_deref()), ascii)
    }

    /// Bar colour by how full something is: calm, then warning from 75 %, critical from 90 %.
    pub fn level(&self, percent: f64) -> Style {
        if percent >= 90.0 {
            self.crit
        } else if percent >= 75.0 {
            self.warn
        } else {
            self.bar_fill
        }
    }
}

/// The light palette: every colour from the fixed part of the 256-colour palette (16-255) and
/// dark enough on white (tests below check each role's contrast ratio).
fn light(ascii: bool, glyphs: Glyphs) -> Theme {
    let bold = Style::new().add_modifier(Modifier::BOLD);
    let fg = |index: u8| Style::new().fg(Color::Indexed(index));
    let black = Color::Indexed(16);
    let white = Color::Indexed(231);
    let blue = 25;
    let red = 160;
    Theme {
        color: true,
        ascii,
        title: bold.fg(Color::Indexed(blue)),
        label: fg(238),
        value: fg(16),
        dim: fg(242),
        warn: fg(130),
        crit: bold.fg(Color::Indexed(red)),
        ok: fg(28),
        selected: Style::new().bg(Color::Indexed(153)).fg(black),
        header_row: bold.fg(white).bg(Color::Indexed(blue)),
        bar_fill: fg(28),
        bar_empty: fg(246),
        sparkline: fg(31),
        sparkline_alt: fg(90),
        peak_marker: bold.fg(Color::Indexed(red)),
        status_error: fg(red),
        border: fg(245),
        key: bold.fg(Color::Indexed(94)),
        paused: bold.fg(black).bg(Color::Indexed(220)),
        glyphs,
    }
}

/// Whether colour may be used given the value of `NO_COLOR`: any non-empty value forbids it.
fn color_allowed(no_color: Option<&std::ffi::OsStr>) -> bool {
    no_color.is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_color_forbids_colour_only_when_non_empty() {
        use std::ffi::OsStr;
        assert!(color_allowed(None));
        assert!(color_allowed(Some(OsStr::new(""))));
        assert!(!color_allowed(Some(OsStr::new("1"))));
        assert!(
            !color_allowed(Some(OsStr::new("0"))),
            "any value counts, even 0"
        );
    }

    #[test]
    fn spark_levels_keep_zero_visible_and_clamp() {
        let g = Glyphs::unicode();
        assert_eq!(g.spark_level(0.0, 100.0), "▁");
        assert_eq!(g.spark_level(100.0, 100.0), "█");
        assert_eq!(g.spark_level(500.0, 100.0), "█");
        assert_eq!(g.spark_level(5.0, 0.0), "▁");
        assert_eq!(Glyphs::ascii().spark_level(f64::NAN, 1.0), ".");
    }

    #[test]
    fn no_color_theme_sets_no_colour() {
        let t = Theme::new(false, true);
        for style in [
            t.title,
            t.crit,
            t.selected,
            t.header_row,
            t.peak_marker,
            t.paused,
        ] {
            assert_eq!(style.fg, None);
            assert_eq!(style.bg, None);
        }
    }

    /// Each role of the light palette with what it draws: text must reach 4.5:1 against the
    /// background it is drawn on (its own, else white), graphics 3:1.
    #[test]
    fn light_palette_is_readable_on_white_in_every_role() {
        use crate::terminal_kit::theme::contrast::{GRAPHIC_MINIMUM, TEXT_MINIMUM, ratio, rgb};
        let t = Theme::named(ThemeName::Light, true, false);
        let white = [255, 255, 255];
        let text = TEXT_MINIMUM;
        let graphic = GRAPHIC_MINIMUM;
        for (role, style, minimum) in [
            ("title", t.title, text),
            ("label", t.label, text),
            ("value", t.value, text),
            ("dim", t.dim, text),
            ("warn", t.warn, text),
            ("crit", t.crit, text),
            ("ok", t.ok, text),
            ("selected", t.selected, text),
            ("header_row", t.header_row, text),
            ("bar_fill", t.bar_fill, graphic),
            ("bar_empty", t.bar_empty, graphic),
            ("sparkline", t.sparkline, graphic),
            ("sparkline_alt", t.sparkline_alt, graphic),
            ("peak_marker", t.peak_marker, text),
            ("status_error", t.status_error, text),
            ("border", t.border, graphic),
            ("key", t.key, text),
            ("paused", t.paused, text),
        ] {
            let fg = style.fg.and_then(rgb);
            let fg = fg.unwrap_or_else(|| panic!("{role}: no fixed foreground: {style:?}"));
            let bg = style.bg.map_or(Some(white), rgb);
            let bg = bg.unwrap_or_else(|| panic!("{role}: background not fixed: {style:?}"));
            let r = ratio(fg, bg);
            assert!(r >= minimum, "{role}: contrast {r:.2} < {minimum}");
        }
    }

    #[test]
    fn no_color_outranks_the_light_palette() {
        let light = Theme::named(ThemeName::Light, false, false);
        let dark = Theme::named(ThemeName::Dark, false, false);
        for (a, b) in [
            (light.title, dark.title),
            (light.selected, dark.selected),
            (light.header_row, dark.header_row),
            (light.paused, dark.paused),
        ] {
            assert_eq!(a, b);
            assert_eq!((a.fg, a.bg), (None, None));
        }
        assert!(!light.color);
    }
}
