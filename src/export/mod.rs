//! `vramscope export FILE --csv`: a recording as a tidy long-format CSV, one row per time,
//! entity and metric, which pandas (`pd.read_csv`) and polars read in one line.
//!
//! Columns: `time_ms,entity,gpu,pid,metric,value`.
//! - `entity`: `gpu`, `process` (NVML's and the host's figures for a GPU process),
//!   `allocator` (what an instrumented process published, one row per writer sample), `host`.
//! - `gpu`: NVML's GPU index, empty where it does not apply or is unknown; `pid`: the host
//!   pid, empty for `gpu` and `host` rows.
//! - `metric` and its unit: `memory_used`, `memory_total` (bytes), `gpu_util`, `mem_util`
//!   (%), `temperature_c` (°C), `power_mw` (mW), `sm_clock_mhz`, `mem_clock_mhz` (MHz) for
//!   GPUs (the keys `--json` and `--csv` give them: `model::figures`; export of vramscope
//!   0.1.0 wrote `temperature`, `power`, `sm_clock` and `mem_clock`), and
//!   `memory_used_peak` (bytes) at the moment the fast memory sampling read a spike between
//!   two samples;
//!   `used_memory`, `host_rss` (bytes), `sm_util` (%), `cpu_percent` (% of one core) for
//!   processes; `allocated`, `reserved`, `interval_peak` (bytes, as `--json`'s
//!   slot calls it; the first export wrote `peak`), `step` for allocators' samples;
//!   after every step row (`step`, `oom_step`, `true_peak_step`) of a writer that counts
//!   its steps from `vramscope attach`, `steps_since_attach` 1 (none after the job's own);
//!   at each OOM (one per failure, however many events told of it) `oom_requested`,
//!   `oom_device_free`, `oom_allocated`, `oom_reserved` (bytes), `oom_step` and `oom_fatal`
//!   (1 fatal, 0 caught, no row while unknown), written once its outcome is known (so after
//!   later rows) or at the end; at the end, each writer slot's `true_peak` (bytes) and
//!   `true_peak_step` at the moment of the peak; `memory_used`, `memory_total` (bytes) for
//!   the host. The peak's and OOM's phase is text: `vramscope report --json` has it.
//! - A figure that could not be read has no row: absent is never written as 0.
//! - Every cell is a number or one of the words above, never foreign text, so no cell needs
//!   quoting or the spreadsheet-formula guard of `--csv` (`output::csv::formula_guard`); a
//!   text column added here must go through both.

use crate::model::SourceEvent;
use crate::model::figures::{device as gpu, process, slot};
use crate::model::writer_fold::{OomOutcome, WriterFold};
use crate::model::{ChannelBatch, DeviceSample, HostSample, Reading, StepOrigin};
use crate::recording::Recording;
use crate::recording::folds::RecordedFolds;
use crate::recording::scope::Asked;
use crate::recording::scoped;
use std::collections::{HashMap, HashSet};
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;

pub const HEADER: &str = "time_ms,entity,gpu,pid,metric,value";

/// The row after a step row whose step counts from an attach: `--json`'s `steps_from` as a
/// number, since every export cell is one.
const STEPS_SINCE_ATTACH: &str = "steps_since_attach";

/// Writes the part of `file` asked for (`recording::scope`) as CSV to `out` (a path, or
/// standard output), saying on standard error what part that is.
pub fn run(file: &Path, out: Option<&Path>, asked: &Asked) -> ExitCode {
    let (recording, told) = match scoped::open(file, asked) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("vramscope: {e}");
            return ExitCode::from(2);
        }
    };
    let sink: Box<dyn Write> = match out {
        Some(path) => match std::fs::File::create(path) {
            Ok(f) => Box::new(f),
            Err(e) => {
                eprintln!("vramscope: cannot create {}: {e}", path.display());
                return ExitCode::from(2);
            }
        },
        None => Box::new(crate::stdout::lock()),
    };
    let written = write_csv(recording, BufWriter::new(sink));
    for note in told.notes() {
        eprintln!("vramscope: {note}");
    }
    match written {
        Ok(None) => ExitCode::SUCCESS,
        Ok(Some(damage)) => {
            eprintln!("vramscope: exported up to the damage: {damage}");
            ExitCode::from(1)
        }
        // A closed pipe (`| head`) is not an error worth a message.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vramscope: cannot write the CSV: {e}");
            ExitCode::from(1)
        }
    }
}

