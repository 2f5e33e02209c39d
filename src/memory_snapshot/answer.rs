//! `held`: one device's history reduced to the live set at the asked moment, grouped by
//! site, with its exactness and, at an OOM, why the request failed.

use super::error::{ErrorKind, SitesError};
use super::exact::{self, History};
use super::held::{BlockAt, Exactness, Held, Known, Moment, Site};
use super::oom;
use super::site::SiteFinder;
use super::snapshot::{Action, MemorySnapshot, TraceEntry};
use super::walk::{self, State};
use std::collections::HashMap;

/// The largest blocks listed, whatever `top` is.
const LARGEST: usize = 10;

/// The device asked for, else the `vramscope` key's, else the lowest with data.
fn pick_device(snap: &MemorySnapshot, asked: Option<u32>) -> Result<Option<u32>, SitesError> {
    let devices = snap.devices();
    if let Some(device) = asked {
        if devices.contains(&device) {
            return Ok(Some(device));
        }
        let list: Vec<String> = devices.iter().map(u32::to_string).collect();
        return Err(SitesError::new(
            ErrorKind::NotInSnapshot,
            format!(
                "the snapshot has nothing on device {device} (devices: {})",
                if list.is_empty() {
                    "none".to_string()
                } else {
                    list.join(", ")
                }
            ),
        ));
    }
    let own = snap.vramscope.as_ref().and_then(|k| k.device);
    Ok(own
        .filter(|d| devices.contains(d))
        .or(devices.first().copied()))
}

pub(crate) fn held_on(
    snap: &MemorySnapshot,
    device: Option<u32>,
    moment: Moment,
    recorded_peak: Option<u64>,
    top: usize,
) -> Result<Held, SitesError> {
    let device = pick_device(snap, device)?;
    let d = device.unwrap_or(0);
    let trace = snap.traces.get(d as usize);
    let entries: &[TraceEntry] = trace.map_or(&[], |t| &t.entries);
    let cut = trace.map_or(0, |t| t.cut);
    // The key speaks for its own device only.
    let key = snap
        .vramscope
        .as_ref()
        .filter(|k| k.device.is_none_or(|kd| kd == d));
    let dump = walk::at_dump(snap, d);
    let paired = walk::pair_frees(entries);
    let history = History {
        entries,
        kept: entries.len(),
        cut,
        max_entries: key.and_then(|k| k.max_entries),
        peak_time_us: key.and_then(|k| k.peak_time_us),
    };
    let recorded = exact::recorded(key, recorded_peak);
    let time_after = |applied: usize| -> Option<i64> {
        applied
            .checked_sub(1)
            .and_then(|i| entries.get(..=i))
            .and_then(|e| e.iter().rev().find_map(|e| e.time_us))
    };
    // Before the walk: an OOM's request is placed by the same rule as the live blocks.
    let mut finder = SiteFinder::new(&snap.frames, !entries.is_empty());
    let (state, exactness, time_us, oom) = match moment {
        Moment::End => (dump, Exactness::Exact, time_after(entries.len()), None),
        Moment::Peak => {
            let walked = walk::find_peak(&dump, entries, &paired);
            let state = walk::state_at(&dump, entries, &paired, walked.at);
            let exactness = exact::judge(&walked, &state, recorded, &history);
            (state, exactness, time_after(walked.at), None)
        }
        Moment::Oom => {
            let last_oom = entries.iter().rposition(|e| e.action == Action::Oom);
            let key_oom = key.filter(|k| k.reason.as_deref() == Some("oom"));
            match (last_oom, key_oom) {
                (Some(i), _) => {
                    let state = walk::state_at(&dump, entries, &paired, i);
                    let e = &entries[i];
                    let free = e
                        .device_free
                        .or(key.and_then(|k| k.oom.as_ref()).and_then(|o| o.device_free));
                    let largest_free = oom::largest_free_block(snap, d, entries, Some(i), &state);
                    let site = request_site(&mut finder, e);
                    let why = oom::explain(&state, Some(e.size), free, largest_free, site);
                    (state, Exactness::Exact, e.time_us, Some(why))
                }
                (None, Some(k)) => {
                    let o = k.oom.as_ref();
                    let requested = o.and_then(|o| o.requested);
                    let free = o.and_then(|o| o.device_free);
                    let largest_free = oom::largest_free_block(snap, d, entries, None, &dump);
                    let site = Err(NO_OOM_ENTRY.to_string());
                    let why = oom::explain(&dump, requested, free, largest_free, site);
                    (dump, Exactness::Exact, time_after(entries.len()), Some(why))
                }
                (None, None) => {
                    return Err(SitesError::new(
                        ErrorKind::NotInSnapshot,
                        "the snapshot holds no OOM (no `oom` entry in its history, and it was not dumped at one)",
                    ));
                }
            }
        }
    };
    let (sites, all_sites, largest) = group(&state, &mut finder, top);
    Ok(Held {
        moment,
        device,
        total_bytes: state.requested,
        blocks: state.live.len() as u64,
        sites,
        largest,
        exactness,
        oom,
        trace_entries: entries.len(),
        time_us,
        all_sites,
        cut: snap.cut.clone(),
        reserved: state.reserved_known(),
        recorded_peak: recorded.map(exact::Recorded::bytes),
        recorded_is_requested: matches!(recorded, Some(exact::Recorded::Requested(_))),
        mismatches: state.mismatches,
    })
}

