//! Opening a recording with a scope (`scope`): the times asked for resolved against its
//! start, and for a process selection one pass over the file first. Apart from `scope`
//! because it reads the recording (`reader`), and the reader applies the scope.

use super::reader::Recording;
use super::scope::{Asked, History, Scope, Selection, Told, pid_of, selection_words};
use crate::model::DeviceInfo;
use crate::model::SourceEvent;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Opens `file` and sets the scope `asked` for on it: times are resolved against the
/// recording's start; a process selection reads the file once first, to learn each job's
/// pids and the GPUs the processes used. One line when the file cannot be read or the
/// options cannot apply to it.
pub fn open(file: &Path, asked: &Asked) -> Result<(Recording, Told), String> {
    let recording = Recording::open(file).map_err(|e| e.to_string())?;
    let started_ms = recording.header().started_ms;
    let since_ms = asked.since.as_ref().map(|w| w.resolve(started_ms));
    let until_ms = asked.until.as_ref().map(|w| w.resolve(started_ms));
    if let (Some(since), Some(until)) = (since_ms, until_ms)
        && until < since
    {
        return Err(format!(
            "--until ({}) is before --since ({})",
            crate::model::time::utc_label(until),
            crate::model::time::utc_label(since)
        ));
    }
    let selection = if asked.selects_processes() {
        let selection = select(Recording::open(file).map_err(|e| e.to_string())?, asked);
        if selection.pids.is_empty() && selection.gpus.is_empty() {
            return Err(format!(
                "{}: no process in it matches {}",
                file.display(),
                selection_words(asked)
            ));
        }
        Some(selection)
    } else {
        None
    };
    let history_floor = if asked.history { 0 } else { started_ms };
    let tally = Arc::new(Mutex::new(History::default()));
    let scope = Scope {
        started_ms,
        from_ms: since_ms.unwrap_or(0).max(history_floor),
        until_ms: until_ms.unwrap_or(u64::MAX),
        asked_from_ms: since_ms.unwrap_or(0),
        selection,
        tally: Arc::clone(&tally),
        channels: Default::default(),
    };
    let told = Told {
        started_ms,
        history: asked.history,
        since_ms,
        until_ms,
        asked: asked.clone(),
        tally,
    };
    Ok((recording.scoped(scope), told))
}

/// One pass over the recording: the pids of the processes asked for (`--pid` as given, and
/// every writer of `--job`), and the GPUs any of them used (by NVML's process lists or by
/// the writer's own devices). A pid never seen anywhere selects nothing.
fn select(recording: Recording, asked: &Asked) -> Selection {
    let asked_pids: BTreeSet<u32> = asked.pids.iter().copied().collect();
    let mut selection = Selection {
        job: asked.job.clone(),
        ..Selection::default()
    };
    let mut devices: Vec<DeviceInfo> = Vec::new();
    // (GPU, pid) pairs NVML listed: few, however long the recording.
    let mut on_gpu: BTreeSet<(u32, u32)> = BTreeSet::new();
    let mut writer_gpus: BTreeSet<u32> = BTreeSet::new();
    // MIG device UUIDs seen: a writer on a MIG device names it so.
    let mut instances: Vec<crate::model::mig::MigUuid> = Vec::new();
    let _ending = recording.each_event(|_, event| match event {
        SourceEvent::Started { devices: d, .. } => devices = d,
        SourceEvent::Device(sample) => {
            for instance in crate::model::device::mig_uuids(&sample) {
                if !instances.contains(&instance) {
                    instances.push(instance);
                }
            }
            if let Ok(processes) = &sample.processes {
                on_gpu.extend(processes.iter().map(|p| (sample.index, p.pid)));
            }
        }
        SourceEvent::Channels(batch) => {
            for poll in &batch.polls {
                let wanted = asked_pids.contains(&pid_of(poll)) || selection.poll(poll);
                if wanted {
                    selection.pids.insert(pid_of(poll));
                    writer_gpus.extend(poll.devices.iter().filter_map(|d| {
                        crate::model::writer_fold::gpu_index_of(d, &devices, &instances)
                    }));
                }
            }
        }
        _ => {}
    });
    for &(_, pid) in &on_gpu {
        if asked_pids.contains(&pid) {
            selection.pids.insert(pid);
        }
    }
    selection.gpus = on_gpu
        .iter()
        .filter(|(_, pid)| selection.pids.contains(pid))
        .map(|&(gpu, _)| gpu)
        .chain(writer_gpus)
        .collect();
    selection
}
