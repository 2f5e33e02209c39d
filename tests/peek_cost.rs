//! A peek (the fast memory sampling between refreshes) costs what it must: each GPU's used
//! memory read once, nothing allocated, and the highest reading handed over with the GPU's
//! next full sample. Run in-process on the real sampling jobs against a private copy of the
//! fake NVML library, with an allocator that counts this thread's allocations.

mod common;

use common::{GIB, h100};
use serde_json::json;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use vramscope::sources::channels::ChannelSampler;
use vramscope::sources::jobs::{Jobs, Untimed};
use vramscope::sources::nvml::open_gpus;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's layout contract is passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above, that is from `System`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: as for `alloc` and `dealloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

#[test]
fn a_peek_reads_each_gpu_allocates_nothing_and_its_high_reaches_the_next_sample() {
    const GPUS: u32 = 8;
    let devices: Vec<_> = (0..GPUS)
        .map(|i| {
            let mut gpu = h100(i);
            // GPU 3 holds more than the others, so each GPU's high is its own.
            if i == 3 {
                gpu["timeline"] = json!([
                    { "t": 0, "memory_used": 10 * GIB },
                    { "t": 0.000_001, "memory_used": 60 * GIB },
                    { "t": 3600, "memory_used": 10 * GIB }
                ]);
            }
            gpu
        })
        .collect();
    let dir = tempfile::tempdir().expect("tempdir");
    let lib = dir.path().join("libnvidia-ml.so.1");
    std::fs::copy(common::fake_nvml(), &lib).expect("copy the fake");
    std::fs::write(
        dir.path().join("fake_nvml_scenario.json"),
        json!({ "devices": devices }).to_string(),
    )
    .expect("scenario");
    let opened = open_gpus(Some(&lib), None, false).expect("the fake opens");
    let jobs = Jobs::new(ChannelSampler::new(), 0);
    jobs.add_gpus(opened.samplers.into_iter().map(|mut s| {
        s.keep_memory_peaks();
        s
    }));
    // The first peek may set up what lasts (the fake's first reads, the driver call chosen).
    assert_eq!(jobs.peek(&Untimed), GPUS as usize, "every GPU is read");

    let before = allocations();
    let mut read = 0;
    for _ in 0..100 {
        read += jobs.peek(&Untimed);
    }
    let allocated = allocations() - before;
    assert_eq!(read, 100 * GPUS as usize, "each peek reads every GPU once");
    assert_eq!(
        allocated, 0,
        "100 peeks of {GPUS} GPUs allocated {allocated} times"
    );

    let batch = jobs.tick(1000, &Untimed);
    let peaks: Vec<(u32, Option<u64>)> = batch
        .iter()
        .filter_map(|e| match e {
            vramscope::model::SourceEvent::Device(d) => {
                Some((d.index, d.memory_peak.as_ref().map(|p| p.used)))
            }
            _ => None,
        })
        .collect();
    assert_eq!(peaks.len(), GPUS as usize, "{peaks:?}");
    for (index, peak) in peaks {
        let expected = if index == 3 { 60 * GIB } else { 10 * GIB };
        assert_eq!(peak, Some(expected), "GPU {index}");
    }
}