/// Why an OOM has no request site: said, never a made-up frame.
const NO_OOM_ENTRY: &str = "the dump was made at an OOM but the history has no `oom` entry to say where the request was made";
const NO_OOM_STACK: &str = "the `oom` entry recorded no stack frames";

/// Where the failed request `oom` was made: its stack's site by the live set's rule, its
/// bytes the request's. A stack of machinery only is its innermost frame, as a block's is.
fn request_site(finder: &mut SiteFinder, oom: &TraceEntry) -> Known<Site> {
    if oom.stack.is_empty() {
        return Err(NO_OOM_STACK.into());
    }
    let key = finder.key(oom.stack);
    let mut site = finder.site(key);
    site.bytes = oom.size;
    Ok(site)
}

/// The live set by site (all, and the top `top`), and its largest blocks.
fn group(
    state: &State,
    finder: &mut SiteFinder,
    top: usize,
) -> (Vec<Site>, Vec<Site>, Vec<BlockAt>) {
    let mut by_key: HashMap<u32, (u64, u64)> = HashMap::new();
    let mut blocks: Vec<(u64, u64, u32, Option<i64>)> = Vec::with_capacity(state.live.len());
    for (&address, live) in &state.live {
        let key = finder.key_of(live);
        let slot = by_key.entry(key).or_insert((0, 0));
        slot.0 = slot.0.saturating_add(live.requested);
        slot.1 += 1;
        blocks.push((live.requested, address, key, live.allocated_us));
    }
    let total = state.requested.max(1) as f64;
    let mut all: Vec<Site> = by_key
        .into_iter()
        .map(|(key, (bytes, count))| {
            let mut site = finder.site(key);
            site.bytes = bytes;
            site.blocks = count;
            site.share = bytes as f64 / total;
            site
        })
        .collect();
    all.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then_with(|| a.file.cmp(&b.file))
            .then_with(|| a.line.cmp(&b.line))
            .then_with(|| a.function.cmp(&b.function))
    });
    let sites = all.iter().take(top).cloned().collect();
    blocks.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let largest = blocks
        .into_iter()
        .take(LARGEST)
        .map(|(bytes, address, key, allocated_us)| {
            let mut site = finder.site(key);
            site.bytes = bytes;
            site.blocks = 1;
            site.share = bytes as f64 / total;
            BlockAt {
                address,
                bytes,
                site,
                allocated_us,
            }
        })
        .collect();
    (sites, all, largest)
}
