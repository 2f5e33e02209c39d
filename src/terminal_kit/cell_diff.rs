//! Which cells of a new frame must be sent: ratatui's rules for what differs (skipped cells,
//! wide characters, emoji with a variation selector, a wide character replaced by a narrow
//! one), with a cheaper test for the common case.
//!
//! Why our own: a monitor's frame is 10,000 cells at 200x50 of which a few hundred change
//! each refresh, and ratatui's `BufferDiff` computes every cell's display width and runs the
//! full `Cell` comparison (its symbol through `memcmp`) before it can tell that a cell did not
//! change. That was 190 µs of a 1 s refresh's 570 µs on the UI thread. Here an unchanged
//! cell costs a few compares of plain fields and of a one-byte symbol. The output is the same
//! list of updates as `Buffer::diff`, which the tests check on random frames.

use super::narrow::known_narrow;
use ratatui::buffer::{Buffer, Cell, CellDiffOption, CellWidth};
use ratatui::style::{Color, Modifier};

/// What a narrow cell must repaint of a wide one it replaces: on a blank with one of these
/// the terminal's erase of the wide character's right half would show.
const SHOWS_ON_BLANK: Modifier = Modifier::REVERSED
    .union(Modifier::UNDERLINED)
    .union(Modifier::SLOW_BLINK)
    .union(Modifier::RAPID_BLINK)
    .union(Modifier::CROSSED_OUT);

/// The updates turning `prev` into `next`, as `(x, y, cell)` in screen order. Both buffers
/// must have the same x, y and width; rows past the shorter one are not compared (a resize
/// redraws whole anyway).
pub fn changes<'a>(prev: &'a Buffer, next: &'a Buffer) -> Changes<'a> {
    // Checked in release builds too, as ratatui's diff does: once a frame, and a mismatch
    // would send every update to the wrong place.
    assert!(
        prev.area.x == next.area.x
            && prev.area.y == next.area.y
            && prev.area.width == next.area.width
    );
    let len = prev.content.len().min(next.content.len());
    Changes {
        prev: &prev.content[..len],
        next: &next.content[..len],
        x0: next.area.x,
        y0: next.area.y,
        width: usize::from(next.area.width).max(1),
        pos: 0,
        tail: None,
    }
}

pub struct Changes<'a> {
    prev: &'a [Cell],
    next: &'a [Cell],
    x0: u16,
    y0: u16,
    width: usize,
    /// The next cell to look at.
    pos: usize,
    /// Cells after a changed one that it decides about, walked before `pos` goes on.
    tail: Option<Tail>,
}

/// The cells covered by a changed cell: those under an emoji with a variation selector (sent
/// where their symbol changed, since terminals disagree on that emoji's width), or those a
/// narrower cell uncovered of a wide one with a visible background (always sent).
struct Tail {
    at: usize,
    end: usize,
    always: bool,
}

impl<'a> Changes<'a> {
    fn update(&self, index: usize) -> (u16, u16, &'a Cell) {
        // Index < len <= u16::MAX * u16::MAX cells, so both fit.
        let x = (index % self.width) as u16 + self.x0;
        let y = (index / self.width) as u16 + self.y0;
        (x, y, &self.next[index])
    }

    /// The next update among the tail's cells; the tail ends where it runs out.
    fn next_in_tail(&mut self) -> Option<(u16, u16, &'a Cell)> {
        let tail = self.tail.as_mut()?;
        let len = self.next.len();
        while tail.at < tail.end {
            let at = tail.at;
            let cell = &self.next[at];
            tail.at += usize::from(cell.cell_width().max(1));
            tail.end = tail.end.max(tail.at).min(len);
            if !skipped(cell) && (tail.always || self.prev[at].symbol() != cell.symbol()) {
                return Some(self.update(at));
            }
        }
        self.pos = tail.end;
        self.tail = None;
        None
    }
}

