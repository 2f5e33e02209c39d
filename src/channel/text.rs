//! Text in the channel: fixed fields padded with NUL, length-prefixed labels, and the GPU UUID.
//! Writers cut text at a character boundary; readers treat every byte as hostile.

/// The longest prefix of `s` that fits in `max` bytes without splitting a character.
pub(crate) fn fit(s: &str, max: usize) -> &[u8] {
    if s.len() <= max {
        return s.as_bytes();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s.as_bytes()[..end]
}

/// Text safe to show (`crate::text::clean_bytes`): invalid UTF-8, control characters
/// (terminal escapes) and bidirectional overrides withheld, line breaks made spaces.
pub fn sanitize(bytes: &[u8]) -> String {
    crate::text::clean_bytes(bytes)
}

/// A NUL-padded field: the bytes before the first NUL, or all of them when it is full.
pub(crate) fn padded(field: &[u8]) -> String {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    sanitize(&field[..end])
}

/// `raw` as NVML prints a UUID: `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, lower case.
pub fn uuid_string(raw: &[u8; 16]) -> String {
    let mut s = String::with_capacity(40);
    s.push_str("GPU-");
    for (i, b) in raw.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push(char::from(HEX[usize::from(b >> 4)]));
        s.push(char::from(HEX[usize::from(b & 0xF)]));
    }
    s
}

/// `raw` as NVML prints it, `MIG-` for a MIG device's UUID.
pub fn slot_uuid_string(raw: &[u8; 16], mig: bool) -> String {
    let text = uuid_string(raw);
    if mig {
        text.replacen("GPU-", "MIG-", 1)
    } else {
        text
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// The raw bytes of a UUID as NVML prints it (`GPU-` or `MIG-` prefix optional, any case);
/// `None` unless it is exactly 32 hex digits in the 8-4-4-4-12 grouping.
pub fn parse_uuid(text: &str) -> Option<[u8; 16]> {
    let body = text
        .strip_prefix("GPU-")
        .or_else(|| text.strip_prefix("MIG-"))
        .unwrap_or(text);
    let groups: Vec<&str> = body.split('-').collect();
    let lens: Vec<usize> = groups.iter().map(|g| g.len()).collect();
    if lens != [8, 4, 4, 4, 12] {
        return None;
    }
    let digits: Vec<u8> = groups.concat().bytes().collect();
    let mut raw = [0u8; 16];
    for (i, pair) in digits.chunks_exact(2).enumerate() {
        let hi = char::from(pair[0]).to_digit(16)?;
        let lo = char::from(pair[1]).to_digit(16)?;
        raw[i] = (hi * 16 + lo) as u8;
    }
    Some(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_cuts_at_a_character_boundary() {
        assert_eq!(fit("abc", 8), b"abc");
        assert_eq!(fit("abcdef", 4), b"abcd");
        // "é" is two bytes: a cut in its middle keeps neither byte.
        assert_eq!(fit("aé", 2), b"a");
        assert_eq!(fit("日本", 5), "日".as_bytes());
        assert_eq!(fit("x", 0), b"");
    }

    #[test]
    fn sanitize_withholds_controls_and_bad_utf8() {
        assert_eq!(sanitize(b"ok\x1b[31mred\n"), "ok\u{FFFD}[31mred ");
        assert_eq!(sanitize(b"a\xFFb"), "a\u{FFFD}b");
        assert_eq!(
            sanitize("tab\there é\u{202e}".as_bytes()),
            "tab here é\u{FFFD}"
        );
    }

    #[test]
    fn padded_stops_at_the_first_nul_or_uses_the_whole_field() {
        assert_eq!(padded(b"torch\0\0\0"), "torch");
        assert_eq!(padded(b"full"), "full");
        assert_eq!(padded(b"\0junk"), "");
    }

    #[test]
    fn uuid_prints_as_nvml_and_parses_back() {
        let raw: [u8; 16] = [
            0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab,
            0xcd, 0xef,
        ];
        let text = uuid_string(&raw);
        assert_eq!(text, "GPU-12345678-9abc-def0-0123-456789abcdef");
        assert_eq!(parse_uuid(&text), Some(raw));
        assert_eq!(
            parse_uuid(&text.to_uppercase().replace("GPU-", "")),
            Some(raw)
        );
        assert_eq!(parse_uuid("GPU-12345678-9abc-def0-0123-456789abcde"), None);
        assert_eq!(parse_uuid("GPU-1234567g-9abc-def0-0123-456789abcdef"), None);
        assert_eq!(parse_uuid("GPU-+2345678-9abc-def0-0123-456789abcdef"), None);
    }
}
