//! What instrumented programs published: each channel's latest figures, its history of
//! allocated and reserved per device (every writer sample, not one per poll), its step ticks
//! and its recent events. Kept after the writer ends, marked ended, because the last figures
//! before a crash are what the user came for.

use crate::history::{Lingering, Series, SeriesConfig};
use crate::model::allocator::{RowProcess, SlotPeaks, joined_channel};
use crate::model::held_sites::SitesJob;
use crate::model::held_sites::SitesState;
use crate::model::mig::MigUuid;
use crate::model::writer_fold::{SlotFold, WriterFold};
use crate::model::{AllocatorSnapshot, ChannelBatch, ChannelPoll, DeviceInfo};

/// At most this many channels are remembered; the longest-silent one goes first.
const MAX_CHANNELS: usize = 512;
/// How long a channel no longer read (file removed, closed, unreachable) stays on screen.
const LINGER_MS: u64 = 10 * 60 * 1000;
/// Device slots a channel can have (the spec's limit).
const MAX_SLOTS: usize = 64;

/// The history of one device slot of one channel.
#[derive(Clone)]
pub struct SlotSeries {
    pub allocated: Series,
    pub reserved: Series,
}

impl Default for SlotSeries {
    fn default() -> Self {
        SlotSeries {
            allocated: Series::new(SeriesConfig::process()),
            reserved: Series::new(SeriesConfig::process()),
        }
    }
}

/// One channel's state: its writer's stream folded (`WriterFold`, the fold every output
/// reads), and the history the charts draw.
#[derive(Clone, Default)]
pub struct ChannelState {
    pub fold: WriterFold,
    /// Indexed by slot.
    pub slots: Vec<SlotSeries>,
}

impl ChannelState {
    fn ingest(&mut self, poll: ChannelPoll, at_ms: u64) {
        for point in &poll.points {
            let slot = usize::from(point.slot);
            if slot >= MAX_SLOTS {
                continue;
            }
            if self.slots.len() <= slot {
                self.slots.resize_with(slot + 1, SlotSeries::default);
            }
            let series = &mut self.slots[slot];
            // The interval peak is what a poller misses: fold it into the plotted maximum so
            // the chart's column for this instant reaches the spike.
            let top = match (point.peak, point.allocated) {
                (Some(p), Some(a)) => Some(p.max(a)),
                (p, a) => p.or(a),
            };
            if let Some(top) = top {
                series.allocated.push(point.at_ms, top as f64);
            }
            if let Some(reserved) = point.reserved {
                series.reserved.push(point.at_ms, reserved as f64);
            }
        }
        self.fold.ingest(poll, at_ms);
    }

    /// The channel's slot that NVML knows as `gpu_index`, and its history.
    pub fn on_gpu(&self, gpu_index: u32) -> Option<(&SlotFold, Option<&SlotSeries>)> {
        let (position, slot) = self.fold.slot_on(gpu_index)?;
        Some((slot, self.slots.get(position)))
    }
}

/// Every channel seen, keyed by its file's path.
#[derive(Clone)]
pub struct Allocators {
    channels: Lingering<String, ChannelState>,
    /// The last pass's refused files, for the status line.
    rejected: Vec<String>,
}

impl Default for Allocators {
    fn default() -> Self {
        Allocators {
            channels: Lingering::new(LINGER_MS, MAX_CHANNELS),
            rejected: Vec::new(),
        }
    }
}

impl Allocators {
    /// Channels no longer read stay `linger_ms` (never less than they usually do).
    pub fn lingering(linger_ms: u64) -> Self {
        Allocators {
            channels: Lingering::new(linger_ms.max(LINGER_MS), MAX_CHANNELS),
            ..Self::default()
        }
    }

    /// About how much memory the channels' histories take (`Series::memory_bytes`).
    pub fn history_bytes(&self) -> usize {
        self.channels
            .iter()
            .flat_map(|(_, channel)| &channel.slots)
            .map(|slot| slot.allocated.memory_bytes() + slot.reserved.memory_bytes())
            .sum()
    }

    pub fn ingest(&mut self, batch: ChannelBatch) {
        for poll in batch.polls {
            let key = poll.path.clone();
            self.channels
                .touch(key, batch.at_ms)
                .ingest(poll, batch.at_ms);
        }
        for (path, why) in &batch.gone {
            let Some(state) = self.channels.get_mut(path) else {
                continue;
            };
            state.fold.gone(*why);
        }
        self.evict(batch.at_ms);
        self.rejected = batch.rejected;
    }

