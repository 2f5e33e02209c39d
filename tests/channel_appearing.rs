//! The channel sampler lists its directories only when inotify reports a change: a channel
//! that appears after minutes of quiet must still be found at the next scan, and one whose
//! file is removed must be reported gone, and a refused file rewritten in place (no change of
//! entries) must be looked at again. One test in this file: it sets `VRAMSCOPE_DIR`,
//! which is process-wide.

use std::os::unix::fs::OpenOptionsExt;
use std::time::{Duration, Instant};
use vramscope::channel::{Writer, WriterConfig, WriterKind};
use vramscope::model::Gone;
use vramscope::sources::channels::ChannelSampler;

/// Samples until `found` says yes of a batch, at most `within`; false if it never did.
fn sample_until(
    sampler: &mut ChannelSampler,
    within: Duration,
    mut found: impl FnMut(&vramscope::model::ChannelBatch) -> bool,
) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if sampler.sample().as_ref().is_some_and(&mut found) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

#[test]
fn a_channel_that_appears_after_a_quiet_spell_is_found_and_its_removal_seen() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("channels");
    // SAFETY: the only test in this binary, before any thread reads the environment. Our
    // directory only: not the machine's /dev/shm channels, which root would read too.
    unsafe {
        std::env::set_var("VRAMSCOPE_DIR", &dir);
        std::env::set_var("VRAMSCOPE_SHM", parent.path().join("no-shm"));
        std::env::remove_var("XDG_RUNTIME_DIR");
    }
    let mut sampler = ChannelSampler::new();
    assert!(sampler.sample().is_none(), "no directory, nothing to tell");
    // Two scans' worth of quiet: the directory does not even exist yet.
    std::thread::sleep(Duration::from_millis(4200));
    assert!(sampler.sample().is_none());

    let writer = Writer::create(WriterConfig {
        framework: "rust-test 1.0".into(),
        dir: Some(dir.clone()),
        ..WriterConfig::from_process(WriterKind::Rust)
    })
    .expect("create a channel");
    let name = writer
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let found = sample_until(&mut sampler, Duration::from_secs(5), |batch| {
        batch.polls.iter().any(|p| p.identity.file == name)
    });
    assert!(found, "{name} created in a new directory was not found");

    // Quiet again, then the file goes: reported as removed.
    std::thread::sleep(Duration::from_millis(2200));
    let path = writer.path().to_path_buf();
    std::fs::remove_file(&path).unwrap();
    let gone = sample_until(&mut sampler, Duration::from_secs(5), |batch| {
        batch
            .gone
            .iter()
            .any(|(p, why)| p.ends_with(&name) && *why == Gone::Removed)
    });
    assert!(gone, "the removal of {} was not seen", path.display());
    drop(writer);

    // A file refused, then made valid in place: the same entry, so no inotify event says so.
    let good = Writer::create(WriterConfig {
        framework: "rust-test 1.0".into(),
        dir: Some(dir.clone()),
        ..WriterConfig::from_process(WriterKind::Rust)
    })
    .expect("create a channel");
    let bogus = dir.join("bogus.vsc");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&bogus)
        .unwrap();
    std::io::Write::write_all(&mut file, &[0xAB; 4096]).unwrap();
    drop(file);
    let refused = sample_until(&mut sampler, Duration::from_secs(5), |batch| {
        batch.rejected.iter().any(|r| r.contains("bogus.vsc"))
    });
    assert!(refused, "garbage in bogus.vsc was not refused");
    std::thread::sleep(Duration::from_millis(2200));
    let bytes = std::fs::read(good.path()).unwrap();
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(&bogus)
        .unwrap();
    std::io::Write::write_all(&mut file, &bytes).unwrap();
    file.set_len(bytes.len() as u64).unwrap();
    drop(file);
    let accepted = sample_until(&mut sampler, Duration::from_secs(5), |batch| {
        batch.polls.iter().any(|p| p.identity.file == "bogus.vsc") && batch.rejected.is_empty()
    });
    assert!(accepted, "bogus.vsc, made valid in place, was not read");
    drop(good);
}
