//! The header's time of day: local time by the C library's zone rules (so `TZ` and
//! /etc/localtime count, as in `date`), or UTC.

/// The time zone a screen's clock shows: the person's local one, or UTC where the output
/// must not depend on the machine (snapshot tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Clock {
    #[default]
    Utc,
    Local,
}

/// `08:04:32 CET` in the person's zone, or `08:04:32 UTC`.
pub fn time_of_day(now_ms: u64, clock: Clock) -> String {
    match clock {
        Clock::Utc => clock_utc(now_ms),
        Clock::Local => local(now_ms).unwrap_or_else(|| clock_utc(now_ms)),
    }
}

/// `08:04:32 UTC`: wall time without a time-zone database, identical on every machine.
pub fn clock_utc(now_ms: u64) -> String {
    let secs = now_ms / 1000;
    let (h, m, s) = ((secs / 3600) % 24, (secs / 60) % 60, secs % 60);
    format!("{h:02}:{m:02}:{s:02} UTC")
}

/// None when the C library cannot convert the time (a year beyond its range).
fn local(now_ms: u64) -> Option<String> {
    let secs = libc::time_t::try_from(now_ms / 1000).ok()?;
    // SAFETY: `tm` is plain data, valid all-zero; localtime_r writes only into it and reads
    // `secs`, both live for the call; it is the thread-safe form (no shared static result).
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&secs, &mut tm).is_null() {
            return None;
        }
        tm
    };
    let zone = if tm.tm_zone.is_null() {
        String::new()
    } else {
        // SAFETY: localtime_r set tm_zone to a NUL-terminated abbreviation that lives in the
        // C library's zone tables for the rest of the process.
        let raw = unsafe { std::ffi::CStr::from_ptr(tm.tm_zone) };
        // The zone name comes from TZ or a file: hostile text, cleaned like any other.
        crate::text::clean_bytes(raw.to_bytes())
    };
    let clock = format!("{:02}:{:02}:{:02}", tm.tm_hour, tm.tm_min, tm.tm_sec);
    Some(if zone.is_empty() {
        clock
    } else {
        format!("{clock} {zone}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_clock_is_the_machine_independent_one() {
        assert_eq!(time_of_day(3_723_000, Clock::Utc), "01:02:03 UTC");
        assert_eq!(clock_utc(3_723_000), "01:02:03 UTC");
    }

    #[test]
    fn local_clock_keeps_the_seconds_and_names_a_zone() {
        // The zone is the machine's; minutes may shift by a zone offset, seconds never do.
        let shown = time_of_day(3_723_000, Clock::Local);
        assert_eq!(&shown[5..8], ":03", "{shown}");
        assert!(shown.len() > 8, "no zone name in {shown}");
    }
}
