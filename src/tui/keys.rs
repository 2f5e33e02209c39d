//! Key handling, one function per mode. Keys change `UiState`; anything that reaches outside
//! the UI (quitting, sending a signal, changing the sampling period) comes back as an
//! `Outcome` for the event loop to carry out.

use super::rows::{TableRow, in_pods, ranked};
use super::ui_state::{AttachRequest, KillRequest, KillSignal, Mode, SortColumn, UiState};
use crate::model::{NA, Snapshot};
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use std::sync::Arc;

/// What the loop must do after a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing changed on screen.
    Ignored,
    Redraw,
    /// Clear and repaint every cell (Ctrl-L).
    FullRedraw,
    Quit,
    /// Ctrl-Z: give the terminal back and stop.
    Suspend,
    Kill(KillRequest),
    /// `vramscope attach` (or detach) the confirmed process.
    Attach(AttachRequest),
    ResetPeaks,
    /// `+` (shorter) or `-` (longer): the next refresh period on the ladder.
    StepInterval {
        slower: bool,
    },
    /// A replay's time cursor.
    Replay(crate::replay::Command),
    /// Replace the (unusable) live data with the bundled demo recording.
    PlayDemo,
    /// Leave the demo for the live screen it was started from.
    LeaveDemo,
    /// Ask the selected process's writer for a memory snapshot through its channel.
    AskSnapshot {
        pid: u32,
        process: crate::model::allocator::RowProcess,
    },
}

/// Refresh periods `+` and `-` step through.
const INTERVALS_MS: [u64; 8] = [100, 250, 500, 1_000, 2_000, 5_000, 10_000, 30_000];

