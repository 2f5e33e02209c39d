//! What a plot shows, independent of how it is drawn: one panel per GPU with its series
//! (already downsampled), the device limit, OOMs and steps.

use super::downsample::Bucket;
use super::steps::StepSpan;
use crate::model::Periods;
use crate::model::writer_fold::OomOutcome;

/// What a series measures; decides its colour and weight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// NVML's used memory of the whole GPU.
    GpuUsed,
    /// NVML's used memory of one process on the GPU.
    ProcessUsed,
    /// Bytes in live tensors (including spikes between two samples).
    Allocated,
    /// Bytes the caching allocator holds from the driver.
    Reserved,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::GpuUsed => "used (NVML)",
            Role::ProcessUsed => "NVML used",
            Role::Allocated => "allocated",
            Role::Reserved => "reserved",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Series {
    /// `GPU 0 used (NVML)` or `pid 4242 python train.py [PyTorch]: allocated`.
    pub label: String,
    pub role: Role,
    /// Which instrumented process of the panel the series belongs to (colours follow it).
    pub process: Option<usize>,
    pub buckets: Vec<Bucket>,
    /// A silence longer than this between two buckets breaks the line instead of bridging
    /// it: for NVML's series it follows the refresh period in force (the longest during the
    /// silence); `None` for writers that publish only on demand.
    pub gap_ms: Option<Periods>,
    /// Where the series' peak happened (`step 40, backward`), when it is the writer's true
    /// peak and the writer said.
    pub peak_where: Option<String>,
}

impl Series {
    /// The series' highest bucket (the first, if several tie).
    pub fn peak(&self) -> Option<&Bucket> {
        self.buckets
            .iter()
            .reduce(|best, b| if b.value > best.value { b } else { best })
    }

    /// The buckets split wherever the writer or sampler fell silent.
    pub fn segments(&self) -> Vec<&[Bucket]> {
        let mut out = Vec::new();
        let mut from = 0;
        for i in 1..self.buckets.len() {
            let (before, after) = (self.buckets[i - 1].last_ms, self.buckets[i].first_ms);
            let silent = after.saturating_sub(before);
            if self
                .gap_ms
                .as_ref()
                .is_some_and(|gap| silent > gap.max_within(before, after))
            {
                out.push(&self.buckets[from..i]);
                from = i;
            }
        }
        if from < self.buckets.len() {
            out.push(&self.buckets[from..]);
        }
        out
    }
}

/// An out-of-memory failure: one however many events told of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OomMark {
    pub at_ms: u64,
    /// Where to put the marker: the allocator's reserved (else allocated) bytes at the time.
    pub bytes: Option<u64>,
    pub requested: Option<u64>,
    pub device_free: Option<u64>,
    /// `step 80, forward`; empty when unknown.
    pub place: String,
    pub outcome: OomOutcome,
    pub pid: Option<u32>,
}

#[derive(Clone, Debug)]
pub struct Panel {
    /// `GPU 0 · NVIDIA H100 80GB HBM3`.
    pub title: String,
    /// The device's total memory.
    pub limit: Option<u64>,
    pub series: Vec<Series>,
    pub ooms: Vec<OomMark>,
    pub steps: Vec<StepSpan>,
    /// Whose steps are shaded (`pid 4242`), when a panel has several writers.
    pub steps_of: Option<String>,
    /// The writer logged more steps than were tracked: none are shaded.
    pub steps_overflow: bool,
}

impl Panel {
    pub fn new(title: String, limit: Option<u64>) -> Self {
        Panel {
            title,
            limit,
            series: Vec::new(),
            ooms: Vec::new(),
            steps: Vec::new(),
            steps_of: None,
            steps_overflow: false,
        }
    }

    /// The highest value of any series.
    pub fn top(&self) -> Option<u64> {
        self.series
            .iter()
            .filter_map(|s| s.peak().map(|b| b.value))
            .chain(self.ooms.iter().filter_map(|o| o.bytes))
            .max()
    }
}

#[derive(Clone, Debug)]
pub struct Contents {
    pub host: Option<String>,
    /// The time axis: first and last moment in the recording.
    pub first_ms: u64,
    pub last_ms: u64,
    pub panels: Vec<Panel>,
    /// OOMs beyond those kept for markers.
    pub ooms_dropped: u64,
    /// The recording stopped being readable here; what came before is plotted.
    pub damaged: Option<String>,
    /// What was skipped, being of kinds this vramscope does not know.
    pub skipped: Option<String>,
}

/// Text from a recording made safe for any output: XML refuses control characters even
/// escaped, and a label must stay on one line.
pub fn clean(text: &str, max_chars: usize) -> String {
    let visible: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let words = visible.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out: String = words.chars().take(max_chars).collect();
    if words.chars().count() > max_chars {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(first_ms: u64, last_ms: u64, value: u64) -> Bucket {
        Bucket {
            first_ms,
            last_ms,
            peak_ms: first_ms,
            value,
            points: 1,
        }
    }

    #[test]
    fn lines_break_at_silences_longer_than_the_gap() {
        let mut s = Series {
            label: String::new(),
            role: Role::GpuUsed,
            process: None,
            buckets: vec![
                bucket(0, 0, 1),
                bucket(1000, 1000, 5),
                bucket(9000, 9500, 2),
            ],
            gap_ms: Some(Periods::constant(5000)),
            peak_where: None,
        };
        assert_eq!(
            s.segments().iter().map(|x| x.len()).collect::<Vec<_>>(),
            [2, 1]
        );
        assert_eq!(s.peak().map(|b| b.value), Some(5));
        s.gap_ms = None;
        assert_eq!(s.segments().len(), 1);
    }

    #[test]
    fn labels_lose_control_characters_and_length() {
        assert_eq!(clean(" a\u{1}b\nc \u{1}", 10), "a b c");
        assert_eq!(clean("python train.py --lr 3e-4", 9), "python tr…");
    }
}
