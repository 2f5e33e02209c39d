//! Two answers compared: which sites grew, shrank, appeared or went. The site that grew
//! most between two dumps of a leaking job is the leak's source.

use super::held::{Held, Site};
use std::collections::HashMap;

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

/// Compares two answers by site: every site of either, the `top` that changed most (by
/// bytes either way), listed by growth, largest first.
pub fn diff(before: &Held, after: &Held, top: usize) -> SitesDiff {
    type Key = (String, u32, String);
    let mut sites: HashMap<Key, SiteChange> = HashMap::new();
    let key = |s: &Site| (s.file.clone(), s.line, s.function.clone());
    let blank = |s: &Site| SiteChange {
        file: s.file.clone(),
        line: s.line,
        function: s.function.clone(),
        before_bytes: 0,
        after_bytes: 0,
        before_blocks: 0,
        after_blocks: 0,
        change: Change::Same,
    };
    for s in &before.all_sites {
        let row = sites.entry(key(s)).or_insert_with(|| blank(s));
        row.before_bytes += s.bytes;
        row.before_blocks += s.blocks;
    }
    for s in &after.all_sites {
        let row = sites.entry(key(s)).or_insert_with(|| blank(s));
        row.after_bytes += s.bytes;
        row.after_blocks += s.blocks;
    }
    let sites_compared = sites.len();
    let mut rows: Vec<SiteChange> = sites
        .into_values()
        .map(|mut row| {
            row.change = match (row.before_blocks, row.after_blocks) {
                (0, a) if a > 0 => Change::Appeared,
                (b, 0) if b > 0 => Change::Gone,
                _ if row.after_bytes > row.before_bytes => Change::Grew,
                _ if row.after_bytes < row.before_bytes => Change::Shrank,
                _ => Change::Same,
            };
            row
        })
        .filter(|row| row.change != Change::Same)
        .collect();
    let order = |a: &SiteChange, b: &SiteChange| {
        (a.file.as_str(), a.line, a.function.as_str()).cmp(&(
            b.file.as_str(),
            b.line,
            b.function.as_str(),
        ))
    };
    rows.sort_by(|a, b| {
        b.growth()
            .abs()
            .cmp(&a.growth().abs())
            .then_with(|| order(a, b))
    });
    rows.truncate(top);
    rows.sort_by(|a, b| b.growth().cmp(&a.growth()).then_with(|| order(a, b)));
    SitesDiff {
        before_total: before.total_bytes,
        after_total: after.total_bytes,
        rows,
        sites_compared,
    }
}
