//! Scenarios for the TUI rendering tests: a `Monitor` fed with `SourceEvent`s built here at
//! fixed timestamps (never the real clock), and helpers to draw a `View` on a `TestBackend`.

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use std::sync::Arc;
use vramscope::model::SourceEvent;
use vramscope::model::{
    Absent, DeviceInfo, DeviceSample, DriverInfo, GpuProcess, HostMemory, HostProcess, HostSample,
    MemoryInfo, NvmlProblem, ProcessKind, Snapshot,
};
use vramscope::state::{HistoryView, Monitor, StaleAfter};
use vramscope::terminal_kit::theme::Theme;
use vramscope::tui::layout;
use vramscope::tui::rows::table_rows;
use vramscope::tui::ui_state::UiState;
use vramscope::tui::view::View;

pub const GIB: u64 = 1024 * 1024 * 1024;
/// 2023-11-14 22:13:20 UTC: the start of every scenario.
pub const T0: u64 = 1_700_000_000_000;
/// Ten minutes of one-second samples later: the moment every screen shows.
pub const NOW: u64 = T0 + 600_000;
pub const INTERVAL_MS: u64 = 1_000;

pub fn driver() -> DriverInfo {
    DriverInfo {
        driver_version: Ok("550.54.15".into()),
        cuda_version: Ok(12040),
        nvml_version: Ok("12.550.54.15".into()),
    }
}

pub fn info(index: u32, name: &str, total: u64) -> DeviceInfo {
    DeviceInfo {
        index,
        name: Ok(name.into()),
        uuid: Ok(format!("GPU-0000000{index}-aaaa-bbbb-cccc-dddddddddddd")),
        pci_bus_id: Ok(format!("00000000:{:02X}:00.0", 0x17 + index)),
        memory_total: Ok(total),
        power_limit_mw: Ok(700_000),
    }
}

/// A sample with every figure readable.
pub fn sample(index: u32, at_ms: u64, used: u64, total: u64, util: u32) -> DeviceSample {
    DeviceSample {
        index,
        at_ms,
        memory: Ok(MemoryInfo {
            total,
            reserved: Some(GIB / 2),
            used,
            free: total.saturating_sub(used),
        }),
        gpu_util: Ok(util),
        mem_util: Ok(util / 2),
        temperature_c: Ok(64),
        power_mw: Ok(412_000),
        power_limit_mw: Ok(700_000),
        sm_clock_mhz: Ok(1980),
        mem_clock_mhz: Ok(2619),
        fan_percent: Ok(30),
        encoder_util: Ok(0),
        decoder_util: Ok(0),
        throttle_reasons: Ok(0x04),
        pstate: Ok(0),
        ecc_corrected: Ok(0),
        ecc_uncorrected: Ok(0),
        pcie_tx_kbs: None,
        pcie_rx_kbs: None,
        processes: Ok(Vec::new()),
        list_gaps: Default::default(),
        memory_peak: None,
        lost: false,
        mig: None,
    }
}

/// A sample from a consumer-style GPU: several figures unreadable, for different reasons.
pub fn sample_with_absences(index: u32, at_ms: u64, used: u64, total: u64) -> DeviceSample {
    DeviceSample {
        temperature_c: Err(Absent::NoPermission),
        fan_percent: Err(Absent::NotSupported),
        encoder_util: Err(Absent::NotSupported),
        decoder_util: Err(Absent::NotSupported),
        power_mw: Err(Absent::NotSupported),
        ecc_corrected: Err(Absent::NotSupported),
        ecc_uncorrected: Err(Absent::NotSupported),
        throttle_reasons: Err(Absent::NotSupported),
        ..sample(index, at_ms, used, total, 12)
    }
}

