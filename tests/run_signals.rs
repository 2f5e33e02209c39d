//! `vramscope run` without a monitor on screen (`--no-monitor`, `--json`): a signal for
//! vramscope reaches the job, vramscope waits for the job's handler and exits with its
//! status, and its scratch directory is gone on every path, NVML or not.

mod common;

use common::tmux::{self, Tmux};
use common::wait::{self, wait_for_path};
use common::{Scenario, h100};
use serde_json::json;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const SECOND: Duration = Duration::from_secs(1);

/// A job that says when it is ready, handles SIGINT and SIGTERM by writing down which came
/// and how often, takes a while to finish, then exits 7. Written to a file; the command that
/// runs it is returned.
fn handling_job(dir: &Path) -> String {
    let script = dir.join("job.sh");
    std::fs::write(
        &script,
        format!(
            "handle() {{ echo $1 >> {log}; sleep 0.5; echo done >> {log}; kill $napping; exit 7; }}\n\
             trap 'handle INT' INT\n\
             trap 'handle TERM' TERM\n\
             sleep 30 >/dev/null 2>&1 & napping=$!\n\
             touch {ready}\n\
             wait\n",
            log = dir.join("job.log").display(),
            ready = dir.join("ready").display(),
        ),
    )
    .unwrap();
    format!("exec sh {}", script.display())
}

/// `vramscope run ARGS -- sh -c JOB` with a private temp dir for its scratch directory.
fn start_run(scenario: &Scenario, args: &[&str], job: &str) -> Child {
    let tmp = scenario.dir().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    scenario
        .command()
        .env("TMPDIR", &tmp)
        .env_remove("XDG_RUNTIME_DIR")
        .env("VRAMSCOPE_DIR", scenario.dir().join("no-channels"))
        .arg("run")
        .args(args)
        .args(["--", "sh", "-c", job])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start vramscope run")
}

