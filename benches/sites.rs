//! `vramscope sites`' cost: reading a snapshot whose history holds 1,000,000 entries (a
//! training loop's allocations and frees over 40 sites with stacks 11 frames deep, from
//! tests/sites_support/simulate.py) and reducing it to the live set at the peak. Prints the
//! file's size, the time to read it, the time to reduce it, and the process's peak RSS;
//! asserts nothing about time. Wall time is the answer's latency; CPU time is what a
//! loaded machine changes least. The read is one pass on the calling thread.
//!
//! Run with `cargo bench --bench sites` (add `-- ENTRIES` for another history size). With
//! `-- shared ENTRIES` it reads instead the tests' history of one entry dict referred to
//! ENTRIES times (tests/sites.rs makes it with 10,000,000), within the default limits.
//!
//! With `-- against OLD_BINARY [ROUNDS]` it times instead whole `vramscope sites --json`
//! runs of this build's binary and of OLD_BINARY (another build, such as the one that read
//! with the `pickled` crate) on the same files in the same run, 100,000 and 1,000,000
//! entries, the two taking turns so that a change in the machine's load falls on both:
//! wall time, CPU time and peak RSS of each child, and whether the two printed the same.

use std::process::Command;
use std::time::{Duration, Instant};
use vramscope::memory_snapshot::{self, Exactness, Limits, Moment, ReadCost, Spent};

// The binary's allocator (src/main.rs), so that the figures are `vramscope sites`' own.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn clock_s(clock: libc::clockid_t) -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the struct it is given.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// CPU time of every thread of the process, seconds.
fn cpu_s() -> f64 {
    clock_s(libc::CLOCK_PROCESS_CPUTIME_ID)
}

fn rusage() -> libc::rusage {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is always valid.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    usage
}

/// User and system CPU time of the process so far, seconds.
fn user_sys_s() -> (f64, f64) {
    let u = rusage();
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (s(u.ru_utime), s(u.ru_stime))
}

/// This process's peak RSS (`VmHWM`): not `ru_maxrss`, which Linux keeps across `execve`
/// and so starts at the peak of cargo, which ran the benchmark.
fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

fn main() {
    let entries: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    if std::env::args().any(|a| a == "shared") {
        return shared(entries);
    }
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "against") {
        let old = args.get(at + 1).expect("against OLD_BINARY");
        let rounds = args.get(at + 2).and_then(|r| r.parse().ok()).unwrap_or(10);
        return against(old, rounds);
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let file = simulated(dir.path(), entries);
    let size = std::fs::metadata(&file).expect("file").len();
    let before = peak_rss_mib();

    let (user0, sys0) = user_sys_s();
    let started = Instant::now();
    let cpu0 = cpu_s();
    let bytes = std::fs::read(&file).expect("file");
    let load = Spent {
        wall: started.elapsed(),
        cpu: Duration::from_secs_f64(cpu_s() - cpu0),
    };
    let mut cost = ReadCost::default();
    let snap =
        memory_snapshot::read_owned_costed(bytes, &Limits::default(), &mut cost).expect("read");
    let read = started.elapsed();
    let cpu1 = cpu_s();
    let (user1, sys1) = user_sys_s();
    let reduce_started = Instant::now();
    let reduce_cpu0 = clock_s(libc::CLOCK_THREAD_CPUTIME_ID);
    let held = memory_snapshot::held(&snap, Moment::Peak, None, 10).expect("held");
    let reduce = reduce_started.elapsed();
    let reduce_cpu = clock_s(libc::CLOCK_THREAD_CPUTIME_ID) - reduce_cpu0;
    let total = started.elapsed();
    drop(snap);
    let (user2, sys2) = user_sys_s();

    assert_eq!(held.trace_entries as u64, entries);
    assert_eq!(held.exactness, Exactness::Exact);
    println!(
        "sites: {entries} trace entries, {:.1} MB pickle: read {:.0} ms, reduce to the peak {:.0} ms, total {:.0} ms (wall); peak RSS {:.0} MiB (before reading {:.0} MiB)",
        size as f64 / 1e6,
        read.as_secs_f64() * 1e3,
        reduce.as_secs_f64() * 1e3,
        total.as_secs_f64() * 1e3,
        peak_rss_mib(),
        before
    );
    println!(
        "sites: CPU time: read {:.0} ms, reduce {:.0} ms; the whole run with the drop: user {:.0} ms, system {:.0} ms (reading alone: user {:.0} ms, system {:.0} ms)",
        (cpu1 - cpu0) * 1e3,
        reduce_cpu * 1e3,
        (user2 - user0) * 1e3,
        (sys2 - sys0) * 1e3,
        (user1 - user0) * 1e3,
        (sys1 - sys0) * 1e3,
    );
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    for (stage, spent) in [
        ("load the file", load),
        ("one pass (check and build)", cost.decode),
        ("walk (into our types)", cost.walk),
    ] {
        println!(
            "sites:   {stage:<27} CPU {:>5.0} ms, wall {:>5.0} ms",
            ms(spent.cpu),
            ms(spent.wall)
        );
    }
    print_load();
    println!(
        "sites: held {} bytes in {} blocks at the peak, {} sites; {}",
        held.total_bytes,
        held.blocks,
        held.all_sites.len(),
        vramscope::sites::render::exactness_words(&held)
    );
}

