//! The detail pane for the selected process: its full command (wrapped), container and pid view,
//! its Kubernetes pod, and VRAM and host RSS charts, each scaled to its own series with its
//! range, time axis and peak labelled (`own_scale`).

use super::{allocator_detail, centered, command, own_scale, panel_text, spark};
use crate::model::units;
use crate::terminal_kit::theme::Theme;
use crate::tui::rows::TableRow;
use crate::tui::view::View;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

pub fn render(frame: &mut Frame, area: Rect, view: &View, row: Option<&TableRow>) {
    let theme = view.theme;
    let width = area.width.saturating_sub(4).min(110);
    let block = super::overlay_block(theme, theme.title);
    let Some(row) = row else {
        let popup = centered(area, width, 10);
        frame.render_widget(Clear, popup);
        let block = block.title(Line::styled(" details ", theme.title));
        let text = Line::styled("no process selected (Esc closes)", theme.dim);
        frame.render_widget(Paragraph::new(text).block(block), popup);
        return;
    };
    // The lines depend on the pane's width only; the allocator's part then sets its height.
    let inner_w = block.inner(centered(area, width, 10)).width;
    let mut title = vec![Span::styled(
        format!(
            " PID {}  {}  GPU {} ",
            row.key.pid,
            row.user().unwrap_or(panel_text::NA),
            row.gpu_index
        ),
        theme.title,
    )];
    // The MIG instance the process runs in, as its own process list names it.
    let instance = view
        .snapshot
        .devices
        .iter()
        .find(|d| d.info.index == row.gpu_index)
        .and_then(|d| {
            d.sample
                .as_ref()?
                .mig_enabled()?
                .instance_of_pid(row.key.pid)
        });
    if let Some(instance) = instance {
        let profile = instance.profile.as_deref().unwrap_or(panel_text::NA);
        title.push(Span::styled(
            format!("MIG {profile} {} ", instance.ids_label()),
            theme.title,
        ));
    }
    if let Some(gone) = row.gone_label(view.now_ms, false) {
        title.push(Span::styled(format!("{gone} "), theme.warn));
    }
    let block = block.title(Line::from(title));

    let mut lines = Vec::with_capacity(10);
    let command_lines = command_lines(view, row.command(), inner_w);
    lines.extend(command_lines);
    lines.push(Line::from(vec![
        panel_text::label(theme, "container"),
        Span::styled(row.container().unwrap_or("-").to_string(), theme.value),
        Span::styled("  pid here ", theme.label),
        match (row.local_pid(), row.is_exited()) {
            (Some(pid), _) => Span::styled(pid.to_string(), theme.value),
            (None, true) => Span::styled("-", theme.dim),
            (None, false) if row.not_visible_here() => {
                Span::styled("not visible from this pid namespace", theme.warn)
            }
            (None, false) => Span::styled("not read yet", theme.dim),
        },
    ]));
    let pod = pod_lines(theme, row);
    lines.extend(pod);

    let chart_w = inner_w.saturating_sub(spark::LABEL_W);
    let range = spark::window(view, chart_w);
    let series = view.history.process(&row.key);

    let mut vram = vec![panel_text::label(theme, "VRAM")];
    vram.push(match (&row.vram, row.is_exited()) {
        (_, true) => Span::styled("-", theme.dim),
        (Ok(v), false) => Span::styled(units::bytes(*v), theme.value),
        (Err(a), false) => Span::styled(format!("{} ({a})", panel_text::NA), theme.dim),
    });
    if let Some(pct) = row.vram_pct {
        // A MIG process can use its instance's memory only: its share is of that.
        let of = if row.mig.is_some() {
            "of its instance"
        } else {
            "of the GPU"
        };
        vram.push(Span::styled(
            format!(" ({} {of})", panel_text::percent(pct)),
            theme.label,
        ));
    }
    vram.push(Span::styled("   SM ", theme.label));
    vram.push(percent_span(
        theme,
        row,
        row.sm.as_ref().ok().map(|v| f64::from(*v)),
        0,
    ));
    lines.push(Line::from(vram));
    // Each chart is scaled to its own series (a process moving between 4.0 and 4.6 GiB
    // fills the plot), its labels saying from where to where and of what total.
    let own_w = inner_w.saturating_sub(own_scale::LABEL_W);
    let own_rows = if area.height >= TALL_CHARTS_FROM {
        3
    } else {
        2
    };
    let own_range = spark::window(view, own_w);
    let gpu_total = view
        .snapshot
        .devices
        .iter()
        .find(|d| d.info.index == row.gpu_index)
        .and_then(|d| d.memory_total())
        .map(|t| t as f64);
    let host_total = match &view.snapshot.host_memory {
        Some(Ok(m)) => Some(m.total as f64),
        _ => None,
    };
    if let Some(s) = &series {
        let charted = spark::Charted {
            series: s.vram,
            all_time: row.vram_peak,
        };
        let of = match row.mig {
            Some(_) => None,
            None => gpu_total.map(|t| (t as u64, "GPU")),
        };
        let plot = (own_w, own_rows, theme.sparkline);
        lines.extend(own_scale::chart(view, charted, own_range, plot, of));
    }

    let mut rss = vec![panel_text::label(theme, "RSS ")];
    rss.push(match (row.rss(), row.is_exited()) {
        (_, true) => Span::styled("-", theme.dim),
        (Some(v), false) => Span::styled(units::bytes(v), theme.value),
        (None, false) => Span::styled(panel_text::NA, theme.dim),
    });
    rss.push(Span::styled("   CPU ", theme.label));
    rss.push(percent_span(theme, row, row.cpu().map(f64::from), 1));
    lines.push(Line::from(rss));
    match series {
        Some(s) => {
            let charted = spark::Charted {
                series: s.host_rss,
                all_time: row.rss_peak,
            };
            let plot = (own_w, own_rows, theme.sparkline_alt);
            let of = host_total.map(|t| (t as u64, "host RAM"));
            lines.extend(own_scale::chart(view, charted, own_range, plot, of));
        }
        None => lines.push(Line::styled("no history for this process", theme.dim)),
    }
    let allocator = allocator_detail::lines(view, row, inner_w, range, chart_w, gpu_total);
    lines.extend(allocator);
    let height = u16::try_from(lines.len() + 2).unwrap_or(u16::MAX);
    let popup = centered(area, width, height);
    frame.render_widget(Clear, popup);
    let inner = block.inner(popup);
    frame.render_widget(block, popup);
    frame.render_widget(Paragraph::new(lines), inner);
}

