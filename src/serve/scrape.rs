//! One scrape's whole exposition: vramscope's own facts, then every device's and process's
//! families (`device_metrics`, `process_metrics`), encoded once per `Published` and format.
//! The top of the exporter's metric files: it imports them, none of them imports it.

use super::encode::{self, Format};
use super::families::{Family, Kind, Labels, Number, Sample, Unit};
use super::published::Published;
use super::{device_metrics, process_metrics};
use bytes::Bytes;
use std::sync::Arc;

// Here rather than beside `Published`: the encoding reads every metric file, and those read
// `Published`, so this is where the two meet without a loop.
impl Published {
    /// The exposition in `format`, encoded once per `Published`.
    pub fn body(&self, format: Format) -> Bytes {
        let cell = match format {
            Format::Text => &self.text,
            Format::OpenMetrics => &self.openmetrics,
        };
        cell.get_or_init(|| Bytes::from(encode::encode(format, build(self))))
            .clone()
    }
}

/// Every family of one scrape; the encoders leave out those without samples.
pub fn build(published: &Published) -> Vec<Family> {
    let mut families = general(published);
    families.extend(device_metrics::families(published));
    families.extend(process_metrics::families(published));
    families
}

/// Facts about vramscope itself.
fn general(published: &Published) -> Vec<Family> {
    let snapshot = &published.snapshot;
    let no_labels: Labels = Arc::from(Vec::new());
    let one = |labels: &Labels, value: Number| {
        vec![Sample {
            labels: Arc::clone(labels),
            value,
        }]
    };
    let version: Labels = Arc::from(vec![("version", env!("CARGO_PKG_VERSION").to_string())]);
    // Only once NVML has answered either way: before that, 0 would claim it failed.
    let nvml = match (&snapshot.driver, &snapshot.nvml_problem) {
        (_, Some(_)) => Some(0),
        (Some(_), None) => Some(1),
        (None, None) => None,
    };
    let taken =
        (snapshot.taken_at_ms > 0).then(|| Number::Float(snapshot.taken_at_ms as f64 / 1000.0));
    vec![
        Family {
            name: "vramscope_build_info",
            help: "vramscope's version; always 1.",
            kind: Kind::Gauge,
            unit: None,
            samples: one(&version, Number::Int(1)),
        },
        Family {
            name: "vramscope_nvml_available",
            help: "1 when NVML could be opened, 0 when it cannot be used (no driver, no permission).",
            kind: Kind::Gauge,
            unit: None,
            samples: nvml.map_or_else(Vec::new, |v| one(&no_labels, Number::Int(v))),
        },
        Family {
            name: "vramscope_snapshot_timestamp_seconds",
            help: "When the figures served were sampled (Unix time); scrapes read this snapshot, never NVML.",
            kind: Kind::Gauge,
            unit: Some(Unit::Seconds),
            samples: taken.map_or_else(Vec::new, |v| one(&no_labels, v)),
        },
    ]
}
