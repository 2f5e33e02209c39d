//! Scenario time: seconds since the first successful `nvmlInit*` in this
//! process (monotonic), multiplied by `FAKE_NVML_TIME_SCALE`.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Environment variable with the time multiplier (f64, default 1).
pub const TIME_SCALE_ENV: &str = "FAKE_NVML_TIME_SCALE";

/// The time origin, fixed at the first successful init.
#[derive(Debug, Clone, Copy)]
pub struct Origin {
    pub instant: Instant,
    /// Wall clock at the origin, µs since the Unix epoch.
    pub wall_us: u64,
    pub scale: f64,
}

impl Origin {
    pub fn now() -> Origin {
        let wall_us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        Origin {
            instant: Instant::now(),
            wall_us,
            scale: time_scale(),
        }
    }

    /// Scenario seconds elapsed since the origin.
    pub fn elapsed(&self) -> f64 {
        self.instant.elapsed().as_secs_f64() * self.scale
    }
}

fn time_scale() -> f64 {
    match std::env::var(TIME_SCALE_ENV) {
        Ok(v) => match v.trim().parse::<f64>() {
            Ok(s) if s.is_finite() && s > 0.0 => s,
            _ => {
                eprintln!("fake-nvml: ignoring bad {TIME_SCALE_ENV}={v:?} (want a number > 0)");
                1.0
            }
        },
        Err(_) => 1.0,
    }
}
