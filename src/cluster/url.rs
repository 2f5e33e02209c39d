//! The few URLs `vramscope cluster` reads: `http://host[:port][/prefix]` for a Prometheus
//! server, `host:port` (or a full URL) for an exporter. Plain HTTP only: no TLS stack is
//! linked, so an `https://` URL is refused in one line that says what to do instead.

/// Where to connect and what to ask for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Url {
    pub host: String,
    pub port: u16,
    /// The path, without a trailing `/` (empty for the root).
    pub path: String,
}

impl Url {
    /// `http://host[:port][/path]`; the port defaults to `default_port`.
    pub fn parse(text: &str, default_port: u16) -> Result<Url, String> {
        let shown = crate::text::clean(text.trim());
        let text = text.trim();
        let rest = if let Some(rest) = text.strip_prefix("http://") {
            rest
        } else if text.starts_with("https://") {
            return Err(format!(
                "`{shown}`: https is not supported; reach the server over plain HTTP (e.g. through an SSH tunnel or a local proxy)"
            ));
        } else if text.contains("://") {
            return Err(format!("`{shown}` is not an http:// URL"));
        } else {
            text
        };
        let (authority, path) = match rest.find('/') {
            Some(at) => (&rest[..at], &rest[at..]),
            None => (rest, ""),
        };
        if authority.contains('@') {
            return Err(format!(
                "`{shown}`: credentials in the URL are not supported"
            ));
        }
        let (host, port) = split_host_port(authority)
            .ok_or_else(|| format!("`{shown}` has no host, or a bad port"))?;
        let port = port.unwrap_or(default_port);
        let path = path.trim_end_matches('/').to_string();
        if host.is_empty() || !crate::text::is_clean(host) || host.contains(char::is_whitespace) {
            return Err(format!("`{shown}` has no usable host"));
        }
        Ok(Url {
            host: host.to_string(),
            port,
            path,
        })
    }

    /// `host:port` as a `Host` header and a Prometheus `instance` label spell it.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// `host`, `host:port`, `[v6]`, `[v6]:port`; `None` when the port is not a number.
fn split_host_port(authority: &str) -> Option<(&str, Option<u16>)> {
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return match after.strip_prefix(':') {
            Some(port) => Some((host, Some(port.parse().ok()?))),
            None if after.is_empty() => Some((host, None)),
            None => None,
        };
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => Some((host, Some(port.parse().ok()?))),
        Some(_) => None,
        None => Some((authority, None)),
    }
}

/// `text` for a query string: everything but the unreserved characters percent-encoded.
pub fn encode_component(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 3 / 2);
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(char::from(byte));
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_bare_addresses_parse() {
        let u = Url::parse("http://127.0.0.1:9090/prom/", 80).unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("127.0.0.1", 9090, "/prom")
        );
        let u = Url::parse("node-3:9400", 80).unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("node-3", 9400, "")
        );
        assert_eq!(u.authority(), "node-3:9400");
        let u = Url::parse("http://[::1]:9400", 80).unwrap();
        assert_eq!((u.host.as_str(), u.port), ("::1", 9400));
        assert_eq!(u.authority(), "[::1]:9400");
        assert_eq!(Url::parse("http://prom", 9090).unwrap().port, 9090);
    }

    #[test]
    fn what_cannot_be_read_is_refused_in_one_clean_line() {
        for bad in [
            "https://prom:9090",
            "ftp://x",
            "http://:9090",
            "host:port",
            "http://user:pw@prom:9090",
            "http://pro\u{1b}[2Jm:9090",
            "",
        ] {
            let message = Url::parse(bad, 80).unwrap_err();
            assert!(crate::text::is_clean(&message), "{message}");
            assert!(!message.contains('\n'), "{message}");
        }
        assert!(
            Url::parse("https://prom", 80)
                .unwrap_err()
                .contains("https is not supported")
        );
    }

    #[test]
    fn query_text_is_percent_encoded() {
        assert_eq!(
            encode_component("up{a=\"b c\"} == 0"),
            "up%7Ba%3D%22b%20c%22%7D%20%3D%3D%200"
        );
    }
}