/// The tests' shared-entry history: `[e] * entries`, one dict memoized and referred to.
fn shared(entries: u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("shared.pickle");
    let code = format!(
        "import pickle\ne = {{'action': 'alloc', 'addr': 1, 'size': 512, 'stream': 0, 'time_us': 1}}\n\
         pickle.dump({{'segments': [], 'device_traces': [[e] * {entries}]}}, open('{}', 'wb'), protocol=4)",
        file.display()
    );
    let made = Command::new("python3")
        .args(["-c", &code])
        .output()
        .expect("python3");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let size = std::fs::metadata(&file).expect("file").len();
    let before = peak_rss_mib();
    let started = Instant::now();
    let cpu0 = cpu_s();
    let bytes = std::fs::read(&file).expect("file");
    let snap = memory_snapshot::read_owned(bytes, &Limits::default()).expect("read");
    let read = started.elapsed();
    let cpu = cpu_s() - cpu0;
    let held = memory_snapshot::held(&snap, Moment::Peak, None, 10).expect("held");
    let total = started.elapsed();
    println!(
        "sites (shared): {entries} trace entries of one shared dict, {:.1} MB pickle: read {:.0} ms (CPU {:.0} ms), with the reduce {:.0} ms (wall); {} kept, {} cut; peak RSS {:.0} MiB (before reading {:.0} MiB)",
        size as f64 / 1e6,
        read.as_secs_f64() * 1e3,
        cpu * 1e3,
        total.as_secs_f64() * 1e3,
        snap.traces[0].entries.len(),
        snap.traces[0].cut,
        peak_rss_mib(),
        before
    );
    assert_eq!(
        held.trace_entries as u64 + snap.cut.trace_entries as u64,
        entries
    );
}

/// The machine's load, for reading the figures above it.
fn print_load() {
    let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "sites: load average {} on {} CPUs",
        loadavg
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
}

/// A history of `entries` entries from the simulator, in `dir`.
fn simulated(dir: &std::path::Path, entries: u64) -> std::path::PathBuf {
    let made = Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/sites_support/simulate.py"
        ))
        .arg(dir)
        .args(["bench", &entries.to_string()])
        .output()
        .expect("python3");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let file = dir.join(format!("bench-{entries}.pickle"));
    std::fs::rename(dir.join("bench.pickle"), &file).expect("rename");
    file
}

/// One whole run of `binary sites --json file`: what it printed, its wall time, its CPU
/// time (user and system) and its peak RSS, from `wait4`.
#[expect(
    clippy::zombie_processes,
    reason = "the child is waited for by wait4, for its own rusage, which Child::wait does not give"
)]
fn one_run(binary: &str, file: &std::path::Path) -> (Vec<u8>, f64, f64, f64) {
    use std::io::Read;
    let started = Instant::now();
    let mut child = Command::new(binary)
        .args(["--json", "sites"])
        .arg(file)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut out = Vec::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_end(&mut out)
        .expect("read");
    let mut status = 0;
    // SAFETY: wait4 only writes the status and the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the child is ours and not yet waited for.
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    let wall = started.elapsed().as_secs_f64() * 1e3;
    assert_eq!(pid, child.id() as libc::pid_t, "wait4");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{binary} failed"
    );
    let s = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
    let cpu = s(usage.ru_utime) + s(usage.ru_stime);
    (out, wall, cpu, usage.ru_maxrss as f64 / 1024.0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The old binary and this one on the same files, taking turns.
fn against(old: &str, rounds: usize) {
    let new = env!("CARGO_BIN_EXE_vramscope");
    let dir = tempfile::tempdir().expect("tempdir");
    for entries in [100_000u64, 1_000_000] {
        let file = simulated(dir.path(), entries);
        let size = std::fs::metadata(&file).expect("file").len();
        let mut runs: [(Vec<f64>, Vec<f64>, Vec<f64>); 2] = Default::default();
        let mut printed: [Option<Vec<u8>>; 2] = [None, None];
        for round in 0..rounds {
            for turn in 0..2 {
                let which = (round + turn) % 2;
                let binary = if which == 0 { old } else { new };
                let (out, wall, cpu, rss) = one_run(binary, &file);
                runs[which].0.push(wall);
                runs[which].1.push(cpu);
                runs[which].2.push(rss);
                printed[which] = Some(out);
            }
        }
        println!(
            "sites against the old binary: {entries} trace entries, {:.1} MB pickle, {rounds} runs each, taking turns",
            size as f64 / 1e6
        );
        for (which, name) in [(0, "old"), (1, "new")] {
            let (wall, cpu, rss) = &runs[which];
            println!(
                "sites:   {name}: wall median {:>5.0} ms (min {:>5.0}), CPU median {:>5.0} ms, peak RSS {:>4.0} MiB",
                median(wall.clone()),
                wall.iter().copied().fold(f64::INFINITY, f64::min),
                median(cpu.clone()),
                median(rss.clone()),
            );
        }
        println!(
            "sites:   the two printed {}",
            if printed[0] == printed[1] {
                "the same --json"
            } else {
                "DIFFERENT --json"
            }
        );
    }
    print_load();
}
