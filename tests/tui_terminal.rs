//! The monitor in a real terminal (tmux), against the fake NVML library: what a person sees,
//! keys, resizes, a blocking driver call, and a clean shell after SIGTERM and SIGHUP.

mod common;

use common::tmux::{self, Tmux};
use common::{GIB, Scenario, h100, threads_named};
use serde_json::json;
use std::time::Duration;

fn command(scenario: &Scenario, extra: &str) -> String {
    scenario.monitor_line(&format!("--interval 100ms {extra}"))
}

/// Two GPUs, the test process on GPU 0, and a memory spike on GPU 1 that rises and falls
/// within 300 ms, well between two redraws of the peak label's surroundings.
fn spike_scenario() -> Scenario {
    let me = std::process::id();
    let mut gpu0 = h100(0);
    gpu0["processes"] = json!([{ "t": 0, "compute": [{ "pid": me, "used_memory": 6 * GIB }] }]);
    let mut gpu1 = h100(1);
    gpu1["name"] = json!("NVIDIA A100-SXM4-40GB");
    gpu1["memory_total"] = json!(40 * GIB);
    gpu1["timeline"] = json!([
        { "t": 0, "memory_used": 4 * GIB, "gpu_util": 20, "temperature": 50, "power": 90_000 },
        { "t": 0.8, "memory_used": 37 * GIB },
        { "t": 1.1, "memory_used": 4 * GIB },
    ]);
    gpu1["num_fans"] = serde_json::Value::Null;
    Scenario::new(&json!({ "devices": [gpu0, gpu1] }))
}

const SECOND: Duration = Duration::from_secs(1);

#[test]
fn shows_gpus_processes_and_a_spike_peak_after_it_has_gone() {
    if !tmux::available() {
        return;
    }
    let scenario = spike_scenario();
    // GNU screen's terminal type, which screen users (and old tmux setups) run under.
    let with_screen_term = format!("env TERM=screen {}", command(&scenario, ""));
    let t = Tmux::start(scenario.dir(), 120, 40, &with_screen_term);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("NVIDIA A100-SXM4-40GB"));
    assert!(ok, "GPU names on screen:\n{screen}");
    assert!(screen.contains("NVIDIA H100 80GB HBM3"), "{screen}");
    // The first frame may come before the first sample ("waiting for the first sample"), on
    // a loaded machine: the processes come with that sample.
    let me = std::process::id().to_string();
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains(&me));
    assert!(ok, "own pid listed:\n{screen}");
    // After the spike has passed, current memory is back to 4 GiB but the peak says 37 GiB.
    let (ok, screen) = t.wait_for(5 * SECOND, |s| {
        s.contains("37.0 GiB") && s.contains("4.00 GiB")
    });
    assert!(
        ok,
        "spike peak 37.0 GiB still shown with current 4.00 GiB:\n{screen}"
    );
    assert!(screen.contains("n/a"), "absent fan shown as n/a:\n{screen}");
}

#[test]
fn keys_resizes_and_tiny_terminals_keep_it_running() {
    if !tmux::available() {
        return;
    }
    let scenario = spike_scenario();
    let t = Tmux::start(scenario.dir(), 120, 40, &command(&scenario, ""));
    assert!(t.wait_for(5 * SECOND, |s| s.contains("NVIDIA")).0);
    t.keys(&["?"]);
    let (ok, screen) = t.wait_for(2 * SECOND, |s| s.to_lowercase().contains("sort"));
    assert!(ok, "help overlay lists keys:\n{screen}");
    t.keys(&["Escape"]);
    // Read together, Escape and `/` would be Alt-/: the next keys wait for the help to close.
    let (ok, screen) = t.wait_for(2 * SECOND, |s| !s.contains("any key closes"));
    assert!(ok, "Escape closes the help:\n{screen}");
    t.keys(&["/", "z", "z", "z"]);
    let (ok, screen) = t.wait_for(2 * SECOND, |s| s.contains("/zzz"));
    assert!(ok, "the filter prompt:\n{screen}");
    // The cursor stands after the typed text on the bottom line, and hides once it is kept.
    // It is moved after the frame's cells, which tmux may take in a later read: allow it that.
    t.wait_for(SECOND, |_| {
        t.pane("cursor_flag") == "1" && t.pane("cursor_x") == "4" && t.pane("cursor_y") == "39"
    });
    assert_eq!(t.pane("cursor_flag"), "1", "cursor shown in the prompt");
    assert_eq!(
        (t.pane("cursor_x"), t.pane("cursor_y")),
        ("4".to_string(), "39".to_string())
    );
    t.keys(&["Enter"]);
    let me = std::process::id().to_string();
    // The filter applies while it is typed, so the processes are gone before Enter is read:
    // wait for the prompt itself to close before looking at the cursor.
    let (ok, screen) = t.wait_for(2 * SECOND, |s| {
        !s.contains(&me) && !s.contains("Enter keeps the filter")
    });
    assert!(ok, "filter 'zzz' kept, hiding every process:\n{screen}");
    let (hidden, _) = t.wait_for(SECOND, |_| t.pane("cursor_flag") == "0");
    assert!(hidden, "cursor hidden again once the filter is kept");
    t.keys(&["Escape"]);
    let (ok, screen) = t.wait_for(2 * SECOND, |s| s.contains(&me));
    assert!(ok, "Esc clears the filter:\n{screen}");
    t.keys(&["Space"]);
    let (ok, screen) = t.wait_for(2 * SECOND, |s| s.contains("PAUSED"));
    assert!(ok, "space pauses the view:\n{screen}");
    t.keys(&["Space"]);
    for (cols, rows) in [(60, 15), (200, 60), (20, 5), (1, 1), (80, 24)] {
        t.resize(cols, rows);
        std::thread::sleep(Duration::from_millis(400));
        assert_eq!(t.pane("pane_dead"), "0", "still running at {cols}x{rows}");
    }
    let (ok, screen) = t.wait_for(3 * SECOND, |s| s.contains("NVIDIA"));
    assert!(ok, "redrawn at 80x24:\n{screen}");
    assert!(screen.lines().all(|l| l.chars().count() <= 80));
    t.keys(&["q"]);
    let (ok, _) = t.wait_for(3 * SECOND, |_| t.pane("pane_dead") == "1");
    assert!(ok, "q quits");
}

