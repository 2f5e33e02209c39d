//! The process table's rows: live (process, GPU) pairs from the snapshot plus the recently
//! exited ones it carries, filtered and sorted as the person asked. A pure function of the
//! snapshot and the UI state: the key handler uses the same function to move the selection,
//! so the order is fully deterministic, and a paused screen's rows are those of its moment.

use super::ui_state::{SortColumn, UiState};
use crate::history::Peak;
use crate::model::allocator::RowProcess;
use crate::model::{
    Absent, HostProcess, PodInfo, ProcessAllocator, ProcessKind, Reading, Snapshot,
};
use crate::state::ProcessKey;
use crate::terminal_kit::filter::Filter;
use std::cmp::Ordering;
use std::sync::Arc;

/// One row of the process table: a process on one GPU.
#[derive(Clone, Debug, PartialEq)]
pub struct TableRow {
    /// The host pid (as NVML reports it) and the GPU.
    pub key: ProcessKey,
    pub gpu_index: u32,
    pub vram: Reading<u64>,
    /// VRAM as a percentage of the GPU's total memory, or of its MIG instance's (`mig`).
    pub vram_pct: Option<f64>,
    /// The MIG instance it runs in, on a GPU in MIG mode: its VRAM share is of the
    /// instance, all it can use.
    pub mig: Option<crate::model::mig::RowInstance>,
    /// Highest VRAM seen for this process on this GPU.
    pub vram_peak: Option<Peak>,
    /// Highest host RSS seen for this process.
    pub rss_peak: Option<Peak>,
    pub sm: Reading<u32>,
    /// Which of NVML's lists the process is on; `None` once it left them.
    pub kind: Option<ProcessKind>,
    /// Host RSS as a percentage of the host's RAM.
    pub host_mem_pct: Option<f64>,
    /// When the process started (ms since the epoch); `None` in a replay, whose start times
    /// count from another boot than this machine's.
    pub started_ms: Option<u64>,
    /// What the host pass read of the process, shared with the snapshot rather than copied;
    /// `None` for an exited process or one the host pass has not matched.
    host: Option<Arc<HostProcess>>,
    /// The last user and command seen, for rows whose host facts lack them (exited ones).
    remembered_user: Option<String>,
    remembered_command: Option<String>,
    /// The pod of an exited row, which has no host facts any more.
    remembered_pod: Option<PodInfo>,
    /// When NVML last listed the process, for rows that are no longer listed.
    pub exited_at: Option<u64>,
    /// A row no longer listed whose process still runs: it left the GPU, it did not exit.
    pub left_gpu: bool,
    /// What the process's allocator publishes for this GPU, when it is instrumented. Boxed:
    /// it is large, and rows are moved when sorted every frame.
    pub allocator: Option<Box<ProcessAllocator>>,
}

impl TableRow {
    /// The pid in vramscope's namespace; `None` when not visible here (or the process exited).
    pub fn local_pid(&self) -> Option<u32> {
        self.host.as_ref()?.local_pid
    }

    /// The host pass has read the process and cannot see it from vramscope's pid namespace
    /// (the `PID*` mark). A process first seen, which no host pass has read yet, is not.
    pub fn not_visible_here(&self) -> bool {
        !self.is_exited() && self.host.as_ref().is_some_and(|h| h.local_pid.is_none())
    }

    /// The host facts the row shows, the ones a signal must match.
    pub fn host(&self) -> Option<&HostProcess> {
        self.host.as_deref()
    }

    /// Host RSS, when read.
    pub fn rss(&self) -> Option<u64> {
        self.host.as_ref()?.rss_bytes.as_ref().ok().copied()
    }

    /// Host CPU %, when read.
    pub fn cpu(&self) -> Option<f32> {
        self.host.as_ref()?.cpu_percent.as_ref().ok().copied()
    }

    pub fn user(&self) -> Option<&str> {
        let read = self.host.as_ref().and_then(|h| h.user.as_deref().ok());
        read.or(self.remembered_user.as_deref())
    }

    pub fn command(&self) -> Option<&str> {
        let read = self.host.as_ref().and_then(|h| h.command.as_deref().ok());
        read.or(self.remembered_command.as_deref())
    }

    /// Short container id.
    pub fn container(&self) -> Option<&str> {
        self.host.as_ref()?.container.as_deref()
    }

    /// The Kubernetes pod it runs in.
    pub fn pod(&self) -> Option<&PodInfo> {
        match &self.host {
            Some(host) => host.pod.as_ref(),
            None => self.remembered_pod.as_ref(),
        }
    }

