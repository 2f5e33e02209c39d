//! What held the memory, pinned in the detail pane under the peak and the OOMs: the top
//! allocation sites of the newest relevant memory snapshot (the OOM's, the peak's, the one
//! asked for), whether that answer is exact, and at an OOM why the request did not fit.
//! While the worker reduces it: "reading snapshot ..."; a file that failed: its one line; in
//! a replay, that it is not read there. Under it, the snapshots the writer deleted to keep
//! its bound, by name.

use super::command;
use crate::model::AllocatorSnapshot;
use crate::model::held_sites::{
    SitesExactness, SitesState, exactness_note, fit_words, headline, request_words,
};
use crate::model::snapshot_drops::Dropped;
use crate::model::time::age_label;
use crate::terminal_kit::theme::Theme;
use ratatui::text::{Line, Span};

/// Sites named on the headline; `--json` and the report carry more.
const SITES_SHOWN: usize = 3;

/// The lines for the channel's snapshot that matters now (`relevant_snapshot`), the OOM's
/// cut to `width` cells with the theme's mark (none without one: a writer without `--sites`
/// stays as it was; one with it and no snapshot yet says how to get one).
pub fn lines(
    theme: &Theme,
    width: u16,
    channel: &AllocatorSnapshot,
    replay: bool,
    now_ms: u64,
) -> Vec<Line<'static>> {
    let dropped = channel.snapshots_dropped.as_ref();
    let steps = channel.steps_from;
    let Some(note) = channel.relevant_snapshot() else {
        if channel.identity.sites && !replay {
            return vec![Line::from(vec![
                super::panel_text::label(theme, "HELD"),
                Span::styled("no snapshot yet (m asks for one)", theme.dim),
            ])];
        }
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut about = format!(
        "snapshot {}, {}",
        note.reason.label(),
        age_label(note.at_ms, now_ms)
    );
    if let Some(step) = note.step {
        about.push_str(&format!(", {}", steps.words(step)));
    }
    match &note.sites {
        // A replay reads no files: they are of another time, perhaps another machine.
        SitesState::NotRead if replay => out.push(Line::from(vec![
            super::panel_text::label(theme, "HELD"),
            Span::styled(
                format!(
                    "snapshot {}: not read in a replay (vramscope report reads it)",
                    note.name
                ),
                theme.dim,
            ),
        ])),
        SitesState::NotRead | SitesState::Reading => out.push(Line::from(vec![
            super::panel_text::label(theme, "HELD"),
            Span::styled(format!("reading snapshot {} ...", note.name), theme.dim),
        ])),
        SitesState::Failed { why } => out.push(Line::from(vec![
            super::panel_text::label(theme, "HELD"),
            Span::styled(format!("snapshot {}: {why}", note.name), theme.warn),
        ])),
        SitesState::Reduced(held) => {
            let style = match held.exactness {
                SitesExactness::Exact => theme.value,
                _ => theme.warn,
            };
            out.push(Line::from(vec![
                super::panel_text::label(theme, "HELD"),
                Span::styled(headline(held, SITES_SHOWN), style),
            ]));
            if let Some(note) = exactness_note(held) {
                out.push(Line::styled(format!("  {note}"), theme.warn));
            }
            if let Some(fit) = &held.oom {
                // Where the request was made on a line of its own, first: a long verdict
                // cut at the pane's edge must not take it with it.
                let width = usize::from(width);
                for text in [
                    format!("  at the OOM: {}", request_words(fit)),
                    format!("  {}", fit_words(fit)),
                ] {
                    let text = command::cut(&text, width, theme.glyphs.cut).unwrap_or(text);
                    out.push(Line::styled(text, theme.crit));
                }
            }
        }
    }
    out.push(Line::styled(format!("  {about}"), theme.dim));
    // The files the writer deleted to keep its bound, by name: what is gone is not a mystery.
    if let Some(words) = dropped.and_then(Dropped::short_words) {
        out.push(Line::styled(format!("  {words}"), theme.dim));
    }
    out
}
