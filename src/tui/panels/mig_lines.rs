//! A MIG GPU's instances, drawn in its full panel where other GPUs draw their utilisation
//! chart: NVML does not support utilisation in MIG mode, so that chart would stay empty.
//!
//! ```text
//! MIG  3g.40gb GI 1 CI 0    4.0 GiB / 40.0 GiB  pid 4100
//! MIG  1g.10gb GI 2 CI 0    1.0 GiB / 10.0 GiB  pids 4200 4201
//!      util n/a: NVML does not support utilisation in MIG mode
//! ```
//!
//! The note comes when a row is left for it (the `w` overlay says the same). With one row
//! and several instances they share it (`MIG 3g.40gb 4.0G/40G │ 1g.10gb 1.0G/10G`), as many
//! as the width holds and then `+N more`; more instances than rows end with `+N more`.

use super::{buffer_write, panel_text};
use crate::model::mig::MigInstance;
use crate::model::{MigState, units};
use crate::terminal_kit::theme::Theme;
use ratatui::text::{Line, Span};

/// The note in place of the utilisation figure.
pub const UTIL_NOTE: &str = "util n/a: NVML does not support utilisation in MIG mode";

/// `rows` lines `width` cells wide for a GPU in MIG mode.
pub fn lines(theme: &Theme, mig: &MigState, rows: u16, width: u16) -> Vec<Line<'static>> {
    let rows = usize::from(rows.max(1));
    let instances = match &mig.instances {
        Ok(list) => list,
        Err(why) => {
            return vec![Line::from(vec![
                head(theme),
                Span::styled(format!("instances {} ({why})", panel_text::NA), theme.dim),
            ])];
        }
    };
    if instances.is_empty() {
        return vec![Line::from(vec![
            head(theme),
            Span::styled("no instances  ", theme.dim),
            Span::styled(UTIL_NOTE, theme.dim),
        ])];
    }
    let note = || Line::from(vec![Span::raw("     "), Span::styled(UTIL_NOTE, theme.dim)]);
    // One line per instance while they fit, the note after them when a row is left; else as
    // many as fit and how many did not, or all of them on one line.
    if instances.len() <= rows {
        let mut out: Vec<Line<'static>> = instances
            .iter()
            .enumerate()
            .map(|(i, instance)| instance_line(theme, instance, i == 0))
            .collect();
        if out.len() < rows {
            out.push(note());
        }
        return out;
    }
    if rows == 1 {
        return vec![packed(theme, instances, usize::from(width))];
    }
    let shown = rows - 1;
    let mut out: Vec<Line<'static>> = instances[..shown]
        .iter()
        .enumerate()
        .map(|(i, instance)| instance_line(theme, instance, i == 0))
        .collect();
    out.push(Line::styled(
        format!("     +{} more", instances.len() - shown),
        theme.dim,
    ));
    out
}

/// The instances on one line, `MIG  3g.40gb 4.0G/40G │ 1g.10gb 1.0G/10G`, as many as fit
/// `width` cells whole; those that do not are counted (`+3 more`), never cut at the edge.
fn packed(theme: &Theme, instances: &[MigInstance], width: usize) -> Line<'static> {
    let mut spans = vec![head(theme)];
    let mut used = buffer_write::cells(&spans[0]);
    for (i, instance) in instances.iter().enumerate() {
        let sep = if i > 0 { " │ " } else { "" };
        let text = format!("{} {}", profile(instance), short_memory(instance));
        let cells = sep.chars().count() + buffer_write::cells(&Span::raw(text.as_str()));
        let left = instances.len() - i - 1;
        // Room for this one, and for the count of the rest after it unless it is the last.
        let tail = if left > 0 { more(left).len() } else { 0 };
        if used + cells + tail > width {
            spans.push(Span::styled(more(instances.len() - i), theme.dim));
            return Line::from(spans);
        }
        used += cells;
        if i > 0 {
            spans.push(Span::styled(sep, theme.border));
        }
        spans.push(Span::styled(profile(instance), theme.label));
        spans.push(Span::styled(
            format!(" {}", short_memory(instance)),
            theme.value,
        ));
    }
    Line::from(spans)
}

/// ` +3 more`.
fn more(count: usize) -> String {
    format!("  +{count} more")
}

/// `MIG 7 inst 38.5/70.0G`: the instances counted and their memory summed, for the compact
/// list's one row per GPU; `None` unless the instances were read.
pub fn summary(mig: &MigState) -> Option<String> {
    let list = mig.instances.as_ref().ok()?;
    let (used, total) = list
        .iter()
        .filter_map(|i| i.memory.as_ref().ok())
        .fold((0u64, 0u64), |(u, t), m| (u + m.used, t + m.total));
    let memory = if total > 0 {
        format!(
            " {}/{}",
            units::short_bytes(used),
            units::short_bytes(total)
        )
    } else {
        String::new()
    };
    Some(format!("MIG {} inst{memory}", list.len()))
}

fn head(theme: &Theme) -> Span<'static> {
    Span::styled("MIG  ", theme.label)
}

fn profile(instance: &MigInstance) -> String {
    instance
        .profile
        .clone()
        .unwrap_or_else(|_| panel_text::NA.to_string())
}

fn short_memory(instance: &MigInstance) -> String {
    match &instance.memory {
        Ok(m) => format!(
            "{}/{}",
            units::short_bytes(m.used),
            units::short_bytes(m.total)
        ),
        Err(_) => panel_text::NA.to_string(),
    }
}

/// `MIG  3g.40gb GI 1 CI 0    4.0 GiB / 40.0 GiB  pids 4100 4101`.
fn instance_line(theme: &Theme, instance: &MigInstance, first: bool) -> Line<'static> {
    let mut spans = vec![if first {
        head(theme)
    } else {
        Span::raw("     ")
    }];
    spans.push(Span::styled(
        format!("{:<8}", profile(instance)),
        theme.value,
    ));
    spans.push(Span::styled(
        format!(" {}", instance.ids_label()),
        theme.dim,
    ));
    spans.push(match &instance.memory {
        Ok(m) => Span::styled(
            format!("  {:>9} / {}", units::bytes(m.used), units::bytes(m.total)),
            theme.value,
        ),
        Err(why) => Span::styled(format!("  mem {} ({why})", panel_text::NA), theme.dim),
    });
    // From GPM (`--gpm`) only: NVML's utilisation call has none in MIG mode.
    if let Ok(sm) = &instance.sm_util {
        spans.push(Span::styled(format!("  sm {sm:>3}%"), theme.value));
    }
    spans.push(match &instance.processes {
        Ok(list) if list.is_empty() => Span::styled("  no processes", theme.dim),
        Ok(list) => {
            let pids: Vec<String> = list.iter().map(|p| p.pid.to_string()).collect();
            let word = if pids.len() == 1 { "pid" } else { "pids" };
            Span::styled(format!("  {word} {}", pids.join(" ")), theme.value)
        }
        Err(why) => Span::styled(format!("  processes {} ({why})", panel_text::NA), theme.dim),
    });
    Line::from(spans)
}
