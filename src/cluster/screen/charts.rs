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
use crate::terminal_kit::sparkline::{Plot, spark};
use crate::terminal_kit::theme::Theme;
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
        Past::Failed(since, ref why) => format!(
            "Prometheus gave no past ({why}): history from this view's refreshes only, since {}",
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
            series.until(now_ms),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::charts::{GpuNow, RankNow};
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    fn rendered(subject: &Subject, charts: &Charts, now_ms: u64) -> Vec<String> {
        let mut terminal = Terminal::new(TestBackend::new(100, HEIGHT)).unwrap();
        let theme = Theme::new(false, true);
        terminal
            .draw(|f| draw(f, f.area(), subject, charts, (now_ms, 3_000), &theme))
            .unwrap();
        let buffer = terminal.backend().buffer();
        (0..HEIGHT)
            .map(|y| {
                (0..100)
                    .map(|x| buffer[(x, y)].symbol())
                    .collect::<String>()
                    .trim_end()
                    .to_string()
            })
            .collect()
    }

    #[test]
    fn a_job_s_charts_show_their_sums_then_since_when_nothing_was_read() {
        let gib = 1u64 << 30;
        let mut charts = Charts::default();
        let gpus = [GpuNow {
            node: "n",
            gpu: ("n:1", 0),
            read: true,
            used: Some(3 * gib),
            util: Some(70.0),
        }];
        for t in 0..30u64 {
            let ranks = [
                RankNow {
                    job: "j",
                    read: true,
                    allocated: Some(gib + t * gib / 10),
                    reserved: Some(2 * gib),
                    gpu: ("n:1", 0),
                },
                RankNow {
                    job: "j",
                    read: true,
                    allocated: Some(gib),
                    reserved: Some(3 * gib),
                    gpu: ("n:1", 0),
                },
            ];
            charts.record(1_000_000 + t * 1_000, &ranks, &gpus);
        }
        let now = 1_029_000;
        let lines = rendered(&Subject::Job("j".into()), &charts, now);
        assert!(
            lines[0].starts_with(
                "job j, last 5m (no Prometheus: history from this view's refreshes only, since"
            ),
            "{lines:#?}"
        );
        assert!(lines[1].starts_with("alloc "), "{lines:#?}");
        assert!(lines[1].ends_with(&format!(" {} total", units::bytes(gib * 49 / 10))));
        assert!(lines[2].ends_with(&format!(" {} total", units::bytes(5 * gib))));
        assert!(lines[3].ends_with(&format!(
            " {} largest rank's reserved",
            units::bytes(3 * gib)
        )));
        assert!(lines[4].ends_with(" 70% mean"), "{lines:#?}");
        // The plot is drawn (ascii levels), rising at its right end.
        assert!(lines[1].trim_end().len() > 60, "{lines:#?}");
        // A refresh that misses a rank: a break, and the value says since when.
        charts.record(
            1_030_000,
            &[RankNow {
                job: "j",
                read: false,
                allocated: Some(gib),
                reserved: Some(gib),
                gpu: ("n:1", 0),
            }],
            &gpus,
        );
        let lines = rendered(&Subject::Job("j".into()), &charts, 1_030_000);
        for line in &lines[1..] {
            assert!(line.contains("n/a: none read since"), "{lines:#?}");
        }
        // Old readings are not current either, even without a break.
        let lines = rendered(&Subject::Node("n".into()), &charts, 1_040_000);
        assert!(lines[1].contains("n/a: none read since"), "{lines:#?}");
    }
}
