//! Human-readable units. Binary prefixes for memory because that is what nvidia-smi's MiB and
//! the allocators' figures use.

const KIB: f64 = 1024.0;

/// `1.50 GiB`, `512 MiB`, `0 B`: at most three significant digits, a binary prefix.
pub fn bytes(value: u64) -> String {
    let v = value as f64;
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut scaled = v;
    let mut unit = 0;
    while scaled >= KIB && unit < units.len() - 1 {
        scaled /= KIB;
        unit += 1;
    }
    if unit == 0 {
        format!("{value} B")
    } else if scaled >= 100.0 {
        format!("{scaled:.0} {}", units[unit])
    } else if scaled >= 10.0 {
        format!("{scaled:.1} {}", units[unit])
    } else {
        format!("{scaled:.2} {}", units[unit])
    }
}

/// Mebibytes as a whole number, the unit nvidia-smi prints.
pub fn mib(value: u64) -> u64 {
    value / (1024 * 1024)
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

    #[test]
    fn bytes_use_binary_prefixes_and_three_digits() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(bytes(512 * 1024 * 1024), "512 MiB");
        assert_eq!(bytes(80 * 1024 * 1024 * 1024), "80.0 GiB");
        assert_eq!(mib(3 * 1024 * 1024 + 5), 3);
    }

    #[test]
    fn watts_round_sensibly() {
        assert_eq!(watts(69_500), "69.5W");
        assert_eq!(watts(350_400), "350W");
    }
}