/// What NVML returns for a GPU that fell off the bus.
pub fn lost_sample(index: u32, at_ms: u64) -> DeviceSample {
    DeviceSample {
        memory: Err(Absent::GpuLost),
        gpu_util: Err(Absent::GpuLost),
        mem_util: Err(Absent::GpuLost),
        temperature_c: Err(Absent::GpuLost),
        power_mw: Err(Absent::GpuLost),
        power_limit_mw: Err(Absent::GpuLost),
        sm_clock_mhz: Err(Absent::GpuLost),
        mem_clock_mhz: Err(Absent::GpuLost),
        fan_percent: Err(Absent::GpuLost),
        encoder_util: Err(Absent::GpuLost),
        decoder_util: Err(Absent::GpuLost),
        throttle_reasons: Err(Absent::GpuLost),
        pstate: Err(Absent::GpuLost),
        ecc_corrected: Err(Absent::GpuLost),
        ecc_uncorrected: Err(Absent::GpuLost),
        processes: Err(Absent::GpuLost),
        lost: true,
        mig: None,
        ..sample(index, at_ms, 0, 0, 0)
    }
}

pub fn gpu_process(pid: u32, used: u64, sm: Result<u32, Absent>) -> GpuProcess {
    GpuProcess {
        pid,
        kind: ProcessKind::Compute,
        used_memory: Ok(used),
        sm_util: sm,
        mem_util: Ok(10),
        enc_util: Ok(0),
        dec_util: Ok(0),
    }
}

pub fn host_process(pid: u32, user: &str, command: &str, rss: u64, cpu: f32) -> HostProcess {
    HostProcess {
        pid,
        local_pid: Some(pid),
        user: Ok(user.into()),
        command: Ok(command.into()),
        rss_bytes: Ok(rss),
        cpu_percent: Ok(cpu),
        container: None,
        pod_unreadable: None,
        pod: None,
        uid: Some(1000),
        starttime: None,
    }
}

pub fn host_sample(at_ms: u64, processes: Vec<HostProcess>) -> HostSample {
    HostSample {
        at_ms,
        load: None,
        memory: Ok(HostMemory {
            total: 62 * GIB + 8 * GIB / 10,
            used: 12 * GIB + 3 * GIB / 10,
            available: 48 * GIB,
            swap_total: 2 * GIB,
            swap_used: 0,
        }),
        processes,
    }
}

/// Two GPUs over ten minutes. GPU 0 (an H100) holds three processes, had its all-time peak
/// 8 minutes ago and a spike 42 s ago; pid 4242 on it peaked 22 s ago; pid 7777 exited
/// 2 minutes ago. GPU 1 reports
/// several figures as unreadable.
pub fn two_gpus() -> Monitor {
    let mut m = Monitor::new(T0);
    m.ingest(SourceEvent::Started {
        driver: driver(),
        devices: vec![
            info(0, "NVIDIA H100 80GB HBM3", 80 * GIB),
            info(1, "NVIDIA A100-SXM4-40GB", 40 * GIB),
        ],
    });
    let mut t = T0;
    while t <= NOW {
        let ago = NOW - t;
        let eval_alive = ago > 120_000;
        let mut used0 = 41 * GIB + GIB / 5;
        if ago == 480_000 {
            used0 = 75 * GIB;
        }
        if (40_000..43_000).contains(&ago) {
            used0 = 70 * GIB;
        }
        let mut s0 = sample(0, t, used0, 80 * GIB, 87);
        let mut procs = vec![
            gpu_process(
                4242,
                if (20_000..23_000).contains(&ago) {
                    36 * GIB
                } else {
                    30 * GIB
                },
                Ok(87),
            ),
            gpu_process(5151, 8 * GIB, Ok(3)),
        ];
        if eval_alive {
            procs.push(gpu_process(7777, 20 * GIB, Ok(40)));
        }
        s0.processes = Ok(procs);
        m.ingest(SourceEvent::Device(Box::new(s0)));

        let mut s1 = sample_with_absences(1, t, 2 * GIB + GIB / 2, 40 * GIB);
        s1.processes = Ok(vec![gpu_process(6000, 2 * GIB, Err(Absent::NotSupported))]);
        m.ingest(SourceEvent::Device(Box::new(s1)));

        let mut hosts = vec![
            HostProcess {
                container: Some("3f5c2a1b9d8e".into()),
                ..host_process(
                    4242,
                    "alice",
                    "python train.py --epochs 90",
                    12 * GIB,
                    101.5,
                )
            },
            HostProcess {
                local_pid: None,
                ..host_process(5151, "bob", "ollama serve", 3 * GIB, 2.0)
            },
            HostProcess {
                cpu_percent: Err(Absent::NoPermission),
                ..host_process(6000, "carol", "jupyter-kernel", GIB, 0.0)
            },
        ];
        if eval_alive {
            hosts.push(host_process(7777, "dave", "python eval.py", 5 * GIB, 99.0));
        }
        m.ingest(SourceEvent::Host(Box::new(host_sample(t, hosts))));
        t += INTERVAL_MS;
    }
    m
}