pub fn handle(
    key: KeyEvent,
    ui: &mut UiState,
    rows: &[TableRow],
    snapshot: &Arc<Snapshot>,
) -> Outcome {
    if key.kind == KeyEventKind::Release {
        return Outcome::Ignored;
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    if ctrl && key.code == KeyCode::Char('c') {
        return Outcome::Quit;
    }
    if ctrl && key.code == KeyCode::Char('z') {
        return Outcome::Suspend;
    }
    if ctrl && key.code == KeyCode::Char('l') {
        return Outcome::FullRedraw;
    }
    ui.flash = None;
    match ui.mode.clone() {
        Mode::Filter => filter_key(key, ui),
        Mode::Help => {
            let end = ui.help_scroll_end.get();
            // A help that fits has nothing to scroll: its title says any key closes it, the
            // arrows too, and a key that closes it does nothing else.
            let scrolls = end > 0;
            let to = match key.code {
                _ if !scrolls => None,
                KeyCode::Up => Some(ui.help_scroll.saturating_sub(1)),
                KeyCode::Down => Some(ui.help_scroll.saturating_add(1)),
                KeyCode::PageUp => Some(ui.help_scroll.saturating_sub(10)),
                KeyCode::PageDown => Some(ui.help_scroll.saturating_add(10)),
                KeyCode::Home => Some(0),
                KeyCode::End => Some(end),
                _ => None,
            };
            if let Some(to) = to {
                ui.help_scroll = to.min(end);
                return Outcome::Redraw;
            }
            ui.mode = Mode::Normal;
            ui.help_scroll = 0;
            if key.code == KeyCode::Char('q') {
                quit(ui)
            } else {
                Outcome::Redraw
            }
        }
        Mode::ConfirmKill(request) => {
            ui.mode = Mode::Normal;
            if matches!(key.code, KeyCode::Char('y') | KeyCode::Char('Y')) {
                Outcome::Kill(request)
            } else {
                ui.flash = Some("kill cancelled".into());
                Outcome::Redraw
            }
        }
        Mode::ConfirmAttach(request) => {
            ui.mode = Mode::Normal;
            if matches!(key.code, KeyCode::Char('y') | KeyCode::Char('Y')) {
                Outcome::Attach(request)
            } else {
                ui.flash = Some("attach cancelled".into());
                Outcome::Redraw
            }
        }
        Mode::Detail => match key.code {
            KeyCode::Esc | KeyCode::Enter => {
                ui.mode = Mode::Normal;
                Outcome::Redraw
            }
            _ => normal_key(key, ui, rows, snapshot),
        },
        Mode::Normal => normal_key(key, ui, rows, snapshot),
        Mode::Reasons => reasons_key(key, ui),
    }
}

fn normal_key(
    key: KeyEvent,
    ui: &mut UiState,
    rows: &[TableRow],
    snapshot: &Arc<Snapshot>,
) -> Outcome {
    if ui.time_cursor
        && let Some(command) = cursor_key(key.code)
    {
        return Outcome::Replay(command);
    }
    match key.code {
        KeyCode::Char('z') => zoom(ui, -1),
        KeyCode::Char('Z') => zoom(ui, 1),
        KeyCode::Char('d') if snapshot.nvml_problem.is_some() && !ui.time_cursor => {
            Outcome::PlayDemo
        }
        KeyCode::Char('q') => quit(ui),
        // Esc undoes the latest thing first: the filter, then the demo.
        KeyCode::Esc if ui.in_demo && ui.filter.is_empty() => Outcome::LeaveDemo,
        KeyCode::Char('?') | KeyCode::F(1) => {
            ui.mode = Mode::Help;
            Outcome::Redraw
        }
        KeyCode::Esc => {
            ui.mode = Mode::Normal;
            if !ui.filter.is_empty() {
                ui.filter.clear();
            }
            Outcome::Redraw
        }
        KeyCode::Char(' ') => {
            ui.frozen = match ui.frozen.take() {
                Some(_) => None,
                None => Some(Arc::clone(snapshot)),
            };
            Outcome::Redraw
        }
        // `+` means "more per second" here as in a replay: a shorter period.
        KeyCode::Char('+') | KeyCode::Char('=') => Outcome::StepInterval { slower: false },
        KeyCode::Char('-') | KeyCode::Char('_') => Outcome::StepInterval { slower: true },
        KeyCode::Char('s') => {
            let (allocators, rank) = (!snapshot.allocators.is_empty(), ranked(snapshot));
            let pods = in_pods(snapshot);
            ui.sort = ui.sort.next(|c| {
                ui.shows(c)
                    && (allocators || !c.is_allocator())
                    && (rank || c != SortColumn::Rank)
                    && (pods || c != SortColumn::Pod)
            });
            ui.sort_descending = ui.sort.default_descending();
            Outcome::Redraw
        }
        KeyCode::Char('S') => {
            ui.sort_descending = !ui.sort_descending;
            Outcome::Redraw
        }
        KeyCode::Char('/') => {
            ui.mode = Mode::Filter;
            Outcome::Redraw
        }
        KeyCode::Char('r') => Outcome::ResetPeaks,
        KeyCode::Char('b') => {
            ui.group_by_gpu = !ui.group_by_gpu;
            Outcome::Redraw
        }
        KeyCode::Char('x') => {
            // Every column; where they do not all fit, the next page of them; after the
            // last, the chosen columns again.
            match (ui.every_column, ui.next_column_page.get()) {
                (true, Some(next)) => ui.column_page = next,
                (every, _) => {
                    ui.every_column = !every;
                    ui.column_page = 0;
                }
            }
            // A sort column that left the screen would order the rows by something unseen.
            if !ui.shows(ui.sort) {
                ui.sort = SortColumn::default();
                ui.sort_descending = ui.sort.default_descending();
            }
            Outcome::Redraw
        }
        KeyCode::Char('w') => {
            ui.mode = Mode::Reasons;
            ui.reasons_scroll = 0;
            Outcome::Redraw
        }
        KeyCode::Enter => {
            if rows.is_empty() {
                return Outcome::Ignored;
            }
            ui.mode = Mode::Detail;
            Outcome::Redraw
        }
        KeyCode::Up => select(ui, rows, -1),
        KeyCode::Down => select(ui, rows, 1),
        KeyCode::PageUp => select(ui, rows, -10),
        KeyCode::PageDown => select(ui, rows, 10),
        KeyCode::Home => select(ui, rows, i64::MIN / 2),
        KeyCode::End => select(ui, rows, i64::MAX / 2),
        KeyCode::Char('a') => ask_attach(ui, rows),
        KeyCode::Char('k') => ask_kill(ui, rows, KillSignal::Term),
        KeyCode::Char('K') => ask_kill(ui, rows, KillSignal::Kill),
        KeyCode::Char('m') => ask_snapshot(ui, rows),
        _ => Outcome::Ignored,
    }
}

/// `m`: a memory snapshot from the selected process's writer. Only a live process the
/// screen shows, and never from a replay (its processes are of another time) or read-only.
/// Whether its writer records history is the loop's to check: it holds the channel.
fn ask_snapshot(ui: &mut UiState, rows: &[TableRow]) -> Outcome {
    if ui.read_only {
        ui.flash = Some("read-only: snapshot requests are disabled".into());
        return Outcome::Redraw;
    }
    if ui.time_cursor {
        ui.flash =
            Some("a replay shows recorded processes: snapshots come only from live ones".into());
        return Outcome::Redraw;
    }
    let Some(row) = rows.get(ui.selected) else {
        return Outcome::Ignored;
    };
    if row.allocator.is_none() {
        ui.flash = Some(format!(
            "pid {} has no allocator channel: start it with vramscope run --sites",
            row.key.pid
        ));
        return Outcome::Redraw;
    }
    if row.is_exited() {
        ui.flash = Some(format!("pid {} has exited", row.key.pid));
        return Outcome::Redraw;
    }
    Outcome::AskSnapshot {
        pid: row.key.pid,
        process: row.process(),
    }
}

/// The reasons overlay scrolls with the arrows and page keys; any other key closes it, and
/// `q` quits (or leaves the demo) as it does from help.
fn reasons_key(key: KeyEvent, ui: &mut UiState) -> Outcome {
    let scroll = &mut ui.reasons_scroll;
    match key.code {
        KeyCode::Up => *scroll = scroll.saturating_sub(1),
        KeyCode::Down => *scroll = scroll.saturating_add(1),
        KeyCode::PageUp => *scroll = scroll.saturating_sub(10),
        KeyCode::PageDown => *scroll = scroll.saturating_add(10),
        KeyCode::Char('q') => return quit(ui),
        _ => ui.mode = Mode::Normal,
    }
    Outcome::Redraw
}

/// `q` ends the demo where one plays (the person came from the live screen), else vramscope.
fn quit(ui: &UiState) -> Outcome {
    if ui.in_demo {
        Outcome::LeaveDemo
    } else {
        Outcome::Quit
    }
}

/// The replay keys: play, speed, steps, and jumps to what matters.
fn cursor_key(code: KeyCode) -> Option<crate::replay::Command> {
    use crate::replay::Command;
    Some(match code {
        KeyCode::Char(' ') => Command::TogglePlay,
        KeyCode::Char('+') | KeyCode::Char('=') => Command::Faster,
        KeyCode::Char('-') | KeyCode::Char('_') => Command::Slower,
        KeyCode::Left => Command::Back,
        KeyCode::Right => Command::Forward,
        KeyCode::Char(',') => Command::SampleBack,
        KeyCode::Char('.') => Command::SampleForward,
        KeyCode::Char('g') => Command::Start,
        KeyCode::Char('G') => Command::End,
        KeyCode::Char('p') => Command::LargestPeak,
        KeyCode::Char('o') => Command::NextOom,
        KeyCode::Char('n') => Command::NextEvent,
        KeyCode::Char('N') => Command::PreviousEvent,
        _ => return None,
    })
}

/// Widens (`1`) or narrows (`-1`) the charts' time window.
fn zoom(ui: &mut UiState, by: i8) -> Outcome {
    let level = (ui.zoom + by).clamp(-super::ui_state::ZOOM_LIMIT, super::ui_state::ZOOM_LIMIT);
    if level == ui.zoom {
        return Outcome::Ignored;
    }
    ui.zoom = level;
    let relative = if level >= 0 {
        format!("{}× their usual time", 1u32 << level)
    } else {
        format!("1/{} of their usual time", 1u32 << -level)
    };
    let usual = ui.chart_usual_ms.get();
    ui.flash = Some(if usual > 0 {
        let span = super::panels::spark::zoomed_span(usual, level);
        let span = super::panels::time_axis::age_label(span);
        format!("charts span {span} ({relative})")
    } else {
        format!("charts span {relative}")
    });
    Outcome::Redraw
}

fn filter_key(key: KeyEvent, ui: &mut UiState) -> Outcome {
    match key.code {
        KeyCode::Enter => ui.mode = Mode::Normal,
        KeyCode::Esc => {
            ui.filter.clear();
            ui.mode = Mode::Normal;
        }
        KeyCode::Backspace => {
            ui.filter.pop();
        }
        KeyCode::Char(c) if ui.filter.chars().count() < 64 => ui.filter.push(c),
        _ => return Outcome::Ignored,
    }
    ui.selected = 0;
    ui.selected_key = None;
    Outcome::Redraw
}

/// Moves the selection by `delta` rows, clamped, and remembers which process it is on.
fn select(ui: &mut UiState, rows: &[TableRow], delta: i64) -> Outcome {
    if rows.is_empty() {
        return Outcome::Ignored;
    }
    let last = rows.len() as i64 - 1;
    let at = (ui.selected as i64).saturating_add(delta).clamp(0, last) as usize;
    ui.selected = at;
    ui.selected_key = rows.get(at).map(|r| r.key.clone());
    ui.selection_chosen = true;
    Outcome::Redraw
}

fn ask_kill(ui: &mut UiState, rows: &[TableRow], signal: KillSignal) -> Outcome {
    if ui.read_only {
        ui.flash = Some("read-only: signals are disabled".into());
        return Outcome::Redraw;
    }
    // A recording's pids name processes of another time, perhaps another machine: here they
    // are whatever has that number now.
    if ui.time_cursor {
        ui.flash = Some("a replay shows recorded processes: signals go only to live ones".into());
        return Outcome::Redraw;
    }
    let Some(row) = rows.get(ui.selected) else {
        return Outcome::Ignored;
    };
    let target = live_target(row, true);
    match target {
        Ok(t) => {
            ui.mode = Mode::ConfirmKill(KillRequest {
                pid: t.pid,
                starttime: t.starttime,
                signal,
                user: t.user,
                command: t.command,
            });
        }
        Err(why) => ui.flash = Some(why),
    }
    Outcome::Redraw
}

/// The live process a row shows, as the person confirming a signal or an attach sees it.
struct LiveTarget {
    /// In vramscope's own pid namespace.
    pid: u32,
    starttime: u64,
    user: String,
    command: String,
}

/// The row's process if it is live, visible here and has a known start time (so it cannot be
/// mistaken for a newer process with its pid); else the line saying why not. The facts are
/// the row's: the snapshot may hold newer ones for the same pid, and the person confirms what
/// is on screen. `to_signal`: the process must also be ours, unless we are root.
fn live_target(row: &TableRow, to_signal: bool) -> Result<LiveTarget, String> {
    let Some(host) = row.host().filter(|_| !row.is_exited()) else {
        return Err(format!(
            "pid {} has exited or is not visible here",
            row.key.pid
        ));
    };
    let Some(local_pid) = host.local_pid else {
        return Err(format!("pid {} is not visible from here", host.pid));
    };
    let me = crate::channel::euid();
    if to_signal && me != 0 && host.uid != Some(me) {
        return Err(format!(
            "pid {local_pid} is not yours: only root may signal it"
        ));
    }
    let Some(starttime) = host.starttime else {
        return Err(format!(
            "pid {local_pid}: its start time is unknown, so it cannot be told from a newer process with that pid"
        ));
    };
    Ok(LiveTarget {
        pid: local_pid,
        starttime,
        user: host.user.clone().unwrap_or_else(|_| NA.into()),
        command: host.command.clone().unwrap_or_else(|_| NA.into()),
    })
}

/// `a`: attach vramscope's writer to the selected process, or detach the one an attach
/// started; after a confirmation naming pid, user and command.
fn ask_attach(ui: &mut UiState, rows: &[TableRow]) -> Outcome {
    if ui.read_only {
        ui.flash = Some("read-only: attach is disabled".into());
        return Outcome::Redraw;
    }
    if ui.time_cursor {
        ui.flash = Some("a replay shows recorded processes: attach goes only to live ones".into());
        return Outcome::Redraw;
    }
    let Some(row) = rows.get(ui.selected) else {
        return Outcome::Ignored;
    };
    let detach = row.allocator.as_ref().is_some_and(|a| a.attached);
    if row.allocator.is_some() && !detach {
        ui.flash = Some(format!(
            "pid {} already publishes allocator figures",
            row.key.pid
        ));
        return Outcome::Redraw;
    }
    match live_target(row, false) {
        // Said at once, rather than after the person confirmed.
        Ok(t) if !detach && let Some(why) = crate::attach::not_python(t.pid as i32) => {
            ui.flash = Some(why);
        }
        Ok(t) => {
            ui.mode = Mode::ConfirmAttach(AttachRequest {
                pid: t.pid,
                starttime: t.starttime,
                user: t.user,
                command: t.command,
                detach,
                stops: crate::attach::stops(t.pid as i32),
                shown: crate::attach::process::Identity::of(t.pid as i32),
            });
        }
        Err(why) => ui.flash = Some(why),
    }
    Outcome::Redraw
}

/// The next refresh period up or down the ladder, from wherever the current one is.
pub fn step_interval(current_ms: u64, slower: bool) -> u64 {
    if slower {
        INTERVALS_MS
            .iter()
            .copied()
            .find(|&i| i > current_ms)
            .unwrap_or(current_ms)
    } else {
        INTERVALS_MS
            .iter()
            .rev()
            .copied()
            .find(|&i| i < current_ms)
            .unwrap_or(current_ms)
    }
}

/// Sends the confirmed signal if the pid still belongs to the process shown; the result is a
/// line for the status bar.
pub fn send_signal(request: &KillRequest) -> String {
    let signal = match request.signal {
        KillSignal::Term => libc::SIGTERM,
        KillSignal::Kill => libc::SIGKILL,
    };
    match super::signal_send::to_same_process(request.pid, request.starttime, signal) {
        Ok(()) => format!("sent {} to {}", request.signal.name(), request.pid),
        Err(why) => format!("not signalled: {why}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_ladder_steps_and_stops_at_the_ends() {
        assert_eq!(step_interval(1_000, true), 2_000);
        assert_eq!(step_interval(1_000, false), 500);
        assert_eq!(step_interval(100, false), 100);
        assert_eq!(step_interval(30_000, true), 30_000);
        assert_eq!(step_interval(700, false), 500);
    }
}
