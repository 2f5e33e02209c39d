//! The charts under the table, drawn as the monitor's sparklines (`tui::panels::spark`):
//! for the selected job (the job view) its allocated and reserved totals, its worst rank's
//! reserved and its GPUs' mean utilisation; for the selected node (the node view) its GPU
//! memory used and mean utilisation; over the last five minutes, with where that past came
//! from. A pure function of the charts' history, the subject and the moment shown.
//!
//! ```text
//! job job-7, last 5m (past from Prometheus since 12:00:01)
//! alloc  ▁▂▃▄▅▆▇█▇▆                                      42.0 GiB total
//! resv   ▂▃▄▅▆▇██▇▆                                      46.0 GiB total
//! worst  ▂▃▄▅▆▇██▇▆                                      13.0 GiB one rank's reserved
//! util   ▅▅▆▆▆▅▅▅▅▆                                      57%
//! ```

use crate::cluster::charts::{Charts, Past};
use crate::cluster::prometheus::HISTORY_SPAN_S;
use crate::cluster::view::clock;
use crate::history::Series;
use crate::model::NA;
use crate::model::units;
use crate::tui::panels::spark::{Plot, spark};
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

/// What the charts are of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subject {
    Job(String),
    Node(String),
}

/// Rows the charts take: a title and four charts (a node's two leave two blank).
pub const HEIGHT: u16 = 5;

const LABEL_W: usize = 7;
const VALUE_W: usize = 34;

/// A chart row: its label, the series, its scale, and how its value reads.
type Row<'a> = (&'a str, &'a Series, Option<f64>, fn(f64) -> String);

pub fn draw(
    frame: &mut Frame,
    area: Rect,
    subject: &Subject,
    charts: &Charts,
    (now_ms, stale_ms): (u64, u64),
    theme: &Theme,
) {
    let span_ms = HISTORY_SPAN_S * 1000;
    let range = (now_ms.saturating_sub(span_ms), now_ms.saturating_add(1));
    let past = match charts.past {
        Past::Nothing => "nothing read yet".to_string(),
        Past::Prometheus(from) => format!("past from Prometheus since {}", clock(from)),
        Past::Refreshes(since) => format!(
            "no Prometheus: history from this view's refreshes only, since {}",
            clock(since)
        ),
    };
    let (name, rows): (String, Vec<Row>) = match subject {
        Subject::Job(job) => match charts.jobs.get(job) {
            Some(c) => {
                let scale = [&c.allocated, &c.reserved]
                    .iter()
                    .filter_map(|s| s.window_peak(range.0, range.1))
                    .map(|p| p.value)
                    .reduce(f64::max);
                (
                    format!("job {job}"),
                    vec![
                        ("alloc", &c.allocated, scale, |v| {
                            format!("{} total", units::bytes(v.max(0.0).round() as u64))
                        }),
                        ("resv", &c.reserved, scale, |v| {
                            format!("{} total", units::bytes(v.max(0.0).round() as u64))
                        }),
                        ("worst", &c.worst, None, |v| {
                            format!(
                                "{} largest rank's reserved",
                                units::bytes(v.max(0.0).round() as u64)
                            )
                        }),
                        ("util", &c.util, Some(100.0), |v| format!("{v:.0}% mean")),
                    ],
                )
            }
            None => (format!("job {job}"), Vec::new()),
        },
        Subject::Node(node) => match charts.nodes.get(node) {
            Some(c) => (
                format!("node {node}"),
                vec![
                    ("used", &c.used, None, |v| {
                        format!("{} used", units::bytes(v.max(0.0).round() as u64))
                    }),
                    ("util", &c.util, Some(100.0), |v| format!("{v:.0}% mean")),
                ],
            ),
            None => (format!("node {node}"), Vec::new()),
        },
    };
    let mut lines = vec![Line::from(vec![
        Span::styled(format!("{name}, last 5m "), theme.title),
        Span::styled(format!("({past})"), theme.dim),
    ])];
    let width = usize::from(area.width).saturating_sub(LABEL_W + VALUE_W + 1);
    let width = u16::try_from(width).unwrap_or(0);
    for (label, series, scale, shown) in rows {
        let drawn = spark(
            theme,
            series,
            range,
            Plot::row(width, scale, theme.sparkline),
            false,
        );
        let mut spans = vec![Span::styled(format!("{label:<LABEL_W$}"), theme.label)];
        spans.extend(drawn.rows.into_iter().flat_map(|l| l.spans));
        let (text, style) = value(series, now_ms, stale_ms, shown);
        spans.push(Span::styled(format!(" {text}"), style(theme)));
        lines.push(Line::from(spans));
    }
    frame.render_widget(Paragraph::new(lines), area);
}

/// The value at the right of a chart: the last reading while it is current (not older than
/// `stale_ms`, a few refreshes), else since when there has been none (never the old figure
/// as if it were now).
fn value(
    series: &Series,
    now_ms: u64,
    stale_ms: u64,
    shown: fn(f64) -> String,
) -> (String, fn(&Theme) -> ratatui::style::Style) {
    match series.last() {
        Some((at, v)) if !series.in_gap() && now_ms.saturating_sub(at) <= stale_ms => {
            (shown(v), |t| t.value)
        }
        Some((at, _)) => (format!("{NA}: none read since {}", clock(at)), |t| t.warn),
        None => (format!("{NA}: none read yet"), |t| t.dim),
    }
}