/// `count` identical busy GPUs, one sample each second for a minute.
pub fn many_gpus(count: u32) -> Monitor {
    let mut m = Monitor::new(T0);
    let devices = (0..count)
        .map(|i| info(i, "NVIDIA H100 80GB HBM3", 80 * GIB))
        .collect();
    m.ingest(SourceEvent::Started {
        driver: driver(),
        devices,
    });
    let mut t = NOW - 60_000;
    while t <= NOW {
        for i in 0..count {
            let used = (10 + u64::from(i) * 8) * GIB;
            let mut s = sample(i, t, used, 80 * GIB, 10 * i);
            s.processes = Ok(vec![gpu_process(1000 + i, used, Ok(10 * i))]);
            m.ingest(SourceEvent::Device(Box::new(s)));
        }
        let hosts = (0..count)
            .map(|i| host_process(1000 + i, "alice", "python worker.py", GIB, 50.0))
            .collect();
        m.ingest(SourceEvent::Host(Box::new(host_sample(t, hosts))));
        t += INTERVAL_MS;
    }
    m
}

/// Three GPUs: 0 healthy, 1 fell off the bus, 2 silent for 30 s (stale).
pub fn faulty_gpus() -> Monitor {
    let mut m = Monitor::new(T0);
    let devices = vec![
        info(0, "NVIDIA L40S", 48 * GIB),
        info(1, "NVIDIA L40S", 48 * GIB),
        info(2, "NVIDIA L40S", 48 * GIB),
    ];
    m.ingest(SourceEvent::Started {
        driver: driver(),
        devices,
    });
    let mut t = NOW - 90_000;
    while t <= NOW {
        m.ingest(SourceEvent::Device(Box::new(sample(
            0,
            t,
            20 * GIB,
            48 * GIB,
            50,
        ))));
        let one = if t < NOW - 45_000 {
            sample(1, t, 9 * GIB, 48 * GIB, 30)
        } else {
            lost_sample(1, t)
        };
        m.ingest(SourceEvent::Device(Box::new(one)));
        if t <= NOW - 30_000 {
            m.ingest(SourceEvent::Device(Box::new(sample(
                2,
                t,
                33 * GIB,
                48 * GIB,
                99,
            ))));
        }
        m.ingest(SourceEvent::Host(Box::new(host_sample(t, Vec::new()))));
        t += INTERVAL_MS;
    }
    m
}

/// NVML could not be loaded; only the host sampler runs.
pub fn no_nvml() -> Monitor {
    let mut m = Monitor::new(T0);
    m.ingest(SourceEvent::NvmlUnavailable(NvmlProblem::LibraryNotFound(
        "libnvidia-ml.so.1: cannot open shared object file".into(),
    )));
    m.ingest(SourceEvent::Host(Box::new(host_sample(
        NOW - 1_000,
        Vec::new(),
    ))));
    m
}

pub fn snapshot(m: &Monitor) -> Snapshot {
    m.snapshot(NOW, StaleAfter::interval(INTERVAL_MS))
}

pub fn ui() -> UiState {
    UiState::new(false, false)
}

/// Draws the whole screen at `width` x `height` and returns the buffer: of the kept
/// snapshot while paused (`ui.frozen`), as the monitor shows it, else of one taken at `NOW`.
pub fn draw(m: &Monitor, ui: &UiState, theme: &Theme, width: u16, height: u16) -> Buffer {
    let snapshot = ui.frozen.clone().unwrap_or_else(|| Arc::new(snapshot(m)));
    let snapshot = &*snapshot;
    let rows = table_rows(snapshot, ui);
    let view = View {
        snapshot,
        history: HistoryView::at(m, snapshot.taken_at_ms),
        ui,
        now_ms: snapshot.taken_at_ms,
        interval_ms: INTERVAL_MS,
        theme,
        rows: &rows,
    };
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("test backend");
    terminal
        .draw(|frame| {
            layout::draw(frame, &view);
        })
        .expect("draw");
    terminal.backend().buffer().clone()
}