    /// No longer on its GPU's list: exited, or (see `left_gpu`) still running elsewhere.
    pub fn is_exited(&self) -> bool {
        self.exited_at.is_some()
    }

    /// The row's process as the join with its channels sees it, so that the detail pane
    /// reads the channel the snapshot joined to this row (`joined_channel`).
    pub fn process(&self) -> RowProcess {
        if self.is_exited() {
            RowProcess::Unlisted
        } else {
            RowProcess::listed(self.host.as_deref())
        }
    }

    /// `exited 2m ago`, or `left GPU 2m ago` for a process that still runs; `short` drops
    /// the `ago` (`left GPU 10m ago` is wider than the table's VRAM column).
    pub fn gone_label(&self, now_ms: u64, short: bool) -> Option<String> {
        let at = self.exited_at?;
        let age = crate::model::time::age_label(at, now_ms);
        let label = if !self.left_gpu {
            format!("exited {age}")
        } else if short {
            format!("left GPU {}", age.trim_end_matches(" ago"))
        } else {
            format!("left GPU {age}")
        };
        Some(label)
    }

    /// Allocated, reserved or true peak, for the allocator columns.
    pub fn allocator_figure(&self, column: SortColumn) -> Option<u64> {
        let allocator = self.allocator.as_ref()?;
        let reading = match column {
            SortColumn::Allocated => &allocator.device.allocated,
            SortColumn::Reserved => &allocator.device.reserved,
            SortColumn::AllocPeak => return allocator.peak.as_ref().map(|p| p.value),
            _ => return None,
        };
        reading.as_ref().ok().copied()
    }

    pub fn allocator_step(&self) -> Option<u64> {
        self.allocator.as_ref()?.step
    }

    /// The rank its writer reports.
    pub fn rank(&self) -> Option<i32> {
        self.allocator.as_ref()?.rank
    }

    fn matches(&self, filter: &Filter) -> bool {
        if !filter.on_gpu(self.gpu_index) {
            return false;
        }
        let needle_lower = filter.text.as_str();
        if needle_lower.is_empty() {
            return true;
        }
        let hit = |text: &str| text.to_lowercase().contains(needle_lower);
        hit(&self.key.pid.to_string())
            || self.user().is_some_and(hit)
            || self.command().is_some_and(hit)
            || self.container().is_some_and(hit)
            || self.pod().is_some_and(|pod| {
                // As the POD column shows it (`ml-team/trainer-0:trainer`), and the uid.
                hit(&pod.full_label()) || hit(&pod.uid)
            })
            || self.mig.as_ref().is_some_and(|i| {
                // Its MIG instance: the profile (`1g.10gb`) or the GPU instance (`GI 3`).
                i.profile.as_deref().is_ok_and(hit)
                    || i.gpu_instance_id
                        .as_ref()
                        .is_ok_and(|gi| hit(&format!("GI {gi}")))
            })
    }
}

/// Some writer reports a rank: the table shows RANK (a torchrun job's rows all have the same
/// command, and only the rank tells them apart).
pub fn ranked(snapshot: &Snapshot) -> bool {
    snapshot
        .allocators
        .iter()
        .any(|a| a.identity.rank.is_some())
}

/// Some process runs in a Kubernetes pod: the table shows POD (when chosen, as by default).
pub fn in_pods(snapshot: &Snapshot) -> bool {
    let listed = |p: &crate::model::ProcessRow| p.host.as_ref().is_some_and(|h| h.pod.is_some());
    snapshot.processes.iter().any(listed) || snapshot.exited.iter().any(|e| e.pod.is_some())
}

/// How far (a share of the held figure) a process's VRAM must move before its row is sorted
/// by the new reading: allocators breathe by a few percent every refresh, and a table sorted
/// by the raw figure reshuffles rows of about equal size every second.
const VRAM_HOLD_SHARE: f64 = 0.10;

/// A move below this is always held, whatever the share: small processes jitter by a few MiB.
const VRAM_HOLD_MIN: u64 = 64 << 20;

