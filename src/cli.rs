//! Command-line options. Global options apply to the monitor and to every one-shot mode.

use clap::Parser;
use std::path::PathBuf;
use std::time::Duration;

/// A live monitor of NVIDIA GPU memory, utilisation and processes.
#[derive(Debug, Parser)]
#[command(name = "vramscope", version, about, long_about = None)]
pub struct Cli {
    /// Load this NVML library instead of libnvidia-ml.so.1 (a driver library in an unusual
    /// place, or the test suite's fake).
    #[arg(long, value_name = "PATH", env = "VRAMSCOPE_NVML_LIB", global = true)]
    pub nvml_lib: Option<PathBuf>,

    /// Refresh period: `1s`, `500ms` or plain seconds (`0.25`); at least 100 ms.
    #[arg(short, long, value_name = "PERIOD", default_value = "1s", value_parser = parse_interval)]
    pub interval: Duration,

    /// Print one table of GPUs and processes and exit.
    #[arg(long)]
    pub once: bool,

    /// Print JSON (schema `vramscope.snapshot` version 1) instead of the monitor.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,

    /// Print CSV, one row per GPU and per process, instead of the monitor.
    #[arg(long)]
    pub csv: bool,

    /// Repeat the one-shot output every SECS seconds, like `nvidia-smi -l`
    /// (JSON: one object per line; CSV: one header, then rows).
    #[arg(short, long, value_name = "SECS", value_parser = parse_interval)]
    pub r#loop: Option<Duration>,

    /// Sample PCIe throughput every SECS seconds (off by default: the call blocks ~40 ms per GPU).
    #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "5", value_parser = parse_interval)]
    pub pcie: Option<Duration>,

    /// Hide the keys that send signals to processes.
    #[arg(long)]
    pub read_only: bool,

    /// Draw with ASCII characters only (no Unicode block glyphs).
    #[arg(long)]
    pub ascii: bool,
}

impl Cli {
    /// Whether a non-interactive output was asked for.
    pub fn one_shot(&self) -> bool {
        self.once || self.json || self.csv || self.r#loop.is_some()
    }
}

/// `1s`, `250ms`, `2m`, `0.5` (seconds). Below 100 ms NVML's own sampling makes no sense.
pub fn parse_interval(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60.0)
    } else {
        (text, 1.0)
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a period (try 1s, 500ms or 0.5)"))?;
    let seconds = value * scale;
    if !seconds.is_finite() || seconds < 0.1 {
        return Err(format!("`{text}` is below the 100 ms minimum"));
    }
    if seconds > 86_400.0 {
        return Err(format!("`{text}` is longer than a day"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_parse_in_every_spelling() {
        assert_eq!(parse_interval("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_interval("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_interval("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_interval("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_interval("50ms").unwrap_err().contains("100 ms"));
        assert!(parse_interval("fast").is_err());
        assert!(parse_interval("NaN").is_err());
    }
}
