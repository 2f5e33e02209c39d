//! What the person chose (view, selection, filter, sort, expanded nodes, pause) and the
//! lines the body shows, made from the `Screen` and those choices.

use crate::cluster::cells::gpu_detail_lines;
use crate::cluster::options::ClusterView;
use crate::cluster::view::{GpuRow, RankRow, Screen, sort_by_risk};
use crate::terminal_kit::filter::Filter;
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

impl Ui {
    /// With nothing selected on screen (at the start, after the view switched, when the
    /// filter hid the selected line) the first selectable line is: the screen opens on a
    /// row, so Enter and the charts have a subject at once.
    pub fn select_first_if_none(&mut self, screen: &Screen, lines: &[Line]) {
        let shown = |key: &String| lines.iter().any(|l| l.key(screen).as_ref() == Some(key));
        if !self.selected.as_ref().is_some_and(shown) {
            self.selected = lines.iter().find_map(|l| l.key(screen));
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
    /// Node index, GPU index, line of its single-node figures and processes
    /// (`cells::gpu_detail_lines`).
    GpuDetail(usize, usize, usize),
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

/// A typed filter split into what it matches exactly and what it matches as text.
#[derive(Debug, Default, PartialEq)]
pub struct ClusterFilter {
    /// `gpu:N` words (the monitor's), matched exactly.
    pub gpus: Filter,
    /// `rank:N` words, matched exactly: `rank:1` is rank 1, not 10 or 11.
    pub ranks: Vec<u32>,
    /// The other words, lowercased: each must be contained in the row's text.
    pub words: Vec<String>,
}

impl ClusterFilter {
    pub fn parse(typed: &str) -> ClusterFilter {
        let gpus = Filter::parse(typed);
        let mut ranks = Vec::new();
        let mut words = Vec::new();
        for word in gpus.text.split_whitespace() {
            match word.strip_prefix("rank:").map(str::parse::<u32>) {
                Some(Ok(n)) => ranks.push(n),
                // `rank:x` is not a rank: it stays text.
                _ => words.push(word.to_string()),
            }
        }
        ClusterFilter { gpus, ranks, words }
    }

    fn text(&self, text: &str) -> bool {
        let lower = text.to_lowercase();
        self.words.iter().all(|w| lower.contains(w.as_str()))
    }

    fn rank(&self, rank: Option<u32>) -> bool {
        self.ranks.is_empty() || rank.is_some_and(|r| self.ranks.contains(&r))
    }
}

/// The body's lines for `ui`'s view, filter and order.
pub fn lines(screen: &Screen, ui: &Ui) -> Vec<Line> {
    let filter = ClusterFilter::parse(&ui.filter);
    let mut out = Vec::new();
    match ui.view {
        ClusterView::Jobs => {
            for (j, job) in screen.jobs.iter().enumerate() {
                let mut ranks: Vec<RankRow> = job
                    .ranks
                    .iter()
                    .filter(|r| {
                        filter.gpus.on_gpu(r.gpu)
                            && filter.rank(r.rank)
                            && filter.text(&format!("{} {} {}", r.job, r.node, r.instance))
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
                // A GPU kept by `gpu:N` that also holds a rank kept by `rank:N`.
                let kept = |g: &GpuRow| {
                    filter.gpus.on_gpu(g.gpu)
                        && (filter.ranks.is_empty()
                            || g.ranks.iter().any(|r| filter.ranks.contains(r)))
                };
                if !filter.text(&text) || !node.gpus.iter().any(kept) {
                    continue;
                }
                out.push(Line::Node(i));
                if ui.expanded.contains(&node.node) {
                    for (g, gpu) in node.gpus.iter().enumerate() {
                        if kept(gpu) {
                            out.push(Line::Gpu(i, g));
                            let detail = gpu_detail_lines(gpu).len();
                            out.extend((0..detail).map(|k| Line::GpuDetail(i, g, k)));
                        }
                    }
                }
            }
        }
    }
    out
}

/// The targets of the nodes shown open, whose single-node figures the next refresh reads.
pub fn open_instances(screen: &Screen, ui: &Ui) -> Vec<String> {
    if ui.view != ClusterView::Nodes {
        return Vec::new();
    }
    let mut out: Vec<String> = screen
        .nodes
        .iter()
        .filter(|n| ui.expanded.contains(&n.node))
        .flat_map(|n| n.instances.iter().cloned())
        .collect();
    out.sort();
    out.dedup();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::view::Freshness;

    fn rank(n: u32, node: &str, gpu: u32) -> RankRow {
        RankRow {
            job: "job-1".into(),
            rank: Some(n),
            local_rank: None,
            node: node.into(),
            instance: format!("{node}:9400"),
            gpu,
            uuid: None,
            pid: 100 + n,
            running: Some(true),
            allocated: None,
            reserved: None,
            peak: None,
            peak_growth: None,
            step: None,
            steps_from: crate::model::StepOrigin::Job,
            oom_in_steps: None,
            ooms: None,
            oom_at_ms: None,
            behind: None,
            nearest_oom: false,
            fastest_growth: false,
            fresh: Freshness {
                age_ms: 0,
                stale: None,
                missing_since_ms: None,
            },
        }
    }

    fn shown(screen: &Screen, filter: &str) -> Vec<u32> {
        let mut ui = Ui::new(Some(ClusterView::Jobs));
        ui.filter = filter.into();
        lines(screen, &ui)
            .iter()
            .filter_map(|l| match l {
                Line::Rank(r) => r.rank,
                _ => None,
            })
            .collect()
    }

    #[test]
    fn rank_words_match_the_rank_exactly_and_text_words_by_substring() {
        let ranks = [1, 10, 11, 12, 21]
            .into_iter()
            .map(|n| rank(n, if n < 11 { "node-1" } else { "node-12" }, n % 2))
            .collect();
        let screen = Screen {
            source: "test".into(),
            now_ms: 0,
            problems: Vec::new(),
            jobs: vec![crate::cluster::view::JobGroup {
                job: "job-1".into(),
                median_step: None,
                ooms: Vec::new(),
                ranks,
            }],
            nodes: Vec::new(),
            last_requests: 0,
            fetches: 0,
        };
        let mut all = shown(&screen, "");
        all.sort_unstable();
        assert_eq!(all, [1, 10, 11, 12, 21]);
        // rank:1 is rank 1, not 10, 11, 12 or 21.
        assert_eq!(shown(&screen, "rank:1"), [1]);
        assert_eq!(shown(&screen, "RANK:12"), [12]);
        let mut either = shown(&screen, "rank:1 rank:21");
        either.sort_unstable();
        assert_eq!(either, [1, 21]);
        // No rank 2: nothing, and the job is left out.
        assert_eq!(shown(&screen, "rank:2"), Vec::<u32>::new());
        assert!(
            lines(&screen, &{
                let mut ui = Ui::new(Some(ClusterView::Jobs));
                ui.filter = "rank:2".into();
                ui
            })
            .is_empty()
        );
        // Text stays a substring: node-1 is in node-12 too.
        let mut on = shown(&screen, "node-1");
        on.sort_unstable();
        assert_eq!(on, [1, 10, 11, 12, 21]);
        assert_eq!(shown(&screen, "node-12 rank:11"), [11]);
        // gpu:N stays exact, with rank:N beside it.
        let mut gpu1 = shown(&screen, "gpu:1");
        gpu1.sort_unstable();
        assert_eq!(gpu1, [1, 11, 21]);
        assert_eq!(shown(&screen, "gpu:0 rank:1"), Vec::<u32>::new());
        // `rank:x` is not a rank: text, matching nothing here.
        assert_eq!(shown(&screen, "rank:x"), Vec::<u32>::new());
    }
}
