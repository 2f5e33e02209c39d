//! Events found by comparing each snapshot with what the previous ones showed: a new OOM in
//! a writer's fold, a writer that ended, a new true peak above a share of its GPU, a step
//! that takes far longer than the median, a GPU with no process for a while. The snapshot is
//! the monitor's own (`state::Monitor::snapshot`); nothing here folds anything again. Each
//! event is found once: what was found is remembered per writer and per GPU, and a writer's
//! memory goes when the snapshot no longer carries it.

use super::event::Event;
use super::spec::Kind;
use crate::model::figures::process::STEPS_FROM;
use crate::model::{AllocatorSnapshot, Snapshot};
use serde_json::json;
use std::collections::{HashMap, VecDeque};

/// A hang is said only after this long without a step, whatever the median: the monitor
/// sees steps once a refresh, not as they end.
pub const HANG_FLOOR_MS: u64 = 3_000;
/// Step times kept per writer for the median.
const STEP_TIMES: usize = 32;
/// Step times needed before a median is trusted.
const STEP_TIMES_NEEDED: usize = 3;

/// The thresholds of the kinds asked for; a kind not asked for is not looked for.
#[derive(Clone, Debug, Default)]
pub struct Wanted {
    pub oom: bool,
    pub exit: bool,
    pub hang_factor: Option<f64>,
    pub peak_share: Option<f64>,
    pub free_after_ms: Option<u64>,
}

/// What earlier snapshots showed.
#[derive(Debug)]
pub struct Detector {
    wanted: Wanted,
    /// When watching began: OOMs and peaks from before it are history, not news.
    started_ms: u64,
    /// The pid of the job `vramscope run` started: its end is said with its status
    /// (`job_ended`), not as a writer's.
    job_pid: Option<u32>,
    writers: HashMap<String, WriterSeen>,
    /// Per GPU index: since when it has listed no process, and whether that was said.
    idle: HashMap<u32, (u64, bool)>,
}

#[derive(Debug, Default)]
struct WriterSeen {
    /// The newest OOM said: its time, and how many OOMs at that time were.
    oom_mark: (u64, usize),
    running: bool,
    /// Per GPU index, the highest true peak said (or standing when watching began).
    peaks: HashMap<u32, u64>,
    /// The last step seen, when it was first seen, and whether its hang was said.
    step: Option<(u64, u64, bool)>,
    /// Recent time per step, in ms.
    step_ms: VecDeque<u64>,
}

impl Detector {
    pub fn new(wanted: Wanted, started_ms: u64) -> Detector {
        Detector {
            wanted,
            started_ms,
            job_pid: None,
            writers: HashMap::new(),
            idle: HashMap::new(),
        }
    }

    pub fn watch_job(&mut self, pid: u32) {
        self.job_pid = Some(pid);
    }

    /// The events `snapshot` shows that earlier ones did not.
    pub fn observe(&mut self, snapshot: &Snapshot) -> Vec<(Kind, Event)> {
        let mut events = Vec::new();
        let now = snapshot.taken_at_ms;
        for writer in &snapshot.allocators {
            let started_ms = self.started_ms;
            let seen = self
                .writers
                .entry(writer.identity.file.clone())
                .or_insert_with(|| first_sight(writer, started_ms));
            if self.wanted.oom {
                events.extend(new_ooms(writer, seen, now));
            }
            if self.wanted.exit {
                let ended = writer.liveness.is_ended();
                let ours = writer.host_pid.is_some() && writer.host_pid == self.job_pid;
                if seen.running && ended && !ours {
                    events.push(writer_exit(writer, now));
                }
            }
            seen.running = writer.liveness.is_running();
            if let Some(share) = self.wanted.peak_share {
                events.extend(new_peaks(writer, seen, snapshot, share, now));
            }
            if let Some(factor) = self.wanted.hang_factor {
                events.extend(hang(writer, seen, factor, now));
            }
        }
        let present: std::collections::HashSet<&str> = snapshot
            .allocators
            .iter()
            .map(|w| w.identity.file.as_str())
            .collect();
        self.writers
            .retain(|file, _| present.contains(file.as_str()));
        if let Some(after) = self.wanted.free_after_ms {
            events.extend(self.free_gpus(snapshot, after));
        }
        events
    }