/// Updates the VRAM each listed process is sorted by (`UiState::held_vram`): a reading that
/// moved more than `VRAM_HOLD_SHARE` of the held one (and more than `VRAM_HOLD_MIN`)
/// replaces it, one that moved less leaves the row where it is. Processes no longer listed
/// are forgotten.
pub fn hold_vram(ui: &mut UiState, snapshot: &Snapshot) {
    let mut held = std::mem::take(&mut ui.held_vram);
    let mut kept = std::collections::HashMap::with_capacity(snapshot.processes.len());
    for p in &snapshot.processes {
        let Ok(now) = p.nvml.used_memory else {
            continue;
        };
        let key = ProcessKey {
            pid: p.nvml.pid,
            gpu_uuid: Arc::clone(&p.gpu_uuid),
        };
        let value = match held.remove(&key) {
            Some(before) => {
                let moved = now.abs_diff(before);
                let hold = (before as f64 * VRAM_HOLD_SHARE) as u64;
                if moved > hold.max(VRAM_HOLD_MIN) {
                    now
                } else {
                    before
                }
            }
            None => now,
        };
        kept.insert(key, value);
    }
    ui.held_vram = kept;
}

/// Rows in display order: live processes, then the exited ones the snapshot carries,
/// filtered by `ui.filter` and sorted by `ui.sort`.
pub fn table_rows(snapshot: &Snapshot, ui: &UiState) -> Vec<TableRow> {
    let mut rows: Vec<TableRow> = Vec::with_capacity(snapshot.processes.len());
    for p in &snapshot.processes {
        let key = ProcessKey {
            pid: p.nvml.pid,
            gpu_uuid: Arc::clone(&p.gpu_uuid),
        };
        let total = match &p.mig {
            Some(instance) => instance.memory_total.as_ref().ok().copied(),
            None => snapshot
                .devices
                .iter()
                .find(|d| d.info.index == p.gpu_index)
                .and_then(|d| d.memory_total()),
        };
        let vram = p.nvml.used_memory.clone();
        let vram_pct = match (&vram, total) {
            (Ok(used), Some(total)) if total > 0 => Some(*used as f64 * 100.0 / total as f64),
            _ => None,
        };
        let host = p.host.as_ref();
        let host_mem_pct = match (host.map(|h| &h.rss_bytes), &snapshot.host_memory) {
            (Some(Ok(rss)), Some(Ok(ram))) if ram.total > 0 => {
                Some(*rss as f64 * 100.0 / ram.total as f64)
            }
            _ => None,
        };
        rows.push(TableRow {
            remembered_user: p.remembered.user.clone(),
            remembered_command: p.remembered.command.clone(),
            remembered_pod: None,
            gpu_index: p.gpu_index,
            vram,
            vram_pct,
            mig: p.mig.clone(),
            vram_peak: p.peaks.vram,
            rss_peak: p.peaks.host_rss,
            sm: p.nvml.sm_util.clone(),
            kind: Some(p.nvml.kind),
            host_mem_pct,
            started_ms: host
                .and_then(|h| h.starttime)
                .filter(|_| !ui.time_cursor)
                .and_then(crate::model::host::started_ms),
            host: host.cloned(),
            exited_at: None,
            left_gpu: false,
            allocator: p.allocator.clone().map(Box::new),
            key,
        });
    }

    // Exited rows come with the snapshot, joined once: a paused screen shows those of the
    // moment it froze.
    for gone in &snapshot.exited {
        let key = ProcessKey {
            pid: gone.pid,
            gpu_uuid: Arc::clone(&gone.gpu_uuid),
        };
        rows.push(TableRow {
            remembered_user: gone.user.clone(),
            remembered_command: gone.command.clone(),
            remembered_pod: gone.pod.clone(),
            gpu_index: gone.gpu_index,
            // The process is gone: its current figures do not exist, only its peak does.
            vram: Err(Absent::NotAvailable),
            vram_pct: None,
            mig: None,
            vram_peak: gone.peaks.vram,
            rss_peak: gone.peaks.host_rss,
            sm: Err(Absent::NotAvailable),
            kind: None,
            host_mem_pct: None,
            started_ms: None,
            host: None,
            exited_at: Some(gone.last_listed_ms),
            left_gpu: gone.left_gpu,
            allocator: gone.allocator.clone().map(Box::new),
            key,
        });
    }

    let filter = Filter::parse(&ui.filter);
    rows.retain(|r| r.matches(&filter));
    sort_rows(&mut rows, ui);
    rows
}

