//! Why one out-of-memory error happened, as the lines a report prints: what was asked against
//! what was free; what the cache held and whether the request would have fit in it
//! unfragmented; what sat outside the allocator; and what `expandable_segments` would have
//! changed. Every figure may be absent, and an absent one reads `n/a` with its reason, never 0.
//!
//! What PyTorch's caching allocator does before it gives up (`CUDACachingAllocator.cpp`): when
//! no cached block is large enough it asks the driver for a new segment; when that fails it
//! frees every cached segment that holds no live tensor and asks again; only then does it
//! count the OOM and call its observers, which is when the writer reads these figures. So at
//! that moment the free device memory already includes every wholly free segment, and what is
//! still cached (reserved minus allocated) is free space inside segments that also hold live
//! tensors: fragments the allocator could not use for this request.
//!
//! `expandable_segments:True` (PyTorch's notes on CUDA memory management) makes the allocator
//! keep one segment per stream that grows by mapping more physical memory at its end, instead
//! of one segment per large allocation. When it frees its cache before giving up, it unmaps
//! the free pages inside those segments even where live tensors share the segment, and can map
//! them again where a request needs them. Only whole pages come back (20 MiB in the large pool,
//! 2 MiB in the small one), so with it the cache and the free memory together bound what a
//! request can get, less that rounding; without it a request needs one free block of the cache
//! or a new segment out of the free memory alone. The setting belongs to PyTorch's native
//! allocator: the `cudaMallocAsync` backend ignores it, and other frameworks have no such
//! setting.
//!
//! Under a memory fraction (`limit`) the allocator refuses to reserve past the limit, so the
//! free memory it can use is the lower of the device's free memory and the limit less reserved.

use super::absent::{Absent, Reading};
use super::allocator::EventKind;
use super::units::bytes;
use serde::Serialize;

/// Whose memory NVML's `used` figure counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UsedBy {
    /// The process's own (its CUDA context, libraries and allocator).
    Process,
    /// The whole device's (every process on it).
    Device,
}

/// The allocator that ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allocator<'a> {
    /// PyTorch's CUDA caching allocator with the program's `PYTORCH_CUDA_ALLOC_CONF` (empty
    /// when unset).
    Torch { config: &'a str },
    /// Any other allocator (JAX, CuPy, a C or Rust program's own).
    Other,
}

/// One OOM's figures, as its event and the monitor knew them at the time.
#[derive(Clone, Debug, PartialEq)]
pub struct OomFigures<'a> {
    pub requested: Reading<u64>,
    pub device_free: Reading<u64>,
    pub device_total: Reading<u64>,
    /// The allocator's own limit (PyTorch's per-process memory fraction) when one is set.
    pub limit: Option<u64>,
    pub allocated: Reading<u64>,
    pub reserved: Reading<u64>,
    /// NVML's used memory for the process or the device, near the moment of the OOM.
    pub used: Reading<u64>,
    pub used_by: UsedBy,
    pub allocator: Allocator<'a>,
}

impl<'a> OomFigures<'a> {
    /// The figures of an OOM observer's event (`EventKind::Oom`), with what the monitor knows
    /// beside it; `None` for any other kind of event.
    pub fn from_event(
        kind: &EventKind,
        limit: Option<u64>,
        used: Reading<u64>,
        used_by: UsedBy,
        allocator: Allocator<'a>,
    ) -> Option<OomFigures<'a>> {
        let EventKind::Oom {
            requested,
            device_free,
            device_total,
            allocated,
            reserved,
            ..
        } = kind
        else {
            return None;
        };
        Some(OomFigures {
            requested: requested.clone(),
            device_free: device_free.clone(),
            device_total: device_total.clone(),
            limit,
            allocated: allocated.clone(),
            reserved: reserved.clone(),
            used,
            used_by,
            allocator,
        })
    }
}

