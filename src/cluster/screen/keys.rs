//! Keys, as the monitor's: `q` quits, `?` helps, `/` filters (Esc clears), `s`/`S` sort and
//! reverse, arrows and pages select, Enter opens a node, space pauses; `v` or Tab switches
//! between the job and node views.

use super::state::{Line, Mode, Ui};
use crate::cluster::options::ClusterView;
use crate::cluster::view::Screen;
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ignored,
    Redraw,
    FullRedraw,
    Quit,
    Suspend,
}

pub fn handle(key: KeyEvent, ui: &mut Ui, screen: &Screen, lines: &[Line]) -> Outcome {
    if key.kind == KeyEventKind::Release {
        return Outcome::Ignored;
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    match (ctrl, key.code) {
        (true, KeyCode::Char('c')) => return Outcome::Quit,
        (true, KeyCode::Char('z')) => return Outcome::Suspend,
        (true, KeyCode::Char('l')) => return Outcome::FullRedraw,
        _ => {}
    }
    match ui.mode {
        Mode::Help => {
            match key.code {
                KeyCode::Down => ui.help_scroll = ui.help_scroll.saturating_add(1),
                KeyCode::Up => ui.help_scroll = ui.help_scroll.saturating_sub(1),
                KeyCode::Char('q') => return Outcome::Quit,
                _ => {
                    ui.mode = Mode::Normal;
                    ui.help_scroll = 0;
                }
            }
            Outcome::Redraw
        }
        Mode::Filter => {
            match key.code {
                KeyCode::Enter => ui.mode = Mode::Normal,
                KeyCode::Esc => {
                    ui.filter.clear();
                    ui.mode = Mode::Normal;
                }
                KeyCode::Backspace => {
                    ui.filter.pop();
                }
                KeyCode::Char(c) if !c.is_control() => ui.filter.push(c),
                _ => return Outcome::Ignored,
            }
            ui.scroll = 0;
            Outcome::Redraw
        }
        Mode::Normal => normal(key.code, ui, screen, lines),
    }
}

fn normal(code: KeyCode, ui: &mut Ui, screen: &Screen, lines: &[Line]) -> Outcome {
    match code {
        KeyCode::Char('q') => return Outcome::Quit,
        KeyCode::Char('?') | KeyCode::F(1) | KeyCode::Char('h') => ui.mode = Mode::Help,
        KeyCode::Char('/') => ui.mode = Mode::Filter,
        KeyCode::Esc => ui.filter.clear(),
        KeyCode::Char('v') | KeyCode::Tab => {
            ui.view = match ui.view {
                ClusterView::Jobs => ClusterView::Nodes,
                ClusterView::Nodes => ClusterView::Jobs,
            };
            ui.view_chosen = true;
            ui.selected = None;
            ui.scroll = 0;
        }
        KeyCode::Char('s') => ui.sort = ui.sort.next(),
        KeyCode::Char('S') => ui.reversed = !ui.reversed,
        KeyCode::Char(' ') => ui.paused = !ui.paused,
        KeyCode::Enter => {
            let node = lines
                .iter()
                .find(|l| {
                    l.key(screen)
                        .is_some_and(|k| Some(&k) == ui.selected.as_ref())
                })
                .and_then(|l| match l {
                    Line::Node(i) => screen.nodes.get(*i).map(|n| n.node.clone()),
                    _ => None,
                });
            if let Some(node) = node
                && !ui.expanded.remove(&node)
            {
                ui.expanded.insert(node);
            }
        }
        KeyCode::Up | KeyCode::Char('k') => select(ui, screen, lines, -1),
        KeyCode::Down | KeyCode::Char('j') => select(ui, screen, lines, 1),
        KeyCode::PageUp => select(ui, screen, lines, -10),
        KeyCode::PageDown => select(ui, screen, lines, 10),
        KeyCode::Home => select(ui, screen, lines, i64::MIN / 2),
        KeyCode::End => select(ui, screen, lines, i64::MAX / 2),
        _ => return Outcome::Ignored,
    }
    Outcome::Redraw
}

/// Moves the selection `by` selectable lines.
fn select(ui: &mut Ui, screen: &Screen, lines: &[Line], by: i64) {
    let keys: Vec<String> = lines.iter().filter_map(|l| l.key(screen)).collect();
    if keys.is_empty() {
        return;
    }
    let at = ui
        .selected
        .as_ref()
        .and_then(|s| keys.iter().position(|k| k == s))
        .map_or(-1, |p| p as i64);
    let to = (at + by).clamp(0, keys.len() as i64 - 1) as usize;
    ui.selected = keys.get(to).cloned();
}
