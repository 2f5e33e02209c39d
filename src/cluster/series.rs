//! One sample as every source hands it on: a metric name, its labels and its value, with the
//! scrape target (`instance`) it came from. Label text is foreign: it is cleaned here, once,
//! as it enters, so every output shows the same safe text.

/// A sample from Prometheus's answer or an exporter's page.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    /// Label pairs, cleaned; `instance` among them for Prometheus, never for a direct scrape.
    pub labels: Vec<(String, String)>,
    pub value: f64,
    /// The scrape target: Prometheus's `instance` label, or the target scraped directly.
    pub instance: String,
}

impl Series {
    /// A sample with its labels cleaned; `instance` is the target it came from.
    pub fn new(name: &str, labels: Vec<(String, String)>, value: f64, instance: &str) -> Self {
        let labels = labels
            .into_iter()
            .map(|(k, v)| (clean(k), clean(v)))
            .collect();
        Self {
            name: clean(name.to_string()),
            labels,
            value,
            instance: clean(instance.to_string()),
        }
    }

    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }

    /// The first of `names` present: a label's several spellings, preferred first.
    pub fn any_label(&self, names: &[&str]) -> Option<&str> {
        names.iter().find_map(|n| self.label(n))
    }
}

/// Label text longer than this is cut: it is shown in one table cell at most.
const MAX_TEXT: usize = 256;

pub fn clean(mut text: String) -> String {
    // Nearly every label is printable ASCII: that needs no character-by-character check.
    if !text.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        crate::text::clean_in_place(&mut text);
    }
    if text.len() > MAX_TEXT {
        let mut end = MAX_TEXT;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn foreign_label_text_is_cleaned_and_cut() {
        let s = Series::new(
            "DCGM_FI_DEV_FB_USED",
            vec![
                ("Hostname".into(), "node\u{1b}[2J\u{202e}a".into()),
                ("pod".into(), "é".repeat(300)),
                ("hostname".into(), String::new()),
            ],
            1.0,
            "n:1",
        );
        assert_eq!(s.label("Hostname"), Some("node\u{FFFD}[2J\u{FFFD}a"));
        assert!(s.label("pod").is_some_and(|p| p.len() <= MAX_TEXT));
        // Empty is absent, as Prometheus treats it.
        assert_eq!(s.any_label(&["hostname", "Hostname"]), s.label("Hostname"));
    }
}
