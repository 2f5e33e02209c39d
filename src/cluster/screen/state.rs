//! What the person chose (view, selection, filter, sort, expanded nodes, pause) and the
//! lines the body shows, made from the `Screen` and those choices.

use crate::cluster::options::ClusterView;
use crate::cluster::view::{RankRow, Screen, sort_by_risk};
use crate::tui::filter::Filter;
use std::collections::BTreeSet;

/// The job view's orders; `s` steps through them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RankSort {
    Risk,
    Rank,
    Node,
    Allocated,
    Peak,
    Growth,
    Step,
}

impl RankSort {
    pub const ALL: [RankSort; 7] = [
        RankSort::Risk,
        RankSort::Rank,
        RankSort::Node,
        RankSort::Allocated,
        RankSort::Peak,
        RankSort::Growth,
        RankSort::Step,
    ];

    pub fn label(self) -> &'static str {
        match self {
            RankSort::Risk => "risk",
            RankSort::Rank => "rank",
            RankSort::Node => "node",
            RankSort::Allocated => "alloc",
            RankSort::Peak => "peak",
            RankSort::Growth => "peak growth",
            RankSort::Step => "step",
        }
    }

    pub fn next(self) -> RankSort {
        let at = Self::ALL.iter().position(|s| *s == self).unwrap_or(0);
        Self::ALL[(at + 1) % Self::ALL.len()]
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    Normal,
    Filter,
    Help,
}

#[derive(Debug)]
pub struct Ui {
    pub view: ClusterView,
    /// Chosen by the person (or `--view`): the default no longer applies.
    pub view_chosen: bool,
    pub mode: Mode,
    pub filter: String,
    pub sort: RankSort,
    pub reversed: bool,
    /// The selected line's key (rank row: job/instance/gpu/pid; node: its name).
    pub selected: Option<String>,
    pub scroll: usize,
    pub expanded: BTreeSet<String>,
    pub paused: bool,
    pub help_scroll: u16,
}

impl Ui {
    pub fn new(view: Option<ClusterView>) -> Self {
        Self {
            view: view.unwrap_or(ClusterView::Nodes),
            view_chosen: view.is_some(),
            mode: Mode::Normal,
            filter: String::new(),
            sort: RankSort::Risk,
            reversed: false,
            selected: None,
            scroll: 0,
            expanded: BTreeSet::new(),
            paused: false,
            help_scroll: 0,
        }
    }
}

/// One line of the body.
#[derive(Clone, Debug, PartialEq)]
pub enum Line {
    /// Job index.
    JobTitle(usize),
    /// Job index, OOM index.
    Oom(usize, usize),
    /// Column headings of the rank table.
    RankHeadings,
    /// The rank row itself (sorted and filtered copy).
    Rank(Box<RankRow>),
    NodeHeadings,
    /// Node index.
    Node(usize),
    /// Node index, GPU index.
    Gpu(usize, usize),
}

impl Line {
    /// The key a selectable line is remembered by.
    pub fn key(&self, screen: &Screen) -> Option<String> {
        match self {
            Line::Rank(r) => Some(format!(
                "{}\u{0}{}\u{0}{}\u{0}{}",
                r.job, r.instance, r.gpu, r.pid
            )),
            Line::Node(i) => screen.nodes.get(*i).map(|n| format!("node\u{0}{}", n.node)),
            _ => None,
        }
    }
}

/// The body's lines for `ui`'s view, filter and order.
pub fn lines(screen: &Screen, ui: &Ui) -> Vec<Line> {
    let filter = Filter::parse(&ui.filter);
    let words: Vec<&str> = filter.text.split_whitespace().collect();
    let matches = |text: &str, gpu: Option<u32>| {
        let lower = text.to_lowercase();
        gpu.is_none_or(|g| filter.on_gpu(g)) && words.iter().all(|w| lower.contains(w))
    };
    let mut out = Vec::new();
    match ui.view {
        ClusterView::Jobs => {
            for (j, job) in screen.jobs.iter().enumerate() {
                let mut ranks: Vec<RankRow> = job
                    .ranks
                    .iter()
                    .filter(|r| {
                        let rank = r.rank.map_or_else(String::new, |n| format!("rank:{n}"));
                        matches(
                            &format!("{} {} {} {rank}", r.job, r.node, r.instance),
                            Some(r.gpu),
                        )
                    })
                    .cloned()
                    .collect();
                if ranks.is_empty() && !ui.filter.is_empty() {
                    continue;
                }
                order(&mut ranks, ui.sort, ui.reversed);
                for o in 0..job.ooms.len() {
                    out.push(Line::Oom(j, o));
                }
                out.push(Line::JobTitle(j));
                out.push(Line::RankHeadings);
                out.extend(ranks.into_iter().map(|r| Line::Rank(Box::new(r))));
            }
        }
        ClusterView::Nodes => {
            out.push(Line::NodeHeadings);
            for (i, node) in screen.nodes.iter().enumerate() {
                let text = format!("{} {}", node.node, node.instances.join(" "));
                let on_gpu = node.gpus.iter().any(|g| filter.on_gpu(g.gpu));
                if !matches(&text, None) || !on_gpu {
                    continue;
                }
                out.push(Line::Node(i));
                if ui.expanded.contains(&node.node) {
                    for (g, gpu) in node.gpus.iter().enumerate() {
                        if filter.on_gpu(gpu.gpu) {
                            out.push(Line::Gpu(i, g));
                        }
                    }
                }
            }
        }
    }
    out
}

fn order(ranks: &mut [RankRow], sort: RankSort, reversed: bool) {
    match sort {
        RankSort::Risk => sort_by_risk(ranks),
        RankSort::Rank => ranks.sort_by_key(|r| (r.rank, r.pid)),
        RankSort::Node => {
            ranks.sort_by(|a, b| (&a.node, a.gpu, a.rank).cmp(&(&b.node, b.gpu, b.rank)))
        }
        RankSort::Allocated => ranks.sort_by_key(|r| std::cmp::Reverse(r.allocated)),
        RankSort::Peak => ranks.sort_by_key(|r| std::cmp::Reverse(r.peak)),
        RankSort::Growth => ranks.sort_by(|a, b| {
            let g = |r: &RankRow| r.peak_growth.unwrap_or(f64::NEG_INFINITY);
            g(b).total_cmp(&g(a))
        }),
        RankSort::Step => ranks.sort_by_key(|r| (r.step, r.rank)),
    }
    if reversed {
        ranks.reverse();
    }
}
