//! `vramscope run -- python3 script.py`: the writer is armed without taking the name
//! `vramscope` from the program. A script with its own `vramscope.py` beside it imports that,
//! as Python's sys.path promises; one without gets the armed package itself, not a copy.

mod common;

use common::{Scenario, h100};
use serde_json::json;

const SCRIPT: &str = "import sys, vramscope\n\
    print(getattr(vramscope, 'MARK', 'injected'))\n\
    print('_vramscope_run._autostart' in sys.modules)\n\
    print(vramscope is sys.modules.get('_vramscope_run'))\n";

fn run_script(scenario: &Scenario) -> Vec<String> {
    let out = scenario
        .command()
        .env_remove("PYTHONPATH")
        .env_remove("VRAMSCOPE_DISABLE")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("VRAMSCOPE_DIR", scenario.dir().join("no-channels"))
        .args(["run", "--no-monitor", "--", "python3"])
        .arg(scenario.dir().join("job").join("train.py"))
        .output()
        .expect("run vramscope");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn a_scripts_own_vramscope_module_wins_and_the_writer_is_still_armed() {
    if !common::python3_available() {
        return;
    }
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let job = scenario.dir().join("job");
    std::fs::create_dir(&job).unwrap();
    std::fs::write(job.join("train.py"), SCRIPT).unwrap();
    assert_eq!(run_script(&scenario), ["injected", "True", "True"]);
    std::fs::write(job.join("vramscope.py"), "MARK = 'the script own'\n").unwrap();
    assert_eq!(run_script(&scenario), ["the script own", "True", "False"]);
}

/// `run --sites` asks the job's writer for allocation sites through its environment, over
/// whatever the environment said; without it the job's environment is left as it was.
#[test]
fn sites_turns_allocation_sites_on_in_the_job() {
    if !common::python3_available() {
        return;
    }
    let scenario = Scenario::new(&json!({ "devices": [h100(0)] }));
    let sites = |flag: Option<&str>, inherited: Option<&str>| {
        let mut cmd = scenario.command();
        cmd.env_remove("PYTHONPATH")
            .env_remove("VRAMSCOPE_DISABLE")
            .env_remove("VRAMSCOPE_SITES")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("VRAMSCOPE_DIR", scenario.dir().join("no-channels"));
        if let Some(value) = inherited {
            cmd.env("VRAMSCOPE_SITES", value);
        }
        cmd.args(["run", "--no-monitor"]);
        cmd.args(flag);
        let out = cmd
            .args([
                "--",
                "python3",
                "-c",
                "import os, vramscope._config as c; \
                 print(os.environ.get('VRAMSCOPE_SITES'), c.Config.from_env().sites)",
            ])
            .output()
            .expect("run vramscope");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(sites(Some("--sites"), None), "1 True");
    assert_eq!(sites(Some("--sites"), Some("0")), "1 True");
    assert_eq!(sites(None, None), "None False");
    assert_eq!(sites(None, Some("yes")), "yes True");
}
