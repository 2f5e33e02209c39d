//! `vramscope cluster --once`: the screen as plain text. Problems first, then each job's
//! OOMs and ranks (riskiest first), then the nodes with their GPUs, each with its
//! single-node figures and processes.

use super::cells::{
    NODE_HEADINGS, RANK_HEADINGS, gpu_detail_lines, gpu_line, job_title, node_cells, oom_line,
    rank_cells,
};
use super::view::{Screen, clock};
use std::fmt::Write;

pub fn render(screen: &Screen) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "vramscope cluster: {} at {}, {} node{}, {} request{} a refresh",
        screen.source,
        clock(screen.now_ms),
        screen.nodes.len(),
        if screen.nodes.len() == 1 { "" } else { "s" },
        screen.last_requests,
        if screen.last_requests == 1 { "" } else { "s" }
    );
    for p in &screen.problems {
        let _ = writeln!(out, "! {p}");
    }
    for job in &screen.jobs {
        out.push('\n');
        for o in &job.ooms {
            let _ = writeln!(out, "{}", oom_line(&job.job, o));
        }
        let _ = writeln!(out, "{}", job_title(job));
        let rows: Vec<Vec<String>> = job.ranks.iter().map(|r| rank_cells(r).to_vec()).collect();
        aligned(&mut out, &RANK_HEADINGS, &rows);
    }
    out.push('\n');
    let rows: Vec<Vec<String>> = screen
        .nodes
        .iter()
        .map(|n| node_cells(n).to_vec())
        .collect();
    aligned(&mut out, &NODE_HEADINGS, &rows);
    for n in &screen.nodes {
        let _ = writeln!(out, "{}", n.node);
        for g in &n.gpus {
            let _ = writeln!(out, "  {}", gpu_line(g));
            for line in gpu_detail_lines(g) {
                let _ = writeln!(out, "    {line}");
            }
        }
    }
    out
}

/// Columns padded to their widest cell; the last is left ragged.
fn aligned(out: &mut String, headings: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = headings.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |out: &mut String, cells: &mut dyn Iterator<Item = &str>| {
        let mut text = String::new();
        for (i, (cell, w)) in cells.zip(&widths).enumerate() {
            if i > 0 {
                text.push_str("  ");
            }
            text.push_str(cell);
            if i + 1 < widths.len() {
                text.extend(std::iter::repeat_n(' ', w - cell.chars().count()));
            }
        }
        let _ = writeln!(out, "{}", text.trim_end());
    };
    line(out, &mut headings.iter().copied());
    for row in rows {
        line(out, &mut row.iter().map(String::as_str));
    }
}
