//! MIG instances in the TUI, rendered on a test backend: every instance shown or counted,
//! never cut silently at the edge, given rows when the screen has them, and no time axis
//! under them.

#[allow(
    dead_code,
    reason = "shared by several test crates, each of which uses a different part"
)]
mod tui_fixtures;

use tui_fixtures::*;
use vramscope::model::SourceEvent;
use vramscope::model::{MemoryInfo, MigInstance, MigProcess, MigState};
use vramscope::state::Monitor;
use vramscope::tui::ui_state::Mode;

/// Seven `1g.10gb` instances, 5.5 GiB used of 10 GiB each (38.5 GiB in all), one process each.
fn seven_instances(gpu: u32) -> MigState {
    let instances = (0..7u32)
        .map(|i| MigInstance {
            gpu_instance_id: Ok(i + 7),
            compute_instance_id: Ok(0),
            uuid: Ok(format!("MIG-{gpu}{i}aaaaaaa-1111-2222-3333-000000000001")),
            profile: Ok("1g.10gb".into()),
            memory: Ok(MemoryInfo {
                total: 10 * GIB,
                reserved: None,
                used: 5 * GIB + GIB / 2,
                free: 4 * GIB + GIB / 2,
            }),
            processes: Ok(vec![MigProcess {
                pid: 9000 + gpu * 10 + i,
                used_memory: Ok(GIB),
            }]),
            sm_util: Err(vramscope::model::Absent::MigMode),
        })
        .collect();
    MigState {
        enabled: true,
        pending: None,
        instances: Ok(instances),
        mode_unread: None,
    }
}

/// `count` A100s in MIG mode with seven instances each, a minute of samples.
fn mig_gpus(count: u32) -> Monitor {
    let mut m = Monitor::new(T0);
    let devices = (0..count)
        .map(|i| info(i, "NVIDIA A100-SXM4-80GB", 80 * GIB))
        .collect();
    m.ingest(SourceEvent::Started {
        driver: driver(),
        devices,
    });
    let mut t = NOW - 60_000;
    while t <= NOW {
        for i in 0..count {
            let mut s = sample(i, t, 40 * GIB, 80 * GIB, 0);
            s.gpu_util = Err(vramscope::model::Absent::MigMode);
            s.mig = Some(seven_instances(i));
            s.processes = Ok((0..7)
                .map(|n| {
                    gpu_process(
                        9000 + i * 10 + n,
                        GIB,
                        Err(vramscope::model::Absent::MigMode),
                    )
                })
                .collect());
            m.ingest(SourceEvent::Device(Box::new(s)));
        }
        t += INTERVAL_MS;
    }
    m
}

fn is_instance(line: &str) -> bool {
    line.contains("1g.10gb") && line.contains(" GI ")
}

#[test]
fn a_packed_line_too_narrow_for_every_instance_says_how_many_more() {
    let screen = screen(&mig_gpus(3), &ui(), 100, 30);
    let mig: Vec<&str> = screen.lines().filter(|l| l.contains("MIG  1g")).collect();
    assert_eq!(mig.len(), 3, "one packed line per GPU:\n{screen}");
    for line in mig {
        let shown = line.matches("1g.10gb").count();
        assert!(shown < 7, "7 instances do not fit 100 cells: {line}");
        assert!(
            line.trim_end().ends_with(&format!("+{} more", 7 - shown)),
            "the rest counted: {line}\n{screen}"
        );
    }
}

#[test]
fn the_compact_list_counts_each_gpus_instances() {
    let screen = screen(&mig_gpus(6), &ui(), 80, 24);
    let rows: Vec<&str> = screen
        .lines()
        .filter(|l| l.contains("MIG 7 inst"))
        .collect();
    assert_eq!(rows.len(), 6, "every GPU's row:\n{screen}");
    assert!(rows[0].contains("MIG 7 inst 38.5G/70.0G"), "{}", rows[0]);
}

#[test]
fn one_mig_gpu_gets_rows_for_its_instances_and_no_axis_under_them() {
    let screen = screen(&mig_gpus(1), &ui(), 100, 40);
    let instance_rows = screen.lines().filter(|l| is_instance(l)).count();
    assert_eq!(
        instance_rows, 7,
        "every instance on a row of its own:\n{screen}"
    );
    assert!(!screen.contains("more"), "none hidden:\n{screen}");
    assert!(
        screen.contains("util n/a: NVML does not support utilisation in MIG mode"),
        "{screen}"
    );
    // The time axis (`now` at its right end) sits under the memory chart, not under the
    // instances: no line between the first instance and the stats line is an axis.
    let lines: Vec<&str> = screen.lines().collect();
    let first = lines.iter().position(|l| is_instance(l)).unwrap();
    let last = lines.iter().rposition(|l| is_instance(l)).unwrap();
    assert!(
        !lines[first..=last + 2]
            .iter()
            .any(|l| l.trim_end().ends_with("now")),
        "{screen}"
    );
}

#[test]
fn a_mig_process_share_is_of_its_instance_and_the_filter_finds_its_profile_and_gi() {
    let m = mig_gpus(1);
    let mut ui = ui();
    ui.mode = Mode::Detail;
    let text = screen(&m, &ui, 100, 30);
    // 1 GiB of its 10 GiB instance, not 1.25 % of the 80 GiB GPU.
    assert!(text.contains("(10% of its instance)"), "{text}");
    let mut ui = tui_fixtures::ui();
    for (filter, pids) in [
        ("1g.10gb", (9000..9007).collect::<Vec<u32>>()),
        ("GI 8", vec![9001]),
        ("gi 13", vec![9006]),
        ("2g.20gb", vec![]),
    ] {
        ui.filter = filter.into();
        assert_eq!(row_pids(&m, &ui), pids, "filter {filter}");
    }
}
