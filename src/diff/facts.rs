//! One run as the diff reads it: `report`'s summary of the recording (the one pass over it,
//! not a second fold), and the process that stands for the run: the instrumented process
//! with the highest allocated peak (of a job's ranks, the worst one), else none.

use super::knobs::{self, Knob};
use crate::report::{AllocatorSummary, ProcessSummary, Report};

/// One recording, summarised.
pub struct Run {
    /// The file's name as given, cleaned.
    pub name: String,
    pub report: Report,
    /// Which of `report.processes` stands for the run.
    chosen: Option<usize>,
}

impl Run {
    pub fn new(name: &str, report: Report) -> Run {
        let chosen = report
            .processes
            .iter()
            .enumerate()
            .filter_map(|(i, p)| Some((i, p.allocator.as_ref()?.peak_allocated.as_ref()?.value)))
            .max_by_key(|&(i, peak)| (peak, std::cmp::Reverse(i)))
            .map(|(i, _)| i)
            .or_else(|| report.processes.iter().position(|p| p.allocator.is_some()));
        Run {
            name: crate::text::clean(name).into_owned(),
            report,
            chosen,
        }
    }

    /// The process that stands for the run, when one was instrumented.
    pub fn process(&self) -> Option<&ProcessSummary> {
        self.report.processes.get(self.chosen?)
    }

    pub fn allocator(&self) -> Option<&AllocatorSummary> {
        self.process()?.allocator.as_ref()
    }

    /// The command line: the writer's own, else what the host said of the process.
    pub fn command(&self) -> Option<&str> {
        let writer = self
            .allocator()
            .map(|a| a.writer_command.as_str())
            .filter(|c| !c.is_empty());
        writer.or_else(|| self.process()?.command.as_deref())
    }

    pub fn batch_size(&self) -> Option<Knob> {
        knobs::batch_size(self.command()?)
    }

    pub fn sequence_length(&self) -> Option<Knob> {
        knobs::sequence_length(self.command()?)
    }

    /// The model of the GPU the chosen process ran on, else of every GPU recorded.
    pub fn gpu_model(&self) -> Option<String> {
        let gpus = &self.report.gpus;
        if let Some(p) = self.process()
            && let Some(gpu) = gpus.iter().find(|g| g.index == p.gpu_index)
        {
            return Some(gpu.name.clone());
        }
        let mut names: Vec<&str> = gpus.iter().map(|g| g.name.as_str()).collect();
        names.dedup();
        (!names.is_empty()).then(|| names.join(", "))
    }

    /// The highest NVML used figure of any GPU.
    pub fn gpu_peak_used(&self) -> Option<u64> {
        self.report
            .gpus
            .iter()
            .filter_map(|g| g.peak_used.as_ref().map(|p| p.value))
            .max()
    }

    pub fn peak_allocated(&self) -> Option<u64> {
        Some(self.allocator()?.peak_allocated.as_ref()?.value)
    }

    pub fn peak_reserved(&self) -> Option<u64> {
        Some(self.allocator()?.peak_reserved.as_ref()?.value)
    }

    /// Reserved beyond allocated at the allocated peak (report's figure).
    pub fn cache_at_peak(&self) -> Option<u64> {
        self.allocator()?.cache_at_peak
    }

    /// Who stands for the run: `pid 4242 rank 0 on GPU 0`.
    pub fn who(&self) -> Option<String> {
        let p = self.process()?;
        let rank = p
            .allocator
            .as_ref()
            .and_then(|a| a.rank)
            .map_or(String::new(), |r| format!(" rank {r}"));
        Some(format!("pid {}{rank} on GPU {}", p.pid, p.gpu_index))
    }
}