impl<'a> Iterator for Changes<'a> {
    type Item = (u16, u16, &'a Cell);

    fn next(&mut self) -> Option<Self::Item> {
        if self.tail.is_some()
            && let Some(update) = self.next_in_tail()
        {
            return Some(update);
        }
        let len = self.next.len();
        while self.pos < len {
            let index = self.pos;
            let (cell, before) = (&self.next[index], &self.prev[index]);
            self.pos += 1;
            if unchanged_narrow(cell, before) {
                continue;
            }
            match cell.diff_option {
                CellDiffOption::Skip => continue,
                _ if skipped(cell) => continue,
                CellDiffOption::ForcedWidth(width) => {
                    self.pos += usize::from(width.get()) - 1;
                    if cell != before {
                        return Some(self.update(index));
                    }
                    continue;
                }
                CellDiffOption::None | CellDiffOption::AlwaysUpdate => {}
            }
            let width = usize::from(cell.cell_width());
            if cell.diff_option == CellDiffOption::None && cell == before {
                self.pos += width.saturating_sub(1);
                continue;
            }
            if width > 1 && cell.symbol().contains('\u{FE0F}') {
                self.tail = Some(Tail {
                    at: index + 1,
                    end: (index + width).min(len),
                    always: false,
                });
            } else if width > 1 {
                self.pos += width - 1;
            } else {
                let before_width = usize::from(before.cell_width());
                if before_width > width
                    && (before.bg != Color::Reset || before.modifier.intersects(SHOWS_ON_BLANK))
                {
                    // Capped: a wide character in the last cell has nothing after it.
                    self.tail = Some(Tail {
                        at: index + 1,
                        end: (index + before_width).min(len),
                        always: true,
                    });
                }
            }
            return Some(self.update(index));
        }
        None
    }
}

/// The common case, decided without a width lookup: the same symbol, one known to be one
/// column wide, in the same style, with nothing that asks for special treatment. False only
/// means "look closer".
#[expect(deprecated, reason = "`skip` is still honoured by ratatui's own diff")]
fn unchanged_narrow(cell: &Cell, before: &Cell) -> bool {
    same_narrow_symbol(cell.symbol().as_bytes(), before.symbol().as_bytes())
        // Field by field: through `style()` each colour is wrapped in an `Option` and every
        // compare checks for `None` first, a third of this function's instructions.
        && cell.fg == before.fg
        && cell.bg == before.bg
        && cell.underline_color == before.underline_color
        && cell.modifier == before.modifier
        && cell.diff_option == CellDiffOption::None
        && before.diff_option == CellDiffOption::None
        // Only the earlier frame's flag: a cell skipped now is not sent either way.
        && !before.skip
}

/// Equal symbols that are one column wide for certain. Compared byte by byte rather than
/// through `memcmp`: this runs for every cell of every frame, and symbols are 1 to 3 bytes.
fn same_narrow_symbol(now: &[u8], was: &[u8]) -> bool {
    match (now, was) {
        ([a], [b]) => a == b,
        ([a0, a1], [b0, b1]) => a0 == b0 && a1 == b1 && known_narrow(now),
        ([a0, a1, a2], [b0, b1, b2]) => a0 == b0 && a1 == b1 && a2 == b2 && known_narrow(now),
        _ => false,
    }
}

/// A cell some other widget owns (an image, say): never sent.
#[expect(deprecated, reason = "`skip` is still honoured by ratatui's own diff")]
fn skipped(cell: &Cell) -> bool {
    cell.diff_option == CellDiffOption::Skip
        || (cell.skip && cell.diff_option == CellDiffOption::None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::layout::Rect;
    use std::num::NonZeroU16;

    fn ours<'a>(prev: &'a Buffer, next: &'a Buffer) -> Vec<(u16, u16, &'a Cell)> {
        changes(prev, next).collect()
    }

    fn line(text: &str) -> Buffer {
        Buffer::with_lines([text])
    }

    #[test]
    fn equal_frames_send_nothing() {
        let a = Buffer::with_lines(["GPU0 ▂▄█ 42%", "pid 123 python"]);
        assert!(ours(&a, &a.clone()).is_empty());
    }

    #[test]
    fn a_changed_cell_is_sent_with_its_position() {
        let a = Buffer::with_lines(["abc", "def"]);
        let b = Buffer::with_lines(["abc", "dXf"]);
        let sent: Vec<_> = ours(&a, &b)
            .into_iter()
            .map(|(x, y, c)| (x, y, c.symbol().to_string()))
            .collect();
        assert_eq!(sent, [(1, 1, "X".to_string())]);
    }

    #[test]
    fn a_style_change_alone_is_sent() {
        let a = line("ab");
        let mut b = a.clone();
        b[(1, 0)].set_fg(Color::Red);
        assert_eq!(ours(&a, &b).len(), 1);
        assert_eq!(ours(&a, &b)[0].2.fg, Color::Red);
    }

    #[test]
    fn a_wide_character_covers_the_cell_after_it() {
        let a = line("ab c");
        let b = line("世 c");
        let sent = ours(&a, &b);
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert_eq!(sent[0].2.symbol(), "世");
        assert_eq!(sent, a.diff(&b));
    }

    #[test]
    fn a_narrow_cell_over_a_coloured_wide_one_repaints_the_uncovered_half() {
        let mut a = line("世x");
        a[(0, 0)].set_bg(Color::Blue);
        let b = line("abx");
        let sent: Vec<_> = ours(&a, &b).iter().map(|(x, _, _)| *x).collect();
        assert_eq!(sent, [0, 1]);
        assert_eq!(ours(&a, &b), a.diff(&b));
    }

    #[test]
    fn skipped_cells_are_never_sent() {
        let a = line("abc");
        let mut b = line("xyz");
        b[(1, 0)].set_diff_option(CellDiffOption::Skip);
        let sent: Vec<_> = ours(&a, &b).iter().map(|(x, _, _)| *x).collect();
        assert_eq!(sent, [0, 2]);
    }

    /// A small generator (no dependency for one test): xorshift.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    /// A frame from a few kinds of content, with long runs of blanks and repeats as a
    /// monitor's frames have, and every rule's trigger: wide characters, an emoji with a
    /// variation selector, coloured and reversed cells, skipped and forced-width cells.
    fn random_frame(rng: &mut Rng, area: Rect) -> Buffer {
        const SYMBOLS: [&str; 13] = [
            " ", "a", "7", "▄", "█", "世", "❤️", "é", "", "│", "°", "⣿", "◽",
        ];
        const COLORS: [Color; 4] = [Color::Reset, Color::Red, Color::Indexed(8), Color::Blue];
        let mut buf = Buffer::empty(area);
        let mut x = 0;
        while x < usize::from(area.width) * usize::from(area.height) {
            let pos = buf.pos_of(x);
            let symbol = SYMBOLS[rng.below(SYMBOLS.len())];
            if symbol.cell_width() > 1 {
                buf.set_string(pos.0, pos.1, symbol, ratatui::style::Style::default());
            } else {
                buf[pos].set_symbol(symbol);
            }
            let cell = &mut buf[pos];
            cell.set_bg(COLORS[rng.below(COLORS.len())]);
            // Rarer than the background, so that most edits leave them equal.
            if rng.below(4) == 0 {
                cell.set_fg(COLORS[rng.below(COLORS.len())]);
            }
            if rng.below(8) == 0 {
                cell.underline_color = COLORS[rng.below(COLORS.len())];
            }
            if rng.below(8) == 0 {
                cell.modifier = Modifier::REVERSED;
            }
            #[expect(deprecated, reason = "still honoured by ratatui's diff, so by ours")]
            if rng.below(40) == 0 {
                cell.skip = true;
            }
            let two = NonZeroU16::new(2).expect("2 is not 0");
            cell.diff_option = match rng.below(40) {
                0 => CellDiffOption::Skip,
                1 => CellDiffOption::AlwaysUpdate,
                2 => CellDiffOption::ForcedWidth(NonZeroU16::MIN),
                3 => CellDiffOption::ForcedWidth(two),
                _ => CellDiffOption::None,
            };
            x += 1;
        }
        narrow_last_cell(&mut buf);
        buf
    }

    /// ratatui's diff indexes past the end for a wide cell in the very last cell (ours stops
    /// there), so the frames compared with it have none.
    fn narrow_last_cell(buf: &mut Buffer) {
        if let Some(last) = buf.content.last_mut()
            && last.cell_width() > 1
        {
            last.set_symbol("z").set_diff_option(CellDiffOption::None);
        }
    }

    /// `next` as a small edit of `prev`: most cells unchanged, as between two refreshes.
    fn edited(rng: &mut Rng, prev: &Buffer) -> Buffer {
        let mut next = prev.clone();
        let other = random_frame(rng, prev.area);
        for i in 0..next.content.len() {
            if rng.below(5) == 0 {
                next.content[i] = other.content[i].clone();
            } else if rng.below(20) == 0 {
                // The same cell, only its skip flag turned: that alone must be sent.
                #[expect(deprecated, reason = "still honoured by ratatui's diff, so by ours")]
                {
                    next.content[i].skip = !next.content[i].skip;
                }
            }
        }
        narrow_last_cell(&mut next);
        next
    }

    #[test]
    fn the_same_updates_as_ratatui_on_random_frames() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..400 {
            let area = Rect::new(
                rng.below(3) as u16,
                rng.below(3) as u16,
                1 + rng.below(12) as u16,
                1 + rng.below(6) as u16,
            );
            let prev = random_frame(&mut rng, area);
            let next = if round % 3 == 0 {
                random_frame(&mut rng, area)
            } else {
                edited(&mut rng, &prev)
            };
            assert_eq!(
                ours(&prev, &next),
                prev.diff(&next),
                "round {round}, area {area:?}"
            );
        }
    }

    #[test]
    fn a_wide_character_in_the_last_cell_is_no_panic() {
        // What it covered lies past the end: nothing there to repaint or skip.
        let mut wide_last = line("ab");
        wide_last[(1, 0)].set_symbol("世").set_bg(Color::Blue);
        let sent: Vec<_> = ours(&wide_last, &line("ab")).iter().map(|u| u.0).collect();
        assert_eq!(sent, [1]);
        let sent: Vec<_> = ours(&line("ab"), &wide_last).iter().map(|u| u.0).collect();
        assert_eq!(sent, [1]);
    }

    #[test]
    fn a_taller_or_shorter_frame_compares_the_rows_both_have() {
        let a = Buffer::with_lines(["ab", "cd"]);
        let b = Buffer::with_lines(["aX"]);
        assert_eq!(ours(&a, &b), a.diff(&b));
        assert_eq!(ours(&b, &a), b.diff(&a));
    }
}
