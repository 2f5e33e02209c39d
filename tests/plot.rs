//! `vramscope plot` end to end: a recording written event by event with known figures (a
//! 75 GiB NVML peak, a 100 ms allocator spike to 29 GiB, a caught OOM, steps), plotted by the
//! real binary; the SVG is checked as XML for every label a reader relies on, the PNG for its
//! format, size and drawn text.

mod common;
mod recording_fixture;

use common::{GIB, builders, stderr};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use vramscope::model::SourceEvent;
use vramscope::model::{
    AllocatorDevice, AllocatorEvent, AllocatorPoint, ChannelPoll, DriverInfo, EventKind,
    HostProcess, WriterIdentity,
};
use vramscope::recording::{Header, Recorder};

use recording_fixture::{PID, device_info, device_sample, uuid};

/// 2023-11-14 22:13:20 UTC.
const T0: u64 = 1_700_000_000_000;
/// A command as hostile to XML as a real one may be.
const COMMAND: &str = "python train.py --tag <a&b> \"x\"\u{1}";
const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

fn host_sample(at_ms: u64) -> SourceEvent {
    SourceEvent::Host(Box::new(builders::host_sample(
        at_ms,
        vec![HostProcess {
            command: Ok(COMMAND.into()),
            starttime: None,
            ..builders::host_process(PID, 1)
        }],
    )))
}

fn allocator_device() -> AllocatorDevice {
    AllocatorDevice {
        uuid: Some(uuid(0)),
        allocated: Ok(20 * GIB),
        allocated_peak: Ok(20 * GIB),
        reserved: Ok(24 * GIB),
        reserved_peak: Ok(24 * GIB),
        active: Ok(20 * GIB),
        inactive_split: Ok(GIB),
        alloc_retries: Ok(3),
        ooms: Ok(1),
        device_free: Ok(GIB),
        ..builders::allocator_device(0)
    }
}

fn oom(at_ms: u64) -> AllocatorEvent {
    AllocatorEvent {
        step: Some(11),
        label: "forward/model.attn".into(),
        phase: "forward".into(),
        ..builders::allocator_event(
            at_ms,
            EventKind::Oom {
                requested: Ok(8 * GIB),
                device_free: Ok(GIB / 2),
                device_total: Ok(80 * GIB),
                allocated: Ok(20 * GIB),
                reserved: Ok(24 * GIB),
                retries: Ok(3),
            },
        )
    }
}

/// `seconds` of a run on two GPUs. GPU 0: NVML used 40 GiB with a 75 GiB peak at T0+30 s;
/// pid 4242 uses 30 GiB by NVML's count, 20 GiB allocated (spiking to 29 GiB for one 100 ms
/// sample at T0+29.9 s) and 24 GiB reserved, ten samples a second, four seconds per step, a
/// caught OOM asking for 8 GiB at T0+45.5 s. GPU 1: 10 GiB used, 12 GiB at T0+10 s, no
/// instrumented process. With `spike_at`, one extra allocator sample at that second reaches
/// 31 GiB (for long recordings).
fn write_recording(path: &Path, seconds: u64, spike_at: Option<u64>) {
    let header = Header {
        version: 1,
        vramscope_version: "0.1.0".into(),
        started_ms: T0,
        interval_ms: 1000,
        host: Some("node-7".into()),
    };
    let mut rec = Recorder::create(path, header).unwrap();
    let started = SourceEvent::Started {
        driver: DriverInfo {
            driver_version: Ok("550.54.15".into()),
            cuda_version: Ok(12040),
            nvml_version: Ok("12.550.54.15".into()),
        },
        devices: vec![device_info(0), device_info(1)],
    };
    rec.record(T0, &started).unwrap();
    let identity = Arc::new(WriterIdentity {
        world_size: Some(2),
        job_id: "job-1".into(),
        ..builders::writer_identity(PID, 1)
    });
    for s in 0..seconds {
        let at = T0 + s * 1000;
        let used = if s == 30 { 75 * GIB } else { 40 * GIB };
        let tick = SourceEvent::Batch(vec![
            device_sample(0, at, used, Some(30 * GIB)),
            device_sample(1, at, if s == 10 { 12 * GIB } else { 10 * GIB }, None),
            host_sample(at),
        ]);
        rec.record(at, &tick).unwrap();
        let points: Vec<AllocatorPoint> = (0..10u64)
            .map(|k| {
                let spike = (s == 29 && k == 9) || (spike_at == Some(s) && k == 5);
                let peak = match (spike, spike_at == Some(s)) {
                    (true, true) => 31 * GIB,
                    (true, false) => 29 * GIB,
                    _ => 20 * GIB,
                };
                AllocatorPoint {
                    peak: Some(peak),
                    step: Some(s / 4),
                    new_high_water: spike,
                    steps_since_attach: false,
                    ..builders::allocator_point(at + k * 100, 20 * GIB, 24 * GIB)
                }
            })
            .collect();
        let poll = ChannelPoll {
            identity: Arc::clone(&identity),
            devices: vec![allocator_device()],
            step: Some(s / 4),
            label: "forward".into(),
            points,
            events: if s == 45 { vec![oom(at + 500)] } else { vec![] },
            ..builders::channel_poll(PID, 1)
        };
        let batch = SourceEvent::Channels(Box::new(builders::channel_batch(at + 999, vec![poll])));
        rec.record(at + 999, &batch).unwrap();
    }
    rec.finish().unwrap();
}

