//! The terminal's output buffer: a frame, with its synchronized-update brackets, leaves in
//! one `write`. Through stdout it took two (ratatui flushes after drawing, and the closing
//! bracket came after that) plus one per kilobyte of a full redraw, since stdout's buffer
//! holds only 1 KiB; each write to a pty wakes the terminal or tmux.

use crossterm::terminal::{BeginSynchronizedUpdate, EndSynchronizedUpdate};
use std::io::{self, Write};

pub struct FrameWriter<W: Write> {
    out: W,
    pending: Vec<u8>,
    /// Inside a frame, flushes wait for its end.
    in_frame: bool,
}

impl<W: Write> FrameWriter<W> {
    pub fn new(out: W) -> Self {
        FrameWriter {
            out,
            pending: Vec::with_capacity(16 * 1024),
            in_frame: false,
        }
    }

    /// Opens a frame: output is held until `end_frame`.
    pub fn begin_frame(&mut self) {
        self.in_frame = true;
        // Synchronized updates stop tmux and modern terminals from showing half-drawn frames.
        let _ = crossterm::queue!(self.pending, BeginSynchronizedUpdate);
    }

    /// Closes the frame and sends it whole.
    pub fn end_frame(&mut self) -> io::Result<()> {
        let _ = crossterm::queue!(self.pending, EndSynchronizedUpdate);
        self.in_frame = false;
        self.flush()
    }

    #[cfg(test)]
    pub fn inner(&self) -> &W {
        &self.out
    }
}

impl<W: Write> Write for FrameWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.in_frame || self.pending.is_empty() {
            return Ok(());
        }
        let sent = self.out.write_all(&self.pending);
        // A failed write drops the frame rather than resending stale bytes later.
        self.pending.clear();
        sent?;
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts the writes that reach it.
    #[derive(Default)]
    struct Writes(Vec<Vec<u8>>);

    impl Write for Writes {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_frame_leaves_in_one_write_between_its_brackets() {
        let mut w = FrameWriter::new(Writes::default());
        w.begin_frame();
        w.write_all(b"cells").unwrap();
        w.flush().unwrap(); // what ratatui does after drawing
        w.write_all(b" more").unwrap();
        assert!(
            w.inner().0.is_empty(),
            "nothing leaves before the frame ends"
        );
        w.end_frame().unwrap();
        assert_eq!(
            w.inner().0,
            vec![b"\x1b[?2026hcells more\x1b[?2026l".to_vec()]
        );
    }

    #[test]
    fn outside_a_frame_a_flush_sends_at_once() {
        let mut w = FrameWriter::new(Writes::default());
        w.write_all(b"clear").unwrap();
        w.flush().unwrap();
        w.flush().unwrap();
        assert_eq!(w.inner().0, vec![b"clear".to_vec()]);
    }
}