/// What is left of `vramscope run`'s scratch directories.
fn leftovers(scenario: &Scenario) -> Vec<String> {
    std::fs::read_dir(scenario.dir().join("tmp"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("vramscope-run-"))
        .collect()
}

fn job_log(scenario: &Scenario) -> String {
    std::fs::read_to_string(scenario.dir().join("job.log")).unwrap_or_default()
}

fn scenario() -> Scenario {
    Scenario::new(&json!({ "devices": [h100(0)] }))
}

#[test]
fn a_signal_for_vramscope_reaches_the_job_which_finishes_its_handler() {
    for (args, signal, name) in [
        (&["--no-monitor"][..], libc::SIGINT, "INT"),
        (&["--no-monitor"][..], libc::SIGTERM, "TERM"),
        (&["--json", "--interval", "100ms"][..], libc::SIGINT, "INT"),
    ] {
        let scenario = scenario();
        let child = start_run(&scenario, args, &handling_job(scenario.dir()));
        wait_for_path(&scenario.dir().join("ready"), 10 * SECOND);
        // SAFETY: a signal to the vramscope this test started.
        assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
        let out = child.wait_with_output().unwrap();
        let what = format!("{args:?} SIG{name}");
        assert_eq!(
            out.status.code(),
            Some(7),
            "{what}: the job's status; {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(job_log(&scenario), format!("{name}\ndone\n"), "{what}");
        assert_eq!(leftovers(&scenario), Vec::<String>::new(), "{what}");
        if args[0] == "--json" {
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(text.contains("\"devices\""), "{what}: JSON went on: {text}");
        }
    }
}

#[test]
fn a_job_killed_by_the_forwarded_signal_gives_the_shells_status() {
    let scenario = scenario();
    let ready = scenario.dir().join("ready");
    let job = format!("touch {}; exec sleep 30", ready.display());
    let child = start_run(&scenario, &["--no-monitor"], &job);
    wait_for_path(&ready, 10 * SECOND);
    // SAFETY: a signal to the vramscope this test started.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(143), "128 + SIGTERM");
    assert_eq!(leftovers(&scenario), Vec::<String>::new());
}

#[test]
fn without_nvml_run_json_still_waits_for_the_job_and_exits_with_its_status() {
    let scenario = scenario();
    let finished = scenario.dir().join("finished");
    let job = format!("sleep 0.5; touch {}; exit 5", finished.display());
    let tmp = scenario.dir().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_vramscope"))
        .env("TMPDIR", &tmp)
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("VRAMSCOPE_NVML_LIB")
        .args(["--nvml-lib", "/nonexistent/libnvidia-ml.so.1"])
        .args(["run", "--json", "--", "sh", "-c", &job])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(finished.exists(), "vramscope returned before the job ended");
    assert!(stderr.contains("runs without GPU figures"), "{stderr}");
    assert_eq!(leftovers(&scenario), Vec::<String>::new());
}

/// Ctrl-C at a real terminal: the job gets it from the terminal once (not a second time from
/// vramscope), runs its handler to the end, and the shell gets the job's status after that.
#[test]
fn ctrl_c_at_the_terminal_waits_for_the_jobs_handler() {
    if !tmux::available() {
        return;
    }
    let scenario = scenario();
    let tmp = scenario.dir().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let job = handling_job(scenario.dir());
    let shell = format!(
        // No NVML: `run --no-monitor` reads none, and refuses `--nvml-lib`.
        "bash -c 'env TMPDIR={} {} run --no-monitor -- sh -c \"{job}\"; echo EXIT=$?; exec sleep 30'",
        tmp.display(),
        env!("CARGO_BIN_EXE_vramscope"),
    );
    let t = Tmux::start(scenario.dir(), 200, 40, &shell);
    wait_for_path(&scenario.dir().join("ready"), 10 * SECOND);
    t.keys(&["C-c"]);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("EXIT="));
    assert!(ok, "{screen}");
    assert!(screen.contains("EXIT=7"), "the job's status:\n{screen}");
    assert_eq!(
        job_log(&scenario),
        "INT\ndone\n",
        "one SIGINT, handled to the end"
    );
    assert_eq!(leftovers(&scenario), Vec::<String>::new());
}

/// The monitor quit while the job runs: the job runs on with the writer's files it may still
/// load, and they are removed once it has ended.
#[test]
fn quitting_the_monitor_leaves_the_scratch_directory_only_until_the_job_ends() {
    if !tmux::available() {
        return;
    }
    let scenario = scenario();
    let tmp = scenario.dir().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let ready = scenario.dir().join("ready");
    let shell = format!(
        "sh -c \"env -u XDG_RUNTIME_DIR TMPDIR={} FAKE_NVML_SCENARIO={} VRAMSCOPE_DIR={} {} --nvml-lib {} run --log {} -- sh -c 'touch {}; sleep 3'; exec sleep 30\"",
        tmp.display(),
        scenario.path.display(),
        scenario.dir().join("no-channels").display(),
        env!("CARGO_BIN_EXE_vramscope"),
        common::fake_nvml().display(),
        scenario.dir().join("job.log").display(),
        ready.display(),
    );
    let t = Tmux::start(scenario.dir(), 160, 40, &shell);
    wait_for_path(&ready, 10 * SECOND);
    let (ok, screen) = t.wait_for(5 * SECOND, |s| s.contains("running"));
    assert!(ok, "{screen}");
    t.keys(&["q"]);
    let (ok, screen) = t.wait_for(3 * SECOND, |s| s.contains("is still running"));
    assert!(ok, "quit, the job running on:\n{screen}");
    assert_eq!(leftovers(&scenario).len(), 1, "kept while the job runs");
    if wait::poll(10 * SECOND, Duration::from_millis(100), || {
        leftovers(&scenario).is_empty().then_some(())
    })
    .is_err()
    {
        panic!("{:?} left", leftovers(&scenario));
    }
}