#[test]
fn a_call_blocking_five_seconds_freezes_neither_input_nor_the_other_gpu() {
    if !tmux::available() {
        return;
    }
    let mut gpu1 = h100(1);
    gpu1["timeline"] =
        json!([{ "t": 0, "memory_used": GIB }, { "t": 2.0, "memory_used": 3 * GIB }]);
    let scenario = Scenario::new(&json!({
        "devices": [h100(0), gpu1],
        "blocks": [{ "function": "nvmlDeviceGetTemperature", "device": 0, "from": 1.0, "until": 1.2, "seconds": 5.0 }]
    }));
    let t = Tmux::start(scenario.dir(), 120, 40, &command(&scenario, ""));
    assert!(t.wait_for(5 * SECOND, |s| s.contains("NVIDIA")).0);
    std::thread::sleep(Duration::from_millis(1_500));
    // GPU 0's sampler is now stuck inside the driver for 5 s.
    t.keys(&["?"]);
    let (ok, screen) = t.wait_for(SECOND, |s| s.to_lowercase().contains("sort"));
    assert!(
        ok,
        "help opened within a second while a call blocks:\n{screen}"
    );
    t.keys(&["Escape"]);
    let pid = t.pid();
    let samplers = || threads_named(pid, "sampler");
    // Counted while waiting, so a slow machine that reaches the check after the call has
    // returned (and the spare has left) does not fail it.
    let most_samplers = std::cell::Cell::new(0);
    let (ok, screen) = t.wait_for(3 * SECOND, |s| {
        most_samplers.set(most_samplers.get().max(samplers()));
        s.contains("STALE") && s.contains("3.00 GiB")
    });
    assert!(ok, "GPU 0 marked stale while GPU 1 updates:\n{screen}");
    assert_eq!(
        most_samplers.get(),
        2,
        "a spare sampler took over from the stuck one"
    );
    // The call returns about 6 s in: GPU 0 comes back, and the pool shrinks back to a single
    // sampling thread.
    let (ok, screen) = t.wait_for(6 * SECOND, |s| !s.contains("STALE"));
    assert!(ok, "GPU 0 recovered after the call returned:\n{screen}");
    let deadline = std::time::Instant::now() + 3 * SECOND;
    while samplers() != 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(samplers(), 1, "one sampling thread once nothing is stuck");
}

#[test]
fn sigterm_and_sighup_leave_a_clean_shell() {
    if !tmux::available() {
        return;
    }
    for (signal, code) in [("TERM", 143), ("HUP", 129)] {
        let scenario = spike_scenario();
        let shell = format!(
            "sh -c '{} ; echo EXIT=$?; stty -a; exec sleep 30'",
            command(&scenario, "")
        );
        let t = Tmux::start(scenario.dir(), 120, 40, &shell);
        assert!(t.wait_for(5 * SECOND, |s| s.contains("NVIDIA")).0);
        // The pid file holds the outer sh; vramscope is its child.
        let pid = t.child();
        send_signal(pid, signal);
        let (ok, screen) = t.wait_for(3 * SECOND, |s| s.contains("EXIT=") && s.contains("icanon"));
        assert!(ok, "vramscope exited on SIG{signal}:\n{screen}");
        assert!(screen.contains(&format!("EXIT={code}")), "{screen}");
        assert_eq!(t.pane("alternate_on"), "0", "alternate screen left");
        assert_eq!(t.pane("cursor_flag"), "1", "cursor visible again");
        assert!(
            screen.contains(" icanon") && screen.contains(" echo "),
            "cooked mode:\n{screen}"
        );
    }
}

