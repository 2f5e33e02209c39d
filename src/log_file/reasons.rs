//! What changed in the reasons shown: a reason that appears is written as it appears, one
//! that goes as cleared; a reason whose text changes is both (its old text cleared, the new
//! one shown), so every state the screen showed is in the log.

use std::collections::BTreeMap;

#[derive(Default)]
pub struct ReasonLog {
    /// The reasons shown, by [`key`].
    shown: BTreeMap<String, String>,
}

impl ReasonLog {
    /// The lines to write for `current`, the reasons shown now.
    pub fn update(&mut self, current: Vec<String>) -> Vec<String> {
        let current: BTreeMap<String, String> = current
            .into_iter()
            .map(|text| (key(&text).to_string(), text))
            .collect();
        let mut lines: Vec<String> = self
            .shown
            .iter()
            .filter(|(k, _)| !current.contains_key(*k))
            .map(|(_, text)| format!("cleared: {text}"))
            .collect();
        lines.extend(
            current
                .iter()
                .filter(|(k, _)| !self.shown.contains_key(*k))
                .map(|(_, text)| format!("n/a: {text}")),
        );
        self.shown = current;
        lines
    }
}

/// What makes a reason the same reason: its text, less an age that grows by itself ("GPU 0
/// stale: last sample 3s ago"), which would otherwise be a new line every second.
fn key(text: &str) -> &str {
    text.split(": last sample ").next().unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appearing_changing_and_clearing_reasons_are_written_once() {
        let mut log = ReasonLog::default();
        let r = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            log.update(r(&["GPU 0 fan: not supported"])),
            r(&["n/a: GPU 0 fan: not supported"])
        );
        assert!(log.update(r(&["GPU 0 fan: not supported"])).is_empty());
        assert_eq!(
            log.update(r(&["GPU 0 fan: timed out"])),
            r(&[
                "cleared: GPU 0 fan: not supported",
                "n/a: GPU 0 fan: timed out"
            ])
        );
        assert_eq!(log.update(r(&[])), r(&["cleared: GPU 0 fan: timed out"]));
        assert_eq!(
            log.update(r(&["GPU 1 stale: last sample 3s ago"])),
            r(&["n/a: GPU 1 stale: last sample 3s ago"])
        );
        assert!(
            log.update(r(&["GPU 1 stale: last sample 4s ago"]))
                .is_empty()
        );
    }
}
