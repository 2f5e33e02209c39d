//! The HTTP side: hyper's HTTP/1.1 server on a one-thread tokio runtime. Read-only: `/` and
//! `/metrics`, GET and HEAD; nothing can be changed through it.
//!
//! Slow and idle clients: hyper's header-read timeout closes a connection that has not sent
//! a complete request head within `client_timeout`, which covers a client trickling its
//! headers and an idle keep-alive connection alike; a connection is also closed after
//! `max_lifetime`, so one whose client stopped reading cannot hold its place for ever; and at
//! `max_connections` a new connection closes one that never sent a request, never one that
//! did recently (`slots`). After each accept the new connection's task runs before the next
//! accept, so a client that sends its request with the connection is answered before a
//! flood of newcomers can close it.

use super::encode::negotiate;
use super::published::Latest;
use super::slots::{Slot, Slots};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{ACCEPT, ALLOW, CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

/// Limits that keep slow, idle or too many clients from starving the scrapers.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_connections: usize,
    /// No complete request head within this: the connection is closed. Covers both a client
    /// trickling its headers and an idle keep-alive connection.
    pub client_timeout: Duration,
    /// A connection is closed after this long whatever it does, so one whose client stopped
    /// reading its response cannot hold a place for ever.
    pub max_lifetime: Duration,
}

/// How long a connection told to close may take to finish the response it is writing.
const CLOSE_GRACE: Duration = Duration::from_secs(1);
/// The largest request head read (hyper's minimum); a scraper's is a few hundred bytes.
const MAX_HEAD_BYTES: usize = 8192;
/// After a failed accept (out of file descriptors), wait before the next, or the loop spins.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

const INDEX: &str = "<!DOCTYPE html>\n<html><head><title>vramscope</title></head>\n<body><h1>vramscope</h1>\n<p>GPU memory per device, process and rank, for Prometheus: <a href=\"/metrics\">/metrics</a></p>\n</body></html>\n";

/// Serves until `stop` completes, then stops accepting, lets every connection finish the
/// response it is writing (at most `CLOSE_GRACE`), and returns.
pub async fn serve(
    listener: std::net::TcpListener,
    latest: Arc<Latest>,
    limits: Limits,
    stop: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let slots = Slots::new(limits.max_connections, limits.client_timeout);
    let mut connections = JoinSet::new();
    tokio::pin!(stop);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut stop => break,
        };
        // Finished connections are reaped here, so the set holds only open ones.
        while connections.try_join_next().is_some() {}
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(_) => {
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        // Every place is held by a client that sent a request recently: refuse this one.
        let Some(slot) = slots.admit(Instant::now()) else {
            continue;
        };
        // Responses go out whole: nothing is gained by waiting to coalesce them.
        let _ = stream.set_nodelay(true);
        connections.spawn(connection(stream, slot, Arc::clone(&latest), limits));
        tokio::task::yield_now().await;
    }
    drop(listener);
    slots.close_all();
    // Each connection gives itself CLOSE_GRACE once told; this bound only guards against
    // one that never reaches its select.
    let drained = async { while connections.join_next().await.is_some() {} };
    let _ = tokio::time::timeout(CLOSE_GRACE * 2, drained).await;
    Ok(())
}

async fn connection(stream: TcpStream, slot: Slot, latest: Arc<Latest>, limits: Limits) {
    let slot = Arc::new(slot);
    let in_service = Arc::clone(&slot);
    let service = service_fn(move |request: Request<Incoming>| {
        in_service.requested(Instant::now());
        let response = respond(&request, &latest);
        async move { Ok::<_, Infallible>(response) }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.client_timeout)
        .max_buf_size(MAX_HEAD_BYTES);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let lifetime = tokio::time::sleep(limits.max_lifetime);
    tokio::pin!(lifetime);
    tokio::select! {
        _ = conn.as_mut() => return,
        () = slot.close.notified() => {}
        () = &mut lifetime => {}
    }
    // Finish the response in flight, if any, then close.
    conn.as_mut().graceful_shutdown();
    let _ = tokio::time::timeout(CLOSE_GRACE, conn).await;
}

fn respond(request: &Request<Incoming>, latest: &Latest) -> Response<Full<Bytes>> {
    let readable = matches!(*request.method(), Method::GET | Method::HEAD);
    match (request.uri().path(), readable) {
        ("/metrics", true) => {
            let accept = request.headers().get(ACCEPT).and_then(|v| v.to_str().ok());
            let format = negotiate(accept);
            let body = latest.get().body(format);
            reply(StatusCode::OK, format.content_type(), body)
        }
        ("/", true) => reply(
            StatusCode::OK,
            "text/html; charset=utf-8",
            Bytes::from_static(INDEX.as_bytes()),
        ),
        ("/" | "/metrics", false) => {
            let mut response = reply(
                StatusCode::METHOD_NOT_ALLOWED,
                "text/plain; charset=utf-8",
                Bytes::from_static(b"read-only: GET or HEAD\n"),
            );
            response
                .headers_mut()
                .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
            response
        }
        _ => reply(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            Bytes::from_static(b"not found: the metrics are at /metrics\n"),
        ),
    }
}

fn reply(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}