fn plot(args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_vramscope"))
        .env_remove("VRAMSCOPE_FONT")
        .arg("plot")
        .args(args)
        .output()
        .unwrap()
}

fn recording(dir: &Path, seconds: u64, spike_at: Option<u64>) -> PathBuf {
    let path = dir.join("run.jsonl.zst");
    write_recording(&path, seconds, spike_at);
    path
}

/// Every `<text>` of an SVG, which must parse as XML, with its x coordinate.
fn svg_texts(svg: &str) -> Vec<(f64, String)> {
    let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("not XML: {e}"));
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| {
            let x = n
                .attribute("x")
                .and_then(|x| x.parse().ok())
                .unwrap_or(f64::NAN);
            (x, n.text().unwrap_or_default().trim().to_string())
        })
        .collect()
}

fn x_of(texts: &[(f64, String)], wanted: &str) -> f64 {
    texts
        .iter()
        .find(|(_, t)| t == wanted)
        .unwrap_or_else(|| panic!("no text {wanted:?} in {texts:#?}"))
        .0
}

#[test]
fn the_svg_shows_every_peak_the_oom_the_limit_and_a_legend_entry_per_series() {
    let dir = tempfile::tempdir().unwrap();
    let path = recording(dir.path(), 60, None);
    let out_path = dir.path().join("timeline.svg");
    let out = plot(&[path.to_str().unwrap(), "-o", out_path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let svg = std::fs::read_to_string(&out_path).unwrap();
    let texts = svg_texts(&svg);
    let all: Vec<&str> = texts.iter().map(|(_, t)| t.as_str()).collect();
    let has = |wanted: &str| {
        assert!(all.contains(&wanted), "no text {wanted:?} in {all:#?}");
    };
    has("run.jsonl.zst · node-7");
    has("2023-11-14 22:13:20 → 22:14:19 UTC (59s) · 2 charts");
    has("GPU 0 · NVIDIA H100 80GB HBM3 · 80.0 GiB");
    has("GPU 1 · NVIDIA H100 80GB HBM3 · 80.0 GiB");
    has("limit 80.0 GiB");
    // Peaks: GPU 0's NVML 75 GiB, the allocator's 100 ms spike, reserved, the process's
    // NVML figure, and GPU 1's own 12 GiB.
    for peak in ["75.0", "24.0", "30.0", "12.0"] {
        has(&format!("peak {peak} GiB"));
    }
    // The allocator's is its true peak, with the step of the sample that made it.
    has("peak 29.0 GiB, step 7");
    // Nothing after it says whether the program survived.
    const OOM: &str = "OOM: asked 8.00 GiB, 512 MiB free, step 11, forward (outcome not yet known)";
    has(OOM);
    has("shaded: steps of pid 4242 · 1 OOM");
    has("step 7");
    // The legend names every series, the command cleaned of what XML cannot hold.
    // The control character is withheld as U+FFFD where the recording is read (src/text.rs).
    let who = "pid 4242 python train.py --tag <a&b> \"x\"\u{FFFD} [PyTorch, rank 0]";
    has("GPU 0 used (NVML)");
    has("GPU 1 used (NVML)");
    has(&format!("{who}: allocated"));
    has(&format!("{who}: reserved"));
    has(&format!("{who}: NVML used"));
    has("out of memory");
    has("every other step");
    // Labels sit at their time: the spike at T0+29.9 s and the 75 GiB peak at T0+30 s next
    // to the 22:13:50 tick, the OOM at T0+45.5 s next to 22:14:05.
    let tick_50 = x_of(&texts, "22:13:50");
    for label in ["peak 29.0 GiB, step 7", "peak 75.0 GiB"] {
        let x = x_of(&texts, label);
        assert!(
            (x - tick_50).abs() < 160.0,
            "{label} at {x}, tick at {tick_50}"
        );
    }
    // The long OOM label may sit to the left of its cross: one of its ends is at its time
    // (its width as the plot reckons it: 0.56 em a character at 15 px).
    let left = x_of(&texts, OOM);
    let right = left + OOM.chars().count() as f64 * 15.0 / 1.24 * 0.56;
    let tick_05 = x_of(&texts, "22:14:05");
    assert!(
        (left - tick_05).abs() < 200.0 || (right - tick_05).abs() < 200.0,
        "OOM from {left} to {right}, tick at {tick_05}"
    );
}

#[test]
fn a_png_is_a_valid_image_of_the_requested_size_with_its_text_drawn() {
    if !Path::new(FONT).is_file() {
        // CI installs fonts-dejavu-core (.ci/run): a missing font there is a real failure.
        assert!(std::env::var_os("CI").is_none(), "{FONT} missing in CI");
        eprintln!("skipped: {FONT} is not installed (apt-get install fonts-dejavu-core)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = recording(dir.path(), 60, None);
    let out_path = dir.path().join("timeline.png");
    let out = plot(&[
        path.to_str().unwrap(),
        "-o",
        out_path.to_str().unwrap(),
        "--width",
        "1000",
        "--height",
        "900",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let bytes = std::fs::read(&out_path).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(&bytes[12..16], b"IHDR");
    let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    assert_eq!((be(16), be(20)), (1000, 900));

    let decoder = png::Decoder::new(std::io::Cursor::new(&bytes));
    let mut reader = decoder.read_info().unwrap();
    let mut rgb = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut rgb).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgb);
    let pixels: Vec<&[u8]> = rgb.chunks(3).collect();
    // The title band (top 60 rows) holds dark glyph pixels: text really was rendered.
    let title_ink = pixels[..1000 * 60]
        .iter()
        .filter(|p| p.iter().all(|&c| c < 90))
        .count();
    assert!(title_ink > 500, "only {title_ink} dark pixels in the title");
    // The OOM cross is red.
    let red = pixels
        .iter()
        .filter(|p| p[0] > 190 && p[1] < 70 && p[2] < 70)
        .count();
    assert!(red > 20, "only {red} red pixels");

    // Without --height, the height follows from the number of charts.
    let out = plot(&[path.to_str().unwrap(), "-o", out_path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let bytes = std::fs::read(&out_path).unwrap();
    let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    assert_eq!(be(16), 1400);
    assert!((700..1200).contains(&be(20)), "height {}", be(20));
}

#[test]
fn long_recordings_are_downsampled_and_keep_their_peak() {
    let dir = tempfile::tempdir().unwrap();
    // An hour: 36,000 allocator samples per series, one of them the 31 GiB spike.
    let path = recording(dir.path(), 3600, Some(2345));
    let out_path = dir.path().join("long.svg");
    let out = plot(&[path.to_str().unwrap(), "-o", out_path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let svg = std::fs::read_to_string(&out_path).unwrap();
    let texts = svg_texts(&svg);
    assert!(
        texts.iter().any(|(_, t)| t.starts_with("peak 31.0 GiB,")),
        "{texts:#?}"
    );
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let mut longest = 0;
    for line in doc.descendants().filter(|n| n.has_tag_name("polyline")) {
        let points = line.attribute("points").unwrap_or_default();
        longest = longest.max(points.split_whitespace().count());
    }
    assert!(
        (1000..=2000).contains(&longest),
        "longest line has {longest} points"
    );
}

#[test]
fn a_missing_damaged_or_unusable_input_is_one_line_and_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("out.svg");
    let svg_arg = svg.to_str().unwrap();
    let one_line = |out: &Output, code: i32, needle: &str| {
        assert_eq!(out.status.code(), Some(code), "{}", stderr(out));
        let err = stderr(out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("vramscope: ") && err.contains(needle),
            "{err}"
        );
    };

    one_line(
        &plot(&["/nonexistent/run.jsonl", "-o", svg_arg]),
        2,
        "/nonexistent/run.jsonl",
    );
    assert!(!svg.exists());

    let garbage = dir.path().join("garbage.jsonl");
    std::fs::write(&garbage, "this is not a recording\n").unwrap();
    one_line(
        &plot(&[garbage.to_str().unwrap(), "-o", svg_arg]),
        2,
        "garbage.jsonl",
    );
    assert!(!svg.exists());

    let path = dir.path().join("run.jsonl");
    write_recording(&path, 60, None);
    let jpg = dir.path().join("out.jpg");
    one_line(
        &plot(&[path.to_str().unwrap(), "-o", jpg.to_str().unwrap()]),
        2,
        ".svg or .png",
    );
    let png = dir.path().join("out.png");
    one_line(
        &plot(&[
            path.to_str().unwrap(),
            "-o",
            png.to_str().unwrap(),
            "--font",
            "/nonexistent.ttf",
        ]),
        2,
        "font",
    );
    one_line(
        &plot(&[path.to_str().unwrap(), "-o", svg_arg, "--height", "300"]),
        2,
        "height",
    );

    // Damage in the middle: plotted up to it, named on the image and in one line.
    let mut text = std::fs::read_to_string(&path).unwrap();
    let middle = text.len() / 2;
    let cut = text[middle..].find('\n').unwrap() + middle + 1;
    text.insert_str(cut, "{\"t\": oops}\n");
    std::fs::write(&path, text).unwrap();
    let out = plot(&[path.to_str().unwrap(), "-o", svg_arg]);
    one_line(&out, 1, "damage");
    let texts = svg_texts(&std::fs::read_to_string(&svg).unwrap());
    assert!(
        texts
            .iter()
            .any(|(_, t)| t.starts_with("damaged recording, plotted up to: ")),
        "{texts:#?}"
    );
    assert!(texts.iter().any(|(_, t)| t == "peak 29.0 GiB, step 7"));
}

/// The hunt of issue 13 plotted: the allocator's peak says where it happened (the fold's
/// step and phase, not the next poll's), and the one failure, told by the observer and the
/// uncaught error, is one cross labelled with its request, the free memory, step, phase
/// and fatal.
#[test]
fn the_hunt_is_plotted_with_its_peak_placed_and_one_fatal_oom() {
    use recording_fixture::hunt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hunt.jsonl");
    hunt::write_hunt(&path);
    let out_path = dir.path().join("hunt.svg");
    let out = plot(&[path.to_str().unwrap(), "-o", out_path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let svg = std::fs::read_to_string(&out_path).unwrap();
    let texts = svg_texts(&svg);
    let all: Vec<&str> = texts.iter().map(|(_, t)| t.as_str()).collect();
    assert!(
        all.contains(&"peak 12.0 GiB, step 40, backward"),
        "{all:#?}"
    );
    let ooms: Vec<&&str> = all.iter().filter(|t| t.starts_with("OOM")).collect();
    assert_eq!(
        ooms,
        vec![&"OOM: asked 6.00 GiB, 3.00 GiB free, step 80, forward (fatal)"],
        "{all:#?}"
    );
    assert!(
        all.iter().any(|t| t.ends_with("· 1 OOM")),
        "one OOM counted: {all:#?}"
    );
}