/// Sorts by the chosen column; rows without a value sort last in either direction, and ties
/// break by pid then GPU so the order never flickers between frames.
fn sort_rows(rows: &mut [TableRow], ui: &UiState) {
    let descending = ui.sort_descending;
    let column = ui.sort;
    // Unstable is enough: ties are broken down to the unique (pid, GPU) key.
    let grouped = ui.group_by_gpu;
    rows.sort_unstable_by(|a, b| {
        // Grouped, each GPU's rows come together, sorted within the group.
        let group = if grouped {
            a.gpu_index.cmp(&b.gpu_index)
        } else {
            Ordering::Equal
        };
        let primary = match column {
            SortColumn::Pid => Some(a.key.pid.cmp(&b.key.pid)),
            SortColumn::User => compare_opt(a.user(), b.user()),
            SortColumn::Gpu => Some(a.gpu_index.cmp(&b.gpu_index)),
            SortColumn::Type => compare_opt(a.kind.map(|k| k.letter()), b.kind.map(|k| k.letter())),
            // Longest running first when descending: the earliest start.
            SortColumn::Elapsed => compare_opt(b.started_ms, a.started_ms),
            SortColumn::HostMem => compare_opt(a.host_mem_pct, b.host_mem_pct),
            SortColumn::Rank => compare_opt(a.rank(), b.rank()),
            SortColumn::Vram => compare_opt(sorted_vram(a, ui), sorted_vram(b, ui)),
            SortColumn::VramPeak => {
                compare_opt(a.vram_peak.map(|p| p.value), b.vram_peak.map(|p| p.value))
            }
            SortColumn::Sm => compare_opt(a.sm.as_ref().ok(), b.sm.as_ref().ok()),
            SortColumn::HostRss => compare_opt(a.rss(), b.rss()),
            SortColumn::Cpu => compare_opt(a.cpu(), b.cpu()),
            SortColumn::Allocated | SortColumn::Reserved | SortColumn::AllocPeak => {
                compare_opt(a.allocator_figure(column), b.allocator_figure(column))
            }
            SortColumn::Step => compare_opt(a.allocator_step(), b.allocator_step()),
            SortColumn::Pod => compare_opt(a.pod().map(pod_key), b.pod().map(pod_key)),
            SortColumn::Command => compare_opt(a.command(), b.command()),
        };
        // `None` means one side lacks a value: that order is final, whatever the direction.
        let primary = match primary {
            Some(order) if descending => order.reverse(),
            Some(order) => order,
            None => absent_last(a, b, column),
        };
        group
            .then(primary)
            .then(a.key.pid.cmp(&b.key.pid))
            .then(a.gpu_index.cmp(&b.gpu_index))
            .then_with(|| a.key.gpu_uuid.cmp(&b.key.gpu_uuid))
    });
}

/// The VRAM a row is sorted by: the held figure (`hold_vram`), else its reading.
fn sorted_vram(row: &TableRow, ui: &UiState) -> Option<u64> {
    let now = row.vram.as_ref().ok().copied()?;
    Some(ui.held_vram.get(&row.key).copied().unwrap_or(now))
}

/// A pod's order: namespace, pod, container; unnamed (deleted) pods by uid, after named ones.
fn pod_key(pod: &PodInfo) -> (bool, &str, &str, &str) {
    fn name(r: &Reading<String>) -> &str {
        r.as_deref().unwrap_or("")
    }
    let ns = pod.namespace.as_deref().ok();
    (
        ns.is_none(),
        ns.unwrap_or(&pod.uid),
        name(&pod.name),
        name(&pod.container),
    )
}

/// Compares two optional values; `None` when exactly one is absent (decided by `absent_last`).
fn compare_opt<T: PartialOrd>(a: Option<T>, b: Option<T>) -> Option<Ordering> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.partial_cmp(&b).unwrap_or(Ordering::Equal)),
        (None, None) => Some(Ordering::Equal),
        _ => None,
    }
}

fn absent_last(a: &TableRow, b: &TableRow, column: SortColumn) -> Ordering {
    let has = |r: &TableRow| match column {
        SortColumn::Pid | SortColumn::Gpu => true,
        SortColumn::Rank => r.rank().is_some(),
        SortColumn::Type => r.kind.is_some(),
        SortColumn::Elapsed => r.started_ms.is_some(),
        SortColumn::HostMem => r.host_mem_pct.is_some(),
        SortColumn::User => r.user().is_some(),
        SortColumn::Vram => r.vram.is_ok(),
        SortColumn::VramPeak => r.vram_peak.is_some(),
        SortColumn::Sm => r.sm.is_ok(),
        SortColumn::HostRss => r.rss().is_some(),
        SortColumn::Cpu => r.cpu().is_some(),
        SortColumn::Allocated | SortColumn::Reserved | SortColumn::AllocPeak => {
            r.allocator_figure(column).is_some()
        }
        SortColumn::Step => r.allocator_step().is_some(),
        SortColumn::Pod => r.pod().is_some(),
        SortColumn::Command => r.command().is_some(),
    };
    // true (has a value) before false.
    has(b).cmp(&has(a))
}
