//! `channels` records: what instrumented programs published in one pass of the channel
//! sampler. A writer's identity is recorded with the first poll of its channel (and again
//! if it changes), not with every poll; points are columns (see `points`); a poll carrying
//! more points or events than fit a modest line (a first read of a full ring) is split over
//! several records, which a monitor ingests to the same state.

use super::points::{self, PointGroup};
use super::skipped::Skipped;
use super::wire::{
    LIVENESS_STATES, WriterLivenessDef, allocator_devices, allocator_events, identity,
};
use crate::model::{
    AllocatorDevice, AllocatorEvent, ChannelBatch, ChannelPoll, Gone, WriterIdentity,
    WriterLiveness,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// Points and events per record at most; a poll with more is split.
const POINTS_PER_RECORD: usize = 8192;
const EVENTS_PER_RECORD: usize = 1024;
/// Channels whose identity is remembered, writing and reading. Past this the writer
/// forgets them all (and sends each identity again); a reader refuses the file.
const WRITERS_KEPT: usize = 4096;
const WRITERS_READ: usize = 65_536;

/// Written only: read by name (`GoneIn`, `GONE_REASONS`).
#[derive(Serialize)]
#[serde(remote = "Gone", rename_all = "snake_case")]
enum GoneDef {
    Removed,
    Refused,
    Unreachable,
    Retired,
}

#[derive(Serialize)]
struct GoneWire {
    path: String,
    #[serde(with = "GoneDef")]
    why: Gone,
}

/// A `channels` record as written.
#[derive(Serialize)]
pub struct BatchOut<'a> {
    at_ms: u64,
    polls: Vec<PollOut<'a>>,
    gone: Vec<GoneWire>,
    rejected: &'a [String],
}

#[derive(Serialize)]
struct PollOut<'a> {
    path: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    writer: Option<identity::Ref<'a>>,
    host_pid: Option<u32>,
    #[serde(with = "WriterLivenessDef")]
    liveness: WriterLiveness,
    #[serde(serialize_with = "allocator_devices::serialize")]
    devices: &'a [AllocatorDevice],
    step: Option<u64>,
    label: &'a str,
    points: Vec<PointGroup>,
    #[serde(serialize_with = "allocator_events::serialize")]
    events: &'a [AllocatorEvent],
    lost_samples: u64,
    lost_events: u64,
}

/// The writer's memory of which identities the file already holds.
#[derive(Default)]
pub struct WritersSent {
    sent: HashMap<String, Arc<WriterIdentity>>,
}

impl WritersSent {
    /// Whether `poll`'s identity must be written with it; notes it as written.
    fn needs(&mut self, poll: &ChannelPoll) -> bool {
        if let Some(known) = self.sent.get(&poll.path)
            && (Arc::ptr_eq(known, &poll.identity) || **known == *poll.identity)
        {
            return false;
        }
        if self.sent.len() >= WRITERS_KEPT {
            self.sent.clear();
        }
        self.sent
            .insert(poll.path.clone(), Arc::clone(&poll.identity));
        true
    }

    /// The records for one batch: usually one; more when a poll must be split.
    pub fn records<'a>(&mut self, batch: &'a ChannelBatch) -> Vec<BatchOut<'a>> {
        let mut records = Vec::new();
        let mut polls = Vec::with_capacity(batch.polls.len());
        for poll in &batch.polls {
            let writer = self.needs(poll).then(|| identity::Ref(&poll.identity));
            let pieces = poll
                .points
                .len()
                .div_ceil(POINTS_PER_RECORD)
                .max(poll.events.len().div_ceil(EVENTS_PER_RECORD));
            if pieces <= 1 {
                polls.push(poll_out(poll, writer, &poll.points, &poll.events));
                continue;
            }
            let mut writer = writer;
            for piece in 0..pieces {
                let points = chunk(&poll.points, piece, POINTS_PER_RECORD);
                let events = chunk(&poll.events, piece, EVENTS_PER_RECORD);
                records.push(BatchOut {
                    at_ms: batch.at_ms,
                    polls: vec![poll_out(poll, writer.take(), points, events)],
                    gone: Vec::new(),
                    rejected: &batch.rejected,
                });
            }
        }
        for (path, _) in &batch.gone {
            self.sent.remove(path);
        }
        if !polls.is_empty() || !batch.gone.is_empty() || records.is_empty() {
            records.push(BatchOut {
                at_ms: batch.at_ms,
                polls,
                gone: batch
                    .gone
                    .iter()
                    .map(|(path, why)| GoneWire {
                        path: path.clone(),
                        why: *why,
                    })
                    .collect(),
                rejected: &batch.rejected,
            });
        }
        records
    }
}

fn chunk<T>(list: &[T], piece: usize, size: usize) -> &[T] {
    let start = (piece * size).min(list.len());
    &list[start..(start + size).min(list.len())]
}

fn poll_out<'a>(
    poll: &'a ChannelPoll,
    writer: Option<identity::Ref<'a>>,
    points: &[crate::model::AllocatorPoint],
    events: &'a [AllocatorEvent],
) -> PollOut<'a> {
    PollOut {
        path: &poll.path,
        writer,
        host_pid: poll.host_pid,
        liveness: poll.liveness,
        devices: &poll.devices,
        step: poll.step,
        label: &poll.label,
        points: points::encode(points),
        events,
        lost_samples: poll.lost_samples,
        lost_events: poll.lost_events,
    }
}

