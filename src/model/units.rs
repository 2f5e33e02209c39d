//! Human-readable units. Binary prefixes for memory because that is what nvidia-smi's MiB and
//! the allocators' figures use.

use std::fmt::Write;

const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

/// The binary unit `value` reads best in (index into `UNITS`): the largest whose one is at
/// most `value`.
fn unit_of(value: u64) -> usize {
    let mut unit = 0;
    while unit + 1 < UNITS.len() && value >> (10 * (unit + 1)) > 0 {
        unit += 1;
    }
    unit
}

/// Whether `value` in `unit` reads at least `whole` (exactly, not after rounding).
fn at_least(value: u64, unit: usize, whole: u64) -> bool {
    u128::from(value) >= u128::from(whole) << (10 * unit)
}

/// Appends `value / 1024^unit` with `decimals` decimals, rounded half to even on the exact
/// quotient: the digits `format!("{:.N}")` gives for `value as f64` below 2^53 bytes (8 PiB),
/// where that f64 is exact (above, the float rounded the value first; these digits are the
/// exact ones). Float formatting fell back to its slow exact path for most of our figures
/// and reallocated the string on every call (a tenth of a frame's allocations).
fn push_fixed(out: &mut String, value: u64, unit: usize, decimals: u32) {
    let shift = 10 * unit as u32;
    let scaled = u128::from(value) * 10u128.pow(decimals);
    let mut q = scaled >> shift;
    if shift > 0 {
        let rest = scaled & ((1u128 << shift) - 1);
        let half = 1u128 << (shift - 1);
        if rest > half || (rest == half && q % 2 == 1) {
            q += 1;
        }
    }
    // At most 2^64 * 100 / 1024 with decimals (unit 1 and up), and the value itself without
    // (unit 0): u64 either way, whose division and printing are far cheaper than u128's.
    let q = u64::try_from(q).unwrap_or(u64::MAX);
    let pow = 10u64.pow(decimals);
    let _ = write!(out, "{}", q / pow);
    if decimals > 0 {
        let _ = write!(out, ".{:0width$}", q % pow, width = decimals as usize);
    }
}

/// `value` expressed in `unit` with one decimal below 100: the compact panels' precision.
fn push_in_unit(out: &mut String, value: u64, unit: usize) {
    let decimals = if unit == 0 || at_least(value, unit, 100) {
        0
    } else {
        1
    };
    push_fixed(out, value, unit, decimals);
}

/// How GPU memory figures are written for people (`--units`): `auto` in the unit that reads
/// best (`4.00 GiB`), `mib` in whole MiB as nvidia-smi prints them, so the two compare digit
/// for digit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum MemoryUnits {
    #[default]
    Auto,
    Mib,
}

impl MemoryUnits {
    /// A memory figure for a table: `4.00 GiB`, or `4096MiB` (nvidia-smi's table).
    pub fn bytes(self, value: u64) -> String {
        match self {
            MemoryUnits::Auto => bytes(value),
            MemoryUnits::Mib => format!("{}MiB", whole_mib(value)),
        }
    }

    /// Used and total for a compact line: `41.2/80.0 GiB`, or `42188/81559MiB`.
    pub fn pair(self, used: u64, total: u64) -> String {
        match self {
            MemoryUnits::Auto => bytes_pair(used, total),
            MemoryUnits::Mib => format!("{}/{}MiB", whole_mib(used), whole_mib(total)),
        }
    }
}

/// Whole MiB, rounded down: nvidia-smi divides NVML's bytes by 2^20 in integers
/// (`85520809984` bytes is its `81559MiB`).
pub fn whole_mib(value: u64) -> u64 {
    value >> 20
}

/// `4096 MiB`: a memory figure as `nvidia-smi --query-gpu=memory.used --format=csv` prints it.
pub fn csv_mib(value: u64) -> String {
    format!("{} MiB", whole_mib(value))
}

/// `1.50 GiB`, `512 MiB`, `0 B`: at most three significant digits, a binary prefix.
pub fn bytes(value: u64) -> String {
    let unit = unit_of(value);
    let decimals = match unit {
        0 => 0,
        _ if at_least(value, unit, 100) => 0,
        _ if at_least(value, unit, 10) => 1,
        _ => 2,
    };
    let mut out = String::with_capacity(12);
    push_fixed(&mut out, value, unit, decimals);
    out.push(' ');
    out.push_str(UNITS[unit]);
    out
}

/// `41.2/80.0 GiB`: both figures in the unit of the larger one, so they compare at a glance.
pub fn bytes_pair(used: u64, total: u64) -> String {
    let unit = unit_of(total.max(used));
    let mut out = String::with_capacity(16);
    push_in_unit(&mut out, used, unit);
    out.push('/');
    push_in_unit(&mut out, total, unit);
    out.push(' ');
    out.push_str(UNITS[unit]);
    out
}

/// `63.0G`, `512M`, `900B`: bytes in at most six cells for compact lines.
pub fn short_bytes(value: u64) -> String {
    let unit = unit_of(value);
    let mut out = String::with_capacity(8);
    push_in_unit(&mut out, value, unit);
    out.push_str(&UNITS[unit][..1]);
    out
}

