//! A moment in a recording as a person names it on the command line (`--since`, `--until`):
//! a duration after the recording began (`30s`, `2m`, `1h`; `-5m` is before it, in ring
//! history), a local time of day (`14:05:30`), or an absolute time (RFC 3339, or the
//! `2026-11-21 09:41:12.345 UTC` labels `report` prints). Parsed before the recording is
//! opened, so a typo is one line at once; resolved against its start once it is.

/// A moment, as given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum When {
    /// Milliseconds after the recording began (negative: before).
    AfterStart(i64),
    /// A local time of day, in milliseconds since midnight.
    LocalClock(u64),
    /// Milliseconds since the Unix epoch.
    Absolute(u64),
}

/// What `parse` accepts, for its one line of error.
const ACCEPTED: &str = "try 30s, 2m or 1h after the recording began, a local time such as 14:05:30, or 2026-11-21T09:41:12Z";

/// Reads a moment; one line saying what is accepted when `text` is none of them.
pub fn parse(text: &str) -> Result<When, String> {
    let text = text.trim();
    let bad = || format!("`{}` is not a time ({ACCEPTED})", crate::text::clean(text));
    if text.contains('-') && text.len() >= 10 && text.as_bytes()[4] == b'-' {
        return absolute(text).map(When::Absolute).ok_or_else(bad);
    }
    if text.contains(':') {
        return clock(text)
            .filter(|ms| *ms < 86_400_000)
            .map(When::LocalClock)
            .ok_or_else(bad);
    }
    let (sign, magnitude) = match text.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, text.strip_prefix('+').unwrap_or(text)),
    };
    offset_ms(magnitude)
        .map(|ms| When::AfterStart(sign * ms))
        .ok_or_else(bad)
}

/// `90s`, `2m`, `1.5h`, `2d`, `500ms` or plain seconds, as milliseconds.
fn offset_ms(text: &str) -> Option<i64> {
    let (number, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 0.001)
    } else {
        match text.char_indices().last()? {
            (at, 's') => (&text[..at], 1.0),
            (at, 'm') => (&text[..at], 60.0),
            (at, 'h') => (&text[..at], 3600.0),
            (at, 'd') => (&text[..at], 86_400.0),
            _ => (text, 1.0),
        }
    };
    let number = number.trim();
    // `f64::parse` takes `inf`, `nan` and a sign: none of them is a duration.
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let ms = number.parse::<f64>().ok()? * scale * 1000.0;
    (ms.is_finite() && ms < 1e15).then_some(ms.round() as i64)
}

/// `HH:MM` or `HH:MM:SS[.fff]`, as milliseconds since midnight (not checked against a day).
fn clock(text: &str) -> Option<u64> {
    let mut parts = text.split(':');
    let hours = digits(parts.next()?, 1, 2)?;
    let minutes = digits(parts.next()?, 2, 2)?;
    let (secs, millis) = match parts.next() {
        Some(s) => seconds_part(s)?,
        None => (0, 0),
    };
    if parts.next().is_some() || minutes > 59 || secs > 60 {
        return None;
    }
    Some(((hours * 60 + minutes) * 60 + secs) * 1000 + millis)
}

/// `SS` or `SS.fff` (any number of fraction digits, milliseconds kept).
fn seconds_part(text: &str) -> Option<(u64, u64)> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let secs = digits(whole, 2, 2)?;
    if !fraction.bytes().all(|b| b.is_ascii_digit()) || (text.contains('.') && fraction.is_empty())
    {
        return None;
    }
    let millis = format!("{fraction:0<3}")[..3].parse().ok()?;
    Some((secs, millis))
}

/// A number of `min..=max` ASCII digits.
fn digits(text: &str, min: usize, max: usize) -> Option<u64> {
    let ok = (min..=max).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_digit());
    ok.then(|| text.parse().ok()).flatten()
}

