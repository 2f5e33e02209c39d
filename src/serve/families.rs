//! The metric families a scrape returns: names, help, types, units and labels, as plain
//! data. Both encoders (`encode`) write exactly these, so the text format and OpenMetrics
//! cannot drift apart; each name sits beside the code that reads its value (in `scrape`,
//! `device_metrics`, `mig_metrics` and `process_metrics`, which all build on this file and
//! none of which it imports), so names and values cannot drift apart either.
//!
//! An absent figure gives no sample at all: never a 0.

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
