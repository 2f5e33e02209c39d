//! One HTTP/1.1 GET with hyper's client on the caller's tokio runtime: a fresh connection,
//! the whole exchange (connect, request, headers, body) under one deadline, and a cap on the
//! body's size, so a server that hangs, trickles or sends without end costs at most the
//! deadline and the cap. Every failure is one short line naming what went wrong.

use super::url::Url;
use crate::safe_fs::Bound;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::Request;
use hyper::header::{ACCEPT, HOST, USER_AGENT};
use hyper_util::rt::TokioIo;
use std::time::Duration;
use tokio::net::TcpStream;

/// What a GET gave: the body of a 2xx answer, or why there is none.
pub type Fetch = Result<Bytes, String>;

/// GETs `path_and_query` from `url`'s host within `deadline`, reading at most
/// `bound.max_bytes` of body (an answer over it is refused, said so, with nothing kept).
pub async fn get(
    url: &Url,
    path_and_query: &str,
    accept: &str,
    deadline: Duration,
    bound: Bound,
) -> Fetch {
    match tokio::time::timeout(deadline, exchange(url, path_and_query, accept, bound)).await {
        Ok(result) => result,
        Err(_) => Err(format!("no answer within {}", seconds(deadline))),
    }
}

async fn exchange(url: &Url, path_and_query: &str, accept: &str, bound: Bound) -> Fetch {
    let limit = usize::try_from(bound.max_bytes).unwrap_or(usize::MAX);
    let stream = TcpStream::connect((url.host.as_str(), url.port))
        .await
        .map_err(|e| connect_error(&e))?;
    let _ = stream.set_nodelay(true);
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("HTTP handshake failed: {e}"))?;
    // The connection is driven by its own task, ended when this exchange ends (or times out)
    // so nothing lingers on the runtime.
    let driver = tokio::spawn(connection);
    let _abort = AbortOnDrop(driver);
    let request = Request::get(path_and_query)
        .header(HOST, url.authority())
        .header(ACCEPT, accept)
        .header(USER_AGENT, concat!("vramscope/", env!("CARGO_PKG_VERSION")))
        .body(Empty::<Bytes>::new())
        .map_err(|e| format!("bad request: {e}"))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("no HTTP answer: {}", short(&e.to_string())))?;
    let status = response.status();
    let body = Limited::new(response.into_body(), limit)
        .collect()
        .await
        .map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                format!(
                    "refused: the {} is larger than {} MiB (its bound)",
                    bound.what,
                    limit >> 20
                )
            } else {
                format!("answer cut short: {}", short(&e.to_string()))
            }
        })?
        .to_bytes();
    if !status.is_success() {
        // Prometheus says why in its JSON body; an exporter in its text.
        let why = String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
        return Err(format!("HTTP {}: {}", status.as_u16(), short(&why)));
    }
    Ok(body)
}

struct AbortOnDrop(tokio::task::JoinHandle<Result<(), hyper::Error>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn connect_error(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connection refused".to_string(),
        _ => format!("cannot connect: {}", short(&e.to_string())),
    }
}

/// Foreign text cut to one clean line of at most 160 characters.
pub fn short(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let clean = crate::text::clean(line);
    let mut out: String = clean.chars().take(160).collect();
    if clean.chars().count() > 160 {
        out.push('…');
    }
    out
}

fn seconds(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}