fn send_signal(pid: i32, signal: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn no_color_and_ascii_are_honoured() {
    if !tmux::available() {
        return;
    }
    let scenario = spike_scenario();
    let t = Tmux::start(
        scenario.dir(),
        120,
        40,
        &format!("env NO_COLOR=1 {}", command(&scenario, "--ascii")),
    );
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("NVIDIA"));
    assert!(ok, "{screen}");
    std::thread::sleep(Duration::from_millis(500));
    let raw = t.screen_with_escapes();
    for code in [
        "\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[34m", "\x1b[36m", "38;5;",
    ] {
        assert!(
            !raw.contains(code),
            "colour code {code:?} present with NO_COLOR"
        );
    }
    assert!(
        t.screen().is_ascii(),
        "only ASCII with --ascii:\n{}",
        t.screen()
    );
}

#[test]
fn quitting_after_the_pane_grew_leaves_no_frame_above_the_shell() {
    if !tmux::available() {
        return;
    }
    // tmux folds alternate-screen lines into the restored screen when the pane grew meanwhile.
    let scenario = spike_scenario();
    let t = Tmux::start(scenario.dir(), 60, 15, &command(&scenario, ""));
    // Compact lines at 60 columns drop the "NVIDIA " every name shares.
    assert!(t.wait_for(5 * SECOND, |s| s.contains("H100")).0);
    t.resize(100, 30);
    let (ok, screen) = t.wait_for(3 * SECOND, |s| s.contains("00000000:18:00.0"));
    assert!(ok, "redrawn with full panels at 100x30:\n{screen}");
    // Looked at for a moment, as a person would, so several frames were drawn at the new size.
    std::thread::sleep(Duration::from_millis(500));
    t.keys(&["q"]);
    let (ok, _) = t.wait_for(3 * SECOND, |_| t.pane("pane_dead") == "1");
    assert!(ok, "q quits");
    // The pane's main screen was empty before vramscope started; only tmux's own notice may
    // be on it now.
    let screen = t.screen();
    let left: Vec<&str> = screen
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("Pane is dead"))
        .collect();
    assert!(
        left.is_empty(),
        "lines left on the shell's screen: {left:#?}"
    );
}

/// `vramscope run` in a real terminal: the monitor opens on the launched job (its row is
/// selected, so Enter shows its allocator), the header follows the job, and
/// `--exit-with-job` leaves with the job, naming the log of its output.
#[test]
fn run_opens_on_the_launched_job_and_leaves_with_it() {
    if !tmux::available() || !common::python3_available() {
        return;
    }
    // Another GPU process comes first in the table, so selecting the job is a real choice.
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let script = scenario.dir().join("train.py");
    let pid_file = scenario.dir().join("job.pid");
    std::fs::write(
        &script,
        "import os, sys, time, vramscope\n\
         vramscope.report(device=0, allocated=3 << 30, reserved=4 << 30, uuid='GPU-00000000-0000-0000-0000-000000000000')\n\
         print('hello from the job', flush=True)\n\
         open(sys.argv[1] + '.tmp', 'w').write(str(os.getpid()))\n\
         os.rename(sys.argv[1] + '.tmp', sys.argv[1])\n\
         time.sleep(float(sys.argv[2]))\n",
    )
    .unwrap();
    let log = scenario.dir().join("job.log");
    let channels = scenario.dir().join("channels");
    let run = format!(
        "env VRAMSCOPE_DIR={} {} run --exit-with-job --log {} -- python3 {} {} 6",
        channels.display(),
        command(&scenario, ""),
        log.display(),
        script.display(),
        pid_file.display()
    );
    let t = Tmux::start(scenario.dir(), 140, 40, &run);
    let deadline = std::time::Instant::now() + 10 * SECOND;
    let job: u32 = loop {
        if let Ok(text) = std::fs::read_to_string(&pid_file) {
            break text.trim().parse().unwrap();
        }
        assert!(std::time::Instant::now() < deadline, "{}", t.screen());
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut gpu = h100(0);
    gpu["processes"] = json!([{ "t": 0, "compute": [
        { "pid": 1, "used_memory": 30 * GIB },
        { "pid": job, "used_memory": 5 * GIB },
    ] }]);
    scenario.rewrite(&json!({ "devices": [gpu] }));
    let (ok, screen) = t.wait_for(5 * SECOND, |s| {
        s.contains(&format!("job {job} running")) && s.contains("ALLOC")
    });
    assert!(ok, "job in the header, allocator columns:\n{screen}");
    t.keys(&["Enter"]);
    let (ok, screen) = t.wait_for(3 * SECOND, |s| s.contains("allocator Python"));
    assert!(ok, "the job's row was selected:\n{screen}");
    assert!(screen.contains(&format!("PID {job}")), "{screen}");
    // The job sleeps 6 s; a loaded machine (CI, tests in parallel) may take longer.
    let (ok, screen) = t.wait_for(30 * SECOND, |_| t.pane("pane_dead") == "1");
    assert!(ok, "left with the job:\n{screen}");
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "hello from the job\n"
    );
}

