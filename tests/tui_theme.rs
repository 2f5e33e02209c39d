//! The light theme drawn: a reviewed snapshot of a screen with its colours, and every cell of
//! every screen checked for contrast against the background it lands on (a white terminal
//! where the theme sets none), since a role readable alone may not be on another's background.

#[allow(
    dead_code,
    reason = "shared by several test crates, each of which uses a different part"
)]
mod tui_fixtures;

use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};
use tui_fixtures::*;
use vramscope::terminal_kit::theme::contrast::{GRAPHIC_MINIMUM, TEXT_MINIMUM, ratio, rgb};
use vramscope::terminal_kit::theme::{Theme, ThemeName};
use vramscope::tui::ui_state::{KillRequest, KillSignal, Mode};

fn light() -> Theme {
    Theme::named(ThemeName::Light, true, false)
}

/// A style as the snapshot writes it: `fg/bg` by palette index (`-`: the terminal's own)
/// and `b` for bold.
fn style_name(fg: Color, bg: Color, modifier: Modifier) -> String {
    let colour = |c: Color| match c {
        Color::Indexed(i) => i.to_string(),
        Color::Reset => "-".to_string(),
        other => format!("{other:?}"),
    };
    let mut name = format!("{}/{}", colour(fg), colour(bg));
    if modifier.contains(Modifier::BOLD) {
        name.push('b');
    }
    name
}

/// The buffer as text with a `‹style›` mark wherever the style changes.
fn styled_text(buffer: &Buffer) -> String {
    let width = usize::from(buffer.area.width);
    let mut out = String::new();
    let mut last = String::new();
    for row in buffer.content.chunks(width) {
        let mut line = String::new();
        for cell in row {
            let name = style_name(cell.fg, cell.bg, cell.modifier);
            if name != last {
                line.push_str(&format!("‹{name}›"));
                last = name;
            }
            line.push_str(cell.symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[test]
fn two_gpus_under_the_light_theme_at_80x24() {
    let buffer = draw(&two_gpus(), &ui(), &light(), 80, 24);
    let styled = styled_text(&buffer);
    insta::assert_snapshot!("light_two_gpus_80x24", styled);
    // The same words as the dark theme draws: a theme changes colours only.
    assert_eq!(text(&buffer), screen(&two_gpus(), &ui(), 80, 24));
    assert!(
        styled.contains("‹25/-b›vramscope"),
        "title in the light blue:\n{styled}"
    );
    assert!(
        !styled.contains("Cyan") && !styled.contains("White"),
        "no named colour:\n{styled}"
    );
}

#[test]
fn every_cell_of_every_light_screen_is_readable_on_its_background() {
    let theme = light();
    let white = [255, 255, 255];
    let black = [0, 0, 0];
    let kill = Mode::ConfirmKill(KillRequest {
        pid: 4242,
        starttime: 1,
        signal: KillSignal::Term,
        user: "alice".into(),
        command: "python train.py".into(),
    });
    let mut checked = 0;
    for mode in [
        Mode::Normal,
        Mode::Help,
        Mode::Detail,
        Mode::Filter,
        Mode::Reasons,
        kill,
    ] {
        let mut ui = ui();
        ui.mode = mode.clone();
        for m in [two_gpus(), many_gpus(8), faulty_gpus(), no_nvml()] {
            for (w, h) in [(80, 24), (200, 50)] {
                let buffer = draw(&m, &ui, &theme, w, h);
                for cell in &buffer.content {
                    let symbol = cell.symbol();
                    if symbol.trim().is_empty() {
                        continue;
                    }
                    // The terminal's own foreground is dark and its background white: the
                    // theme is for a light terminal.
                    let fg = if cell.fg == Color::Reset {
                        Some(black)
                    } else {
                        rgb(cell.fg)
                    };
                    let bg = if cell.bg == Color::Reset {
                        Some(white)
                    } else {
                        rgb(cell.bg)
                    };
                    let (Some(fg), Some(bg)) = (fg, bg) else {
                        panic!(
                            "{mode:?} {w}x{h}: {symbol:?} in a terminal's own colour {:?}/{:?}",
                            cell.fg, cell.bg
                        );
                    };
                    let text = symbol.chars().any(char::is_alphanumeric);
                    let minimum = if text { TEXT_MINIMUM } else { GRAPHIC_MINIMUM };
                    let r = ratio(fg, bg);
                    assert!(
                        r >= minimum,
                        "{mode:?} {w}x{h}: {symbol:?} {:?} on {:?}: {r:.2} < {minimum}",
                        cell.fg,
                        cell.bg
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 10_000, "{checked} cells checked");
}
