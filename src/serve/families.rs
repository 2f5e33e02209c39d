//! The metric families a scrape returns: names, help, types, units and labels, as plain
//! data. Both encoders (`encode`) write exactly these, so the text format and OpenMetrics
//! cannot drift apart; each name sits beside the code that reads its value (here and in
//! `device_metrics` and `process_metrics`), so names and values cannot drift apart either.
//!
//! An absent figure gives no sample at all: never a 0.

use super::published::Published;
use super::{device_metrics, process_metrics};
use std::sync::Arc;

/// Prometheus metric types used here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
}

/// Base units, declared in OpenMetrics' `# UNIT` line; the name ends with the unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Bytes,
    Seconds,
}

impl Unit {
    pub fn suffix(self) -> &'static str {
        match self {
            Unit::Bytes => "_bytes",
            Unit::Seconds => "_seconds",
        }
    }
}

/// One value. Integers stay integers in the output (byte counts print exactly).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Number {
    Int(u64),
    Float(f64),
}

impl Number {
    pub fn as_f64(self) -> f64 {
        match self {
            // Byte counts stay below 2^53, where f64 is exact.
            Number::Int(v) => v as f64,
            Number::Float(v) => v,
        }
    }
}

/// Label pairs shared by every sample of one GPU or process.
pub type Labels = Arc<[(&'static str, String)]>;

#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub labels: Labels,
    pub value: Number,
}

/// One metric family.
#[derive(Clone, Debug, PartialEq)]
pub struct Family {
    /// The name as samples carry it: with its unit suffix, and `_total` for counters.
    pub name: &'static str,
    pub help: &'static str,
    pub kind: Kind,
    pub unit: Option<Unit>,
    pub samples: Vec<Sample>,
}

/// A family's definition and how to read its value from a `T`; `None` is an absent figure.
pub struct Metric<T> {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: Kind,
    pub unit: Option<Unit>,
    pub read: fn(&T) -> Option<Number>,
}

impl<T> Metric<T> {
    /// The family over `items`, each with its labels; items without the figure are left out.
    pub fn family(&self, items: &[(Labels, &T)]) -> Family {
        Family {
            name: self.name,
            help: self.help,
            kind: self.kind,
            unit: self.unit,
            samples: items
                .iter()
                .filter_map(|(labels, item)| {
                    Some(Sample {
                        labels: Arc::clone(labels),
                        value: (self.read)(item)?,
                    })
                })
                .collect(),
        }
    }
}

/// A gauge with no unit.
pub const fn gauge<T>(
    name: &'static str,
    help: &'static str,
    read: fn(&T) -> Option<Number>,
) -> Metric<T> {
    Metric {
        name,
        help,
        kind: Kind::Gauge,
        unit: None,
        read,
    }
}

/// A gauge in bytes; `name` ends with `_bytes`.
pub const fn bytes<T>(
    name: &'static str,
    help: &'static str,
    read: fn(&T) -> Option<Number>,
) -> Metric<T> {
    Metric {
        name,
        help,
        kind: Kind::Gauge,
        unit: Some(Unit::Bytes),
        read,
    }
}

/// A counter; `name` ends with `_total`.
pub const fn counter<T>(
    name: &'static str,
    help: &'static str,
    read: fn(&T) -> Option<Number>,
) -> Metric<T> {
    Metric {
        name,
        help,
        kind: Kind::Counter,
        unit: None,
        read,
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
