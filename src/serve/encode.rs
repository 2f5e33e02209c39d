//! Writing the families in the format the scraper asked for, with the ecosystem's encoders:
//! tikv's `prometheus` writes the classic text format (0.0.4) and the Prometheus project's
//! `prometheus-client` writes OpenMetrics 1.0. Neither crate writes both, and the formats
//! differ in how counters are named (`# TYPE x counter` with samples `x_total` in
//! OpenMetrics, `# TYPE x_total counter` in the text format), in units and in the `# EOF`
//! terminator.

use super::families::{Family, Kind, Number, Unit};
use prometheus::proto::{self, MetricFamily, MetricType};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType as OmType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit as OmUnit};

/// The two exposition formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    OpenMetrics,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// OpenMetrics when the `Accept` header prefers it (as Prometheus's does), else the text
/// format, which every scraper reads.
pub fn negotiate(accept: Option<&str>) -> Format {
    let Some(accept) = accept else {
        return Format::Text;
    };
    let (mut openmetrics, mut other) = (0.0_f32, 0.0_f32);
    for range in accept.split(',') {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        if media.is_empty() {
            continue;
        }
        let q = parts
            .filter_map(|p| p.trim().strip_prefix("q="))
            .find_map(|q| q.trim().parse::<f32>().ok())
            .filter(|q| q.is_finite())
            .unwrap_or(1.0);
        let best = if media == "application/openmetrics-text" {
            &mut openmetrics
        } else {
            &mut other
        };
        *best = best.max(q);
    }
    if openmetrics > 0.0 && openmetrics >= other {
        Format::OpenMetrics
    } else {
        Format::Text
    }
}

/// The exposition of `families` in `format`; a family without samples is left out (an
/// absent figure is never a 0, and the text encoder refuses an empty family).
pub fn encode(format: Format, mut families: Vec<Family>) -> String {
    families.retain(|f| !f.samples.is_empty());
    match format {
        Format::Text => text(&families),
        Format::OpenMetrics => openmetrics(families),
    }
}

fn text(families: &[Family]) -> String {
    let protos: Vec<MetricFamily> = families.iter().map(to_proto).collect();
    // Fails only for a family without samples or name, which cannot reach it.
    prometheus::TextEncoder::new()
        .encode_to_string(&protos)
        .unwrap_or_default()
}

fn to_proto(family: &Family) -> MetricFamily {
    let mut mf = MetricFamily::default();
    mf.set_name(family.name.to_string());
    mf.set_help(family.help.to_string());
    mf.set_field_type(match family.kind {
        Kind::Gauge => MetricType::GAUGE,
        Kind::Counter => MetricType::COUNTER,
    });
    let metrics = family
        .samples
        .iter()
        .map(|s| {
            let labels = s
                .labels
                .iter()
                .map(|(name, value)| {
                    let mut pair = proto::LabelPair::default();
                    pair.set_name((*name).to_string());
                    pair.set_value(value.clone());
                    pair
                })
                .collect();
            let mut metric = proto::Metric::from_label(labels);
            match family.kind {
                Kind::Gauge => {
                    let mut gauge = proto::Gauge::default();
                    gauge.set_value(s.value.as_f64());
                    metric.set_gauge(gauge);
                }
                Kind::Counter => {
                    let mut counter = proto::Counter::default();
                    counter.set_value(s.value.as_f64());
                    metric.set_counter(counter);
                }
            }
            metric
        })
        .collect();
    mf.set_metric(metrics);
    mf
}

fn openmetrics(families: Vec<Family>) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Families(families)));
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
    out
}

/// The families, handed to `prometheus-client` as a collector run once.
#[derive(Debug)]
struct Families(Vec<Family>);