/// `2026-11-21T09:41:12Z`, `…+01:00`, `2026-11-21 09:41:12.345 UTC`: ms since the epoch.
/// A time without a zone is refused: local or UTC would be a guess.
fn absolute(text: &str) -> Option<u64> {
    let (date, rest) = text.split_at_checked(10)?;
    let rest = rest.strip_prefix(['T', 't', ' '])?;
    let (time, zone_ms) = if let Some(t) = rest.strip_suffix(" UTC") {
        (t, 0)
    } else if let Some(t) = rest.strip_suffix(['Z', 'z']) {
        (t, 0)
    } else {
        let at = rest.rfind(['+', '-'])?;
        let (t, zone) = rest.split_at(at);
        let sign = if zone.starts_with('-') { -1 } else { 1 };
        let (h, m) = zone[1..].split_once(':')?;
        let minutes = digits(h, 2, 2)? * 60 + digits(m, 2, 2)?;
        (t, sign * minutes as i64 * 60_000)
    };
    let mut ymd = date.split('-');
    let year = digits(ymd.next()?, 4, 4)?;
    let month = digits(ymd.next()?, 2, 2)?;
    let day = digits(ymd.next()?, 2, 2)?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || time.matches(':').count() != 2 {
        return None;
    }
    let of_day = clock(time).filter(|ms| *ms < 86_400_000)?;
    let days = days_from_civil(year as i64, month as u32, day as u32);
    let ms = days * 86_400_000 + of_day as i64 - zone_ms;
    u64::try_from(ms).ok()
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's days-from-civil).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

impl When {
    /// The moment in ms since the epoch, for a recording that began at `started_ms`. A local
    /// time of day is taken on the day the recording began, or the next day when that is
    /// more than 12 hours before the start (a recording that runs past midnight).
    pub fn resolve(&self, started_ms: u64) -> u64 {
        match *self {
            When::AfterStart(ms) => started_ms.saturating_add_signed(ms),
            When::Absolute(ms) => ms,
            When::LocalClock(of_day) => {
                let offset = local_offset_ms(started_ms);
                let local = started_ms as i64 + offset;
                let midnight = local - local.rem_euclid(86_400_000);
                let mut at = midnight + of_day as i64 - offset;
                if at < started_ms as i64 - 12 * 3_600_000 {
                    at += 86_400_000;
                }
                u64::try_from(at).unwrap_or(0)
            }
        }
    }
}

/// The local zone's offset from UTC at `ms`, by the C library's rules (`TZ`,
/// /etc/localtime); 0 (UTC) when they cannot be read.
fn local_offset_ms(ms: u64) -> i64 {
    let secs = (ms / 1000) as libc::time_t;
    // SAFETY: `tm` is plain data, valid all-zero; localtime_r writes only into it and reads
    // only `secs`, both of which outlive the call.
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&secs, &mut tm).is_null() {
            return 0;
        }
        tm.tm_gmtoff * 1000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_clock_times_and_absolute_times_parse() {
        assert_eq!(parse("30s"), Ok(When::AfterStart(30_000)));
        assert_eq!(parse("2m"), Ok(When::AfterStart(120_000)));
        assert_eq!(parse("0"), Ok(When::AfterStart(0)));
        assert_eq!(parse("1.5"), Ok(When::AfterStart(1_500)));
        assert_eq!(parse("250ms"), Ok(When::AfterStart(250)));
        assert_eq!(parse("-5m"), Ok(When::AfterStart(-300_000)));
        assert_eq!(parse("14:05"), Ok(When::LocalClock(50_700_000)));
        assert_eq!(parse("14:05:30.25"), Ok(When::LocalClock(50_730_250)));
        assert_eq!(
            parse("2023-11-14T22:13:20Z"),
            Ok(When::Absolute(1_700_000_000_000))
        );
        assert_eq!(
            parse("2023-11-14T23:13:20.123+01:00"),
            Ok(When::Absolute(1_700_000_000_123))
        );
        // The labels `report` prints read back.
        assert_eq!(
            parse("2023-11-14 22:13:20.123 UTC"),
            Ok(When::Absolute(1_700_000_000_123))
        );
        assert_eq!(
            parse("2000-02-29T00:00:00Z"),
            Ok(When::Absolute(951_782_400_000))
        );
    }

    #[test]
    fn anything_else_is_one_line_naming_what_is_accepted() {
        for bad in [
            "",
            "soon",
            "inf",
            "nan",
            "--5m",
            "25:00",
            "14:5",
            "14:05:61",
            "1:2:3:4",
            "2023-11-14T22:13:20",
            "2023-13-14T22:13:20Z",
            "2023-11-14",
            "5x",
            "\u{1b}[31m",
        ] {
            let e = parse(bad).expect_err(bad);
            assert!(e.contains("is not a time (try 30s"), "{bad}: {e}");
            assert!(!e.contains('\n') && !e.contains('\u{1b}'), "{e:?}");
        }
    }

    #[test]
    fn moments_resolve_against_the_start() {
        let start = 1_700_000_000_000;
        assert_eq!(When::AfterStart(30_000).resolve(start), start + 30_000);
        assert_eq!(When::AfterStart(-30_000).resolve(start), start - 30_000);
        assert_eq!(When::Absolute(5).resolve(start), 5);
        // In UTC (the test's TZ may be anything: compare against its own offset).
        let offset = local_offset_ms(start);
        let local_of_day = (start as i64 + offset).rem_euclid(86_400_000) as u64;
        assert_eq!(When::LocalClock(local_of_day).resolve(start), start);
        let later = (local_of_day + 60_000) % 86_400_000;
        assert_eq!(When::LocalClock(later).resolve(start), start + 60_000);
    }
}