    /// The job `vramscope run` started has ended.
    pub fn job_ended(&self, pid: u32, code: u8, text: &str, at_ms: u64) -> Option<(Kind, Event)> {
        if !self.wanted.exit {
            return None;
        }
        let mut event = Event::new(Kind::Exit, at_ms, format!("job {pid} {text}"));
        event.pid = Some(pid);
        event.details = json!({ "status": code, "how": text, "job": true });
        Some((Kind::Exit, event))
    }

    fn free_gpus(&mut self, snapshot: &Snapshot, after_ms: u64) -> Vec<(Kind, Event)> {
        let mut events = Vec::new();
        let now = snapshot.taken_at_ms;
        for device in &snapshot.devices {
            let index = device.info.index;
            // An unreadable list says nothing either way: the count goes on.
            let Some(Ok(listed)) = device.sample.as_ref().map(|s| &s.processes) else {
                continue;
            };
            if !listed.is_empty() {
                self.idle.remove(&index);
                continue;
            }
            let (since, said) = self.idle.entry(index).or_insert((now, false));
            if !*said && now.saturating_sub(*since) >= after_ms {
                *said = true;
                let idle_s = now.saturating_sub(*since) / 1000;
                let mut event = Event::new(
                    Kind::Free,
                    now,
                    format!("GPU {index} has had no process for {idle_s} s"),
                );
                event.gpu = Some(index);
                event.details = json!({ "idle_s": idle_s, "memory_used": device.memory_used() });
                events.push((Kind::Free, event));
            }
        }
        events
    }
}

/// What a writer already showed when first seen: OOMs and peaks from before watching began
/// are not news; those after it (a writer that appeared and failed between two
/// snapshots) are.
fn first_sight(writer: &AllocatorSnapshot, started_ms: u64) -> WriterSeen {
    let old: Vec<u64> = writer
        .ooms
        .iter()
        .map(|o| o.at_ms)
        .filter(|at| *at < started_ms)
        .collect();
    let mark = old
        .iter()
        .max()
        .map_or((0, 0), |m| (*m, old.iter().filter(|a| *a == m).count()));
    let mut peaks = HashMap::new();
    for (i, peak) in writer.peaks.iter().enumerate() {
        if let (Some(peak), Some(Some(gpu))) = (peak, writer.gpu_indices.get(i))
            && peak.at_ms < started_ms
        {
            peaks.insert(*gpu, peak.value);
        }
    }
    WriterSeen {
        oom_mark: mark,
        running: false,
        peaks,
        step: None,
        step_ms: VecDeque::new(),
    }
}

/// The writer's identity on an event.
fn about(writer: &AllocatorSnapshot, mut event: Event, gpu: Option<u32>) -> Event {
    event.pid = writer.host_pid.or(Some(writer.identity.pid));
    event.gpu = gpu;
    event.rank = writer.identity.rank;
    event.job = Some(writer.identity.job_id.clone());
    event.command = Some(writer.identity.command.clone());
    event
}

fn who(writer: &AllocatorSnapshot) -> String {
    match writer.host_pid {
        Some(pid) => format!("pid {pid}"),
        None => format!("pid {} (its own namespace)", writer.identity.pid),
    }
}

fn new_ooms(writer: &AllocatorSnapshot, seen: &mut WriterSeen, now: u64) -> Vec<(Kind, Event)> {
    let (mark_at, mark_count) = seen.oom_mark;
    let mut at_mark = 0;
    let mut events = Vec::new();
    // Each OOM on the GPU the fold placed it (`WriterFold::gpu_of_oom`), as every output says.
    let placed = writer.ooms.iter().zip(&writer.oom_gpus);
    for (oom, gpu) in placed {
        if oom.at_ms < mark_at {
            continue;
        }
        if oom.at_ms == mark_at {
            at_mark += 1;
            if at_mark <= mark_count {
                continue;
            }
        }
        let gpu = *gpu;
        let requested = oom.requested.as_ref().ok().copied();
        let where_ = gpu.map_or(String::new(), |g| format!(" on GPU {g}"));
        let summary = match requested {
            Some(bytes) => format!("OOM in {}{where_}: {bytes} bytes asked", who(writer)),
            None => format!("OOM in {}{where_}", who(writer)),
        };
        let mut event = about(writer, Event::new(Kind::Oom, now, summary), gpu);
        event.details = json!({
            "requested": requested,
            "device_free": oom.device_free.as_ref().ok(),
            "device_total": oom.device_total.as_ref().ok(),
            "allocated": oom.allocated.as_ref().ok(),
            "reserved": oom.reserved.as_ref().ok(),
            "step": oom.step,
            (STEPS_FROM.key): writer.steps_from.key(),
            "phase": crate::text::clean(&oom.phase),
            "message": oom.message.as_deref().map(crate::text::clean),
            "oom_at_ms": oom.at_ms,
        });
        events.push((Kind::Oom, event));
    }
    if let Some(last) = writer.ooms.last() {
        let count = writer.ooms.iter().filter(|o| o.at_ms == last.at_ms).count();
        if last.at_ms >= mark_at {
            seen.oom_mark = (last.at_ms, count);
        }
    }
    events
}