impl Collector for Families {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for family in &self.0 {
            // prometheus-client appends the unit and, for counters, `_total` itself.
            let mut name = family.name;
            if family.kind == Kind::Counter {
                name = name.strip_suffix("_total").unwrap_or(name);
            }
            if let Some(u) = family.unit {
                name = name.strip_suffix(u.suffix()).unwrap_or(name);
            }
            let unit = family.unit.map(|u| match u {
                Unit::Bytes => OmUnit::Bytes,
                Unit::Seconds => OmUnit::Seconds,
            });
            let kind = match family.kind {
                Kind::Gauge => OmType::Gauge,
                Kind::Counter => OmType::Counter,
            };
            let mut metric = encoder.encode_descriptor(name, family.help, unit.as_ref(), kind)?;
            // A lone unlabelled sample is written without a label set: no empty `{}`.
            if let [only] = family.samples.as_slice()
                && only.labels.is_empty()
            {
                write_value(family.kind, only.value, metric)?;
                continue;
            }
            for sample in &family.samples {
                let labels: &[(&str, String)] = &sample.labels;
                write_value(family.kind, sample.value, metric.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

fn write_value(kind: Kind, value: Number, out: MetricEncoder) -> Result<(), std::fmt::Error> {
    match (kind, value) {
        (Kind::Counter, Number::Int(v)) => ConstCounter::new(v).encode(out),
        (Kind::Counter, Number::Float(v)) => ConstCounter::new(v).encode(out),
        (Kind::Gauge, Number::Int(v)) => ConstGauge::new(v).encode(out),
        (Kind::Gauge, Number::Float(v)) => ConstGauge::new(v).encode(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::families::Sample;
    use std::sync::Arc;

    #[test]
    fn prometheus_accept_header_gets_openmetrics() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(negotiate(Some(prometheus)), Format::OpenMetrics);
        assert_eq!(negotiate(None), Format::Text);
        assert_eq!(negotiate(Some("*/*")), Format::Text);
        assert_eq!(negotiate(Some("text/plain;version=0.0.4")), Format::Text);
        assert_eq!(
            negotiate(Some("text/plain;q=0.9, application/openmetrics-text;q=0.5")),
            Format::Text
        );
        assert_eq!(
            negotiate(Some("application/openmetrics-text;q=0")),
            Format::Text
        );
        assert_eq!(negotiate(Some(";;,q=,")), Format::Text);
    }

    fn families() -> Vec<Family> {
        let labels: Arc<[(&str, String)]> = Arc::from(vec![
            ("gpu", "0".to_string()),
            ("command", "python \"a\\b\"\nx".to_string()),
        ]);
        vec![
            Family {
                name: "vramscope_process_allocator_ooms_total",
                help: "OOMs.",
                kind: Kind::Counter,
                unit: None,
                samples: vec![Sample {
                    labels: labels.clone(),
                    value: Number::Int(2),
                }],
            },
            Family {
                name: "vramscope_process_memory_used_bytes",
                help: "Used.",
                kind: Kind::Gauge,
                unit: Some(Unit::Bytes),
                samples: vec![Sample {
                    labels,
                    value: Number::Int(21_474_836_480),
                }],
            },
            Family {
                name: "vramscope_empty",
                help: "Nothing.",
                kind: Kind::Gauge,
                unit: None,
                samples: vec![],
            },
        ]
    }

    #[test]
    fn the_text_format_names_counters_with_total_and_escapes_labels() {
        let text = encode(Format::Text, families());
        assert!(text.contains("# TYPE vramscope_process_allocator_ooms_total counter\n"));
        assert!(text.contains(
            "vramscope_process_allocator_ooms_total{gpu=\"0\",command=\"python \\\"a\\\\b\\\"\\nx\"} 2\n"
        ));
        assert!(text.contains("vramscope_process_memory_used_bytes{gpu=\"0\","));
        assert!(text.contains("} 21474836480\n"));
        assert!(!text.contains("vramscope_empty"));
        assert!(!text.contains("# EOF"));
    }

    #[test]
    fn openmetrics_names_the_family_without_total_and_declares_units() {
        let text = encode(Format::OpenMetrics, families());
        assert!(text.contains("# TYPE vramscope_process_allocator_ooms counter\n"));
        assert!(text.contains("vramscope_process_allocator_ooms_total{gpu=\"0\","));
        assert!(text.contains("# UNIT vramscope_process_memory_used_bytes bytes\n"));
        assert!(text.contains("} 21474836480\n"));
        assert!(text.contains("command=\"python \\\"a\\\\b\\\"\\nx\""));
        assert!(!text.contains("vramscope_empty"));
        assert!(text.ends_with("# EOF\n"));
    }
}
