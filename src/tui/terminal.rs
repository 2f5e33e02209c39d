//! Entering and leaving the terminal. Restoring is idempotent and runs on every exit path:
//! normal return (the guard's Drop), panic (a hook that chains the previous one), and signals
//! (the event loop returns, so the guard drops).

use super::frame_writer::FrameWriter;
use crossterm::{cursor, execute, terminal};
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;
use ratatui::{Terminal, TerminalOptions, Viewport};
use std::io::{self, Stdout};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

static ACTIVE: AtomicBool = AtomicBool::new(false);
static PANIC_HOOK: Once = Once::new();

pub type Term = Terminal<CrosstermBackend<FrameWriter<Stdout>>>;

/// Owns the terminal while the monitor runs.
pub struct TerminalGuard {
    pub terminal: Term,
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
        let terminal = Terminal::with_options(
            CrosstermBackend::new(FrameWriter::new(io::stdout())),
            TerminalOptions {
                viewport: Viewport::Fixed(current_area()),
            },
        )?;
        Ok(Self { terminal })
    }

    /// Draws one frame, sent to the terminal in one write.
    pub fn draw(&mut self, render: impl FnOnce(&mut ratatui::Frame)) -> io::Result<()> {
        self.terminal.backend_mut().writer_mut().begin_frame();
        let drawn = self.terminal.draw(render).map(|_| ());
        let sent = self.terminal.backend_mut().writer_mut().end_frame();
        drawn.and(sent)
    }

    /// Follows a new terminal size (resize event, SIGWINCH, resume); the next frame is
    /// drawn whole.
    pub fn resized(&mut self) -> io::Result<()> {
        self.terminal.resize(current_area())
    }

    /// Leaves the terminal as the shell expects it, for a suspend (Ctrl-Z).
    pub fn suspend(&mut self) {
        restore();
    }

    /// Takes the terminal back after a resume and forces a full redraw.
    pub fn resume(&mut self) -> io::Result<()> {
        enter_modes()?;
        self.resized()
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
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
