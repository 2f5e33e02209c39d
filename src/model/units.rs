//! Human-readable units. Binary prefixes for memory because that is what nvidia-smi's MiB and
//! the allocators' figures use.

const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

/// The binary unit `value` reads best in (index into `UNITS`) and the value scaled to it.
fn scale(value: u64) -> (f64, usize) {
    let mut scaled = value as f64;
    let mut unit = 0;
    while scaled >= 1024.0 && unit + 1 < UNITS.len() {
        scaled /= 1024.0;
        unit += 1;
    }
    (scaled, unit)
}

/// `value` expressed in `unit` with one decimal below 100: the compact panels' precision.
fn in_unit(value: u64, unit: usize) -> String {
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

/// `1.50 GiB`, `512 MiB`, `0 B`: at most three significant digits, a binary prefix.
pub fn bytes(value: u64) -> String {
    let (scaled, unit) = scale(value);
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

/// `41.2/80.0 GiB`: both figures in the unit of the larger one, so they compare at a glance.
pub fn bytes_pair(used: u64, total: u64) -> String {
    let (_, unit) = scale(total.max(used));
    format!(
        "{}/{} {}",
        in_unit(used, unit),
        in_unit(total, unit),
        UNITS[unit]
    )
}

/// `63.0G`, `512M`, `900B`: bytes in at most six cells for compact lines.
pub fn short_bytes(value: u64) -> String {
    let (_, unit) = scale(value);
    let letter = &UNITS[unit][..1];
    format!("{}{letter}", in_unit(value, unit))
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

    #[test]
    fn watts_round_sensibly() {
        assert_eq!(watts(69_500), "69.5W");
        assert_eq!(watts(350_400), "350W");
    }
}