fn writer_exit(writer: &AllocatorSnapshot, now: u64) -> (Kind, Event) {
    let (crashed, error) = match writer.liveness {
        crate::model::WriterLiveness::Ended { crashed, error } => (crashed, error),
        _ => (false, false),
    };
    let how = match (crashed, error) {
        (true, _) => "ended without a word (killed or crashed)",
        (false, true) => "ended by an uncaught error",
        (false, false) => "ended cleanly",
    };
    let summary = format!("{} {how}", who(writer));
    let gpu = writer.gpu_indices.iter().flatten().next().copied();
    let mut event = about(writer, Event::new(Kind::Exit, now, summary), gpu);
    event.details = json!({ "crashed": crashed, "error": error, "step": writer.step,
            (STEPS_FROM.key): writer.steps_from.key(), "job": false });
    (Kind::Exit, event)
}

fn new_peaks(
    writer: &AllocatorSnapshot,
    seen: &mut WriterSeen,
    snapshot: &Snapshot,
    share: f64,
    now: u64,
) -> Vec<(Kind, Event)> {
    let mut events = Vec::new();
    for (i, peak) in writer.peaks.iter().enumerate() {
        let (Some(peak), Some(Some(gpu))) = (peak, writer.gpu_indices.get(i)) else {
            continue;
        };
        let total = snapshot
            .devices
            .iter()
            .find(|d| d.info.index == *gpu)
            .and_then(|d| d.memory_total());
        let Some(total) = total.filter(|t| *t > 0) else {
            continue;
        };
        let said = seen.peaks.get(gpu).copied().unwrap_or(0);
        #[allow(
            clippy::cast_precision_loss,
            reason = "a share of memory, not an exact count"
        )]
        let above = peak.value as f64 >= share * total as f64;
        if peak.value > said && above {
            seen.peaks.insert(*gpu, peak.value);
            #[allow(
                clippy::cast_precision_loss,
                reason = "a share of memory, not an exact count"
            )]
            let percent = 100.0 * peak.value as f64 / total as f64;
            let summary = format!(
                "new peak in {} on GPU {gpu}: {} bytes, {percent:.0}% of the GPU",
                who(writer),
                peak.value
            );
            let mut event = about(writer, Event::new(Kind::Peak, now, summary), Some(*gpu));
            event.details = json!({
                "peak": peak.value,
                "gpu_total": total,
                "step": peak.step,
                (STEPS_FROM.key): writer.steps_from.key(),
                "phase": crate::text::clean(&peak.phase),
                "peak_at_ms": peak.at_ms,
            });
            events.push((Kind::Peak, event));
        }
    }
    events
}

