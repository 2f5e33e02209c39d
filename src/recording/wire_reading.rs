//! How a figure that may be absent (`Reading<T>`) looks in a recording: its value when read,
//! and an object `{"absent": "<reason>"}` (with `"detail"` for the reasons that carry words)
//! when not. Below `wire` and `wire_mig`, which both record readings this way.

use crate::model::{Absent, MemoryInfo, Reading};
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::marker::PhantomData;

/// An absence as recorded.
#[derive(Deserialize)]
pub(super) struct AbsentWire {
    absent: String,
    #[serde(default)]
    detail: Option<String>,
}

/// An absence being written.
#[derive(Serialize)]
pub(super) struct AbsentOut<'a> {
    absent: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'a str>,
}

impl<'a> From<&'a Absent> for AbsentOut<'a> {
    fn from(why: &'a Absent) -> Self {
        let (absent, detail) = match why {
            Absent::NotSupported => ("not_supported", None),
            Absent::NoPermission => ("no_permission", None),
            Absent::NotAvailable => ("not_available", None),
            Absent::GpuLost => ("gpu_lost", None),
            Absent::Timeout => ("timeout", None),
            Absent::MigMode => ("mig_mode", None),
            Absent::MissingFunction(name) => ("missing_function", Some(name.as_str())),
            Absent::Error(text) => ("error", Some(text.as_str())),
        };
        AbsentOut { absent, detail }
    }
}

/// Every absence in a recording is read here, so here its words are cleaned
/// (`crate::text`): a recording is anyone's file.
impl From<AbsentWire> for Absent {
    fn from(wire: AbsentWire) -> Self {
        let detail = crate::text::clean(&wire.detail.unwrap_or_default()).into_owned();
        match crate::text::clean(&wire.absent).as_ref() {
            "not_supported" => Absent::NotSupported,
            "no_permission" => Absent::NoPermission,
            "not_available" => Absent::NotAvailable,
            "gpu_lost" => Absent::GpuLost,
            "timeout" => Absent::Timeout,
            "mig_mode" => Absent::MigMode,
            "missing_function" => Absent::MissingFunction(detail),
            "error" => Absent::Error(detail),
            // A reason a later version added: still absent, never a zero.
            other if detail.is_empty() => Absent::Error(other.replace('_', " ")),
            other => Absent::Error(format!("{}: {detail}", other.replace('_', " "))),
        }
    }
}

/// `Reading<T>` for any `T` recorded as a number, string or array.
pub mod reading {
    use super::*;

    pub fn serialize<T: Serialize, S: Serializer>(
        value: &Reading<T>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Ok(v) => v.serialize(s),
            Err(why) => AbsentOut::from(why).serialize(s),
        }
    }

    pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Reading<T>, D::Error> {
        d.deserialize_any(ReadingVisitor(PhantomData))
    }
}

struct ReadingVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ReadingVisitor<T> {
    type Value = Reading<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a figure or {\"absent\": reason}")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        T::deserialize(v.into_deserializer()).map(Ok)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        T::deserialize(v.into_deserializer()).map(Ok)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        T::deserialize(v.into_deserializer()).map(Ok)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        T::deserialize(v.into_deserializer()).map(Ok)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        T::deserialize(v.into_deserializer()).map(Ok)
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        T::deserialize(v.into_deserializer()).map(Ok)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        T::deserialize(SeqAccessDeserializer::new(seq)).map(Ok)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        AbsentWire::deserialize(MapAccessDeserializer::new(map)).map(|w| Err(w.into()))
    }
}

/// `Option<Reading<T>>`: `None` (not sampled) is an omitted field.
pub(super) mod optional_reading {
    use super::*;

    pub fn serialize<T: Serialize, S: Serializer>(
        value: &Option<Reading<T>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(r) => reading::serialize(r, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Reading<T>>, D::Error> {
        reading::deserialize(d).map(Some)
    }
}

/// Device memory as `[total, reserved, used, free]`; `reserved` is null where the driver
/// counted it in `used`.
pub(super) mod memory {
    use super::*;

    pub fn serialize<S: Serializer>(value: &Reading<MemoryInfo>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Ok(m) => (m.total, m.reserved, m.used, m.free).serialize(s),
            Err(why) => AbsentOut::from(why).serialize(s),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Reading<MemoryInfo>, D::Error> {
        let value: Reading<(u64, Option<u64>, u64, u64)> = reading::deserialize(d)?;
        Ok(value.map(|(total, reserved, used, free)| MemoryInfo {
            total,
            reserved,
            used,
            free,
        }))
    }
}