/// Watts from NVML's milliwatts, one decimal below 100 W.
pub fn watts(milliwatts: u32) -> String {
    let w = f64::from(milliwatts) / 1000.0;
    if w >= 100.0 {
        format!("{w:.0}W")
    } else {
        format!("{w:.1}W")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1024 * 1024 * 1024;

    #[test]
    fn mib_is_whole_and_rounded_down_as_nvidia_smi_prints_it() {
        let h100_total = 85_520_809_984;
        assert_eq!(MemoryUnits::Mib.bytes(h100_total), "81559MiB");
        assert_eq!(MemoryUnits::Mib.bytes(4 * GIB), "4096MiB");
        assert_eq!(MemoryUnits::Mib.bytes((1 << 20) - 1), "0MiB");
        assert_eq!(MemoryUnits::Mib.bytes(GIB + (1 << 20) + 1), "1025MiB");
        assert_eq!(csv_mib(4 * GIB), "4096 MiB");
        assert_eq!(MemoryUnits::Mib.pair(4 * GIB, h100_total), "4096/81559MiB");
        assert_eq!(MemoryUnits::Auto.bytes(4 * GIB), "4.00 GiB");
    }

    #[test]
    fn bytes_use_binary_prefixes_and_three_digits() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(bytes(512 * 1024 * 1024), "512 MiB");
        assert_eq!(bytes(80 * 1024 * 1024 * 1024), "80.0 GiB");
    }

    #[test]
    fn pairs_share_the_larger_unit() {
        assert_eq!(bytes_pair(GIB * 41 + GIB / 5, GIB * 80), "41.2/80.0 GiB");
        assert_eq!(bytes_pair(512 * 1024 * 1024, GIB * 80), "0.5/80.0 GiB");
        assert_eq!(bytes_pair(0, 0), "0/0 B");
        assert_eq!(short_bytes(GIB * 63), "63.0G");
        assert_eq!(short_bytes(900), "900B");
    }

    /// The formatting these replaced, kept as the reference: the same text for every value.
    fn bytes_by_float(value: u64) -> String {
        let mut scaled = value as f64;
        let mut unit = 0;
        while scaled >= 1024.0 && unit + 1 < UNITS.len() {
            scaled /= 1024.0;
            unit += 1;
        }
        let name = UNITS[unit];
        if unit == 0 {
            format!("{value} B")
        } else if scaled >= 100.0 {
            format!("{scaled:.0} {name}")
        } else if scaled >= 10.0 {
            format!("{scaled:.1} {name}")
        } else {
            format!("{scaled:.2} {name}")
        }
    }

    /// The unit and scaled value as the float code chose them.
    fn scale_by_float(value: u64) -> (f64, usize) {
        let mut scaled = value as f64;
        let mut unit = 0;
        while scaled >= 1024.0 && unit + 1 < UNITS.len() {
            scaled /= 1024.0;
            unit += 1;
        }
        (scaled, unit)
    }

    fn in_unit_by_float(value: u64, unit: usize) -> String {
        if unit == 0 {
            return value.to_string();
        }
        let scaled = value as f64 / 1024f64.powi(unit as i32);
        if scaled >= 100.0 {
            format!("{scaled:.0}")
        } else {
            format!("{scaled:.1}")
        }
    }

    fn pair_by_float(used: u64, total: u64) -> String {
        let (_, unit) = scale_by_float(total.max(used));
        let (a, b) = (in_unit_by_float(used, unit), in_unit_by_float(total, unit));
        format!("{a}/{b} {}", UNITS[unit])
    }

    fn short_by_float(value: u64) -> String {
        let (_, unit) = scale_by_float(value);
        let scaled = value as f64 / 1024f64.powi(unit as i32);
        let digits = if unit == 0 {
            value.to_string()
        } else if scaled >= 100.0 {
            format!("{scaled:.0}")
        } else {
            format!("{scaled:.1}")
        };
        format!("{digits}{}", &UNITS[unit][..1])
    }

    #[test]
    fn integer_rounding_matches_float_formatting_digit_for_digit() {
        // Ties (x.x5 exactly, x.5 exactly) round to even in both; boundaries around each
        // unit and each precision change; and a spread of ordinary values.
        let mut values: Vec<u64> = vec![0, 1, 1023, 1024, 1025, u64::MAX >> 11];
        for unit in 1..6u32 {
            let one = 1u64 << (10 * unit);
            for whole in [1u64, 9, 10, 99, 100, 999, 1023] {
                for frac in [0u64, 1, 2, 3, 4, 5, 6, 7, 8, 9] {
                    let base = whole * one + frac * one / 10;
                    values.extend([base.saturating_sub(1), base, base + 1]);
                }
                values.extend([
                    whole * one + one / 2,
                    whole * one + one / 4,
                    whole * one + one / 8,
                ]);
                values.extend([whole * one + 3 * one / 8, whole * one + 5 * one / 8]);
            }
        }
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push(x >> (x % 40 + 12));
        }
        // Below 2^53 the f64 holds every value exactly (see `push_fixed`).
        values.retain(|&v| v < 1 << 53);
        for (i, &v) in values.iter().enumerate() {
            assert_eq!(bytes(v), bytes_by_float(v), "bytes({v})");
            assert_eq!(short_bytes(v), short_by_float(v), "short_bytes({v})");
            let other = values[(i * 7 + 3) % values.len()];
            assert_eq!(
                bytes_pair(v, other),
                pair_by_float(v, other),
                "bytes_pair({v}, {other})"
            );
        }
        // Above it, the exact digits, and the PiB cap.
        assert_eq!(bytes(41 * (1 << 48) + 1), "10.3 PiB");
        assert_eq!(bytes(u64::MAX), "16384 PiB");
    }

    #[test]
    fn watts_round_sensibly() {
        assert_eq!(watts(69_500), "69.5W");
        assert_eq!(watts(350_400), "350W");
    }
}