fn hang(
    writer: &AllocatorSnapshot,
    seen: &mut WriterSeen,
    factor: f64,
    now: u64,
) -> Option<(Kind, Event)> {
    let step = writer.step?;
    match seen.step {
        Some((last, since, _)) if step > last => {
            let per_step = now.saturating_sub(since) / (step - last);
            if seen.step_ms.len() == STEP_TIMES {
                seen.step_ms.pop_front();
            }
            seen.step_ms.push_back(per_step);
            seen.step = Some((step, now, false));
            return None;
        }
        Some((last, _, _)) if step == last => {}
        _ => {
            seen.step = Some((step, now, false));
            return None;
        }
    }
    let (last, since, said) = seen.step?;
    if said || !writer.liveness.is_running() || seen.step_ms.len() < STEP_TIMES_NEEDED {
        return None;
    }
    let mut times: Vec<u64> = seen.step_ms.iter().copied().collect();
    times.sort_unstable();
    let median = times[times.len() / 2];
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "milliseconds, far inside both types"
    )]
    let limit = ((median as f64 * factor) as u64).max(HANG_FLOOR_MS);
    let waited = now.saturating_sub(since);
    if waited < limit {
        return None;
    }
    seen.step = Some((last, since, true));
    let gpu = writer.gpu_indices.iter().flatten().next().copied();
    let summary = format!(
        "{} has been on {} for {} s (median step {median} ms)",
        who(writer),
        writer.steps_from.words(last),
        waited / 1000
    );
    let mut event = about(writer, Event::new(Kind::Hang, now, summary), gpu);
    event.details = json!({ "step": last, (STEPS_FROM.key): writer.steps_from.key(),
        "waited_ms": waited, "median_step_ms": median });
    Some((Kind::Hang, event))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::WriterLiveness;
    use crate::model::writer_fold::WriterFold;
    use crate::model::writer_fold::test_support::{event, oom, poll};

    fn snapshot_of(fold: &WriterFold, at_ms: u64) -> Snapshot {
        Snapshot {
            taken_at_ms: at_ms,
            driver: None,
            nvml_problem: None,
            devices: Vec::new(),
            processes: Vec::new(),
            exited: Vec::new(),
            host_memory: None,
            host_load: None,
            allocators: AllocatorSnapshot::of(fold).into_iter().collect(),
            rejected_channels: Vec::new(),
        }
    }

    fn kinds(events: &[(Kind, Event)]) -> Vec<&'static str> {
        events.iter().map(|(k, _)| k.name()).collect()
    }

    #[test]
    fn an_oom_from_before_watching_is_not_news_and_a_new_one_is_said_once() {
        let wanted = Wanted {
            oom: true,
            exit: true,
            ..Wanted::default()
        };
        let mut detector = Detector::new(wanted, 1_000);
        let mut fold = WriterFold::default();
        fold.ingest(poll(Vec::new(), vec![event(100, oom(6), "")]), 100);
        assert!(detector.observe(&snapshot_of(&fold, 1_000)).is_empty());
        fold.ingest(poll(Vec::new(), vec![event(2_000, oom(7), "")]), 2_000);
        let events = detector.observe(&snapshot_of(&fold, 2_000));
        assert_eq!(kinds(&events), ["oom"]);
        assert_eq!(events[0].1.details["requested"], serde_json::json!(7));
        assert_eq!(events[0].1.pid, Some(7));
        assert!(detector.observe(&snapshot_of(&fold, 2_500)).is_empty());
        // Ended after it was seen running: one exit, then nothing more.
        let mut ended = poll(Vec::new(), Vec::new());
        ended.liveness = WriterLiveness::Ended {
            crashed: false,
            error: true,
        };
        fold.ingest(ended, 3_000);
        let events = detector.observe(&snapshot_of(&fold, 3_000));
        assert_eq!(kinds(&events), ["exit"]);
        assert_eq!(events[0].1.details["error"], serde_json::json!(true));
        assert!(detector.observe(&snapshot_of(&fold, 3_500)).is_empty());
    }

    #[test]
    fn the_job_run_started_ends_with_its_status_not_as_a_writer() {
        let wanted = Wanted {
            exit: true,
            ..Wanted::default()
        };
        let mut detector = Detector::new(wanted, 0);
        detector.watch_job(7);
        let mut fold = WriterFold::default();
        fold.ingest(poll(Vec::new(), Vec::new()), 10);
        assert!(detector.observe(&snapshot_of(&fold, 10)).is_empty());
        let mut ended = poll(Vec::new(), Vec::new());
        ended.liveness = WriterLiveness::Ended {
            crashed: true,
            error: false,
        };
        fold.ingest(ended, 20);
        assert!(detector.observe(&snapshot_of(&fold, 20)).is_empty());
        let (kind, event) = detector
            .job_ended(7, 137, "killed by signal 9", 30)
            .unwrap();
        assert_eq!(kind, Kind::Exit);
        assert_eq!(event.details["status"], serde_json::json!(137));
    }
}
