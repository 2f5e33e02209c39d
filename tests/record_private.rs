//! Recordings hold every user's command lines and job ids: the file is its owner's alone
//! (0600) whether `record` creates it or `--force` replaces one, and whatever the umask.

mod common;

use common::{GIB, Scenario, h100};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).expect("stat").permissions().mode() & 0o777
}

fn record(scenario: &Scenario, file: &Path, extra: &[&str]) {
    let out = scenario
        .command()
        .env("VRAMSCOPE_DIR", scenario.dir().join("no-channels"))
        .args(["--interval", "100ms", "record", "--duration", "0.3s", "-o"])
        .arg(file)
        .args(extra)
        .output()
        .expect("run vramscope record");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn recordings_are_created_and_replaced_private() {
    let mut gpu = h100(0);
    gpu["processes"] =
        json!([{ "t": 0, "compute": [{ "pid": std::process::id(), "used_memory": GIB }] }]);
    let scenario = Scenario::new(&json!({ "devices": [gpu] }));
    for name in ["new.jsonl", "new.jsonl.zst"] {
        let file = scenario.dir().join(name);
        record(&scenario, &file, &[]);
        assert_eq!(mode(&file), 0o600, "{name} created");
    }
    let replaced = scenario.dir().join("old.jsonl.zst");
    std::fs::write(&replaced, "an older recording").expect("write");
    std::fs::set_permissions(&replaced, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    record(&scenario, &replaced, &["--force"]);
    assert_eq!(mode(&replaced), 0o600, "replaced with --force");
}
