//! Every style and glyph the panels draw with, one field per UI role, so panels never pick a
//! colour or a character themselves. Two switches shape it: colour (off under `NO_COLOR`, when
//! only modifiers such as bold and reverse are used) and ASCII (for terminals and fonts without
//! block characters: every glyph then has a plain 7-bit stand-in).

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
    pub fn new(color: bool, ascii: bool) -> Self {
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

    /// Colour unless `NO_COLOR` is set to a non-empty value (no-color.org).
    pub fn from_env(ascii: bool) -> Self {
        let no_color = std::env::var_os("NO_COLOR");
        Theme::new(color_allowed(no_color.as_deref()), ascii)
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
}
