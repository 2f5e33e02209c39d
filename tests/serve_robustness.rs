//! Scrapes keep being answered while other clients misbehave: connections that never send a
//! request, a client trickling its headers a byte at a time, a client that stopped reading
//! its responses, and a flood of connections beyond the limit.

mod common;
mod serve_support;

use common::*;
use serde_json::json;
use serve_support::storm::{KeepAlive, Misbehaviour, Storm};
use serve_support::*;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

const MAX_CONNECTIONS: usize = 8;

fn serve(scenario: &Scenario) -> Served {
    let served = Served::start(
        scenario,
        &[
            "--interval",
            "250ms",
            "--max-connections",
            &MAX_CONNECTIONS.to_string(),
            "--client-timeout",
            "1s",
        ],
        &[],
    );
    served.scrape_until(Duration::from_secs(20), |t| {
        t.contains("DCGM_FI_DEV_FB_USED")
    });
    served
}

/// Whether the server has closed `stream` (EOF or reset) within `within`.
fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    let mut buf = [0_u8; 65536];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        stream.set_read_timeout(Some(left)).unwrap();
        match stream.read(&mut buf) {
            Ok(0) => return true,
            // A response it was owed; keep reading until the close.
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return false;
            }
            Err(_) => return true,
        }
    }
}

/// One scrape on a fresh connection; its latency.
fn timed_scrape(served: &Served) -> Duration {
    let started = Instant::now();
    let reply = get(&served.url("/metrics"), None);
    assert_eq!(reply.status, 200);
    assert!(reply.body.contains("DCGM_FI_DEV_FB_USED"));
    started.elapsed()
}

/// Sends a request head one byte every 100 ms until the server closes the connection;
/// returns how long that took (or `None` if it never did within 10 s).
fn slowloris(addr: SocketAddr) -> std::thread::JoinHandle<Option<Duration>> {
    std::thread::spawn(move || {
        let mut stream = TcpStream::connect(addr).unwrap();
        let head = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ".repeat(20);
        let started = Instant::now();
        for byte in head {
            if stream.write_all(&[byte]).is_err() {
                return Some(started.elapsed());
            }
            stream
                .set_read_timeout(Some(Duration::from_millis(100)))
                .unwrap();
            match stream.read(&mut [0_u8; 1024]) {
                Ok(0) => return Some(started.elapsed()),
                Err(e) if !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Some(started.elapsed());
                }
                _ => {}
            }
            if started.elapsed() > Duration::from_secs(10) {
                return None;
            }
        }
        None
    })
}

#[test]
fn scrapes_are_answered_while_clients_idle_trickle_and_stop_reading() {
    let scenario = Scenario::new(&json!({ "devices": [h100(0), h100(1)] }));
    let served = serve(&scenario);
    // Three times the limit of connections that never send anything.
    let mut idle: Vec<TcpStream> = (0..3 * MAX_CONNECTIONS)
        .map(|_| TcpStream::connect(served.addr).unwrap())
        .collect();
    // A client that asked for a hundred responses and reads none of them.
    let mut stalled = TcpStream::connect(served.addr).unwrap();
    stalled
        .write_all(&b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".repeat(100))
        .unwrap();
    let trickling = slowloris(served.addr);
    let mut worst = Duration::ZERO;
    for _ in 0..20 {
        worst = worst.max(timed_scrape(&served));
        std::thread::sleep(Duration::from_millis(50));
    }
    // Generous for a loaded CI machine; a server blocked by any of those clients would wait
    // for a timeout of a second or more per scrape, or never answer.
    assert!(
        worst < Duration::from_millis(900),
        "slowest scrape {worst:?}"
    );
    // The trickling client is cut off by the header timeout (1 s) although it never stops
    // sending; the idle ones are gone by timeout or to make room.
    let cut_after = trickling.join().unwrap();
    assert!(
        cut_after.is_some_and(|d| d < Duration::from_secs(4)),
        "the trickling client was never cut off: {cut_after:?}"
    );
    for (i, stream) in idle.iter_mut().enumerate() {
        assert!(
            closed_within(stream, Duration::from_secs(3)),
            "idle connection {i} still open"
        );
    }
    // Still serving, on a kept-alive connection too.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .into();
    for _ in 0..3 {
        let body = agent
            .get(&served.url("/metrics"))
            .call()
            .unwrap()
            .body_mut()
            .read_to_string()
            .unwrap();
        assert!(body.contains("DCGM_FI_DEV_FB_USED"));
    }
    drop(stalled);
}

#[test]
fn a_flood_of_connections_holds_at_most_the_limit_open() {
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let served = serve(&scenario);
    let mut flood: Vec<TcpStream> = (0..100)
        .map(|_| TcpStream::connect(served.addr).unwrap())
        .collect();
    // Every one of them was accepted, and each beyond the limit closed an older one.
    std::thread::sleep(Duration::from_millis(300));
    let open = flood
        .iter_mut()
        .map(|s| closed_within(s, Duration::from_millis(20)))
        .filter(|closed| !closed)
        .count();
    assert!(
        open <= MAX_CONNECTIONS,
        "{open} of 100 connections still open with a limit of {MAX_CONNECTIONS}"
    );
    // The newest ones are those kept: a scraper that just connected is never starved.
    assert!(open >= 1, "no connection left open at all");
    assert!(timed_scrape(&served) < Duration::from_millis(900));
}

/// A scraper on one kept-alive connection scrapes every 100 ms while `clients` clients
/// that behave as `how` says reconnect as soon as they are dropped: every scrape must be
/// answered on that connection, and a scrape on a fresh connection too.
fn scrapes_survive_a_storm(clients: usize, how: Misbehaviour) {
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let served = serve(&scenario);
    let mut scraper = KeepAlive::connect(served.addr);
    scraper
        .scrape()
        .expect("the first scrape, before the storm");
    let storm = Storm::start(served.addr, clients, how, Duration::from_secs(30));
    // Until every client has connected once: all places taken, and newcomers closing others.
    let deadline = Instant::now() + Duration::from_secs(10);
    while storm.connections() < clients as u64 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let before = storm.connections();
    let mut failures = Vec::new();
    for i in 0..30 {
        std::thread::sleep(Duration::from_millis(100));
        match scraper.scrape() {
            Ok(body) if body.contains("DCGM_FI_DEV_FB_USED") => {}
            Ok(body) => failures.push(format!("scrape {i}: no metrics in {body:?}")),
            Err(e) => failures.push(format!("scrape {i}: {e}")),
        }
    }
    let fresh = timed_scrape(&served);
    let during = storm.connections() - before;
    let total = storm.stop();
    assert!(
        failures.is_empty(),
        "{} of 30 kept-alive scrapes failed during a storm of {clients} {how:?} clients: {failures:?}",
        failures.len()
    );
    assert!(
        fresh < Duration::from_secs(3),
        "a scrape on a fresh connection took {fresh:?}"
    );
    // The storm did storm: clients kept being dropped and reconnecting while we scraped.
    assert!(
        total >= clients as u64 && during > 0,
        "{total} connections in all, {during} while scraping"
    );
}

#[test]
fn a_kept_alive_scraper_is_answered_through_a_storm_of_reconnecting_idle_clients() {
    scrapes_survive_a_storm(200, Misbehaviour::Idle);
}

#[test]
fn a_kept_alive_scraper_is_answered_through_a_slowloris_storm() {
    scrapes_survive_a_storm(100, Misbehaviour::Trickle);
}