/// The buffer as text, one line per row, trailing blanks trimmed for readable snapshots.
pub fn text(buffer: &Buffer) -> String {
    let width = usize::from(buffer.area.width);
    let mut out = String::new();
    for row in buffer.content.chunks(width.max(1)) {
        let line: String = row.iter().map(|c| c.symbol()).collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

pub fn color() -> Theme {
    Theme::new(true, false)
}

/// The whole screen in colour with Unicode glyphs, as text.
pub fn screen(m: &Monitor, ui: &UiState, width: u16, height: u16) -> String {
    text(&draw(m, ui, &color(), width, height))
}

/// Pids of the table rows in display order, for the given UI state.
pub fn row_pids(m: &Monitor, ui: &UiState) -> Vec<u32> {
    let snapshot = ui.frozen.clone().unwrap_or_else(|| Arc::new(snapshot(m)));
    table_rows(&snapshot, ui)
        .iter()
        .map(|r| r.key.pid)
        .collect()
}

/// One H100 over ten minutes whose memory climbs in steps through a training run and falls
/// back at its end, with a 250 ms-wide spike 90 s ago; utilisation follows the steps.
pub fn one_gpu() -> Monitor {
    let mut m = Monitor::new(T0);
    m.ingest(SourceEvent::Started {
        driver: driver(),
        devices: vec![info(0, "NVIDIA H100 80GB HBM3", 80 * GIB)],
    });
    let mut t = T0;
    while t <= NOW {
        let ago = NOW - t;
        // 20 s steps of 4 GiB from 8 GiB, back to 8 GiB every 3 minutes.
        let step = (t - T0) / 20_000 % 9;
        let mut used = (8 + step * 4) * GIB;
        if ago == 90_000 {
            used = 76 * GIB;
        }
        let util = u32::try_from(20 + step * 10).unwrap_or(100);
        let mut s = sample(0, t, used, 80 * GIB, util);
        s.processes = Ok(vec![gpu_process(4242, used - 2 * GIB, Ok(util))]);
        m.ingest(SourceEvent::Device(Box::new(s)));
        let host = host_sample(
            t,
            vec![host_process(
                4242,
                "alice",
                "python train.py",
                9 * GIB,
                100.0,
            )],
        );
        m.ingest(SourceEvent::Host(Box::new(host)));
        t += INTERVAL_MS;
    }
    m
}

/// An 8-GPU node like [`many_gpus`], where GPU 3 counts ECC errors (2 corrected, 1 not),
/// GPU 5 throttles for heat and GPU 6's memory spiked 30 s ago.
pub fn eight_gpus_with_alarms() -> Monitor {
    let count = 8;
    let mut m = Monitor::new(T0);
    let devices = (0..count)
        .map(|i| info(i, "NVIDIA H100 80GB HBM3", 80 * GIB))
        .collect();
    m.ingest(SourceEvent::Started {
        driver: driver(),
        devices,
    });
    let mut t = NOW - 120_000;
    while t <= NOW {
        for i in 0..count {
            let mut used = (10 + u64::from(i) * 8) * GIB;
            if i == 6 && NOW - t == 30_000 {
                used = 79 * GIB;
            }
            // Each GPU's utilisation swings on its own period, so the charts differ.
            let phase = (t / 1_000 + u64::from(i) * 7) % 40;
            let util = if phase < 20 { 90 } else { 30 + i * 5 };
            let mut s = sample(i, t, used, 80 * GIB, util);
            s.throttle_reasons = Ok(if i == 5 { 0x40 } else { 0x01 });
            if i == 3 {
                s.ecc_corrected = Ok(2);
                s.ecc_uncorrected = Ok(1);
            }
            s.processes = Ok(vec![gpu_process(1000 + i, used, Ok(util))]);
            m.ingest(SourceEvent::Device(Box::new(s)));
        }
        let hosts = (0..count)
            .map(|i| host_process(1000 + i, "alice", "python worker.py", GIB, 50.0))
            .collect();
        m.ingest(SourceEvent::Host(Box::new(host_sample(t, hosts))));
        t += INTERVAL_MS;
    }
    m
}
