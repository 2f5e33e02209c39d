//! Placing marker labels (peaks, OOMs, the limit) next to their points without covering one
//! another: a few positions around the point are tried, then rows further up and down; a
//! label that fits nowhere still appears, where it overlaps least badly (clamped inside).

/// A rectangle in pixels: left, top, right, bottom.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rect {
    pub left: i32,
    pub top: i32,
    pub right: i32,
    pub bottom: i32,
}

impl Rect {
    pub fn new(left: i32, top: i32, width: i32, height: i32) -> Rect {
        Rect {
            left,
            top,
            right: left.saturating_add(width),
            bottom: top.saturating_add(height),
        }
    }

    fn overlaps(&self, other: &Rect) -> bool {
        self.left < other.right
            && other.left < self.right
            && self.top < other.bottom
            && other.top < self.bottom
    }

    fn inside(&self, bounds: &Rect) -> bool {
        self.left >= bounds.left
            && self.right <= bounds.right
            && self.top >= bounds.top
            && self.bottom <= bounds.bottom
    }

    /// Moved the least to lie inside `bounds` (its top-left corner wins if it cannot).
    fn clamped(&self, bounds: &Rect) -> Rect {
        let width = self.right - self.left;
        let height = self.bottom - self.top;
        let left = self.left.min(bounds.right - width).max(bounds.left);
        let top = self.top.min(bounds.bottom - height).max(bounds.top);
        Rect::new(left, top, width, height)
    }
}

/// Labels placed so far in one chart.
pub struct Placer {
    bounds: Rect,
    taken: Vec<Rect>,
}

/// Gap between a point and its label.
const GAP: i32 = 6;
/// Rows tried above and below before giving up on a free place.
const ROWS: i32 = 8;

impl Placer {
    pub fn new(bounds: Rect) -> Placer {
        Placer {
            bounds,
            taken: Vec::new(),
        }
    }

    /// Marks a rectangle as covered (a label drawn by other means).
    pub fn take(&mut self, rect: Rect) {
        self.taken.push(rect);
    }

    /// Where a `width` x `height` label for the point `(x, y)` goes: its top-left corner.
    pub fn place(&mut self, (x, y): (i32, i32), width: i32, height: i32) -> Rect {
        let right = x + GAP;
        let left = x - GAP - width;
        let above = y - GAP - height;
        let below = y + GAP;
        let mut candidates = vec![(right, above), (left, above), (right, below), (left, below)];
        for row in 1..=ROWS {
            let shift = row * (height + 2);
            candidates.extend([
                (right, above - shift),
                (left, above - shift),
                (right, below + shift),
                (left, below + shift),
            ]);
        }
        let free = candidates
            .iter()
            .map(|&(l, t)| Rect::new(l, t, width, height))
            .find(|r| r.inside(&self.bounds) && !self.taken.iter().any(|t| t.overlaps(r)));
        let rect = free.unwrap_or_else(|| {
            // Nowhere free: the spot overlapping the fewest labels, kept inside the chart.
            candidates
                .iter()
                .map(|&(l, t)| Rect::new(l, t, width, height).clamped(&self.bounds))
                .min_by_key(|r| self.taken.iter().filter(|t| t.overlaps(r)).count())
                .unwrap_or_else(|| Rect::new(x, y, width, height))
        });
        self.taken.push(rect);
        rect
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_at_one_point_stack_without_overlapping() {
        let mut placer = Placer::new(Rect::new(0, 0, 800, 400));
        let rects: Vec<Rect> = (0..6).map(|_| placer.place((400, 200), 120, 16)).collect();
        for (i, a) in rects.iter().enumerate() {
            assert!(a.inside(&Rect::new(0, 0, 800, 400)), "{a:?}");
            for b in &rects[i + 1..] {
                assert!(!a.overlaps(b), "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn a_label_by_the_edge_turns_inwards_and_one_too_big_is_clamped() {
        let mut placer = Placer::new(Rect::new(0, 0, 300, 200));
        let r = placer.place((295, 5), 100, 16);
        assert!(r.right <= 295 && r.top >= 5, "{r:?}");
        let huge = placer.place((10, 10), 1000, 16);
        assert_eq!(huge.left, 0);
    }
}
