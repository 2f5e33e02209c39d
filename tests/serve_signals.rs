//! `vramscope serve` ends in order on SIGTERM (a service manager's stop) and SIGINT (Ctrl-C):
//! it stops accepting, lets open connections go, shuts NVML down and exits 0, instead of
//! dying with NVML never told.

mod common;
mod serve_support;

use common::*;
use serve_support::*;
use std::net::TcpStream;
use std::process::ExitStatus;
use std::time::Duration;

/// Waits for the server to exit, or panics (killing it) after `timeout`.
fn wait_exit(served: &mut Served, timeout: Duration) -> ExitStatus {
    let exited = wait::poll(timeout, wait::POLL, || {
        served.child.try_wait().expect("wait for serve")
    });
    exited.unwrap_or_else(|_| {
        let _ = served.child.kill();
        panic!("vramscope serve did not exit within {timeout:?} of the signal");
    })
}

fn ends_in_order(signal: libc::c_int) {
    let scenario = Scenario::new(&two_gpus(4242, None));
    let work = tempfile::tempdir().expect("tempdir");
    let counts = work.path().join("counts.json");
    let channels = work.path().join("channels");
    let mut served = Served::start(
        &scenario,
        &["--interval", "250ms"],
        &[("FAKE_NVML_COUNTS", &counts), ("VRAMSCOPE_DIR", &channels)],
    );
    // NVML is open once a GPU figure is served.
    served.scrape_until(Duration::from_secs(20), |text| {
        text.contains("vramscope_gpu_memory_total_bytes{")
    });
    // A kept-alive client that sends nothing must not hold the exit up.
    let idle = TcpStream::connect(served.addr).expect("connect");
    let pid = libc::pid_t::try_from(served.child.id()).expect("pid");
    // SAFETY: `pid` is our own child, not yet waited for, so it cannot have been reused.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
    let status = wait_exit(&mut served, Duration::from_secs(15));
    drop(idle);
    let said: Vec<String> = served.stderr.try_iter().collect();
    assert_eq!(
        status.code(),
        Some(0),
        "signal {signal}: {status:?}, {said:?}"
    );
    let counts = read_counts(&counts);
    let inits = counts.get("nvmlInit_v2").copied().unwrap_or(0.0);
    assert!(inits >= 1.0, "signal {signal}: {counts:?}");
    assert_eq!(
        counts.get("nvmlShutdown").copied(),
        Some(inits),
        "signal {signal}: {counts:?}"
    );
    assert!(
        TcpStream::connect(served.addr).is_err(),
        "the port still accepts after exit"
    );
}

#[test]
fn sigterm_ends_serve_in_order_with_nvml_shut_down() {
    ends_in_order(libc::SIGTERM);
}

#[test]
fn sigint_ends_serve_in_order_with_nvml_shut_down() {
    ends_in_order(libc::SIGINT);
}
