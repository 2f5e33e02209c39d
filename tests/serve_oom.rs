//! `vramscope serve` after a process dies of an OOM: the OOM is counted (the writer's OOM
//! event, whatever its published counter says), and the process's allocator and step series
//! stay, with their rank labels, for the whole grace period, first while NVML still lists
//! the dying process and then after it stopped listing it.

mod common;
mod serve_support;

use common::*;
use serve_support::oom::{die_of_an_oom, missing, train};
use serve_support::*;
use std::time::{Duration, Instant};

#[test]
fn a_process_that_dies_of_an_oom_keeps_its_count_series_and_rank_labels_for_the_grace() {
    let work = tempfile::tempdir().unwrap();
    let channels = work.path().join("channels");
    let mut writer = rank_writer(&channels);
    train(&mut writer);
    let pid = std::process::id();
    let ours = pid.to_string();
    let scenario = Scenario::new(&two_gpus(pid, None));
    let served = Served::start(
        &scenario,
        &["--interval", "250ms", "--grace", "60s"],
        &[("VRAMSCOPE_DIR", &channels)],
    );
    served.scrape_until(Duration::from_secs(20), |text| {
        value(
            &samples(text),
            "vramscope_process_allocator_allocated_bytes",
            &[("pid", &ours)],
        )
        .is_some()
    });

    die_of_an_oom(writer);
    // NVML still lists the dying process for a while: its row already has the OOM.
    served.scrape_until(Duration::from_secs(10), |text| {
        missing(text, &ours).is_empty()
    });
    let dying_until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < dying_until {
        let failures = missing(&served.scrape(), &ours);
        assert!(failures.is_empty(), "while NVML lists it: {failures:?}");
        std::thread::sleep(Duration::from_millis(100));
    }

    // Then NVML stops listing it: exited, and everything but what it held stays.
    scenario.rewrite(&two_gpus(1, None));
    served.scrape_until(Duration::from_secs(10), |text| {
        value(
            &samples(text),
            "vramscope_process_running",
            &[("pid", &ours)],
        ) == Some(0.0)
    });
    let exited_until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < exited_until {
        let text = served.scrape();
        let failures = missing(&text, &ours);
        assert!(failures.is_empty(), "after it exited: {failures:?}");
        let all = samples(&text);
        let running = find(&all, "vramscope_process_running", &[("pid", &ours)]);
        assert_eq!(running.len(), 1, "{running:?}");
        assert_eq!(running[0].label("rank"), Some("1"), "{running:?}");
        assert_eq!(running[0].label("job_id"), Some("job-42"), "{running:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
