//! A tiny loopback HTTP server for the direct-scraping tests: it answers every request with
//! a fixed page, or with garbage, or never answers (hangs), until dropped; then its port
//! refuses connections.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

#[derive(Clone)]
pub enum Answer {
    /// `200 OK` with this text-format page.
    Page(String),
    /// `200 OK` with an HTML page: not a metrics page.
    Garbage,
    /// Reads the request and never answers.
    Hang,
}

pub struct PageServer {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl PageServer {
    pub fn start(answer: Answer) -> PageServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            // Connections that hang are held here until the server stops.
            let mut held: Vec<TcpStream> = Vec::new();
            while !stopping.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        if let Some(stream) = answer_one(stream, &answer) {
                            held.push(stream);
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        PageServer {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

/// Answers one connection; returns it when it is to be held open unanswered.
fn answer_one(mut stream: TcpStream, answer: &Answer) -> Option<TcpStream> {
    stream.set_nonblocking(false).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let (content_type, body) = match answer {
        Answer::Hang => return Some(stream),
        Answer::Page(text) => ("text/plain; version=0.0.4", text.clone()),
        Answer::Garbage => (
            "text/html",
            "<html><body><h1>502 Bad Gateway</h1>\u{1b}[2J</body></html>\n".to_string(),
        ),
    };
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    None
}

impl Drop for PageServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