    /// Forgets channels no longer read for longer than the linger time. Called with every
    /// GPU sample too, since a quiet channel sampler sends nothing.
    pub fn evict(&mut self, now_ms: u64) {
        self.channels.evict(now_ms);
    }

    pub fn rejected(&self) -> &[String] {
        &self.rejected
    }

    /// The channel of the process NVML lists as `host_pid`: the one its row joins in the
    /// snapshot (`joined_channel`).
    pub fn for_pid(&self, host_pid: u32, process: RowProcess) -> Option<&ChannelState> {
        let candidates = self
            .channels
            .iter()
            .map(|(_, state)| state)
            .filter(|s| s.fold.host_pid == Some(host_pid) && s.fold.identity.is_some());
        let starttime = |s: &ChannelState| s.fold.identity.as_ref().and_then(|i| i.starttime());
        joined_channel(candidates, |s| s.fold.liveness, starttime, process)
    }

    /// Resolves every channel's GPUs (`WriterFold::resolve_gpus`); `listed_on(pid)` gives
    /// the GPUs whose last readable process list names the pid (`GpuLists`).
    pub fn resolve_gpus(
        &mut self,
        devices: &[DeviceInfo],
        instances: &[MigUuid],
        listed_on: impl Fn(u32) -> Vec<u32>,
    ) {
        for (_, state) in self.channels.iter_mut() {
            let listed = state.fold.host_pid.map(&listed_on).unwrap_or_default();
            state.fold.resolve_gpus(devices, instances, &listed);
        }
    }

    /// Every channel, as its fold says, with its charts' all-time peaks.
    pub fn snapshot(&self) -> Vec<AllocatorSnapshot> {
        self.channels
            .iter()
            .filter_map(|(_, state)| {
                let mut snapshot = AllocatorSnapshot::of(&state.fold)?;
                snapshot.chart_peaks = snapshot
                    .devices
                    .iter()
                    .map(|d| {
                        let series = state.slots.get(usize::from(d.slot));
                        SlotPeaks {
                            allocated: series.and_then(|s| s.allocated.peak()),
                            reserved: series.and_then(|s| s.reserved.peak()),
                        }
                    })
                    .collect();
                Some(snapshot)
            })
            .collect()
    }

    /// The channel read from `path`.
    pub fn channel(&self, path: &str) -> Option<&ChannelState> {
        self.channels.get(path)
    }

    /// The snapshots to reduce now: each channel's relevant one (`relevant_snapshot`) not
    /// yet read, marked as being read.
    pub fn reductions_wanted(&mut self) -> Vec<SitesJob> {
        let mut jobs = Vec::new();
        for (path, state) in self.channels.iter_mut() {
            let Some(note) = state.fold.relevant_snapshot() else {
                continue;
            };
            if note.sites != SitesState::NotRead {
                continue;
            }
            if let Some(job) = SitesJob::of(path, note) {
                state.fold.set_sites(&job.path, SitesState::Reading);
                jobs.push(job);
            }
        }
        jobs
    }

    /// What reducing a snapshot said (or, `NotRead`, that it was not done after all).
    pub fn sites_done(&mut self, channel: &str, path: &str, sites: SitesState) {
        if let Some(state) = self.channels.get_mut(&channel.to_string()) {
            state.fold.set_sites(path, sites);
        }
    }