/// Every reason of `GoneDef`: any other was added by a later version.
const GONE_REASONS: [(&str, Gone); 4] = [
    ("removed", Gone::Removed),
    ("refused", Gone::Refused),
    ("unreachable", Gone::Unreachable),
    ("retired", Gone::Retired),
];

/// A gone channel as read: its reason read as a name, so that a reason a later version
/// added does not stop the reading.
#[derive(Deserialize)]
struct GoneIn {
    path: String,
    why: String,
}

/// A `channels` record as read.
#[derive(Deserialize)]
pub struct BatchIn {
    at_ms: u64,
    polls: Vec<PollIn>,
    #[serde(default)]
    gone: Vec<GoneIn>,
    #[serde(default)]
    rejected: Vec<String>,
}

#[derive(Deserialize)]
struct PollIn {
    path: String,
    #[serde(default)]
    writer: Option<identity::Own>,
    host_pid: Option<u32>,
    /// Read on its own, so that a state a later version added skips the poll only.
    liveness: Value,
    #[serde(deserialize_with = "allocator_devices::deserialize")]
    devices: Vec<AllocatorDevice>,
    step: Option<u64>,
    label: String,
    points: Vec<PointGroup>,
    /// Read one by one, so that a kind a later version added skips that event only.
    events: Vec<Value>,
    lost_samples: u64,
    lost_events: u64,
}

/// The reader's memory of each channel's identity, shared by all its polls as live.
#[derive(Clone, Default)]
pub struct WritersRead {
    known: HashMap<String, Arc<WriterIdentity>>,
    /// Events and polls skipped so far, of kinds a later version added.
    pub skipped: Skipped,
}

impl WritersRead {
    /// The batch back; an error says what in the record is inconsistent.
    pub fn batch(&mut self, batch: BatchIn) -> Result<ChannelBatch, String> {
        let mut polls = Vec::with_capacity(batch.polls.len());
        for poll in batch.polls {
            let identity = match poll.writer {
                Some(identity::Own(identity)) => {
                    if self.known.len() >= WRITERS_READ && !self.known.contains_key(&poll.path) {
                        return Err(format!("more than {WRITERS_READ} channels"));
                    }
                    let identity = Arc::new(identity);
                    self.known.insert(poll.path.clone(), Arc::clone(&identity));
                    identity
                }
                None => match self.known.get(&poll.path) {
                    Some(identity) => Arc::clone(identity),
                    None => {
                        return Err(format!(
                            "channel {} is polled before its writer is named",
                            poll.path
                        ));
                    }
                },
            };
            // A state a later version added: the poll cannot be shown as any state of ours,
            // so it is skipped (its writer, above, is still remembered for the next).
            let Some(liveness) = known(
                poll.liveness,
                "state",
                &LIVENESS_STATES,
                WriterLivenessDef::deserialize,
            )?
            else {
                self.skipped.polls += 1;
                continue;
            };
            let mut events = Vec::with_capacity(poll.events.len());
            let kinds: Vec<&str> = crate::channel::EventKind::tags().collect();
            for event in poll.events {
                let kind = event.get("event").cloned().unwrap_or(Value::Null);
                if !is_known(&kind, "kind", &kinds) {
                    self.skipped.events += 1;
                    continue;
                }
                let event = allocator_events::Own::deserialize(event)
                    .map_err(|e| format!("damaged writer event ({e})"))?;
                events.push(event.0);
            }
            polls.push(ChannelPoll {
                path: poll.path,
                identity,
                host_pid: poll.host_pid,
                liveness,
                devices: poll.devices,
                step: poll.step,
                label: poll.label,
                points: points::decode(poll.points)?,
                events,
                lost_samples: poll.lost_samples,
                lost_events: poll.lost_events,
            });
        }
        let mut gone = Vec::with_capacity(batch.gone.len());
        for g in batch.gone {
            // Gone whatever the reason: the recorder forgot its writer, and names it again
            // with its next poll.
            self.known.remove(&g.path);
            match GONE_REASONS.iter().find(|(name, _)| *name == g.why) {
                Some(&(_, why)) => gone.push((g.path, why)),
                // A later version's reason: the monitor cannot be told what it means.
                None => self.skipped.gone += 1,
            }
        }
        Ok(ChannelBatch {
            at_ms: batch.at_ms,
            polls,
            gone,
            rejected: batch.rejected,
        })
    }
}

/// `value` read by `read`; `None` when its `tag` names a variant none of `names` (a later
/// version's). A known variant that does not read is damage.
fn known<T>(
    value: Value,
    tag: &str,
    names: &[&str],
    read: impl FnOnce(Value) -> Result<T, serde_json::Error>,
) -> Result<Option<T>, String> {
    if !is_known(&value, tag, names) {
        return Ok(None);
    }
    read(value)
        .map(Some)
        .map_err(|e| format!("damaged {tag} ({e})"))
}

/// False only when `value`'s `tag` is a string that is none of `names`: anything else (a
/// known name, no tag, not an object) is left for the reading to judge.
fn is_known(value: &Value, tag: &str, names: &[&str]) -> bool {
    match value.get(tag).and_then(Value::as_str) {
        Some(name) => names.contains(&name),
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reasons_read_by_name_are_those_written() {
        for (name, why) in GONE_REASONS {
            let written = GoneDef::serialize(&why, serde_json::value::Serializer).unwrap();
            assert_eq!(written, Value::from(name));
        }
    }
}
