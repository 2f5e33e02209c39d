//! Misbehaving clients for the exporter's robustness test and benchmark: a scraper on one
//! kept-alive connection, as Prometheus scrapes, and a storm of clients that never complete
//! a request and reconnect as soon as they are dropped.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a scrape may take before it counts as failed.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

/// A scraper holding one connection for all its scrapes. It never reconnects: a scrape on a
/// connection the server closed fails, which is what the test is about.
pub struct KeepAlive {
    stream: TcpStream,
    /// Bytes read past the last response (none with a well-behaved server).
    pending: Vec<u8>,
}

impl KeepAlive {
    pub fn connect(addr: SocketAddr) -> Self {
        let stream = TcpStream::connect(addr).expect("connect the scraper");
        let _ = stream.set_nodelay(true);
        stream
            .set_read_timeout(Some(SCRAPE_TIMEOUT))
            .expect("read timeout");
        Self {
            stream,
            pending: Vec::new(),
        }
    }

    /// GET `/metrics` on this connection: the body of a 200 response, or why not.
    pub fn scrape(&mut self) -> Result<String, String> {
        self.stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: vramscope\r\n\r\n")
            .map_err(|e| format!("send: {e}"))?;
        let head_end = loop {
            if let Some(at) = find(&self.pending, b"\r\n\r\n") {
                break at + 4;
            }
            self.fill()?;
        };
        let head = String::from_utf8_lossy(&self.pending[..head_end]).into_owned();
        if !head.starts_with("HTTP/1.1 200") {
            return Err(format!("status line {:?}", head.lines().next()));
        }
        let length: usize = head
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse().ok())?
            })
            .ok_or("no Content-Length")?;
        while self.pending.len() < head_end + length {
            self.fill()?;
        }
        let body = String::from_utf8_lossy(&self.pending[head_end..head_end + length]).into_owned();
        self.pending.drain(..head_end + length);
        Ok(body)
    }

    fn fill(&mut self) -> Result<(), String> {
        let mut buf = [0_u8; 65536];
        match self.stream.read(&mut buf) {
            Ok(0) => Err("the server closed the connection".into()),
            Ok(n) => {
                self.pending.extend_from_slice(&buf[..n]);
                Ok(())
            }
            Err(e) => Err(format!("read: {e}")),
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// What each client of a storm does once connected.
#[derive(Clone, Copy, Debug)]
pub enum Misbehaviour {
    /// Sends nothing and waits to be dropped.
    Idle,
    /// Sends a request head that never ends, one byte every 100 ms (slowloris).
    Trickle,
    /// Closes at once (connect/close churn).
    Churn,
}

/// Clients that misbehave and reconnect as soon as they are dropped, until stopped (or
/// `limit` has passed, so that a failing test cannot leave them running).
pub struct Storm {
    stop: Arc<AtomicBool>,
    connections: Arc<AtomicU64>,
    clients: Vec<JoinHandle<()>>,
}

impl Storm {
    pub fn start(addr: SocketAddr, clients: usize, how: Misbehaviour, limit: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(AtomicU64::new(0));
        let until = Instant::now() + limit;
        let clients = (0..clients)
            .map(|_| {
                let stop = Arc::clone(&stop);
                let connections = Arc::clone(&connections);
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) && Instant::now() < until {
                        let Ok(stream) = TcpStream::connect(addr) else {
                            std::thread::sleep(Duration::from_millis(10));
                            continue;
                        };
                        connections.fetch_add(1, Ordering::Relaxed);
                        misbehave(stream, how, &stop, until);
                    }
                })
            })
            .collect();
        Self {
            stop,
            connections,
            clients,
        }
    }

    /// Connections opened so far (each after the last was dropped).
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }

    /// Stops every client; the connections they opened in all.
    pub fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        for client in self.clients {
            let _ = client.join();
        }
        self.connections.load(Ordering::Relaxed)
    }
}

/// Holds `stream` as `how` says until the server drops it or the storm ends.
fn misbehave(mut stream: TcpStream, how: Misbehaviour, stop: &AtomicBool, until: Instant) {
    if matches!(how, Misbehaviour::Churn) {
        return;
    }
    let head = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    let mut sent = 0_usize;
    let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
    while !stop.load(Ordering::Relaxed) && Instant::now() < until {
        if matches!(how, Misbehaviour::Trickle) {
            let byte = head.get(sent).copied().unwrap_or(b'a');
            if stream.write_all(&[byte]).is_err() {
                return;
            }
            sent += 1;
        }
        match stream.read(&mut [0_u8; 1024]) {
            Ok(0) => return,
            Err(e) if !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return,
            _ => {}
        }
    }
}