/// What kept the request from being served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Verdict {
    /// By these figures the free memory covered the request: they were read at different
    /// moments, or another process took the memory first.
    FreeWasEnough,
    /// The cache alone held more free bytes than were asked, in pieces none large enough.
    FragmentedCache,
    /// The cache and the free memory together held enough, but not as one block.
    FragmentedCacheAndFree,
    /// Even the whole cache with the free memory was `short` of the request: the live tensors
    /// left no room.
    TooLarge { short: u64 },
}

/// The report's lines for one OOM: asked against free, the cache, outside the allocator,
/// `expandable_segments`.
pub fn explain(f: &OomFigures) -> Vec<String> {
    let verdict = verdict(f);
    vec![
        asked_line(f, &verdict),
        cache_line(f, &verdict),
        outside_line(f),
        expandable_line(f, &verdict),
    ]
}

/// What kept the request from being served, or why that cannot be told (naming the figure
/// that is missing).
pub fn verdict(f: &OomFigures) -> Reading<Verdict> {
    let requested = named("requested", &f.requested)?;
    let usable = usable_free(f)?;
    if requested <= usable {
        return Ok(Verdict::FreeWasEnough);
    }
    let cached = cached(f)?;
    if requested <= cached {
        return Ok(Verdict::FragmentedCache);
    }
    let whole = reachable(f)?;
    if requested <= whole {
        Ok(Verdict::FragmentedCacheAndFree)
    } else {
        Ok(Verdict::TooLarge {
            short: requested - whole,
        })
    }
}

/// The segment the allocator asks the driver for to serve `requested` with no cached block
/// (`CUDACachingAllocator.cpp`'s `get_allocation_size`): 2 MiB for a request up to 1 MiB,
/// 20 MiB under 10 MiB, else the request rounded up to 2 MiB.
pub fn segment_for(requested: u64) -> u64 {
    const MIB: u64 = 1 << 20;
    if requested <= MIB {
        2 * MIB
    } else if requested < 10 * MIB {
        20 * MIB
    } else {
        requested.div_ceil(2 * MIB).saturating_mul(2 * MIB)
    }
}

/// Reserved but not allocated: the allocator's cache.
fn cached(f: &OomFigures) -> Reading<u64> {
    let reserved = named("reserved", &f.reserved)?;
    let allocated = named("allocated", &f.allocated)?;
    reserved.checked_sub(allocated).ok_or_else(|| {
        Absent::Error(format!(
            "reserved {} is below allocated {}: read at different moments",
            bytes(reserved),
            bytes(allocated)
        ))
    })
}

/// Free memory the allocator could take as a new segment: the device's, capped by the limit.
fn usable_free(f: &OomFigures) -> Reading<u64> {
    let free = named("free", &f.device_free)?;
    match f.limit {
        Some(limit) => Ok(free.min(limit.saturating_sub(named("reserved", &f.reserved)?))),
        None => Ok(free),
    }
}

/// The most a request could get with the whole cache reclaimed: cache plus free memory,
/// capped by the limit less what live tensors hold.
fn reachable(f: &OomFigures) -> Reading<u64> {
    let whole = named("free", &f.device_free)?.saturating_add(cached(f)?);
    match f.limit {
        Some(limit) => Ok(whole.min(limit.saturating_sub(named("allocated", &f.allocated)?))),
        None => Ok(whole),
    }
}

/// A figure, or why it is absent with its name: a derived figure says which input it lacks.
fn named(name: &str, value: &Reading<u64>) -> Reading<u64> {
    value
        .clone()
        .map_err(|why| Absent::Error(format!("{name}: {why}")))
}

/// A figure, or `n/a (reason)`.
fn fig(value: &Reading<u64>) -> String {
    match value {
        Ok(v) => bytes(*v),
        Err(why) => format!("n/a ({why})"),
    }
}