/// The full command, wrapped under its label: the table shows it short and cut, so this is
/// where it can be read whole. A command longer than `MAX_COMMAND_LINES` lines ends in the
/// cut mark rather than push the charts out of the pane.
fn command_lines(view: &View, command: Option<&str>, inner_w: u16) -> Vec<Line<'static>> {
    const LABEL: &str = "command ";
    let theme = view.theme;
    let Some(full) = command else {
        return vec![Line::from(vec![
            panel_text::label(theme, LABEL.trim_end()),
            Span::styled(panel_text::NA, theme.dim),
        ])];
    };
    let width = usize::from(inner_w).saturating_sub(LABEL.len()).max(1);
    let mut parts = command::wrap(full, width, width);
    if parts.len() > MAX_COMMAND_LINES {
        parts.truncate(MAX_COMMAND_LINES);
        if let Some(last) = parts.last_mut() {
            let longer = format!("{last}{}", theme.glyphs.cut);
            *last = command::cut(&longer, width, theme.glyphs.cut).unwrap_or(longer);
        }
    }
    parts
        .into_iter()
        .enumerate()
        .map(|(i, part)| {
            let head = if i == 0 {
                panel_text::label(theme, LABEL.trim_end())
            } else {
                Span::raw(" ".repeat(LABEL.len()))
            };
            Line::from(vec![head, Span::styled(part, theme.value)])
        })
        .collect()
}

/// `pod ml-team/trainer-0  container trainer` and `pod uid … qos burstable`, for a process in
/// a Kubernetes pod; a name that could not be read says why.
fn pod_lines(theme: &Theme, row: &TableRow) -> Vec<Line<'static>> {
    let Some(pod) = row.pod() else {
        return Vec::new();
    };
    let shown = |reading: &crate::model::Reading<String>| match reading {
        Ok(text) => Span::styled(text.clone(), theme.value),
        Err(why) => Span::styled(format!("{} ({why})", panel_text::NA), theme.dim),
    };
    let names = match (&pod.namespace, &pod.name) {
        (Ok(ns), Ok(name)) => Span::styled(format!("{ns}/{name}"), theme.value),
        (Err(why), _) | (_, Err(why)) => {
            Span::styled(format!("{} ({why})", panel_text::NA), theme.dim)
        }
    };
    let mut first = vec![panel_text::label(theme, "pod"), names];
    // A deleted pod's container name is gone for the same reason: said once.
    if pod.name.is_ok() {
        first.push(Span::styled("  container ", theme.label));
        first.push(shown(&pod.container));
    }
    let second = vec![
        panel_text::label(theme, "pod uid"),
        Span::styled(pod.uid.clone(), theme.value),
        Span::styled("  qos ", theme.label),
        match &pod.qos {
            Some(qos) => Span::styled(qos.clone(), theme.value),
            None => Span::styled(panel_text::NA, theme.dim),
        },
    ];
    vec![Line::from(first), Line::from(second)]
}

/// From this terminal height the detail pane's charts are three rows tall, else two.
const TALL_CHARTS_FROM: u16 = 32;

/// Lines the detail pane gives a command before cutting it.
const MAX_COMMAND_LINES: usize = 6;

/// `45%`, `102.5%`, `n/a`, or `-` for an exited process.
fn percent_span(
    theme: &Theme,
    row: &TableRow,
    value: Option<f64>,
    decimals: usize,
) -> Span<'static> {
    match value {
        _ if row.is_exited() => Span::styled("-", theme.dim),
        Some(v) => Span::styled(format!("{v:.decimals$}%"), theme.value),
        None => Span::styled(panel_text::NA, theme.dim),
    }
}