/// Writes every figure of the recording; returns the damage that stopped it, if any.
pub fn write_csv(recording: Recording, mut out: impl Write) -> io::Result<Option<String>> {
    writeln!(out, "{HEADER}")?;
    let mut rows = Rows {
        out: &mut out,
        folds: RecordedFolds::default(),
        ooms_written: HashMap::new(),
    };
    let mut events = recording.events();
    let mut damage = None;
    for item in events.by_ref() {
        match item {
            Ok((_, event)) => rows.event(event)?,
            Err(e) => {
                damage = Some(e.to_string());
                break;
            }
        }
    }
    rows.finish()?;
    out.flush()?;
    if let Some(skipped) = events.skipped_notice() {
        eprintln!("vramscope: {skipped}");
    }
    Ok(damage)
}

struct Rows<'a, W: Write> {
    out: &'a mut W,
    /// Every writer's stream, folded as the monitor folds it: GPUs, OOMs, true peaks.
    folds: RecordedFolds,
    /// Channel path -> the OOMs already written, by time and slot.
    ooms_written: HashMap<String, HashSet<(u64, Option<u16>)>>,
}

impl<W: Write> Rows<'_, W> {
    fn row(
        &mut self,
        at_ms: u64,
        entity: &str,
        gpu: Option<u32>,
        pid: Option<u32>,
        metric: &str,
        value: impl std::fmt::Display,
    ) -> io::Result<()> {
        row(self.out, at_ms, entity, gpu, pid, metric, value)
    }

    fn event(&mut self, event: SourceEvent) -> io::Result<()> {
        match event {
            SourceEvent::Started { devices, .. } => self.folds.started(&devices),
            SourceEvent::Device(sample) => {
                self.folds.device(&sample);
                self.device(&sample)?;
            }
            SourceEvent::Host(sample) => self.host(&sample)?,
            SourceEvent::Channels(batch) => self.batch(*batch)?,
            // A recording gives a batch's members one by one.
            SourceEvent::NvmlUnavailable(_)
            | SourceEvent::Batch(_)
            | SourceEvent::Interval { .. } => {}
        }
        Ok(())
    }

    fn device(&mut self, s: &DeviceSample) -> io::Result<()> {
        let (t, g) = (s.at_ms, Some(s.index));
        // A spike the fast memory sampling caught between two samples, at its own time.
        if let Some(peak) = s.memory_peak.as_ref().filter(|p| p.at_ms < t) {
            self.row(
                peak.at_ms,
                "gpu",
                g,
                None,
                gpu::MEMORY_USED_PEAK.key,
                peak.used,
            )?;
        }
        if let Ok(m) = &s.memory {
            self.row(t, "gpu", g, None, gpu::MEMORY_USED.key, m.used)?;
            self.row(t, "gpu", g, None, gpu::MEMORY_TOTAL.key, m.total)?;
        }
        let figures: [(&str, &Reading<u32>); 6] = [
            (gpu::GPU_UTIL.key, &s.gpu_util),
            (gpu::MEM_UTIL.key, &s.mem_util),
            (gpu::TEMPERATURE_C.key, &s.temperature_c),
            (gpu::POWER_MW.key, &s.power_mw),
            (gpu::SM_CLOCK_MHZ.key, &s.sm_clock_mhz),
            (gpu::MEM_CLOCK_MHZ.key, &s.mem_clock_mhz),
        ];
        for (metric, value) in figures {
            if let Ok(v) = value {
                self.row(t, "gpu", g, None, metric, v)?;
            }
        }
        if let Ok(processes) = &s.processes {
            for p in processes {
                if let Ok(used) = p.used_memory {
                    self.row(t, "process", g, Some(p.pid), process::USED_MEMORY.key, used)?;
                }
                if let Ok(sm) = p.sm_util {
                    self.row(t, "process", g, Some(p.pid), process::SM_UTIL.key, sm)?;
                }
            }
        }
        Ok(())
    }

    fn host(&mut self, s: &HostSample) -> io::Result<()> {
        if let Ok(m) = &s.memory {
            self.row(s.at_ms, "host", None, None, gpu::MEMORY_USED.key, m.used)?;
            self.row(s.at_ms, "host", None, None, gpu::MEMORY_TOTAL.key, m.total)?;
        }
        for p in &s.processes {
            if let Ok(rss) = p.rss_bytes {
                self.row(
                    s.at_ms,
                    "process",
                    None,
                    Some(p.pid),
                    process::HOST_RSS.key,
                    rss,
                )?;
            }
            if let Ok(cpu) = p.cpu_percent {
                self.row(
                    s.at_ms,
                    "process",
                    None,
                    Some(p.pid),
                    process::CPU_PERCENT.key,
                    cpu,
                )?;
            }
        }
        Ok(())
    }

    /// A batch: folded first, so that each sample's row names the GPU the fold resolved;
    /// then the samples' rows, then the rows of every OOM whose outcome is now known.
    fn batch(&mut self, batch: ChannelBatch) -> io::Result<()> {
        let at_ms = batch.at_ms;
        let mut samples = Vec::with_capacity(batch.polls.len());
        for poll in batch.polls {
            samples.push((poll.path.clone(), poll.host_pid, poll.points.clone()));
            self.folds.poll(poll, at_ms);
        }
        self.folds.gone(&batch.gone);
        self.folds.resolve();
        for (path, pid, points) in samples {
            let Some(fold) = self.folds.writers.get(&path) else {
                continue;
            };
            for p in &points {
                let gpu = fold.slots.get(usize::from(p.slot)).and_then(|s| s.gpu);
                let figures = [
                    (slot::ALLOCATED.key, p.allocated),
                    (slot::RESERVED.key, p.reserved),
                    (slot::INTERVAL_PEAK.key, p.peak),
                    (process::STEP.key, p.step),
                ];
                for (metric, value) in figures {
                    if let Some(v) = value {
                        row(self.out, p.at_ms, "allocator", gpu, pid, metric, v)?;
                    }
                }
                if p.step.is_some() && p.steps_since_attach {
                    row(
                        self.out,
                        p.at_ms,
                        "allocator",
                        gpu,
                        pid,
                        STEPS_SINCE_ATTACH,
                        StepOrigin::Attach.since_attach(),
                    )?;
                }
            }
            self.ooms(&path, false)?;
        }
        Ok(())
    }

    /// The rows of `path`'s OOMs not written yet: those settled, or all of them at the end.
    fn ooms(&mut self, path: &str, at_end: bool) -> io::Result<()> {
        let Some(fold) = self.folds.writers.get(path) else {
            return Ok(());
        };
        let written = self.ooms_written.entry(path.to_string()).or_default();
        for oom in &fold.ooms {
            let key = (oom.at_ms, oom.slot);
            if (oom.outcome == OomOutcome::Pending && !at_end) || written.contains(&key) {
                continue;
            }
            written.insert(key);
            let (t, gpu, pid) = (oom.at_ms, fold.gpu_of_oom(oom), fold.host_pid);
            let figures = [
                ("oom_requested", &oom.requested),
                ("oom_device_free", &oom.device_free),
                ("oom_allocated", &oom.allocated),
                ("oom_reserved", &oom.reserved),
            ];
            for (metric, value) in figures {
                if let Ok(v) = value {
                    row(self.out, t, "allocator", gpu, pid, metric, v)?;
                }
            }
            if let Some(step) = oom.step {
                row(self.out, t, "allocator", gpu, pid, "oom_step", step)?;
                since_attach(self.out, fold, (t, gpu, pid))?;
            }
            let fatal = match oom.outcome {
                OomOutcome::Fatal => Some(1),
                OomOutcome::Caught => Some(0),
                OomOutcome::Pending => None,
            };
            if let Some(fatal) = fatal {
                row(self.out, t, "allocator", gpu, pid, "oom_fatal", fatal)?;
            }
        }
        Ok(())
    }

    /// At the end: the OOMs still pending, and each slot's true peak with its step.
    fn finish(&mut self) -> io::Result<()> {
        let paths: Vec<String> = self.folds.writers.keys().cloned().collect();
        for path in &paths {
            self.ooms(path, true)?;
        }
        for fold in self.folds.writers.values() {
            for slot in &fold.slots {
                let Some(peak) = slot.true_peak() else {
                    continue;
                };
                let (t, gpu, pid) = (peak.at_ms, slot.gpu, fold.host_pid);
                row(
                    self.out,
                    t,
                    "allocator",
                    gpu,
                    pid,
                    process::TRUE_PEAK.key,
                    peak.value,
                )?;
                if let Some(step) = peak.step {
                    row(self.out, t, "allocator", gpu, pid, "true_peak_step", step)?;
                    since_attach(self.out, fold, (t, gpu, pid))?;
                }
            }
        }
        Ok(())
    }
}

/// After a step row of a writer that counts from its attach: `steps_since_attach` 1, so the
/// step is not read as the job's own (nothing after the job's own steps).
fn since_attach(
    out: &mut impl Write,
    fold: &WriterFold,
    (t, gpu, pid): (u64, Option<u32>, Option<u32>),
) -> io::Result<()> {
    match fold.steps_from {
        StepOrigin::Attach => row(
            out,
            t,
            "allocator",
            gpu,
            pid,
            STEPS_SINCE_ATTACH,
            StepOrigin::Attach.since_attach(),
        ),
        StepOrigin::Job => Ok(()),
    }
}

fn row(
    out: &mut impl Write,
    at_ms: u64,
    entity: &str,
    gpu: Option<u32>,
    pid: Option<u32>,
    metric: &str,
    value: impl std::fmt::Display,
) -> io::Result<()> {
    let gpu = gpu.map_or(String::new(), |g| g.to_string());
    let pid = pid.map_or(String::new(), |p| p.to_string());
    writeln!(out, "{at_ms},{entity},{gpu},{pid},{metric},{value}")
}