fn asked_line(f: &OomFigures, verdict: &Reading<Verdict>) -> String {
    let mut line = format!(
        "asked for {} with {} free on the device (of {})",
        fig(&f.requested),
        fig(&f.device_free),
        fig(&f.device_total)
    );
    if let Some(limit) = f.limit {
        let left = f
            .reserved
            .clone()
            .map(|reserved| limit.saturating_sub(reserved));
        line.push_str(&format!(
            "; the allocator's limit of {} left {}",
            bytes(limit),
            fig(&left)
        ));
    }
    let short = f
        .requested
        .clone()
        .and_then(|requested| Ok(requested.saturating_sub(usable_free(f)?)));
    match (verdict, short) {
        (Ok(Verdict::FreeWasEnough), _) => line.push_str(
            ": that covered it by these figures, so they were read at different moments or \
             another process took the memory first",
        ),
        (_, Ok(short)) => line.push_str(&format!(": {} short", bytes(short))),
        (_, Err(_)) => {}
    }
    line
}

fn cache_line(f: &OomFigures, verdict: &Reading<Verdict>) -> String {
    let cached = match cached(f) {
        Ok(cached) => cached,
        Err(why) => return format!("cached: n/a ({why})"),
    };
    let mut line = format!(
        "cached: {} reserved but not allocated (reserved {}, allocated {})",
        bytes(cached),
        fig(&f.reserved),
        fig(&f.allocated)
    );
    let whole = fig(&reachable(f));
    match verdict {
        Ok(Verdict::FragmentedCache) => line.push_str(
            "; the request would have fit in it had that space been one block: it was \
             fragmented",
        ),
        Ok(Verdict::FragmentedCacheAndFree) => line.push_str(&format!(
            "; with the free memory that is {whole}, enough for the request had it been one block"
        )),
        Ok(Verdict::TooLarge { short }) => line.push_str(&format!(
            "; even all of it with the free memory ({whole}) falls {} short: the live tensors \
             ({}) left no room",
            bytes(*short),
            fig(&f.allocated)
        )),
        Ok(Verdict::FreeWasEnough) | Err(_) => {}
    }
    line
}

fn outside_line(f: &OomFigures) -> String {
    let (scope, holders) = match f.used_by {
        UsedBy::Process => (
            "by the process",
            "the CUDA context with its loaded kernels, and what libraries such as NCCL take \
             from the driver directly",
        ),
        UsedBy::Device => (
            "on the device",
            "the CUDA context, what libraries take from the driver directly, and every other \
             process on the GPU",
        ),
    };
    let (used, reserved) = match (&f.used, &f.reserved) {
        (Ok(used), Ok(reserved)) => (*used, *reserved),
        (Err(why), _) => return format!("outside the allocator: n/a (NVML used: {why})"),
        (_, Err(why)) => return format!("outside the allocator: n/a (reserved: {why})"),
    };
    match used.checked_sub(reserved) {
        Some(outside) => format!(
            "outside the allocator: {} (NVML used {} {scope}, reserved {}): {holders}",
            bytes(outside),
            bytes(used),
            bytes(reserved)
        ),
        None => format!(
            "outside the allocator: n/a (NVML used {} {scope} is below reserved {}: read at \
             different moments)",
            bytes(used),
            bytes(reserved)
        ),
    }
}

/// What PyTorch's configuration string says about the two settings that matter here. Later
/// entries win, as in PyTorch's own parser; it accepts only `True` and `False`.
fn torch_settings(config: &str) -> (bool, bool) {
    let mut expandable = false;
    let mut async_backend = false;
    for (key, value) in config.split(',').filter_map(|item| item.split_once(':')) {
        match key.trim() {
            "expandable_segments" => expandable = value.trim() == "True",
            "backend" => async_backend = value.trim() == "cudaMallocAsync",
            _ => {}
        }
    }
    (expandable, async_backend)
}

