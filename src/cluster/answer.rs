//! Decoding one answer of Prometheus's query API within its bounds. The body is already
//! capped in bytes (`http::get`); what it decodes into is capped too, counted as it is
//! decoded (`bounds::PROMETHEUS_SERIES`, `_LABELS`, `_POINTS`), so an answer of a million
//! tiny series is refused after the first 200,000 rather than built whole. A point's value
//! is read as a number where it is decoded: no string is kept per point.

use super::http::short;
use crate::safe_fs::bounds::{PROMETHEUS_LABELS, PROMETHEUS_POINTS, PROMETHEUS_SERIES};
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use std::cell::Cell;
use std::fmt;

/// Prometheus's envelope: `{status, data | errorType + error}`.
#[derive(Deserialize)]
struct Envelope {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct Data {
    #[serde(rename = "resultType")]
    pub result_type: String,
    #[serde(default)]
    pub result: Results,
}

/// The result's series, counted against `PROMETHEUS_SERIES` as each is decoded.
#[derive(Debug, Default)]
pub struct Results(pub Vec<Entry>);

#[derive(Debug, Deserialize)]
pub struct Entry {
    #[serde(default)]
    pub metric: Labels,
    /// An instant query's `[time, "value"]`.
    #[serde(default)]
    pub value: Option<Point>,
    /// A range query's points.
    #[serde(default)]
    pub values: Points,
}

/// `[unix seconds, "value"]`; the value is `None` when it is not a number.
#[derive(Clone, Copy, Debug, Deserialize)]
pub struct Point(pub f64, pub Number);

/// A sample value, written as a string by Prometheus (`"1024"`, `"NaN"`, `"+Inf"`).
#[derive(Clone, Copy, Debug)]
pub struct Number(pub Option<f64>);

/// A range result's points, counted against `PROMETHEUS_POINTS`.
#[derive(Debug, Default)]
pub struct Points(pub Vec<Point>);

/// A result's labels in the order given, counted against `PROMETHEUS_LABELS`: read into a
/// list, with no hashing, since each is looked at once.
#[derive(Debug, Default)]
pub struct Labels(pub Vec<(String, String)>);

/// What this thread's decode has built so far, and which bound it passed.
#[derive(Clone, Copy, Default)]
struct Spent {
    series: usize,
    labels: usize,
    points: usize,
    over: Option<Over>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Over {
    Series,
    Labels,
    Points,
}

thread_local! {
    /// One decode at a time per thread (`decode` is synchronous), reset at its start.
    static SPENT: Cell<Spent> = Cell::new(Spent::default());
}

/// Counts one more of `what`; an error once its bound is passed.
fn spend<E: de::Error>(what: Over) -> Result<(), E> {
    SPENT.with(|cell| {
        let mut spent = cell.get();
        let (count, bound) = match what {
            Over::Series => (&mut spent.series, PROMETHEUS_SERIES),
            Over::Labels => (&mut spent.labels, PROMETHEUS_LABELS),
            Over::Points => (&mut spent.points, PROMETHEUS_POINTS),
        };
        *count += 1;
        let over = *count > bound;
        if over {
            spent.over = Some(what);
        }
        cell.set(spent);
        if over {
            Err(E::custom("over its bound"))
        } else {
            Ok(())
        }
    })
}

/// Decodes `body`: the answer's data, or one line saying why there is none.
pub fn decode(body: &[u8]) -> Result<Data, String> {
    SPENT.with(|cell| cell.set(Spent::default()));
    let decoded = serde_json::from_slice::<Envelope>(body);
    let over = SPENT.with(|cell| cell.replace(Spent::default()).over);
    if let Some(over) = over {
        let (count, what) = match over {
            Over::Series => (PROMETHEUS_SERIES, "series"),
            Over::Labels => (PROMETHEUS_LABELS, "label pairs"),
            Over::Points => (PROMETHEUS_POINTS, "points"),
        };
        return Err(format!(
            "refused: the Prometheus answer holds more than {count} {what} (its bound); ask a smaller fleet, or one job"
        ));
    }
    let answer =
        decoded.map_err(|e| format!("not a Prometheus answer: {}", short(&e.to_string())))?;
    if answer.status != "success" {
        return Err(format!(
            "query failed: {}: {}",
            short(answer.error_type.as_deref().unwrap_or("error")),
            short(answer.error.as_deref().unwrap_or("no reason given"))
        ));
    }
    answer
        .data
        .ok_or_else(|| "a successful answer without data".to_string())
}

impl<'de> Deserialize<'de> for Results {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> Visitor<'de> for Visit {
            type Value = Results;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of series")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Results, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = seq.next_element::<Entry>()? {
                    spend::<A::Error>(Over::Series)?;
                    entries.push(entry);
                }
                Ok(Results(entries))
            }
        }
        deserializer.deserialize_seq(Visit)
    }
}