    /// Forget true peaks (the `r` key), as for NVML's peaks.
    pub fn reset_peaks(&mut self) {
        for (_, state) in self.channels.iter_mut() {
            state.fold.reset_peaks();
            for slot in &mut state.slots {
                slot.allocated.reset_peak();
                slot.reserved.reset_peak();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::writer_fold::test_support::{device, info, point, poll};
    use crate::model::{Gone, WriterLiveness};

    const LISTED: RowProcess = RowProcess::Listed { starttime: None };

    #[test]
    fn a_spike_between_two_polls_sets_the_true_peak_and_the_plotted_maximum() {
        let mut state = Allocators::default();
        let points = vec![
            point(1_000, 100, 100),
            point(1_050, 100, 900),
            point(1_100, 120, 120),
        ];
        let mut p = poll(points, vec![]);
        p.devices[0].allocated_peak = Ok(12 << 30);
        state.ingest(ChannelBatch {
            at_ms: 1_200,
            polls: vec![p],
            ..ChannelBatch::default()
        });
        state.resolve_gpus(&[info(4, "GPU-b", "00000000:3B:00.0")], &[], |_| vec![]);
        let snap = state.snapshot();
        assert_eq!(snap.len(), 1);
        // The framework's own peak counter (12 GiB) is higher still, and it wins, but where
        // it happened is not known.
        let peak = snap[0].peaks[0].as_ref().unwrap();
        assert_eq!((peak.value, peak.located), (12 << 30, false));
        assert_eq!(snap[0].gpu_indices, vec![Some(4)]);
        let channel = state.for_pid(7, LISTED).unwrap();
        let peak = channel.slots[0].allocated.peak().unwrap();
        assert_eq!((peak.value, peak.at_ms), (900.0, 1_050));
        assert_eq!(channel.slots[0].reserved.last(), Some((1_100, 220.0)));
    }

    #[test]
    fn a_removed_file_ends_its_channel_cleanly_and_a_live_pid_does_not_join_it() {
        let mut state = Allocators::default();
        state.ingest(ChannelBatch {
            at_ms: 1_000,
            polls: vec![poll(vec![], vec![])],
            ..ChannelBatch::default()
        });
        state.ingest(ChannelBatch {
            at_ms: 2_000,
            gone: vec![("/dev/shm/vramscope-0/7-9.vsc".into(), Gone::Removed)],
            rejected: vec!["x.vsc: wrong magic".into()],
            ..ChannelBatch::default()
        });
        // A live process with that pid (a reused one) must not show the ended writer's
        // figures; the exited row does.
        assert!(state.for_pid(7, LISTED).is_none());
        let channel = state.for_pid(7, RowProcess::Unlisted).unwrap();
        assert_eq!(
            channel.fold.liveness,
            WriterLiveness::Ended {
                crashed: false,
                error: false
            }
        );
        assert_eq!(state.rejected(), ["x.vsc: wrong magic"]);
    }

    #[test]
    fn a_listed_process_joins_its_own_ended_channel_never_a_dead_namesakes() {
        let mut state = Allocators::default();
        let mut ended = poll(vec![], vec![]);
        ended.liveness = WriterLiveness::Ended {
            crashed: false,
            error: true,
        };
        state.ingest(ChannelBatch {
            at_ms: 1_000,
            polls: vec![ended],
            ..ChannelBatch::default()
        });
        // The writer ended on its error; NVML still lists the process while it tears down:
        // the same process (the file `7-9.vsc` says start time 9) keeps its figures.
        let same = RowProcess::Listed { starttime: Some(9) };
        assert!(state.for_pid(7, same).is_some());
        // Pid 7 reused by a process started later: not the dead writer's.
        let reused = RowProcess::Listed {
            starttime: Some(10),
        };
        assert!(state.for_pid(7, reused).is_none());
        assert!(state.for_pid(7, LISTED).is_none());
    }

    #[test]
    fn figures_follow_their_slot_index_not_their_position() {
        let mut state = Allocators::default();
        let mut p = poll(
            vec![crate::model::AllocatorPoint {
                slot: 2,
                ..point(1_000, 100, 700)
            }],
            vec![],
        );
        // Only slot 2 is readable yet: it is the first and only device in the poll.
        p.devices[0].slot = 2;
        state.ingest(ChannelBatch {
            at_ms: 1_100,
            polls: vec![p],
            ..ChannelBatch::default()
        });
        state.resolve_gpus(&[info(4, "GPU-b", "00000000:3B:00.0")], &[], |_| vec![]);
        let channel = state.for_pid(7, LISTED).unwrap();
        assert_eq!(channel.slots.len(), 3);
        assert!(channel.slots[0].allocated.peak().is_none());
        assert_eq!(channel.slots[2].allocated.peak().unwrap().value, 700.0);
        let (slot, series) = channel.on_gpu(4).unwrap();
        assert_eq!(slot.device.as_ref().unwrap().slot, 2);
        assert_eq!(series.unwrap().allocated.last(), Some((1_000, 700.0)));
        // The snapshot's one device carries slot 2's charted peak, for a paused screen.
        let snapshot = state.snapshot();
        let peaks = &snapshot[0].chart_peaks;
        assert_eq!(peaks.len(), 1);
        assert_eq!(
            peaks[0].allocated.map(|p| (p.value, p.at_ms)),
            Some((700.0, 1_000))
        );
        assert_eq!(snapshot[0].slot_on_gpu(4), Some((0, 2)));
        let _ = device(None, None);
    }
}