/// Without `--exit-with-job` the monitor stays after the job, says how it ended, and
/// quitting then exits with the job's status.
#[test]
fn run_stays_after_the_job_and_quits_with_its_status() {
    if !tmux::available() {
        return;
    }
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let status = scenario.dir().join("status");
    let run = format!(
        "sh -c \"{} run --log {} -- sh -c 'sleep 0.5; exit 3'; echo \\$? > {}\"",
        command(&scenario, ""),
        scenario.dir().join("job.log").display(),
        status.display(),
    );
    let t = Tmux::start(scenario.dir(), 120, 30, &run);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("running"));
    assert!(ok, "the job in the header while it runs:\n{screen}");
    assert!(screen.contains("its output goes to"), "{screen}");
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("exited with code 3"));
    assert!(ok, "how the job ended:\n{screen}");
    assert_eq!(t.pane("pane_dead"), "0", "the monitor stayed");
    t.keys(&["q"]);
    let (ok, _) = t.wait_for(3 * SECOND, |_| t.pane("pane_dead") == "1");
    assert!(ok, "quit");
    assert_eq!(std::fs::read_to_string(&status).unwrap().trim(), "3");
}

/// The first full screen names each GPU process's user and command at once, even at a slow
/// refresh: it does not wait a tick for the host sampler to learn the pids.
#[test]
fn the_first_screen_names_the_processes_without_waiting_a_tick() {
    if !tmux::available() {
        return;
    }
    let scenario = spike_scenario();
    let command = scenario.monitor_line("--interval 30s");
    let t = Tmux::start(scenario.dir(), 160, 40, &command);
    let me = std::process::id().to_string();
    // Our own command line is this test binary's path.
    let exe = std::env::current_exe().unwrap();
    let name = exe.file_name().unwrap().to_string_lossy().into_owned();
    let (ok, screen) = t.wait_for(5 * SECOND, |s| {
        s.lines().any(|l| l.contains(&me) && l.contains(&name))
    });
    assert!(ok, "user and command on the first screen:\n{screen}");
}

/// Issue 28 §1.7: `run --log` to a name it refuses (here a symlink: a default name in a
/// shared temp directory could be planted) is one line and status 2, as any refused option,
/// not 127 (the shell's "cannot run that command"); the job never starts and the symlink's
/// target is untouched.
#[test]
fn run_refuses_a_log_through_a_symlink_in_one_line_with_status_2() {
    if !tmux::available() {
        return;
    }
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let dir = scenario.dir();
    let target = dir.join("victim");
    std::fs::write(&target, "precious").unwrap();
    let planted = dir.join("job.log");
    std::os::unix::fs::symlink(&target, &planted).unwrap();
    let (status, err, started) = (dir.join("status"), dir.join("err"), dir.join("started"));
    let run = format!(
        "sh -c \"{} run --log {} -- touch {} 2> {}; echo \\$? > {}; sleep 30\"",
        command(&scenario, ""),
        planted.display(),
        started.display(),
        err.display(),
        status.display(),
    );
    let _t = Tmux::start(dir, 120, 30, &run);
    let deadline = std::time::Instant::now() + 10 * SECOND;
    while !std::fs::read_to_string(&status).is_ok_and(|s| s.ends_with('\n')) {
        assert!(
            std::time::Instant::now() < deadline,
            "vramscope never ended"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(std::fs::read_to_string(&status).unwrap().trim(), "2");
    let said = std::fs::read_to_string(&err).unwrap();
    assert_eq!(
        said,
        format!(
            "vramscope: cannot create {0}: {0} is a symlink, not followed\n",
            planted.display()
        )
    );
    assert!(!started.exists(), "the job never started");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");
}
