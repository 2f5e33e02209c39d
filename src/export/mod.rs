//! `vramscope export FILE --csv`: a recording as a tidy long-format CSV, one row per time,
//! entity and metric, which pandas (`pd.read_csv`) and polars read in one line.
//!
//! Columns: `time_ms,entity,gpu,pid,metric,value`.
//! - `entity`: `gpu`, `process` (NVML's and the host's figures for a GPU process),
//!   `allocator` (what an instrumented process published, one row per writer sample), `host`.
//! - `gpu`: NVML's GPU index, empty where it does not apply or is unknown; `pid`: the host
//!   pid, empty for `gpu` and `host` rows.
//! - `metric` and its unit: `memory_used`, `memory_total` (bytes), `gpu_util`, `mem_util`
//!   (%), `temperature` (°C), `power` (mW), `sm_clock`, `mem_clock` (MHz) for GPUs;
//!   `used_memory`, `host_rss` (bytes), `sm_util` (%), `cpu_percent` (% of one core) for
//!   processes; `allocated`, `reserved`, `peak` (bytes), `step` for allocators, and
//!   `oom_requested` (bytes) at each OOM; `memory_used`, `memory_total` (bytes) for the host.
//! - A figure that could not be read has no row: absent is never written as 0.
//! - Every cell is a number or one of the words above, never foreign text, so no cell needs
//!   quoting or the spreadsheet-formula guard of `--csv` (`output::csv::formula_guard`); a
//!   text column added here must go through both.

use crate::model::{ChannelPoll, DeviceInfo, DeviceSample, EventKind, HostSample, Reading};
use crate::record::Recording;
use crate::record::scope::{self, Asked};
use crate::sources::runner::SourceEvent;
use std::collections::HashMap;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;

pub const HEADER: &str = "time_ms,entity,gpu,pid,metric,value";

/// Writes the part of `file` asked for (`record::scope`) as CSV to `out` (a path, or
/// standard output), saying on standard error what part that is.
pub fn run(file: &Path, out: Option<&Path>, asked: &Asked) -> ExitCode {
    let (recording, told) = match scope::open(file, asked) {
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
        None => Box::new(io::stdout().lock()),
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
        devices: Vec::new(),
        slot_gpu: HashMap::new(),
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
    out.flush()?;
    if let Some(skipped) = events.skipped_notice() {
        eprintln!("vramscope: {skipped}");
    }
    Ok(damage)
}

struct Rows<'a, W: Write> {
    out: &'a mut W,
    devices: Vec<DeviceInfo>,
    /// (channel path, slot) → NVML GPU index, once joined.
    slot_gpu: HashMap<(String, u16), Option<u32>>,
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
        let gpu = gpu.map_or(String::new(), |g| g.to_string());
        let pid = pid.map_or(String::new(), |p| p.to_string());
        writeln!(self.out, "{at_ms},{entity},{gpu},{pid},{metric},{value}")
    }

    fn event(&mut self, event: SourceEvent) -> io::Result<()> {
        match event {
            SourceEvent::Started { devices, .. } => self.devices = devices,
            SourceEvent::Device(sample) => self.device(&sample)?,
            SourceEvent::Host(sample) => self.host(&sample)?,
            SourceEvent::Channels(batch) => {
                for poll in &batch.polls {
                    self.poll(poll)?;
                }
            }
            // A recording gives a batch's members one by one.
            SourceEvent::NvmlUnavailable(_) | SourceEvent::Batch(_) => {}
        }
        Ok(())
    }

    fn device(&mut self, s: &DeviceSample) -> io::Result<()> {
        let (t, g) = (s.at_ms, Some(s.index));
        if let Ok(m) = &s.memory {
            self.row(t, "gpu", g, None, "memory_used", m.used)?;
            self.row(t, "gpu", g, None, "memory_total", m.total)?;
        }
        let figures: [(&str, &Reading<u32>); 6] = [
            ("gpu_util", &s.gpu_util),
            ("mem_util", &s.mem_util),
            ("temperature", &s.temperature_c),
            ("power", &s.power_mw),
            ("sm_clock", &s.sm_clock_mhz),
            ("mem_clock", &s.mem_clock_mhz),
        ];
        for (metric, value) in figures {
            if let Ok(v) = value {
                self.row(t, "gpu", g, None, metric, v)?;
            }
        }
        if let Ok(processes) = &s.processes {
            for p in processes {
                if let Ok(used) = p.used_memory {
                    self.row(t, "process", g, Some(p.pid), "used_memory", used)?;
                }
                if let Ok(sm) = p.sm_util {
                    self.row(t, "process", g, Some(p.pid), "sm_util", sm)?;
                }
            }
        }
        Ok(())
    }

    fn host(&mut self, s: &HostSample) -> io::Result<()> {
        if let Ok(m) = &s.memory {
            self.row(s.at_ms, "host", None, None, "memory_used", m.used)?;
            self.row(s.at_ms, "host", None, None, "memory_total", m.total)?;
        }
        for p in &s.processes {
            if let Ok(rss) = p.rss_bytes {
                self.row(s.at_ms, "process", None, Some(p.pid), "host_rss", rss)?;
            }
            if let Ok(cpu) = p.cpu_percent {
                self.row(s.at_ms, "process", None, Some(p.pid), "cpu_percent", cpu)?;
            }
        }
        Ok(())
    }

    fn poll(&mut self, poll: &ChannelPoll) -> io::Result<()> {
        for d in &poll.devices {
            let gpu = crate::model::writer_fold::gpu_index_of(d, &self.devices);
            let known = self
                .slot_gpu
                .entry((poll.path.clone(), d.slot))
                .or_insert(gpu);
            if known.is_none() {
                *known = gpu;
            }
        }
        let pid = poll.host_pid;
        for p in &poll.points {
            let gpu = self
                .slot_gpu
                .get(&(poll.path.clone(), p.slot))
                .copied()
                .flatten();
            let figures = [
                ("allocated", p.allocated),
                ("reserved", p.reserved),
                ("peak", p.peak),
                ("step", p.step),
            ];
            for (metric, value) in figures {
                if let Some(v) = value {
                    self.row(p.at_ms, "allocator", gpu, pid, metric, v)?;
                }
            }
        }
        for e in &poll.events {
            if let EventKind::Oom { requested, .. } | EventKind::OomError { requested } = &e.kind {
                let gpu = e
                    .slot
                    .and_then(|s| self.slot_gpu.get(&(poll.path.clone(), s)).copied())
                    .flatten();
                if let Ok(bytes) = requested {
                    self.row(e.at_ms, "allocator", gpu, pid, "oom_requested", bytes)?;
                }
            }
        }
        Ok(())
    }
}
