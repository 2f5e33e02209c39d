//! How a GPU's MIG state looks in a recording (docs/recording-v1.md): the sample's `mig`
//! object, left out for a GPU without MIG. Shadows of `model::mig`, as in `wire`.

use super::wire_reading::{memory, reading};
use crate::model::{MemoryInfo, MigInstance, MigProcess, MigState, Reading};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Serialize, Deserialize)]
#[serde(remote = "MigState")]
pub struct MigStateDef {
    enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pending: Option<bool>,
    #[serde(with = "instances")]
    instances: Reading<Vec<MigInstance>>,
    /// Why the mode was not read; recorded as the instances' reason where none were found.
    #[serde(skip)]
    mode_unread: Option<crate::model::Absent>,
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "MigInstance")]
pub struct MigInstanceDef {
    #[serde(with = "reading")]
    gpu_instance_id: Reading<u32>,
    #[serde(with = "reading")]
    compute_instance_id: Reading<u32>,
    #[serde(with = "reading")]
    uuid: Reading<String>,
    #[serde(with = "reading")]
    profile: Reading<String>,
    #[serde(with = "memory")]
    memory: Reading<MemoryInfo>,
    #[serde(with = "processes")]
    processes: Reading<Vec<MigProcess>>,
    #[serde(with = "reading")]
    sm_util: Reading<u32>,
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "MigProcess")]
pub struct MigProcessDef {
    pid: u32,
    #[serde(with = "reading")]
    used_memory: Reading<u64>,
}

/// `Ref`/`Own` wrappers through a shadow, and a `with` module for a `Reading<Vec<T>>` of it.
macro_rules! reading_list {
    ($module:ident, $ty:ty, $def:ident) => {
        mod $module {
            use super::*;

            struct Ref<'a>(&'a $ty);

            impl Serialize for Ref<'_> {
                fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                    $def::serialize(self.0, s)
                }
            }

            struct Own($ty);

            impl<'de> Deserialize<'de> for Own {
                fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                    $def::deserialize(d).map(Own)
                }
            }

            pub fn serialize<S: Serializer>(
                value: &Reading<Vec<$ty>>,
                s: S,
            ) -> Result<S::Ok, S::Error> {
                let refs = value
                    .as_ref()
                    .map(|list| list.iter().map(Ref).collect::<Vec<_>>())
                    .map_err(Clone::clone);
                reading::serialize(&refs, s)
            }

            pub fn deserialize<'de, D: Deserializer<'de>>(
                d: D,
            ) -> Result<Reading<Vec<$ty>>, D::Error> {
                let value: Reading<Vec<Own>> = reading::deserialize(d)?;
                Ok(value.map(|list| list.into_iter().map(|o| o.0).collect()))
            }
        }
    };
}

reading_list!(instances, MigInstance, MigInstanceDef);
reading_list!(processes, MigProcess, MigProcessDef);

/// `Option<MigState>`: `None` (no MIG) is an omitted field.
pub mod optional_mig {
    use super::*;

    struct Own(MigState);

    impl<'de> Deserialize<'de> for Own {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            MigStateDef::deserialize(d).map(Own)
        }
    }

    pub fn serialize<S: Serializer>(value: &Option<MigState>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(m) => MigStateDef::serialize(m, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<MigState>, D::Error> {
        let value: Option<Own> = Option::deserialize(d)?;
        Ok(value.map(|o| o.0))
    }
}
