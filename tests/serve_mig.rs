//! `vramscope serve` on a GPU in MIG mode: the framebuffer families per GPU instance,
//! labelled `GPU_I_PROFILE` and `GPU_I_ID` in dcgm-exporter's place for them, no whole-GPU
//! framebuffer sample beside them, no utilisation sample, and an exposition promtool accepts.

mod common;
mod serve_support;

use common::*;
use serde_json::json;
use serve_support::*;
use std::process::Command;
use std::time::Duration;

const MIG_A: &str = "MIG-aaaaaaaa-1111-2222-3333-000000000001";
const MIG_B: &str = "MIG-bbbbbbbb-1111-2222-3333-000000000002";

fn mig_gpu() -> serde_json::Value {
    let instance = |gi: u32, profile: &str, uuid: &str, used: u64, total: u64| {
        json!({
            "gpu_instance_id": gi, "compute_instance_id": 0, "profile": profile, "uuid": uuid,
            "memory_total": total, "timeline": [{ "t": 0, "memory_used": used }],
            "processes": [{ "t": 0, "compute": [{ "pid": 4_300_000 + gi, "used_memory": GIB }] }],
        })
    };
    let mut gpu0 = h100(0);
    gpu0["mig"] = json!({ "current": true, "instances": [
        instance(1, "3g.40gb", MIG_A, 4 * GIB, 40 * GIB),
        instance(2, "1g.10gb", MIG_B, GIB, 10 * GIB),
    ]});
    let mut gpu1 = h100(1);
    gpu1["mig"] = json!({ "current": false, "pending": true });
    json!({ "devices": [gpu0, gpu1] })
}

fn served() -> (Scenario, Served, String) {
    let scenario = Scenario::new(&mig_gpu());
    let served = Served::start(&scenario, &["--interval", "250ms"], &[]);
    let text = served.scrape_until(Duration::from_secs(20), |text| {
        text.contains("GPU_I_PROFILE=\"1g.10gb\"")
    });
    (scenario, served, text)
}

#[test]
fn instances_are_labelled_as_dcgm_exporter_labels_them() {
    let (_scenario, _served, text) = served();
    let all = samples(&text);
    let fb = find(&all, "DCGM_FI_DEV_FB_USED", &[("gpu", "0")]);
    let by_instance: Vec<(Option<&str>, Option<&str>, f64)> = fb
        .iter()
        .map(|l| (l.label("GPU_I_PROFILE"), l.label("GPU_I_ID"), l.value))
        .collect();
    // Per instance, in MiB, and no whole-GPU sample beside them: a sum counts each byte once.
    assert_eq!(
        by_instance,
        vec![
            (Some("3g.40gb"), Some("1"), 4096.0),
            (Some("1g.10gb"), Some("2"), 1024.0)
        ]
    );
    // dcgm-exporter's order: the GPU's labels, the instance's after modelName, Hostname last.
    let names: Vec<&str> = fb[0].labels.iter().map(|(n, _)| n.as_str()).collect();
    let at = |n: &str| names.iter().position(|x| *x == n);
    assert_eq!(at("gpu"), Some(0), "{names:?}");
    assert_eq!(at("UUID"), Some(1), "{names:?}");
    let model = at("modelName").expect("modelName");
    assert_eq!(at("GPU_I_PROFILE"), Some(model + 1), "{names:?}");
    assert_eq!(at("GPU_I_ID"), Some(model + 2), "{names:?}");
    assert_eq!(at("Hostname"), Some(model + 3), "{names:?}");
    assert_eq!(
        value(
            &all,
            "DCGM_FI_DEV_FB_TOTAL",
            &[("gpu", "0"), ("GPU_I_ID", "1")]
        ),
        Some(40_960.0)
    );
    assert_eq!(
        value(
            &all,
            "DCGM_FI_DEV_FB_FREE",
            &[("gpu", "0"), ("GPU_I_ID", "2")]
        ),
        Some(9216.0)
    );
    // NVML has no utilisation in MIG mode: no sample, never a 0.
    assert_eq!(value(&all, "DCGM_FI_DEV_GPU_UTIL", &[("gpu", "0")]), None);
    assert_eq!(
        value(&all, "DCGM_FI_DEV_GPU_UTIL", &[("gpu", "1")]),
        Some(87.0)
    );
    // The GPU without MIG keeps its whole-GPU framebuffer sample, without instance labels.
    let fb1 = find(&all, "DCGM_FI_DEV_FB_USED", &[("gpu", "1")]);
    assert_eq!(fb1.len(), 1);
    assert_eq!(fb1[0].label("GPU_I_ID"), None);
    // vramscope's own families: bytes per instance, with the MIG device's UUID.
    assert_eq!(
        value(
            &all,
            "vramscope_mig_memory_used_bytes",
            &[
                ("gpu", "0"),
                ("GPU_I_PROFILE", "3g.40gb"),
                ("mig_uuid", MIG_A)
            ]
        ),
        Some((4 * GIB) as f64)
    );
    assert_eq!(
        value(&all, "vramscope_mig_processes", &[("GPU_I_ID", "2")]),
        Some(1.0)
    );
    assert_eq!(
        value(&all, "vramscope_gpu_mig_pending", &[("gpu", "1")]),
        Some(1.0)
    );
    assert_eq!(
        value(&all, "vramscope_gpu_mig_pending", &[("gpu", "0")]),
        Some(0.0)
    );
    // The whole GPU's memory is still vramscope's to give.
    assert_eq!(
        value(&all, "vramscope_gpu_memory_used_bytes", &[("gpu", "0")]),
        Some((10 * GIB) as f64)
    );
}

#[test]
fn promtool_accepts_the_instance_families() {
    if !tool_available("promtool", "--version", "apt-get install prometheus") {
        return;
    }
    let (_scenario, _served, text) = served();
    // dcgm-exporter's own label names (modelName, GPU_I_*) are not snake_case: promtool's
    // lint says so, as of dcgm-exporter's output. Renamed, nothing else may be found.
    let snake = text
        .replace(",modelName=", ",model_name=")
        .replace(",GPU_I_PROFILE=", ",gpu_i_profile=")
        .replace(",GPU_I_ID=", ",gpu_i_id=");
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(snake.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let report =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && report.trim().is_empty(),
        "promtool: {report}"
    );
}

#[test]
fn with_gpm_the_instances_sm_utilisation_is_a_ratio() {
    let mut s = mig_gpu();
    s["devices"][0]["mig"]["gpm"] = json!(true);
    s["devices"][0]["mig"]["instances"][0]["timeline"][0]["sm_util"] = json!(25.0);
    let scenario = Scenario::new(&s);
    let served = Served::start(&scenario, &["--interval", "250ms", "--gpm"], &[]);
    let text = served.scrape_until(Duration::from_secs(20), |text| {
        text.contains("vramscope_mig_sm_utilization_ratio{")
    });
    let all = samples(&text);
    assert_eq!(
        value(
            &all,
            "vramscope_mig_sm_utilization_ratio",
            &[("GPU_I_ID", "1")]
        ),
        Some(0.25)
    );
    // The other instance's timeline has no figure: no sample, never a 0.
    assert_eq!(
        value(
            &all,
            "vramscope_mig_sm_utilization_ratio",
            &[("GPU_I_ID", "2")]
        ),
        None
    );
}