fn expandable_line(f: &OomFigures, verdict: &Reading<Verdict>) -> String {
    let Allocator::Torch { config } = f.allocator else {
        return "expandable_segments: n/a (a setting of PyTorch's caching allocator, which \
                this writer does not use)"
            .into();
    };
    let (on, async_backend) = torch_settings(config);
    if async_backend {
        return "expandable_segments: does not apply (backend:cudaMallocAsync replaces the \
                caching allocator)"
            .into();
    }
    let verdict = match verdict {
        Ok(verdict) => *verdict,
        Err(why) => return format!("expandable_segments: n/a ({why})"),
    };
    match (verdict, on) {
        (Verdict::FreeWasEnough, _) => {
            "expandable_segments: n/a (the figures show enough free memory for the request)".into()
        }
        (Verdict::FragmentedCache | Verdict::FragmentedCacheAndFree, false) => format!(
            "with expandable_segments:True it would likely have fit: the allocator could have \
             returned the {} cached to the driver in whole pages (20 MiB for large blocks) and \
             mapped them, with the {} free, into one growing segment; set \
             PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
            fig(&cached(f)),
            fig(&usable_free(f))
        ),
        (Verdict::FragmentedCache | Verdict::FragmentedCacheAndFree, true) => {
            "expandable_segments is on, so the cache was reclaimable: what it lacked was lost \
             to page rounding (whole 20 MiB pages per free range), or the figures were read at \
             different moments"
                .into()
        }
        (Verdict::TooLarge { short }, false) => format!(
            "expandable_segments:True would not have saved it: with all of the cache reclaimed \
             the request was still {} short",
            bytes(short)
        ),
        (Verdict::TooLarge { short }, true) => format!(
            "expandable_segments is on and could not help: with all of the cache reclaimed the \
             request was still {} short",
            bytes(short)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    /// The run on an 80 GiB GPU: a 6 GiB request at step 80, 66 GiB in live
    /// tensors, 72 GiB reserved (6 GiB cached in fragments), 2 GiB free, and NVML counting
    /// 73.5 GiB for the process.
    fn fragmented() -> OomFigures<'static> {
        OomFigures {
            requested: Ok(6 * GIB),
            device_free: Ok(2 * GIB),
            device_total: Ok(80 * GIB),
            limit: None,
            allocated: Ok(66 * GIB),
            reserved: Ok(72 * GIB),
            used: Ok(73 * GIB + 512 * MIB),
            used_by: UsedBy::Process,
            allocator: Allocator::Torch { config: "" },
        }
    }

    #[test]
    fn an_observer_event_gives_its_figures_and_other_events_none() {
        let oom = EventKind::Oom {
            requested: Ok(6 * GIB),
            device_free: Ok(2 * GIB),
            device_total: Ok(80 * GIB),
            allocated: Ok(66 * GIB),
            reserved: Ok(72 * GIB),
            retries: Ok(1),
        };
        let allocator = Allocator::Torch { config: "" };
        let used = || Ok(73 * GIB + 512 * MIB);
        assert_eq!(
            OomFigures::from_event(&oom, None, used(), UsedBy::Process, allocator),
            Some(fragmented())
        );
        let uncaught = EventKind::OomError {
            requested: Ok(6 * GIB),
        };
        assert_eq!(
            OomFigures::from_event(&uncaught, None, used(), UsedBy::Process, allocator),
            None
        );
    }

    #[test]
    fn a_request_the_fragmented_cache_could_have_held_says_so_and_names_the_fix() {
        let f = fragmented();
        assert_eq!(verdict(&f), Ok(Verdict::FragmentedCache));
        assert_eq!(
            explain(&f),
            vec![
                "asked for 6.00 GiB with 2.00 GiB free on the device (of 80.0 GiB): 4.00 GiB short",
                "cached: 6.00 GiB reserved but not allocated (reserved 72.0 GiB, allocated 66.0 GiB); the request would have fit in it had that space been one block: it was fragmented",
                "outside the allocator: 1.50 GiB (NVML used 73.5 GiB by the process, reserved 72.0 GiB): the CUDA context with its loaded kernels, and what libraries such as NCCL take from the driver directly",
                "with expandable_segments:True it would likely have fit: the allocator could have returned the 6.00 GiB cached to the driver in whole pages (20 MiB for large blocks) and mapped them, with the 2.00 GiB free, into one growing segment; set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
            ]
        );
    }

    #[test]
    fn cache_and_free_memory_together_would_have_held_it() {
        let f = OomFigures {
            device_free: Ok(3 * GIB),
            reserved: Ok(70 * GIB),
            ..fragmented()
        };
        assert_eq!(verdict(&f), Ok(Verdict::FragmentedCacheAndFree));
        let lines = explain(&f);
        assert!(
            lines[1].ends_with(
                "; with the free memory that is 7.00 GiB, enough for the request had it been one block"
            ),
            "{}",
            lines[1]
        );
        assert!(lines[3].starts_with("with expandable_segments:True it would likely have fit"));
    }

    #[test]
    fn a_request_larger_than_cache_and_free_together_is_too_large_whatever_the_setting() {
        let f = OomFigures {
            device_free: Ok(GIB),
            allocated: Ok(75 * GIB),
            reserved: Ok(76 * GIB),
            used: Ok(77 * GIB),
            ..fragmented()
        };
        assert_eq!(verdict(&f), Ok(Verdict::TooLarge { short: 4 * GIB }));
        let lines = explain(&f);
        assert_eq!(
            lines[1],
            "cached: 1.00 GiB reserved but not allocated (reserved 76.0 GiB, allocated 75.0 GiB); even all of it with the free memory (2.00 GiB) falls 4.00 GiB short: the live tensors (75.0 GiB) left no room"
        );
        assert_eq!(
            lines[3],
            "expandable_segments:True would not have saved it: with all of the cache reclaimed the request was still 4.00 GiB short"
        );
        let on = OomFigures {
            allocator: Allocator::Torch {
                config: "max_split_size_mb:512, expandable_segments:True",
            },
            ..f
        };
        assert_eq!(
            explain(&on)[3],
            "expandable_segments is on and could not help: with all of the cache reclaimed the request was still 4.00 GiB short"
        );
    }

    #[test]
    fn a_memory_fraction_caps_what_the_allocator_could_take() {
        // 40 GiB allowed of 80: the device has 40 GiB free, but 38 GiB are reserved already.
        let f = OomFigures {
            requested: Ok(4 * GIB),
            device_free: Ok(40 * GIB),
            limit: Some(40 * GIB),
            allocated: Ok(35 * GIB),
            reserved: Ok(38 * GIB),
            used: Ok(39 * GIB),
            ..fragmented()
        };
        // Usable: min(40, 40 - 38) = 2 GiB; reachable: min(40 + 3, 40 - 35) = 5 GiB.
        assert_eq!(verdict(&f), Ok(Verdict::FragmentedCacheAndFree));
        assert_eq!(
            explain(&f)[0],
            "asked for 4.00 GiB with 40.0 GiB free on the device (of 80.0 GiB); the allocator's limit of 40.0 GiB left 2.00 GiB: 2.00 GiB short"
        );
        let tighter = OomFigures {
            requested: Ok(6 * GIB),
            ..f
        };
        assert_eq!(verdict(&tighter), Ok(Verdict::TooLarge { short: GIB }));
    }

    #[test]
    fn free_memory_that_covered_the_request_points_at_the_figures_not_the_allocator() {
        let f = OomFigures {
            requested: Ok(GIB),
            ..fragmented()
        };
        assert_eq!(verdict(&f), Ok(Verdict::FreeWasEnough));
        let lines = explain(&f);
        assert!(lines[0].ends_with(
            ": that covered it by these figures, so they were read at different moments or another process took the memory first"
        ));
        assert_eq!(
            lines[1],
            "cached: 6.00 GiB reserved but not allocated (reserved 72.0 GiB, allocated 66.0 GiB)"
        );
        assert_eq!(
            lines[3],
            "expandable_segments: n/a (the figures show enough free memory for the request)"
        );
    }

    #[test]
    fn every_absent_figure_reads_n_a_with_its_reason_never_zero() {
        let f = OomFigures {
            requested: Err(Absent::NotAvailable),
            device_free: Err(Absent::NotAvailable),
            device_total: Err(Absent::NotSupported),
            limit: None,
            allocated: Err(Absent::NotAvailable),
            reserved: Err(Absent::NotSupported),
            used: Err(Absent::NoPermission),
            used_by: UsedBy::Process,
            allocator: Allocator::Torch { config: "" },
        };
        assert_eq!(
            verdict(&f),
            Err(Absent::Error("requested: not available".into()))
        );
        assert_eq!(
            explain(&f),
            vec![
                "asked for n/a (not available) with n/a (not available) free on the device (of n/a (not supported))",
                "cached: n/a (reserved: not supported)",
                "outside the allocator: n/a (NVML used: no permission)",
                "expandable_segments: n/a (requested: not available)",
            ]
        );
        // Only NVML's figure missing: the rest is still told, and nothing reads 0.
        let partial = OomFigures {
            used: Err(Absent::NoPermission),
            ..fragmented()
        };
        let lines = explain(&partial);
        assert_eq!(
            lines[2],
            "outside the allocator: n/a (NVML used: no permission)"
        );
        assert!(lines.iter().all(|l| !l.contains(" 0 B")), "{lines:?}");
        // Only the request's size missing: no shortfall is invented.
        let unasked = OomFigures {
            requested: Err(Absent::NotAvailable),
            ..fragmented()
        };
        let lines = explain(&unasked);
        assert_eq!(
            lines[0],
            "asked for n/a (not available) with 2.00 GiB free on the device (of 80.0 GiB)"
        );
        assert_eq!(
            lines[1],
            "cached: 6.00 GiB reserved but not allocated (reserved 72.0 GiB, allocated 66.0 GiB)"
        );
        assert_eq!(
            lines[3],
            "expandable_segments: n/a (requested: not available)"
        );
    }

    #[test]
    fn figures_from_different_moments_are_not_subtracted_into_nonsense() {
        let f = OomFigures {
            allocated: Ok(73 * GIB),
            used: Ok(70 * GIB),
            ..fragmented()
        };
        let lines = explain(&f);
        assert_eq!(
            lines[1],
            "cached: n/a (reserved 72.0 GiB is below allocated 73.0 GiB: read at different moments)"
        );
        assert_eq!(
            lines[2],
            "outside the allocator: n/a (NVML used 70.0 GiB by the process is below reserved 72.0 GiB: read at different moments)"
        );
    }

    #[test]
    fn the_device_s_used_memory_includes_other_processes() {
        let f = OomFigures {
            used: Ok(78 * GIB),
            used_by: UsedBy::Device,
            ..fragmented()
        };
        assert_eq!(
            explain(&f)[2],
            "outside the allocator: 6.00 GiB (NVML used 78.0 GiB on the device, reserved 72.0 GiB): the CUDA context, what libraries take from the driver directly, and every other process on the GPU"
        );
    }

    #[test]
    fn the_setting_is_read_as_pytorch_reads_it_and_only_for_pytorch() {
        assert_eq!(torch_settings(""), (false, false));
        assert_eq!(torch_settings("expandable_segments:True"), (true, false));
        assert_eq!(
            torch_settings("expandable_segments:True,expandable_segments:False"),
            (false, false)
        );
        assert_eq!(
            torch_settings("roundup_power2_divisions:[256:1,512:2], expandable_segments : True"),
            (true, false)
        );
        assert_eq!(torch_settings("backend:cudaMallocAsync"), (false, true));
        let on = OomFigures {
            allocator: Allocator::Torch {
                config: "expandable_segments:True",
            },
            ..fragmented()
        };
        assert!(
            explain(&on)[3].starts_with("expandable_segments is on, so the cache was reclaimable")
        );
        let async_backend = OomFigures {
            allocator: Allocator::Torch {
                config: "backend:cudaMallocAsync",
            },
            ..fragmented()
        };
        assert_eq!(
            explain(&async_backend)[3],
            "expandable_segments: does not apply (backend:cudaMallocAsync replaces the caching allocator)"
        );
        let jax = OomFigures {
            allocator: Allocator::Other,
            ..fragmented()
        };
        assert_eq!(
            explain(&jax)[3],
            "expandable_segments: n/a (a setting of PyTorch's caching allocator, which this writer does not use)"
        );
    }
}