impl<'de> Deserialize<'de> for Points {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> Visitor<'de> for Visit {
            type Value = Points;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of points")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Points, A::Error> {
                let mut points = Vec::new();
                while let Some(point) = seq.next_element::<Point>()? {
                    spend::<A::Error>(Over::Points)?;
                    points.push(point);
                }
                Ok(Points(points))
            }
        }
        deserializer.deserialize_seq(Visit)
    }
}

impl<'de> Deserialize<'de> for Labels {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> Visitor<'de> for Visit {
            type Value = Labels;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of label names to values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Labels, A::Error> {
                let mut pairs = Vec::new();
                while let Some(pair) = map.next_entry::<String, String>()? {
                    spend::<A::Error>(Over::Labels)?;
                    pairs.push(pair);
                }
                Ok(Labels(pairs))
            }
        }
        deserializer.deserialize_map(Visit)
    }
}

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl Visitor<'_> for Visit {
            type Value = Number;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a sample value")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Number, E> {
                Ok(Number(text.parse().ok()))
            }
        }
        deserializer.deserialize_str(Visit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_decode_and_errors_say_why() {
        let body = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"__name__":"DCGM_FI_DEV_FB_USED","instance":"n:9400"},"value":[1700000000.5,"1024"]},
            {"metric":{},"value":[1,"NaN"]},{"metric":{},"value":[1,"x"]}]}}"#;
        let data = decode(body).unwrap();
        assert_eq!(data.result_type, "vector");
        assert_eq!(data.result.0.len(), 3);
        assert_eq!(data.result.0[0].metric.0.len(), 2);
        assert_eq!(data.result.0[0].value.unwrap().1.0, Some(1024.0));
        assert!(data.result.0[1].value.unwrap().1.0.unwrap().is_nan());
        assert_eq!(data.result.0[2].value.unwrap().1.0, None);
        let error = decode(br#"{"status":"error","errorType":"bad_data","error":"parse error at char 3\u001b[2J"}"#)
            .unwrap_err();
        assert_eq!(
            error,
            "query failed: bad_data: parse error at char 3\u{FFFD}[2J"
        );
        assert!(
            decode(b"<html>502 Bad Gateway</html>")
                .unwrap_err()
                .starts_with("not a Prometheus answer")
        );
    }

    fn vector_of(series: usize, labels_each: usize) -> Vec<u8> {
        let labels: Vec<String> = (0..labels_each)
            .map(|i| format!("\"l{i}\":\"v\""))
            .collect();
        let one = format!(
            "{{\"metric\":{{{}}},\"value\":[1,\"1\"]}}",
            labels.join(",")
        );
        let mut body = br#"{"status":"success","data":{"resultType":"vector","result":["#.to_vec();
        for i in 0..series {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(one.as_bytes());
        }
        body.extend_from_slice(b"]}}");
        body
    }

    #[test]
    fn an_answer_over_its_counts_is_refused_and_the_next_one_starts_afresh() {
        assert_eq!(
            decode(&vector_of(PROMETHEUS_SERIES, 0))
                .unwrap()
                .result
                .0
                .len(),
            PROMETHEUS_SERIES
        );
        let e = decode(&vector_of(PROMETHEUS_SERIES + 1, 0)).unwrap_err();
        assert_eq!(
            e,
            format!(
                "refused: the Prometheus answer holds more than {PROMETHEUS_SERIES} series (its bound); ask a smaller fleet, or one job"
            )
        );
        let e = decode(&vector_of(1000, PROMETHEUS_LABELS / 1000 + 1)).unwrap_err();
        assert!(e.contains("label pairs (its bound)"), "{e}");
        // The counts are per answer: a small one after a refused one decodes.
        assert_eq!(decode(&vector_of(3, 2)).unwrap().result.0.len(), 3);
    }

    #[test]
    fn range_points_are_counted() {
        let points = vec!["[1,\"2\"]"; PROMETHEUS_POINTS + 1].join(",");
        let body = format!(
            "{{\"status\":\"success\",\"data\":{{\"resultType\":\"matrix\",\"result\":[{{\"metric\":{{}},\"values\":[{points}]}}]}}}}"
        );
        let e = decode(body.as_bytes()).unwrap_err();
        assert!(e.contains("points (its bound)"), "{e}");
    }
}
