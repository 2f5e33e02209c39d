//! Every figure vramscope shows, named once. One table per entity (`device`: a GPU,
//! `process`: a process on one GPU, `slot`: what an allocator publishes for one GPU) gives
//! each figure its unit, its key (`--json`'s key, `--csv`'s column and `export`'s metric are
//! the same word), its label (what the screen and the list of `n/a` reasons call it), the
//! Prometheus families `serve` writes it as, and the names older versions wrote it under.
//!
//! The outputs read the table rather than spell a name: `output::fields` pairs each entry
//! with how to read it (and its test holds the two in the same order), `serve` builds its
//! families from `prometheus()` and `dcgm_family()` (a figure without one is a compile-time
//! error), `export` writes `key`, the cluster view's reverse map from a remote `--json`
//! document to series reads both sides from here, and the reasons list prints `label`.

pub mod device;
pub mod process;
pub mod slot;

/// What a figure counts, as its key and the documentation say it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Bytes,
    Percent,
    Celsius,
    Milliwatts,
    Megahertz,
    /// NVML's PCIe throughput: KB/s (1024 bytes).
    KilobytesPerSecond,
    /// Milliseconds since the Unix epoch.
    UnixMillis,
    Count,
    /// An index, an id or a pid: a number that is a name.
    Id,
    /// A performance state, 0 fastest to 15 slowest.
    Level,
    /// NVML's bitmask of clock throttle reasons.
    Bitmask,
    Flag,
    Text,
}

/// One figure of one entity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Figure {
    /// `--json`'s key, `--csv`'s column, `export`'s metric.
    pub key: &'static str,
    pub unit: Unit,
    /// What the screen and the `n/a` reasons call it (`temp`, `SM clock`, `VRAM`). Two
    /// figures may share one (both ECC counters are `ECC`): a reason is said once for both.
    pub label: &'static str,
    /// vramscope's own Prometheus family, in base units.
    pub family: Option<&'static str>,
    /// dcgm-exporter's family, in its units (MiB, W), kept so dashboards work unchanged.
    pub dcgm: Option<&'static str>,
    /// The family dcgm-exporter's default counters file collects it as, where that is not
    /// `dcgm`: what to tell a dcgm-exporter user to add.
    pub dcgm_default: Option<&'static str>,
    /// The keys older versions wrote it under (`export` of 0.1.0).
    pub formerly: &'static [&'static str],
}

impl Figure {
    pub const fn new(key: &'static str, unit: Unit, label: &'static str) -> Figure {
        Figure {
            key,
            unit,
            label,
            family: None,
            dcgm: None,
            dcgm_default: None,
            formerly: &[],
        }
    }

    pub const fn in_family(self, name: &'static str) -> Figure {
        Figure {
            family: Some(name),
            ..self
        }
    }

    pub const fn as_dcgm(self, name: &'static str) -> Figure {
        Figure {
            dcgm: Some(name),
            ..self
        }
    }

    pub const fn dcgm_default(self, name: &'static str) -> Figure {
        Figure {
            dcgm_default: Some(name),
            ..self
        }
    }

    pub const fn was(self, keys: &'static [&'static str]) -> Figure {
        Figure {
            formerly: keys,
            ..self
        }
    }

    /// vramscope's family, for constants only (`serve`'s family tables): there a figure
    /// without one fails to compile. Code that runs reads `family`.
    pub const fn prometheus(&self) -> &'static str {
        required(self.family)
    }

    /// dcgm-exporter's family, for constants only, as `prometheus`.
    pub const fn dcgm_family(&self) -> &'static str {
        required(self.dcgm)
    }
}

#[allow(
    clippy::panic,
    reason = "evaluated at compile time: a build error, not a panic"
)]
const fn required(family: Option<&'static str>) -> &'static str {
    match family {
        Some(name) => name,
        None => panic!("this figure has no such Prometheus family"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn tables() -> [(&'static str, &'static [&'static Figure]); 3] {
        [
            ("device", device::ALL),
            ("process", process::ALL),
            ("slot", slot::ALL),
        ]
    }

    #[test]
    fn a_key_names_one_figure_of_its_entity_now_and_formerly() {
        for (entity, table) in tables() {
            let mut seen = HashSet::new();
            for f in table {
                for name in std::iter::once(&f.key).chain(f.formerly) {
                    assert!(seen.insert(*name), "{entity}: `{name}` names two figures");
                }
            }
        }
    }

    #[test]
    fn a_prometheus_family_carries_one_figure_and_says_its_unit() {
        let mut seen = HashSet::new();
        for (entity, table) in tables() {
            for f in table.iter() {
                for name in f.family.iter().chain(&f.dcgm).chain(&f.dcgm_default) {
                    assert!(seen.insert(*name), "{entity}: {name} carries two figures");
                }
                let Some(name) = f.family else { continue };
                assert!(name.starts_with("vramscope_"), "{name}");
                let suffix_ok = match f.unit {
                    Unit::Bytes => name.ends_with("_bytes"),
                    Unit::KilobytesPerSecond => name.ends_with("_bytes_per_second"),
                    // Prometheus wants a share as a ratio of 0 to 1.
                    Unit::Percent => name.ends_with("_ratio"),
                    _ => !name.ends_with("_bytes") && !name.ends_with("_ratio"),
                };
                assert!(
                    suffix_ok,
                    "{entity}: {name} does not end as {:?} wants",
                    f.unit
                );
            }
        }
    }

    #[test]
    fn a_key_is_snake_case_and_a_label_is_printable() {
        for (entity, table) in tables() {
            for f in table.iter() {
                assert!(
                    f.key
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                    "{entity}: {}",
                    f.key
                );
                assert!(!f.label.is_empty() && !f.label.chars().any(char::is_control));
            }
        }
    }

    /// `docs/oneshot.md` documents `--json`: a figure added to a table and not there fails.
    #[test]
    fn every_figure_is_in_the_json_documentation() {
        let doc = include_str!("../../../docs/oneshot.md");
        for (entity, table) in tables() {
            for f in table.iter() {
                let quoted = format!("\"{}\"", f.key);
                assert!(
                    doc.contains(&quoted),
                    "{entity}: {quoted} not in docs/oneshot.md"
                );
            }
        }
    }

    /// The first export's names stay with their figures, for scripts that read old files.
    #[test]
    fn the_first_exports_names_are_kept_on_their_figures() {
        let formerly: Vec<(&str, &str)> = tables()
            .iter()
            .flat_map(|(_, table)| table.iter())
            .flat_map(|f| f.formerly.iter().map(|old| (*old, f.key)))
            .collect();
        assert_eq!(
            formerly,
            [
                ("temperature", "temperature_c"),
                ("power", "power_mw"),
                ("sm_clock", "sm_clock_mhz"),
                ("mem_clock", "mem_clock_mhz"),
                ("peak", "interval_peak"),
            ]
        );
    }
}
