//! Entering and leaving the terminal. Restoring is idempotent and runs on every exit path:
//! normal return (the guard's Drop), panic (a hook that chains the previous one), and signals
//! (the event loop returns, so the guard drops).

use super::cell_diff;
use super::frame_writer::FrameWriter;
use crossterm::{cursor, execute, terminal};
use ratatui::backend::{Backend, CrosstermBackend};
use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::{Terminal, TerminalOptions, Viewport};
use std::io::{self, Stdout};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

static ACTIVE: AtomicBool = AtomicBool::new(false);
static PANIC_HOOK: Once = Once::new();

type Term = Terminal<CrosstermBackend<FrameWriter<Stdout>>>;

/// Owns the terminal while the monitor runs.
pub struct TerminalGuard {
    terminal: Term,
    /// The last frame sent, which the next one is compared with. Ours rather than ratatui's
    /// back buffer so that `cell_diff` can do the comparing; ratatui renders into its front
    /// buffer and never flushes it itself.
    sent: Buffer,
}

impl TerminalGuard {
    /// Raw mode, alternate screen, hidden cursor; installs the panic hook once.
    pub fn enter() -> io::Result<Self> {
        PANIC_HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                restore();
                previous(info);
            }));
        });
        enter_modes()?;
        // A fixed viewport, resized only when the terminal says its size changed: ratatui's
        // full-screen viewport asks crossterm for the size before every frame, and crossterm
        // opens /dev/tty to answer, which was a tenth of an idle monitor's CPU.
        let area = current_area();
        let terminal = Terminal::with_options(
            CrosstermBackend::new(FrameWriter::new(io::stdout())),
            TerminalOptions {
                viewport: Viewport::Fixed(area),
            },
        )?;
        Ok(Self {
            terminal,
            sent: Buffer::empty(area),
        })
    }

    /// Draws one frame, sent to the terminal in one write. `render` returns where the cursor
    /// goes, `None` to hide it.
    pub fn draw(
        &mut self,
        render: impl FnOnce(&mut ratatui::Frame) -> Option<Position>,
    ) -> io::Result<()> {
        self.terminal.backend_mut().writer_mut().begin_frame();
        let drawn = self.draw_frame(render);
        let sent = self.terminal.backend_mut().writer_mut().end_frame();
        drawn.and(sent)
    }

    /// What ratatui's `Terminal::draw` does for a fixed viewport, with our diff. Everything
    /// here only queues into the frame writer; `end_frame` is the one write that can fail.
    fn draw_frame(
        &mut self,
        render: impl FnOnce(&mut ratatui::Frame) -> Option<Position>,
    ) -> io::Result<()> {
        let cursor = render(&mut self.terminal.get_frame());
        // Taken out so the backend can be borrowed while the frame is read. Its area is
        // `sent`'s: the viewport changes only in `resized`, which replaces `sent` too.
        let frame = std::mem::take(self.terminal.current_buffer_mut());
        self.terminal
            .backend_mut()
            .draw(cell_diff::changes(&self.sent, &frame))?;
        // Blanked now, while the diff has just read it into cache: blanked a second later,
        // before rendering, it took 14% of the monitor's perf samples instead of 1.4%.
        let mut spare = std::mem::replace(&mut self.sent, frame);
        spare.reset();
        *self.terminal.current_buffer_mut() = spare;
        match cursor {
            None => self.terminal.hide_cursor(),
            Some(at) => {
                self.terminal.show_cursor()?;
                self.terminal.set_cursor_position(at)
            }
        }
    }

    /// Follows a new terminal size (resize event, SIGWINCH, resume); the next frame is
    /// drawn whole.
    pub fn resized(&mut self) -> io::Result<()> {
        let area = current_area();
        // Cleared by the resize whatever happens next: the next frame is sent whole.
        self.sent = Buffer::empty(area);
        self.terminal.resize(area)
    }

    /// Leaves the terminal as the shell expects it, for a suspend (Ctrl-Z).
    pub fn suspend(&mut self) {
        restore();
    }

    /// Takes the terminal back after a resume and forces a full redraw. Whatever the shell
    /// did to the terminal while we were stopped: raw mode is set afresh even where crossterm
    /// believes it still holds (after a SIGSTOP nothing was restored, and the shell then put
    /// the terminal back in cooked mode).
    pub fn resume(&mut self) -> io::Result<()> {
        let _ = terminal::disable_raw_mode();
        enter_modes()?;
        self.resized()
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Why this terminal cannot hold the monitor, if it cannot: `TERM=dumb` says it has no
/// cursor addressing, so full-screen escapes would only garble it.
pub fn unsuitable() -> Option<&'static str> {
    let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
    dumb.then_some(
        "TERM=dumb cannot show the monitor; use --once, --json or --csv, or a terminal with cursor addressing",
    )
}

/// The whole terminal; 0x0 when the size cannot be read (the screen then stays blank rather
/// than failing).
fn current_area() -> Rect {
    let (width, height) = terminal::size().unwrap_or((0, 0));
    Rect::new(0, 0, width, height)
}

fn enter_modes() -> io::Result<()> {
    terminal::enable_raw_mode()?;
    ACTIVE.store(true, Ordering::SeqCst);
    execute!(io::stdout(), terminal::EnterAlternateScreen, cursor::Hide)
}

/// Puts the terminal back: cooked mode, main screen, visible cursor. Safe to call twice.
pub fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        // The alternate screen is blanked first: tmux, when the pane was resized meanwhile,
        // folds alternate lines into the restored screen, which left the last frame above the
        // shell prompt.
        let _ = execute!(
            io::stdout(),
            terminal::Clear(terminal::ClearType::All),
            cursor::MoveTo(0, 0),
            terminal::LeaveAlternateScreen,
            cursor::Show
        );
        let _ = terminal::disable_raw_mode();
    }
}
